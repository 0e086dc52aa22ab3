// Runs tests/tools/exporter_test.py (`gpuprio exporter` on an ephemeral port, scraped over HTTP
// and parsed by a strict text-format parser, with coord_client programs under the library and the
// fake driver attached to a segment in a private GPUPRIO_SHM_DIR under TEST_TMPDIR, and damaged
// segment files beside them) as a Catch2 test case, so its verdict counts like every other test's.
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "tests/runfiles.h"

namespace {

std::string RunfileOrFail(const std::string& path) {
  auto found = gpuprio_test::Runfile(path);
  REQUIRE(found.ok());
  return *found;
}

TEST_CASE("gpuprio exporter serves the segments' metrics", "[cli]") {
  // -I: ignore PYTHON* variables and user site-packages; -S: no site-packages (standard library
  // only); -B: no .pyc in the runfiles.
  const std::vector<std::string> argv = {"/usr/bin/env", "python3", "-I", "-S", "-B",
                                         RunfileOrFail("tests/tools/exporter_test.py")};
  auto result = gpuprio_test::RunProcess(
      argv, {{"GPUPRIO_CLI_UNDER_TEST", RunfileOrFail("tools/cli/gpuprio")},
             {"GPUPRIO_TEST_LIB", RunfileOrFail("hook/libgpuprio.so")},
             {"GPUPRIO_TEST_FAKE_CUDA", RunfileOrFail("tests/fake_cuda/libcuda.so.1")},
             {"GPUPRIO_TEST_COORD_CLIENT", RunfileOrFail("tests/coordinator/coord_client")},
             {"GPUPRIO_TEST_MONITORING",
              RunfileOrFail("deploy/monitoring/grafana-dashboard.json")}});
  REQUIRE(result.ok());
  INFO("stdout:\n" << result->stdout_text << "\nstderr:\n" << result->stderr_text);
  CHECK(result->exit_code == 0);
  // unittest's own verdict: every test ran and passed.
  CHECK(result->stderr_text.find("\nOK") != std::string::npos);
  CHECK(result->stderr_text.find("skipped") == std::string::npos);
}

}  // namespace
