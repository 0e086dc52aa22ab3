// Which processes ask MPS for a below-normal client priority, and when the user's value wins
// (hook/mps_client_priority.h). End to end, with the driver's view: env_handling_test.
#include "hook/mps_client_priority.h"

#include <optional>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "hook/config.h"

namespace gpuprio::hook {
namespace {

Config WithPriority(int priority) {
  Config config;
  config.mode = Mode::kSchedule;
  config.default_priority = priority;
  return config;
}

TEST_CASE("A below-normal process asks for a below-normal MPS client", "[hook][mps]") {
  for (const int priority : {-1, -5, -100}) {
    const MpsClientPriorityDecision d =
        DecideMpsClientPriority(WithPriority(priority), std::nullopt, false);
    REQUIRE(d.set_value.has_value());
    CHECK(*d.set_value == "1");
    CHECK(d.below_normal);
    CHECK_FALSE(d.withdraw);
    CHECK_FALSE(d.warning.has_value());
  }
  // Set but blank counts as unset, as the driver would find nothing in it.
  CHECK(DecideMpsClientPriority(WithPriority(-1), " ", false).set_value == "1");
}

TEST_CASE("Normal and more important processes keep MPS's default", "[hook][mps]") {
  for (const int priority : {0, 1, 100}) {
    const MpsClientPriorityDecision d =
        DecideMpsClientPriority(WithPriority(priority), std::nullopt, false);
    CHECK_FALSE(d.set_value.has_value());
    CHECK_FALSE(d.warning.has_value());
  }
}

TEST_CASE("A value already set is never replaced", "[hook][mps]") {
  CHECK_FALSE(DecideMpsClientPriority(WithPriority(-1), "0", false).set_value.has_value());
  CHECK_FALSE(DecideMpsClientPriority(WithPriority(-1), "1", false).set_value.has_value());
  CHECK_FALSE(DecideMpsClientPriority(WithPriority(1), "0", false).set_value.has_value());
}

TEST_CASE("A normal or high process about to run as a below-normal client is told why",
          "[hook][mps]") {
  const MpsClientPriorityDecision d = DecideMpsClientPriority(WithPriority(1), " 1 ", false);
  CHECK_FALSE(d.set_value.has_value());
  REQUIRE(d.warning.has_value());
  CHECK(*d.warning ==
        "CUDA_MPS_CLIENT_PRIORITY=1 (a below-normal MPS client) in a process of priority 1: under "
        "MPS its kernels yield SMs to other clients' work; unset it for this process (it is "
        "inherited from the parent's environment)");
  // At normal too: inherited from a low parent, it would make a normal job yield to others.
  CHECK(DecideMpsClientPriority(WithPriority(0), "1", false).warning.has_value());
  CHECK_FALSE(DecideMpsClientPriority(WithPriority(-1), "1", false).warning.has_value());
  CHECK_FALSE(DecideMpsClientPriority(WithPriority(1), "0", false).warning.has_value());
}

TEST_CASE("Off, passthrough and off modes leave the variable alone", "[hook][mps]") {
  Config off = WithPriority(-1);
  off.mps_client_priority = false;
  CHECK_FALSE(DecideMpsClientPriority(off, std::nullopt, false).set_value.has_value());
  off.default_priority = 1;
  CHECK_FALSE(DecideMpsClientPriority(off, "1", false).warning.has_value());
  for (const Mode mode : {Mode::kPassthrough, Mode::kOff}) {
    Config config = WithPriority(-1);
    config.mode = mode;
    CHECK_FALSE(DecideMpsClientPriority(config, std::nullopt, false).set_value.has_value());
  }
}

TEST_CASE("GPUPRIO_MPS_CLIENT_PRIORITY is read as the table says", "[hook][mps][config]") {
  CHECK(kDefaultMpsClientPriority);
  const auto parse = [](const char* value) {
    return ParseConfig([value](const char* name) -> const char* {
      return std::string(name) == "GPUPRIO_MPS_CLIENT_PRIORITY" ? value : nullptr;
    });
  };
  CHECK_FALSE(parse("off").config.mps_client_priority);
  CHECK(parse("AUTO").config.mps_client_priority);
  const auto bad = parse("below");
  CHECK(bad.config.mps_client_priority);
  REQUIRE(bad.problems.size() == 1);
  CHECK(bad.problems[0].find("GPUPRIO_MPS_CLIENT_PRIORITY") != std::string::npos);
}

TEST_CASE("gpuprio's own inherited value is kept below normal and withdrawn above", "[hook][mps]") {
  // A low child of a low launcher: already right, nothing to change.
  for (const int priority : {-1, -100}) {
    const MpsClientPriorityDecision d = DecideMpsClientPriority(WithPriority(priority), "1", true);
    CHECK_FALSE(d.set_value.has_value());
    CHECK_FALSE(d.withdraw);
    CHECK(d.below_normal);
    CHECK_FALSE(d.warning.has_value());
  }
  // A server started by a low launcher's script: gpuprio's value goes, without a warning.
  for (const int priority : {0, 1}) {
    const MpsClientPriorityDecision d =
        DecideMpsClientPriority(WithPriority(priority), " 1 ", true);
    CHECK(d.withdraw);
    CHECK_FALSE(d.set_value.has_value());
    CHECK_FALSE(d.below_normal);
    CHECK_FALSE(d.warning.has_value());
  }
}

TEST_CASE("The mark does not make the user's value gpuprio's", "[hook][mps]") {
  // The user set 0 for this process after a gpuprio ancestor had set 1 and the mark.
  for (const int priority : {-1, 1}) {
    const MpsClientPriorityDecision d = DecideMpsClientPriority(WithPriority(priority), "0", true);
    CHECK_FALSE(d.set_value.has_value());
    CHECK_FALSE(d.withdraw);
    CHECK_FALSE(d.below_normal);
    CHECK_FALSE(d.warning.has_value());
  }
  // ... and the stale mark goes, so that a later deliberate 1 is not taken for gpuprio's.
  CHECK(DecideMpsClientPriority(WithPriority(1), "0", true).clear_mark);
  CHECK(DecideMpsClientPriority(WithPriority(-1), "0", true).clear_mark);
  // The user removed the variable and left the mark: as if unset.
  const MpsClientPriorityDecision low =
      DecideMpsClientPriority(WithPriority(-1), std::nullopt, true);
  CHECK(low.set_value == "1");
  CHECK_FALSE(low.clear_mark);  // set again, with the mark
  const MpsClientPriorityDecision high =
      DecideMpsClientPriority(WithPriority(1), std::nullopt, true);
  CHECK_FALSE(high.withdraw);
  CHECK_FALSE(high.set_value.has_value());
  CHECK(high.clear_mark);
  // Without the mark there is no mark to clear.
  CHECK_FALSE(DecideMpsClientPriority(WithPriority(1), "0", false).clear_mark);
  CHECK_FALSE(DecideMpsClientPriority(WithPriority(1), std::nullopt, false).clear_mark);
}

TEST_CASE("gpuprio's inherited value is withdrawn wherever gpuprio would not set it",
          "[hook][mps]") {
  // A low process with the setting off, or not scheduling: gpuprio would not give it the value,
  // so the one a low launcher's gpuprio set goes; a value without the mark stays.
  Config off = WithPriority(-1);
  off.mps_client_priority = false;
  CHECK(DecideMpsClientPriority(off, "1", true).withdraw);
  CHECK_FALSE(DecideMpsClientPriority(off, "1", false).withdraw);
  CHECK_FALSE(DecideMpsClientPriority(off, "1", false).warning.has_value());
  for (const Mode mode : {Mode::kPassthrough, Mode::kOff}) {
    Config config = WithPriority(-1);
    config.mode = mode;
    const MpsClientPriorityDecision d = DecideMpsClientPriority(config, "1", true);
    CHECK(d.withdraw);
    CHECK_FALSE(d.below_normal);
    CHECK_FALSE(DecideMpsClientPriority(config, "1", false).withdraw);
    // Not scheduling: no warning about the user's value either.
    config.default_priority = 1;
    CHECK_FALSE(DecideMpsClientPriority(config, "1", false).warning.has_value());
  }
}

TEST_CASE("At load only the three settings the decision needs are read, silently",
          "[hook][mps][config]") {
  std::vector<std::string> asked;
  const Config config = ParseMpsClientPriorityConfig([&asked](const char* name) -> const char* {
    asked.emplace_back(name);
    const std::string n = name;
    if (n == "GPUPRIO_MODE") return " schedule";
    if (n == "GPUPRIO_PRIORITY") return "low";
    if (n == "GPUPRIO_MPS_CLIENT_PRIORITY") return "off";
    return "999999999999";  // any other variable would read as a bad value
  });
  CHECK(config.mode == Mode::kSchedule);
  CHECK(config.default_priority == -1);
  CHECK_FALSE(config.mps_client_priority);
  CHECK(asked == std::vector<std::string>{"GPUPRIO_MODE", "GPUPRIO_PRIORITY",
                                          "GPUPRIO_MPS_CLIENT_PRIORITY"});
  // Bad values read as ParseConfig reads them: passthrough for the mode, defaults otherwise.
  const Config bad =
      ParseMpsClientPriorityConfig([](const char*) -> const char* { return "nonsense"; });
  CHECK(bad.mode == Mode::kPassthrough);
  CHECK(bad.default_priority == kDefaultPriority);
  CHECK(bad.mps_client_priority == kDefaultMpsClientPriority);
}

}  // namespace
}  // namespace gpuprio::hook
