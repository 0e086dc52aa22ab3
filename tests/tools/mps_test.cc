// Runs tests/tools/mps_test.py (`gpuprio mps start|stop|status|env` against a fake
// nvidia-cuda-mps-control that really daemonizes, `gpuprio run`'s warning and `gpuprio doctor`'s
// check of processes of different priorities sharing a GPU without MPS, on segments fabricated
// under TEST_TMPDIR) as a Catch2 test case, so its verdict counts in the test totals like every
// other test's.
#include <unistd.h>

#include "catch2/catch.hpp"
#include "tests/python_unittest.h"

namespace {

using gpuprio_test::RunfileOrFail;

TEST_CASE("gpuprio mps, and the warning of processes of different priorities without MPS",
          "[cli]") {
  // One case reads the defaults of root, and is skipped for any other user.
  const int expected_skips = geteuid() == 0 ? 0 : 1;
  gpuprio_test::CheckPythonUnittest(
      {RunfileOrFail("tests/tools/mps_test.py")},
      {{"GPUPRIO_CLI_UNDER_TEST", RunfileOrFail("tools/cli/gpuprio")},
       {"GPUPRIO_TEST_LIB", RunfileOrFail("hook/libgpuprio.so")}},
      expected_skips);
}

}  // namespace
