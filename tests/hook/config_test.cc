#include "hook/config.h"

#include <unistd.h>

#include <map>
#include <string>
#include <tuple>

#include "absl/strings/match.h"
#include "catch2/catch.hpp"

namespace gpuprio::hook {
namespace {

ParsedEnv<Config> ParseFrom(const std::map<std::string, std::string>& env) {
  return ParseConfig([&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

// The one problem of parsing `env`; fails the test unless there is exactly one.
std::string OnlyProblem(const ParsedEnv<Config>& parsed) {
  REQUIRE(parsed.problems.size() == 1);
  return parsed.problems[0];
}

TEST_CASE("ParseConfig defaults to schedule mode and warnings", "[hook]") {
  const auto parsed = ParseFrom({});
  CHECK(parsed.problems.empty());
  CHECK(parsed.config.mode == Mode::kSchedule);
  CHECK(parsed.config.log_level == LogLevel::kWarning);
}

TEST_CASE("ParseConfig reads every mode and log level, case-insensitively", "[hook]") {
  CHECK(ParseFrom({{"GPUPRIO_MODE", "passthrough"}}).config.mode == Mode::kPassthrough);
  CHECK(ParseFrom({{"GPUPRIO_MODE", "OFF"}}).config.mode == Mode::kOff);
  CHECK(ParseFrom({{"GPUPRIO_MODE", "Schedule"}}).config.mode == Mode::kSchedule);
  CHECK(ParseFrom({{"GPUPRIO_MODE", ""}}).config.mode == Mode::kSchedule);
  CHECK(ParseFrom({{"GPUPRIO_LOG", "info"}}).config.log_level == LogLevel::kInfo);
  CHECK(ParseFrom({{"GPUPRIO_LOG", "debug"}}).config.log_level == LogLevel::kDebug);
  CHECK(ParseFrom({{"GPUPRIO_LOG", "error"}}).config.log_level == LogLevel::kError);
}

TEST_CASE("ParseConfig names the variable, the bad value and the accepted ones", "[hook]") {
  SECTION("mode") {
    const std::string message = OnlyProblem(ParseFrom({{"GPUPRIO_MODE", "fast"}}));
    CHECK(message.find("GPUPRIO_MODE") != std::string::npos);
    CHECK(message.find("\"fast\"") != std::string::npos);
    CHECK(message.find("passthrough") != std::string::npos);
  }
  SECTION("log") {
    CHECK(OnlyProblem(ParseFrom({{"GPUPRIO_LOG", "loud"}})).find("GPUPRIO_LOG") !=
          std::string::npos);
  }
  SECTION("direct issue") {
    CHECK(OnlyProblem(ParseFrom({{"GPUPRIO_DIRECT_ISSUE", "yes"}})).find("GPUPRIO_DIRECT_ISSUE") !=
          std::string::npos);
  }
  SECTION("max queued") {
    for (const char* bad : {"1", "0", "-5", "1000001", "many"}) {
      INFO(bad);
      const auto parsed = ParseFrom({{"GPUPRIO_MAX_QUEUED", bad}});
      CHECK(OnlyProblem(parsed).find("GPUPRIO_MAX_QUEUED") != std::string::npos);
      CHECK(parsed.config.max_queued == 1024);
    }
  }
}

TEST_CASE("ParseConfig reads the fast path switch and the queue limit", "[hook]") {
  const auto defaults = ParseFrom({});
  CHECK(defaults.config.direct_issue);
  CHECK(defaults.config.max_queued == 1024);
  const auto set = ParseFrom({{"GPUPRIO_DIRECT_ISSUE", "0"}, {"GPUPRIO_MAX_QUEUED", "64"}});
  CHECK(set.problems.empty());
  CHECK_FALSE(set.config.direct_issue);
  CHECK(set.config.max_queued == 64);
}

bool SameConfig(const Config& a, const Config& b) {
  return std::tie(a.mode, a.log_level, a.default_priority, a.budget_ns, a.direct_issue,
                  a.max_queued, a.peer_budget_ns) ==
         std::tie(b.mode, b.log_level, b.default_priority, b.budget_ns, b.direct_issue,
                  b.max_queued, b.peer_budget_ns);
}

// A setting of every variable, none of them a default or a fallback.
const std::map<std::string, std::string> kAllSet = {
    {"GPUPRIO_MODE", "off"},          {"GPUPRIO_LOG", "debug"},
    {"GPUPRIO_PRIORITY", "high"},     {"GPUPRIO_BUDGET_US", "500"},
    {"GPUPRIO_DIRECT_ISSUE", "0"},    {"GPUPRIO_MAX_QUEUED", "64"},
    {"GPUPRIO_PEER_BUDGET_US", "250"},
};

TEST_CASE("A bad value falls back for its own variable only; a bad mode means passthrough",
          "[hook]") {
  const auto all_set = ParseFrom(kAllSet);
  REQUIRE(all_set.problems.empty());
  const Config defaults = ParseFrom({}).config;
  struct BadValue {
    const char* name;
    const char* value;
    const char* fallback;                           // the end of the problem's message
    void (*expect)(Config& config, const Config& defaults);  // what the bad value changes
  };
  const BadValue kBadValues[] = {
      {"GPUPRIO_LOG", "loud", "using the default (warning)",
       [](Config& c, const Config& d) { c.log_level = d.log_level; }},
      {"GPUPRIO_PRIORITY", "hihg", "using the default (normal)",
       [](Config& c, const Config& d) { c.default_priority = d.default_priority; }},
      {"GPUPRIO_BUDGET_US", "2ms", "using the default (2000)",
       [](Config& c, const Config& d) { c.budget_ns = d.budget_ns; }},
      {"GPUPRIO_PEER_BUDGET_US", "0", "using the default (500)",
       [](Config& c, const Config& d) { c.peer_budget_ns = d.peer_budget_ns; }},
      {"GPUPRIO_DIRECT_ISSUE", "yes", "using the default (1)",
       [](Config& c, const Config& d) { c.direct_issue = d.direct_issue; }},
      {"GPUPRIO_MAX_QUEUED", "1", "using the default (1024)",
       [](Config& c, const Config& d) { c.max_queued = d.max_queued; }},
      {"GPUPRIO_MODE", "fast", "running unscheduled (passthrough)",
       [](Config& c, const Config&) { c.mode = Mode::kPassthrough; }},
  };
  for (const BadValue& bad : kBadValues) {
    INFO(bad.name << "=" << bad.value);
    std::map<std::string, std::string> env = kAllSet;
    env[bad.name] = bad.value;
    const auto parsed = ParseFrom(env);
    REQUIRE(parsed.problems.size() == 1);
    CHECK(absl::EndsWith(parsed.problems[0], std::string("; ") + bad.fallback));
    Config expected = all_set.config;
    bad.expect(expected, defaults);
    CHECK(SameConfig(parsed.config, expected));
  }
  // Two bad values: two problems, each variable on its own.
  const auto two = ParseFrom(
      {{"GPUPRIO_LOG", "loud"}, {"GPUPRIO_BUDGET_US", "0"}, {"GPUPRIO_PRIORITY", "high"}});
  CHECK(two.problems.size() == 2);
  CHECK(two.config.mode == Mode::kSchedule);
  CHECK(two.config.default_priority == 1);
}

TEST_CASE("Every variable ignores leading and trailing whitespace", "[hook]") {
  for (const auto& [name, value] : kAllSet) {
    const Config plain = ParseFrom({{name, value}}).config;
    for (const char* pad : {" ", "\t", "\n", " \t\r\n\v\f"}) {
      INFO(name << "=[" << pad << value << pad << "]");
      const auto padded = ParseFrom({{name, pad + value + pad}});
      CHECK(padded.problems.empty());
      CHECK(SameConfig(padded.config, plain));
    }
    INFO(name << " blank");
    const auto blank = ParseFrom({{name, " \t\n"}});
    CHECK(blank.problems.empty());
    CHECK(SameConfig(blank.config, ParseFrom({}).config));
  }
  // Inside a value whitespace is not removed.
  CHECK(ParseFrom({{"GPUPRIO_MODE", "pass through"}}).problems.size() == 1);
}

TEST_CASE("A bad value is echoed with control characters escaped", "[hook]") {
  const auto parsed = ParseFrom({{"GPUPRIO_MODE", "fast\n\x1b[31mred\\ \"quoted\""}});
  const std::string message = OnlyProblem(parsed);
  CHECK(absl::StartsWith(message,
                         "GPUPRIO_MODE=\"fast\\n\\x1b[31mred\\\\ \\\"quoted\\\"\" is not valid"));
  for (char c : message) CHECK(static_cast<unsigned char>(c) >= 0x20);
}

TEST_CASE("A share group must be one this user is in; the segment directory must be absolute",
          "[hook]") {
  const std::string own_gid = std::to_string(getegid());
  auto parsed = ParseFrom({{"GPUPRIO_SHARE_GROUP", own_gid}});
  CHECK(parsed.problems.empty());
  CHECK(parsed.config.share_gid == static_cast<int64_t>(getegid()));
  CHECK(parsed.config.coordinate);
  // (gid_t)-1 is "no change" to chown: no file can be given it, so no process could share it.
  parsed = ParseFrom({{"GPUPRIO_SHARE_GROUP", "4294967295"}});
  CHECK(absl::StrContains(OnlyProblem(parsed), "a group this user is a member of"));
  CHECK_FALSE(parsed.config.coordinate);
  CHECK(parsed.config.share_gid == -1);
  // A group this process is not in (the highest gid below (gid_t)-1 is none of ours in a test).
  if (getegid() != 4294967294u) {
    parsed = ParseFrom({{"GPUPRIO_SHARE_GROUP", "4294967294"}});
    CHECK_FALSE(parsed.config.coordinate);
  }
  parsed = ParseFrom({{"GPUPRIO_SHM_DIR", "/run/gpuprio"}});
  CHECK(parsed.problems.empty());
  CHECK(parsed.config.shm_dir == "/run/gpuprio");
  CHECK(ParseFrom({}).config.shm_dir == "/dev/shm");
  parsed = ParseFrom({{"GPUPRIO_SHM_DIR", "shm"}});
  CHECK(absl::StrContains(OnlyProblem(parsed), "an absolute directory path"));
  CHECK_FALSE(parsed.config.coordinate);
}

}  // namespace
}  // namespace gpuprio::hook
