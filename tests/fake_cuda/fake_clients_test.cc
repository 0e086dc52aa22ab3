// Runs each fake client scenario as a subprocess against the fake libcuda.so.1, found through
// LD_LIBRARY_PATH, and requires exit code 0 and the summary line.
#include <cstdlib>
#include <string>

#include "catch2/catch.hpp"
#include "tests/runfiles.h"

namespace {

void RunClient(const std::string& client, const std::string& scenario) {
  auto lib = gpuprio_test::Runfile("tests/fake_cuda/libcuda.so.1");
  REQUIRE(lib.ok());
  auto bin = gpuprio_test::Runfile("tests/fake_cuda/clients/" + client);
  REQUIRE(bin.ok());
  std::string tsan = std::getenv("TSAN_OPTIONS") ? std::getenv("TSAN_OPTIONS") : "";
  // The fork scenario starts threads in a child of a threaded parent: allowed, as in CUDA apps.
  tsan += (tsan.empty() ? "" : ":") + std::string("die_after_fork=0");
  if (auto supp = gpuprio_test::Runfile("tests/fake_cuda/tsan_dlopen.supp"); supp.ok()) {
    tsan += ":suppressions=" + *supp;
  }
  auto result = gpuprio_test::RunProcess(
      {*bin, scenario},
      {{"LD_LIBRARY_PATH", gpuprio_test::Dirname(*lib)}, {"TSAN_OPTIONS", tsan}});
  REQUIRE(result.ok());
  INFO("stdout: " << result->stdout_text << "\nstderr: " << result->stderr_text);
  CHECK(result->exit_code == 0);
  CHECK(result->stdout_text.find(client + ": " + scenario + " ok") != std::string::npos);
}

}  // namespace

TEST_CASE("cudart-like client scenarios pass against the fake", "[clients]") {
  for (const char* scenario : {"launch_forms", "params", "streams", "fork"}) {
    SECTION(scenario) { RunClient("cudart_like_client", scenario); }
  }
}

TEST_CASE("-lcuda client scenarios pass against the fake", "[clients]") {
  for (const char* scenario : {"launch_forms", "memcpy"}) {
    SECTION(scenario) { RunClient("lcuda_client", scenario); }
  }
}

TEST_CASE("RunProcess reports a failing client's exit code and message", "[clients]") {
  auto lib = gpuprio_test::Runfile("tests/fake_cuda/libcuda.so.1");
  auto bin = gpuprio_test::Runfile("tests/fake_cuda/clients/lcuda_client");
  REQUIRE(lib.ok());
  REQUIRE(bin.ok());
  auto result = gpuprio_test::RunProcess({*bin, "no_such_scenario"},
                                         {{"LD_LIBRARY_PATH", gpuprio_test::Dirname(*lib)}});
  REQUIRE(result.ok());
  CHECK(result->exit_code == 1);
  CHECK(result->stderr_text.find("unknown scenario") != std::string::npos);
}
