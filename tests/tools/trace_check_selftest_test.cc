// Runs tests/tools/trace_check_selftest.py (the GPU trace checker on synthetic traces, passing and
// failing cases, and run_trace_check.sh end to end with stand-in workloads) as part of CI, so the
// checker whose verdicts docs/gpu_checks.md reports keeps working without a GPU.
#include <string>

#include "catch2/catch.hpp"
#include "tests/runfiles.h"

namespace {

TEST_CASE("The GPU trace checker passes good traces and fails broken ones", "[tools][tracer]") {
  auto script = gpuprio_test::Runfile("tests/tools/trace_check_selftest.py");
  REQUIRE(script.ok());
  auto result = gpuprio_test::RunProcess({"/usr/bin/env", "python3", *script}, {});
  REQUIRE(result.ok());
  INFO("stdout:\n" << result->stdout_text << "\nstderr:\n" << result->stderr_text);
  CHECK(result->exit_code == 0);
  // unittest's own verdict: every test ran and none was skipped for a missing prerequisite.
  CHECK(result->stderr_text.find("\nOK") != std::string::npos);
  CHECK(result->stderr_text.find("skipped") == std::string::npos);
}

}  // namespace
