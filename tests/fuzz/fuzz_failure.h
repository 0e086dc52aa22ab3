// libFuzzer entry points: a broken property is a crash, so that libFuzzer saves the input.
#ifndef GPUPRIO_TESTS_FUZZ_FUZZ_FAILURE_H_
#define GPUPRIO_TESTS_FUZZ_FUZZ_FAILURE_H_

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace gpuprio_test {

// Prints every broken property and aborts; returns if there is none.
inline void AbortIfBroken(const std::vector<std::string>& broken) {
  if (broken.empty()) return;
  for (const std::string& line : broken) std::fprintf(stderr, "broken: %s\n", line.c_str());
  std::abort();
}

}  // namespace gpuprio_test

#endif  // GPUPRIO_TESTS_FUZZ_FUZZ_FAILURE_H_
