#include "hook/config.h"

#include <grp.h>
#include <limits.h>
#include <unistd.h>

#include <string>

#include "absl/base/attributes.h"
#include "absl/base/call_once.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "scheduler/coordinator/segment_name.h"

namespace gpuprio::hook {

absl::string_view ModeName(Mode mode) {
  switch (mode) {
    case Mode::kSchedule:
      return "schedule";
    case Mode::kPassthrough:
      return "passthrough";
    case Mode::kOff:
      return "off";
  }
  return "unknown";
}

std::optional<int> ParsePriority(absl::string_view text) {
  const absl::string_view value = absl::StripAsciiWhitespace(text);
  if (absl::EqualsIgnoreCase(value, "low")) return -1;
  if (absl::EqualsIgnoreCase(value, "normal")) return 0;
  if (absl::EqualsIgnoreCase(value, "high")) return 1;
  int number = 0;
  if (!absl::SimpleAtoi(value, &number) || number < -100 || number > 100) return std::nullopt;
  return number;
}

// Whether this process is a member of `gid` (its effective or a supplementary group): it can give
// a segment only such a group, and a segment of any other group is refused by its members.
bool MemberOf(gid_t gid) {
  if (getegid() == gid) return true;
  gid_t groups[NGROUPS_MAX];
  const int n = getgroups(NGROUPS_MAX, groups);
  for (int i = 0; i < n; ++i) {
    if (groups[i] == gid) return true;
  }
  return false;
}

std::optional<int64_t> ResolveGroup(absl::string_view text) {
  const std::string name(absl::StripAsciiWhitespace(text));
  if (name.empty()) return std::nullopt;
  uint32_t number = 0;
  std::optional<int64_t> gid;
  if (absl::SimpleAtoi(name, &number)) {
    // (gid_t)-1 means "no change" to chown: no file can have it.
    if (number != static_cast<uint32_t>(-1)) gid = number;
  } else {
    struct group entry;
    struct group* found = nullptr;
    char buffer[16384];
    if (getgrnam_r(name.c_str(), &entry, buffer, sizeof(buffer), &found) == 0 && found != nullptr) {
      gid = static_cast<int64_t>(found->gr_gid);
    }
  }
  if (!gid.has_value() || !MemberOf(static_cast<gid_t>(*gid))) return std::nullopt;
  return gid;
}

namespace {

void ReadLogLevel(EnvReader& env, LogLevel* level) {
  env.ReadChoice<LogLevel>("GPUPRIO_LOG",
                           {{"error", LogLevel::kError},
                            {"warning", LogLevel::kWarning},
                            {"info", LogLevel::kInfo},
                            {"debug", LogLevel::kDebug},
                            {"warn", LogLevel::kWarning}},
                           "using the default (warning)", level);
}

}  // namespace

LogLevel LogLevelFromEnvironment(GetenvFunction getenv) {
  EnvReader env(getenv);
  LogLevel level = LogLevel::kWarning;
  ReadLogLevel(env, &level);
  return level;
}

ParsedEnv<Config> ParseConfig(GetenvFunction getenv) {
  EnvReader env(getenv);
  Config config;
  // An unknown mode could have meant anything, so the process runs as if gpuprio only watched.
  if (!env.ReadChoice<Mode>(
          "GPUPRIO_MODE",
          {{"schedule", Mode::kSchedule}, {"passthrough", Mode::kPassthrough}, {"off", Mode::kOff}},
          "running unscheduled (passthrough)", &config.mode)) {
    config.mode = Mode::kPassthrough;
  }
  ReadLogLevel(env, &config.log_level);
  if (const std::optional<absl::string_view> text = env.Get("GPUPRIO_PRIORITY")) {
    if (const std::optional<int> priority = ParsePriority(*text)) {
      config.default_priority = *priority;
    } else {
      env.Reject("GPUPRIO_PRIORITY", "low, normal, high, or an integer -100..100",
                 "using the default (normal)");
    }
  }
  int64_t budget_us = static_cast<int64_t>(config.budget_ns / 1000);
  env.ReadInteger("GPUPRIO_BUDGET_US", "an integer number of microseconds",
                  "using the default (2000)", &budget_us);
  config.budget_ns = static_cast<uint64_t>(budget_us) * 1000;
  int64_t peer_budget_us = static_cast<int64_t>(config.peer_budget_ns / 1000);
  env.ReadInteger("GPUPRIO_PEER_BUDGET_US", "an integer number of microseconds",
                  "using the default (500)", &peer_budget_us);
  config.peer_budget_ns = static_cast<uint64_t>(peer_budget_us) * 1000;
  env.ReadChoice<bool>("GPUPRIO_DIRECT_ISSUE", {{"1", true}, {"0", false}},
                       "using the default (1)", &config.direct_issue);
  env.ReadChoice<scheduler::Isolation>("GPUPRIO_ISOLATION",
                                       {{"active", scheduler::Isolation::kActive},
                                        {"always", scheduler::Isolation::kAlways},
                                        {"off", scheduler::Isolation::kOff},
                                        {"force", scheduler::Isolation::kForce}},
                                       "using the default (active)", &config.isolation);
  int64_t reserved_sms = config.reserved_sms;
  env.ReadInteger("GPUPRIO_RESERVED_SMS", 0, 1024, "an integer number of SMs",
                  "using the default (16)", &reserved_sms);
  config.reserved_sms = static_cast<int>(reserved_sms);
  if (config.reserved_sms == 0) config.isolation = scheduler::Isolation::kOff;
  int64_t max_queued = static_cast<int64_t>(config.max_queued);
  env.ReadInteger("GPUPRIO_MAX_QUEUED", "an integer number of ops per stream",
                  "using the default (1024)", &max_queued);
  config.max_queued = static_cast<uint64_t>(max_queued);
  int64_t max_hold_ms = static_cast<int64_t>(config.max_hold_ns / 1'000'000);
  env.ReadInteger("GPUPRIO_MAX_HOLD_MS", "an integer number of milliseconds",
                  "using the default (100)", &max_hold_ms);
  config.max_hold_ns = static_cast<uint64_t>(max_hold_ms) * 1'000'000;
  int64_t host_yield_us = static_cast<int64_t>(config.host_yield_ns / 1000);
  env.ReadInteger("GPUPRIO_HOST_YIELD_US", "an integer number of microseconds",
                  "using the default (2000)", &host_yield_us);
  config.host_yield_ns = static_cast<uint64_t>(host_yield_us) * 1000;
  int64_t exit_timeout_ms = static_cast<int64_t>(config.exit_timeout_ns / 1'000'000);
  env.ReadInteger("GPUPRIO_EXIT_TIMEOUT_MS", "an integer number of milliseconds",
                  "using the default (30000)", &exit_timeout_ms);
  config.exit_timeout_ns = static_cast<uint64_t>(exit_timeout_ms) * 1'000'000;
  env.ReadChoice<bool>("GPUPRIO_COORDINATE", {{"1", true}, {"0", false}},
                       "using the default (1)", &config.coordinate);
  if (const std::optional<absl::string_view> text = env.Get("GPUPRIO_DOMAIN")) {
    if (coordinator::ValidDomain(*text)) {
      config.domain = std::string(*text);
    } else {
      env.Reject("GPUPRIO_DOMAIN", "1 to 64 characters of A-Z a-z 0-9 _ . -",
                 "no coordination with other processes");
      config.coordinate = false;
    }
  }
  if (const std::optional<absl::string_view> text = env.Get("GPUPRIO_SHM_DIR")) {
    // Absolute, so every process names the same directory whatever its working directory.
    if (!text->empty() && text->front() == '/' && text->size() < 4096) {
      config.shm_dir = std::string(*text);
    } else {
      env.Reject("GPUPRIO_SHM_DIR", "an absolute directory path",
                 "no coordination with other processes");
      config.coordinate = false;
    }
  }
  if (const std::optional<absl::string_view> text = env.Get("GPUPRIO_SHARE_GROUP")) {
    if (const std::optional<int64_t> gid = ResolveGroup(*text)) {
      config.share_gid = *gid;
    } else {
      env.Reject("GPUPRIO_SHARE_GROUP", "the name or number of a group this user is a member of",
                 "no coordination with other processes");
      config.coordinate = false;
    }
  }
  return {config, env.TakeProblems()};
}

const Config& GetConfig() {
  ABSL_CONST_INIT static absl::once_flag once;
  // Never destroyed: wrappers may run during exit, after static destructors.
  static Config* config = nullptr;
  absl::call_once(once, [] {
    ParsedEnv<Config> parsed = ParseConfig(GpuprioGetenv);
    config = new Config(parsed.config);
    SetLogLevel(config->log_level);
    for (const std::string& problem : parsed.problems) Log(LogLevel::kError, problem);
  });
  return *config;
}

}  // namespace gpuprio::hook
