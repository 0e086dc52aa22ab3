// Runs the benchmark runners' self-tests (tests/tools/two_process_selftest.py,
// interference_selftest.py, ddp_bench_selftest.py and torch_pairs_selftest.py: the record and report code on synthetic results, and the runners end
// to end with stand-ins for the CUDA programs, for --mps for nvidia-cuda-mps-control, and for
// run_torch_bench.sh --threads for torch and the gpuprio Python helper) in CI, so the scripts whose
// tables docs/benchmarks.md reports keep working without a GPU.
#include <string>

#include "catch2/catch.hpp"
#include "tests/runfiles.h"

namespace {

void RunSelftest(const char* path) {
  auto script = gpuprio_test::Runfile(path);
  REQUIRE(script.ok());
  auto result = gpuprio_test::RunProcess({"/usr/bin/env", "python3", *script}, {});
  REQUIRE(result.ok());
  INFO("stdout:\n" << result->stdout_text << "\nstderr:\n" << result->stderr_text);
  CHECK(result->exit_code == 0);
  CHECK(result->stdout_text.find(" passed, 0 failed") != std::string::npos);
  CHECK(result->stdout_text.find("FAIL") == std::string::npos);
}

TEST_CASE("The two-process benchmarks' records and reports", "[tools][bench]") {
  RunSelftest("tests/tools/two_process_selftest.py");
}

TEST_CASE("The PyTorch pairs' pure parts and runner, and the MPS cost benchmark's runner and report",
          "[tools][bench]") {
  RunSelftest("tests/tools/torch_pairs_selftest.py");
}

TEST_CASE("The two-GPU DDP benchmark's runner, records and report", "[tools][bench]") {
  RunSelftest("tests/tools/ddp_bench_selftest.py");
}

TEST_CASE("The in-process interference runner and report, and the launch bench's isolation check",
          "[tools][bench]") {
  RunSelftest("tests/tools/interference_selftest.py");
}

}  // namespace
