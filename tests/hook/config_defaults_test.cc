// The library's defaults are scheduler/base/env_vars.def's: each variable set to its table DEFAULT
// reads as if unset; a bad value's message names the table's default; every setting reaches the
// scheduler's options; and scheduler/options.h's own initialisers of those settings (what unit
// tests build schedulers with) are the table's too.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "catch2/catch.hpp"
#include "hook/config.h"
#include "scheduler/base/env_vars.h"
#include "scheduler/options.h"
#include "tests/hook/config_describe.h"

namespace gpuprio {
namespace {

// An environment of one variable.
struct OneVariable {
  std::string name;
  std::string value;
  const char* operator()(const char* n) const { return name == n ? value.c_str() : nullptr; }
};

const char* Unset(const char*) { return nullptr; }

std::vector<std::string> Problems(const OneVariable& env) {
  std::vector<std::string> problems = hook::ParseConfig(env).problems;
  for (std::string& p : tracer::ParseTracerConfig(env).problems) problems.push_back(std::move(p));
  return problems;
}

TEST_CASE("Each library variable set to its table default reads as if unset", "[config]") {
  const std::string unset = gpuprio_test::DescribeEnvironment(Unset);
  int checked = 0;
  for (const KnownEnvVar& var : KnownEnvVars()) {
    // A blank DEFAULT is unset itself: setting it is not setting the default.
    if (var.read_by != EnvVarReader::kLibrary || var.default_value.empty()) continue;
    const OneVariable env{std::string(var.name), std::string(var.default_value)};
    INFO(var.name << "=" << var.default_value);
    CHECK(Problems(env).empty());
    CHECK(gpuprio_test::DescribeEnvironment(env) == unset);
    ++checked;
  }
  CHECK(checked >= 20);
}

TEST_CASE("The configuration's defaults are the parse of an empty environment", "[config]") {
  CHECK(gpuprio_test::DescribeConfig(hook::Config()) ==
        gpuprio_test::DescribeConfig(hook::ParseConfig(Unset).config));
  CHECK(hook::LogLevelFromEnvironment(Unset) == hook::Config().log_level);
}

// (The tracer's window variables say what they do instead: "recording from the start".)
TEST_CASE("A bad integer names the table's default as the value used", "[config]") {
  int checked = 0;
  for (const KnownEnvVar& var : KnownEnvVars()) {
    if (var.read_by != EnvVarReader::kLibrary || var.kind != EnvVarKind::kInteger ||
        absl::StartsWith(var.name, "GPUPRIO_TRACE_")) {
      continue;
    }
    const OneVariable env{std::string(var.name), "bogus"};
    const std::vector<std::string> problems = Problems(env);
    INFO(var.name);
    REQUIRE(problems.size() == 1);
    CHECK(absl::StartsWith(problems[0], absl::StrCat(var.name, "=\"bogus\" is not valid")));
    CHECK(absl::StrContains(problems[0], absl::StrCat(var.min, "..", var.max)));
    CHECK(absl::EndsWith(problems[0], absl::StrCat("using the default (", var.default_value, ")")));
    ++checked;
  }
  CHECK(checked >= 7);
}

TEST_CASE("Every scheduling setting reaches the scheduler's options", "[config]") {
  // Each variable at a value other than its default (and within its range).
  const std::vector<std::pair<std::string, std::string>> settings = {
      {"GPUPRIO_PRIORITY", "-7"},        {"GPUPRIO_BUDGET_US", "1234"},
      {"GPUPRIO_PEER_BUDGET_US", "321"}, {"GPUPRIO_DIRECT_ISSUE", "0"},
      {"GPUPRIO_ISOLATION", "always"},   {"GPUPRIO_RESERVED_SMS", "24"},
      {"GPUPRIO_MAX_QUEUED", "77"},      {"GPUPRIO_MAX_HOLD_MS", "9"},
      {"GPUPRIO_HOST_YIELD_US", "55"},   {"GPUPRIO_EXIT_TIMEOUT_MS", "4321"},
      {"GPUPRIO_COORDINATE", "0"},       {"GPUPRIO_SHM_DIR", "/run/gpuprio"},
      {"GPUPRIO_DOMAIN", "team.a"},
  };
  for (const auto& [name, value] : settings) {
    INFO(name << "=" << value);
    REQUIRE(FindKnownEnvVar(name) != nullptr);
    CHECK(FindKnownEnvVar(name)->default_value != value);
  }
  auto getenv = [&](const char* n) -> const char* {
    for (const auto& [name, value] : settings) {
      if (name == n) return value.c_str();
    }
    return nullptr;
  };
  const ParsedEnv<hook::Config> parsed = hook::ParseConfig(getenv);
  CHECK(parsed.problems.empty());
  const scheduler::SchedulerOptions options = hook::SchedulerOptionsFor(parsed.config);
  CHECK(options.default_priority == -7);
  CHECK(options.budget_ns == 1'234'000);
  CHECK(options.default_estimate_ns == 1'234'000);
  CHECK(options.peer_budget_ns == 321'000);
  CHECK_FALSE(options.direct_issue);
  CHECK(options.isolation == scheduler::Isolation::kAlways);
  CHECK(options.reserved_sms == 24);
  CHECK(options.max_queued_per_stream == 77);
  CHECK(options.max_hold_ns == 9'000'000);
  CHECK(options.host_yield_ns == 55'000);
  CHECK(options.stop_stall_timeout_ns == 4'321'000'000);
  CHECK_FALSE(options.coordinate);
  CHECK(options.segment.shm_dir == "/run/gpuprio");
  CHECK(options.segment.domain == "team.a");
}

TEST_CASE("The library's scheduler options by default are the table's defaults", "[config]") {
  const scheduler::SchedulerOptions options = hook::SchedulerOptionsFor(hook::Config());
  CHECK(options.budget_ns == static_cast<uint64_t>(hook::kDefaultBudgetUs) * 1000);
  CHECK(options.reserved_sms == IntegerDefault(env_var::GPUPRIO_RESERVED_SMS));
  CHECK(options.isolation == scheduler::Isolation::kActive);
  CHECK(options.coordinate);
  CHECK(options.host_yield_ns == static_cast<uint64_t>(hook::kDefaultHostYieldUs) * 1000);
  CHECK(options.segment.shm_dir == env_var::GPUPRIO_SHM_DIR.default_value);
  CHECK(options.segment.domain == env_var::GPUPRIO_DOMAIN.default_value);
}

// scheduler/options.h keeps its own initialisers (the scheduler's package cannot take them from
// the hook's configuration); those of a user setting must still be the table's, so that a unit
// test's scheduler runs as the library's does. Coordination, isolation and host yield are off
// there on purpose (unit tests opt in), as options.h says.
TEST_CASE("scheduler/options.h's initialisers of user settings are the table's defaults",
          "[config]") {
  const scheduler::SchedulerOptions options;
  const hook::Config config;
  CHECK(options.default_priority == config.default_priority);
  CHECK(options.budget_ns == config.budget_ns);
  CHECK(options.peer_budget_ns == config.peer_budget_ns);
  CHECK(options.direct_issue == config.direct_issue);
  CHECK(options.reserved_sms == config.reserved_sms);
  CHECK(options.max_queued_per_stream == config.max_queued);
  CHECK(options.max_hold_ns == config.max_hold_ns);
  CHECK(options.stop_stall_timeout_ns == config.exit_timeout_ns);
  CHECK(options.segment.shm_dir == config.shm_dir);
  CHECK(options.segment.domain == config.domain);
  CHECK_FALSE(options.coordinate);
  CHECK(options.isolation == scheduler::Isolation::kOff);
  CHECK(options.host_yield_ns == 0);
}

TEST_CASE("The table's integer defaults read as numbers at compile time", "[config]") {
  constexpr int64_t kReservedSms = IntegerDefault(env_var::GPUPRIO_RESERVED_SMS);
  static_assert(kReservedSms >= env_var::GPUPRIO_RESERVED_SMS.min &&
                kReservedSms <= env_var::GPUPRIO_RESERVED_SMS.max);
  static_assert(ParseTableInteger("-100") == -100);
  static_assert(ParseTableInteger("+7") == 7);
  static_assert(!ParseTableInteger("").has_value());
  static_assert(!ParseTableInteger("-").has_value());
  static_assert(!ParseTableInteger("1e3").has_value());
  static_assert(!ParseTableInteger("99999999999999999999").has_value());
  static_assert(IsAcceptedWord("a|Bb|c", "bB"));
  static_assert(!IsAcceptedWord("a|bb|c", "b"));
  static_assert(!IsAcceptedWord("", ""));
  static_assert(!IsAcceptedWord("a||c", ""));
  for (const KnownEnvVar& var : KnownEnvVars()) {
    INFO(var.name);
    CHECK(DefaultIsValid(var));
  }
}

}  // namespace
}  // namespace gpuprio
