// Running fake clients in tests: the environment that points a client at the fake driver and
// (optionally) preloads libgpuprio.so, with the sanitizer options such children need, and a
// parser for the key=value lines clients print.
#ifndef GPUPRIO_TESTS_CLIENT_ENV_H_
#define GPUPRIO_TESTS_CLIENT_ENV_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/runfiles.h"

namespace gpuprio_test {

using Env = std::vector<std::pair<std::string, std::string>>;

// LD_LIBRARY_PATH to the fake libcuda.so.1; with a non-empty `mode`, LD_PRELOAD=libgpuprio.so
// and GPUPRIO_MODE=mode; TestCoordinationVariables() unless `extra` sets them; then `extra`.
// Fails if a runfile is missing.
absl::StatusOr<Env> ClientEnv(const std::string& mode, Env extra = {});

// The coordination domain of this test process's clients: "test-<pid>-<random>", fixed for
// the process.
std::string TestDomain();
// This test process's GPUPRIO_SHM_DIR: a directory of its own under TEST_TMPDIR, removed with
// its segments when the process ends.
std::string TestShmDir();
// GPUPRIO_DOMAIN=TestDomain() and GPUPRIO_SHM_DIR=TestShmDir(), for a test that builds its
// children's environment itself.
Env TestCoordinationVariables();

// Every key=value token of `text` whose value is an integer.
std::map<std::string, long> IntValues(const std::string& text);

// Every key=value token of `text`, the value up to the next space.
std::map<std::string, std::string> StringValues(const std::string& text);

}  // namespace gpuprio_test

#endif  // GPUPRIO_TESTS_CLIENT_ENV_H_
