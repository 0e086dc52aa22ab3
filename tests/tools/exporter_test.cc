// Runs tests/tools/exporter_test.py (`gpuprio exporter` on an ephemeral port, scraped over HTTP
// and parsed by a strict text-format parser, with coord_client programs under the library and the
// fake driver attached to a segment in a private GPUPRIO_SHM_DIR under TEST_TMPDIR, and damaged
// segment files beside them) as a Catch2 test case, so its verdict counts like every other test's.
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "tests/python_unittest.h"

namespace {

using gpuprio_test::RunfileOrFail;

TEST_CASE("gpuprio exporter serves the segments' metrics", "[cli]") {
  gpuprio_test::CheckPythonUnittest(
      {RunfileOrFail("tests/tools/exporter_test.py")},
      {{"GPUPRIO_CLI_UNDER_TEST", RunfileOrFail("tools/cli/gpuprio")},
       {"GPUPRIO_TEST_LIB", RunfileOrFail("hook/libgpuprio.so")},
       {"GPUPRIO_TEST_FAKE_CUDA", RunfileOrFail("tests/fake_cuda/libcuda.so.1")},
       {"GPUPRIO_TEST_COORD_CLIENT", RunfileOrFail("tests/coordinator/coord_client")},
       {"GPUPRIO_TEST_MONITORING", RunfileOrFail("deploy/monitoring/grafana-dashboard.json")}});
}

}  // namespace
