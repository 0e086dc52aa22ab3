// Runs tests/tools/doctor_test.py (`gpuprio run`'s --domain, --isolation and --reserved-sms,
// `gpuprio doctor` without a GPU and against the fake driver, `gpuprio clean-segments` on
// segments fabricated in private GPUPRIO_SHM_DIRs under TEST_TMPDIR) as a Catch2 test case, so
// its verdict counts in the test totals like every other test's.
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "tests/python_unittest.h"

namespace {

using gpuprio_test::RunfileOrFail;

// Under TSan the fake driver needs the TSan runtime loaded first, which an uninstrumented Python
// cannot do (dlopen: "cannot allocate memory in static TLS block"; preloaded: a crash), so the
// three cases that load it into doctor's probe run in the other configurations only.
#if defined(__SANITIZE_THREAD__)
constexpr bool kFakeDriverLoadsInPython = false;
#else
constexpr bool kFakeDriverLoadsInPython = true;
#endif

TEST_CASE("gpuprio run's settings, gpuprio doctor and gpuprio clean-segments", "[cli]") {
  // unittest's own verdict: every test ran and passed (but for those three under TSan).
  gpuprio_test::CheckPythonUnittest(
      {RunfileOrFail("tests/tools/doctor_test.py")},
      {{"GPUPRIO_CLI_UNDER_TEST", RunfileOrFail("tools/cli/gpuprio")},
       {"GPUPRIO_TEST_LIB", RunfileOrFail("hook/libgpuprio.so")},
       {"GPUPRIO_TEST_FAKE_CUDA", RunfileOrFail("tests/fake_cuda/libcuda.so.1")},
       {"GPUPRIO_TEST_ENV_DUMP", RunfileOrFail("tests/tools/env_dump")},
       {"GPUPRIO_TEST_FAKE_CUDA_IN_PYTHON", kFakeDriverLoadsInPython ? "1" : "0"}},
      kFakeDriverLoadsInPython ? 0 : 3);
}

}  // namespace
