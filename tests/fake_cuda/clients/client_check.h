// Failure reporting for the fake clients: one clear line on stderr, then exit(1).
#ifndef GPUPRIO_TESTS_FAKE_CUDA_CLIENTS_CLIENT_CHECK_H_
#define GPUPRIO_TESTS_FAKE_CUDA_CLIENTS_CLIENT_CHECK_H_

#include <cuda.h>

#include <cstdio>
#include <cstdlib>

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

inline int Succeed() {
  std::printf("%s: %s ok\n", g_client_name, g_scenario);
  std::fflush(stdout);
  return 0;
}

}  // namespace fake_client

#endif  // GPUPRIO_TESTS_FAKE_CUDA_CLIENTS_CLIENT_CHECK_H_
