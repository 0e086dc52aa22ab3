// Test helpers: the absolute path of a runfile and its text, and running a subprocess with extra environment
// while capturing its exit code, stdout and stderr (used to run fake clients under LD_PRELOAD).
#ifndef GPUPRIO_TESTS_RUNFILES_H_
#define GPUPRIO_TESTS_RUNFILES_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpuprio_test {

// Absolute path of `path` (relative to the workspace root, e.g. "tests/fake_cuda/libcuda.so.1")
// in the test's runfiles (TEST_SRCDIR or RUNFILES_DIR, workspace "gpuprio"). NotFound if absent.
absl::StatusOr<std::string> Runfile(absl::string_view path);

// The whole content of the runfile `path`: NotFound if absent, an error if it cannot be read.
absl::StatusOr<std::string> RunfileText(absl::string_view path);

// The directory part of a path ("a/b/c" -> "a/b").
std::string Dirname(absl::string_view path);

struct ProcessResult {
  int exit_code = -1;    // exit status, or 128 + signal number if it was killed by a signal
  std::string stdout_text;
  std::string stderr_text;
};

// The environment of a child: this process's, with `extra_env` (NAME, VALUE pairs) replacing or
// adding entries, as "NAME=VALUE" strings.
std::vector<std::string> ChildEnvironment(
    const std::vector<std::pair<std::string, std::string>>& extra_env);

// Runs argv[0] (a path) with argv, the current environment plus `extra_env` (NAME, VALUE pairs
// replace existing values), and waits for it. Errors only if it could not be started.
absl::StatusOr<ProcessResult> RunProcess(
    const std::vector<std::string>& argv,
    const std::vector<std::pair<std::string, std::string>>& extra_env);

}  // namespace gpuprio_test

#endif  // GPUPRIO_TESTS_RUNFILES_H_
