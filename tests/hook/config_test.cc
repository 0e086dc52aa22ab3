#include "hook/config.h"

#include <map>
#include <string>

#include "catch2/catch.hpp"

namespace gpuprio::hook {
namespace {

absl::StatusOr<Config> ParseFrom(const std::map<std::string, std::string>& env) {
  return ParseConfig([&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST_CASE("ParseConfig defaults to schedule mode and warnings", "[hook]") {
  const auto config = ParseFrom({});
  REQUIRE(config.ok());
  CHECK(config->mode == Mode::kSchedule);
  CHECK(config->log_level == LogLevel::kWarning);
}

TEST_CASE("ParseConfig reads every mode and log level, case-insensitively", "[hook]") {
  CHECK(ParseFrom({{"GPUPRIO_MODE", "passthrough"}})->mode == Mode::kPassthrough);
  CHECK(ParseFrom({{"GPUPRIO_MODE", "OFF"}})->mode == Mode::kOff);
  CHECK(ParseFrom({{"GPUPRIO_MODE", "Schedule"}})->mode == Mode::kSchedule);
  CHECK(ParseFrom({{"GPUPRIO_MODE", ""}})->mode == Mode::kSchedule);
  CHECK(ParseFrom({{"GPUPRIO_LOG", "info"}})->log_level == LogLevel::kInfo);
  CHECK(ParseFrom({{"GPUPRIO_LOG", "debug"}})->log_level == LogLevel::kDebug);
  CHECK(ParseFrom({{"GPUPRIO_LOG", "error"}})->log_level == LogLevel::kError);
}

TEST_CASE("ParseConfig names the variable, the bad value and the accepted ones", "[hook]") {
  SECTION("mode") {
    const auto config = ParseFrom({{"GPUPRIO_MODE", "fast"}});
    REQUIRE_FALSE(config.ok());
    const std::string message(config.status().message());
    CHECK(message.find("GPUPRIO_MODE") != std::string::npos);
    CHECK(message.find("\"fast\"") != std::string::npos);
    CHECK(message.find("passthrough") != std::string::npos);
  }
  SECTION("log") {
    const auto config = ParseFrom({{"GPUPRIO_LOG", "loud"}});
    REQUIRE_FALSE(config.ok());
    CHECK(std::string(config.status().message()).find("GPUPRIO_LOG") != std::string::npos);
  }
  SECTION("direct issue") {
    const auto config = ParseFrom({{"GPUPRIO_DIRECT_ISSUE", "yes"}});
    REQUIRE_FALSE(config.ok());
    CHECK(std::string(config.status().message()).find("GPUPRIO_DIRECT_ISSUE") !=
          std::string::npos);
  }
  SECTION("max queued") {
    for (const char* bad : {"1", "0", "-5", "1000001", "many"}) {
      const auto config = ParseFrom({{"GPUPRIO_MAX_QUEUED", bad}});
      INFO(bad);
      REQUIRE_FALSE(config.ok());
      CHECK(std::string(config.status().message()).find("GPUPRIO_MAX_QUEUED") !=
            std::string::npos);
    }
  }
}

TEST_CASE("ParseConfig reads the fast path switch and the queue limit", "[hook]") {
  const auto defaults = ParseFrom({});
  REQUIRE(defaults.ok());
  CHECK(defaults->direct_issue);
  CHECK(defaults->max_queued == 1024);
  const auto set = ParseFrom({{"GPUPRIO_DIRECT_ISSUE", "0"}, {"GPUPRIO_MAX_QUEUED", "64"}});
  REQUIRE(set.ok());
  CHECK_FALSE(set->direct_issue);
  CHECK(set->max_queued == 64);
}

}  // namespace
}  // namespace gpuprio::hook
