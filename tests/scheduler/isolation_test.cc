// Spatial isolation end to end on the fake driver (tests/scheduler/isolation_client.cc says what
// the client checks): work below an active level runs on twin streams in a green context, in
// CUDA's order, and returns to the whole GPU when the level goes quiet; the SM reserve is
// rounded to the split granularity; without green contexts the budget takes over, said once; on
// two devices, a more important level's CUDA graph lifts confinement on its device only.
#include <string>

#include "catch2/catch.hpp"
#include "tests/client_env.h"
#include "tests/runfiles.h"

namespace {

using gpuprio_test::Env;

gpuprio_test::ProcessResult RunClient(int expected_sms, Env extra) {
  auto client = gpuprio_test::Runfile("tests/scheduler/isolation_client");
  REQUIRE(client.ok());
  extra.emplace_back("GPUPRIO_LOG", "info");
  auto env = gpuprio_test::ClientEnv("schedule", std::move(extra));
  REQUIRE(env.ok());
  auto result = gpuprio_test::RunProcess({*client, std::to_string(expected_sms)}, *env);
  REQUIRE(result.ok());
  INFO("stdout:\n" << result->stdout_text << "\nstderr:\n" << result->stderr_text);
  CHECK(result->exit_code == 0);
  return *result;
}

TEST_CASE("Work below an active level is confined to a partition and keeps CUDA's order",
          "[isolation]") {
  SECTION("the default reserve of 16 SMs, rounded to the H100's groups of 8") {
    const auto r = RunClient(112, {});
    CHECK(r.stdout_text.find("isolation_client: isolation ok") != std::string::npos);
    CHECK(r.stderr_text.find("GPUPRIO_RESERVED_SMS=16 rounded to 20") != std::string::npos);
    CHECK(r.stderr_text.find("isolation: device 0: 112 of 132 SMs for confined work (20 "
                             "reserved)") != std::string::npos);
  }
  SECTION("a reserve that needs no rounding") {
    const auto r = RunClient(64, {{"GPUPRIO_RESERVED_SMS", "68"}});
    CHECK(r.stdout_text.find("isolation_client: isolation ok") != std::string::npos);
    CHECK(r.stderr_text.find("rounded") == std::string::npos);
  }
  SECTION("the fast path off: every op through the dispatcher") {
    const auto r = RunClient(112, {{"GPUPRIO_DIRECT_ISSUE", "0"}});
    CHECK(r.stdout_text.find("isolation_client: isolation ok") != std::string::npos);
  }
}

TEST_CASE("Without green contexts, isolation is off with one message and work still runs",
          "[isolation]") {
  const auto r = RunClient(0, {{"FAKECUDA_GREEN_CONTEXTS", "0"}});
  CHECK(r.stdout_text.find("isolation_client: isolation ok") != std::string::npos);
  const std::string off = "isolation off on device 0: the device's SMs cannot be partitioned";
  const size_t first = r.stderr_text.find(off);
  CHECK(first != std::string::npos);
  CHECK(r.stderr_text.find(off, first + 1) == std::string::npos);
}

// tests/scheduler/whole_device_client.cc says what the client checks.
gpuprio_test::ProcessResult RunWholeDeviceClient(const std::string& scenario) {
  auto client = gpuprio_test::Runfile("tests/scheduler/whole_device_client");
  REQUIRE(client.ok());
  auto env =
      gpuprio_test::ClientEnv("schedule", {{"FAKECUDA_DEVICES", "2"}, {"GPUPRIO_LOG", "info"}});
  REQUIRE(env.ok());
  auto result = gpuprio_test::RunProcess({*client, scenario}, *env);
  REQUIRE(result.ok());
  INFO("stdout:\n" << result->stdout_text << "\nstderr:\n" << result->stderr_text);
  CHECK(result->exit_code == 0);
  CHECK(result->stdout_text.find("whole_device_client: " + scenario + " ok") != std::string::npos);
  return *result;
}

TEST_CASE("A more important level's CUDA graph lifts confinement on its device only",
          "[isolation]") {
  SECTION("a graph on device 0: device 0's low work runs unconfined, device 1's stays confined") {
    const auto r = RunWholeDeviceClient("graph");
    // Said once, for device 0 only.
    const std::string said =
        "isolation: device 0: work below priority 1 is held, not confined, while that level "
        "launches CUDA graphs";
    const size_t first = r.stderr_text.find(said);
    CHECK(first != std::string::npos);
    CHECK(r.stderr_text.find(said, first + 1) == std::string::npos);
    CHECK(r.stderr_text.find("isolation: device 1: work below") == std::string::npos);
  }
  SECTION("a level busy on device 0 only: device 1's low work is not confined") {
    RunWholeDeviceClient("one_device");
  }
  SECTION("the control, plain kernels on both devices: low work is confined on both") {
    const auto r = RunWholeDeviceClient("plain");
    // Both devices can be partitioned here: device 0's unconfined work in the graph run is the
    // rule's doing, not a missing partition.
    CHECK(r.stderr_text.find("isolation: device 0: 112 of 132 SMs") != std::string::npos);
    CHECK(r.stderr_text.find("isolation: device 1: 112 of 132 SMs") != std::string::npos);
    CHECK(r.stderr_text.find("launches CUDA graphs") == std::string::npos);
  }
}

}  // namespace
