// Failure reporting for the fake clients: one clear line on stderr, then exit(1).
#ifndef GPUPRIO_TESTS_FAKE_CUDA_CLIENTS_CLIENT_CHECK_H_
#define GPUPRIO_TESTS_FAKE_CUDA_CLIENTS_CLIENT_CHECK_H_

#include <cuda.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace fake_client {

inline const char* g_client_name = "client";
inline const char* g_scenario = "?";

[[noreturn]] inline void Fail(const char* what) {
  std::fprintf(stderr, "%s: %s FAILED: %s\n", g_client_name, g_scenario, what);
  std::fflush(stderr);
  std::exit(1);
}

inline void Check(bool ok, const char* what) {
  if (!ok) Fail(what);
}

inline void CheckCu(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) {
    char line[256];
    std::snprintf(line, sizeof(line), "%s returned %d", what, static_cast<int>(r));
    Fail(line);
  }
}

// Every word of `v` is `expected`; else fails naming `what` and the first word that is not.
inline void CheckAll(const std::vector<uint32_t>& v, uint32_t expected, const char* what) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] != expected) {
      Fail((std::string(what) + ": element " + std::to_string(i) + " is " + std::to_string(v[i]) +
            ", expected " + std::to_string(expected))
               .c_str());
    }
  }
}

inline int Succeed() {
  std::printf("%s: %s ok\n", g_client_name, g_scenario);
  std::fflush(stdout);
  return 0;
}

}  // namespace fake_client

#endif  // GPUPRIO_TESTS_FAKE_CUDA_CLIENTS_CLIENT_CHECK_H_
