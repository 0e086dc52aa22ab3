// A Python unittest file run as one Catch2 test case's checks, so its verdict counts in the test
// totals like every other test's: the standard library only, and the script's own verdict read
// from its output.
#ifndef GPUPRIO_TESTS_PYTHON_UNITTEST_H_
#define GPUPRIO_TESTS_PYTHON_UNITTEST_H_

#include <string>
#include <utility>
#include <vector>

#include "catch2/catch.hpp"
#include "tests/runfiles.h"

namespace gpuprio_test {

// The runfile's path; fails the test case if it is missing.
inline std::string RunfileOrFail(const std::string& path) {
  auto found = Runfile(path);
  REQUIRE(found.ok());
  return *found;
}

// Runs `script_and_args` (the script's path first) under python3 -I -S -B (no PYTHON* variables,
// no site-packages, no .pyc in the runfiles) with `extra_env`, and checks that it exits 0 and
// that unittest reports OK with exactly `expected_skips` tests skipped.
inline void CheckPythonUnittest(const std::vector<std::string>& script_and_args,
                                const std::vector<std::pair<std::string, std::string>>& extra_env,
                                int expected_skips = 0) {
  std::vector<std::string> argv = {"/usr/bin/env", "python3", "-I", "-S", "-B"};
  argv.insert(argv.end(), script_and_args.begin(), script_and_args.end());
  auto result = RunProcess(argv, extra_env);
  REQUIRE(result.ok());
  INFO("stdout:\n" << result->stdout_text << "\nstderr:\n" << result->stderr_text);
  CHECK(result->exit_code == 0);
  CHECK(result->stderr_text.find("\nOK") != std::string::npos);
  if (expected_skips == 0) {
    CHECK(result->stderr_text.find("skipped") == std::string::npos);
  } else {
    CHECK(result->stderr_text.find("OK (skipped=" + std::to_string(expected_skips) + ")") !=
          std::string::npos);
  }
}

}  // namespace gpuprio_test

#endif  // GPUPRIO_TESTS_PYTHON_UNITTEST_H_
