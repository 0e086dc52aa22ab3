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
#include "absl/strings/str_cat.h"
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

// The readers take what the table says: the launcher and the user guide show the table's words.
static_assert(ChoicesMatchTable(env_var::GPUPRIO_MODE, kModeChoices));
static_assert(ChoicesMatchTable(env_var::GPUPRIO_LOG, kLogLevelChoices));
static_assert(ChoicesMatchTable(env_var::GPUPRIO_PRIORITY, kPriorityNames));
static_assert(ChoicesMatchTable(env_var::GPUPRIO_DIRECT_ISSUE, kOnOffChoices));
static_assert(ChoicesMatchTable(env_var::GPUPRIO_ISOLATION, kIsolationChoices));
static_assert(ChoicesMatchTable(env_var::GPUPRIO_COORDINATE, kOnOffChoices));
static_assert(ChoicesMatchTable(env_var::GPUPRIO_MPS_CLIENT_PRIORITY, kMpsClientPriorityChoices));
static_assert(env_var::GPUPRIO_PRIORITY.kind == EnvVarKind::kPriority);
// A priority the table accepts fits the int the scheduler keeps it in.
static_assert(env_var::GPUPRIO_PRIORITY.min >= INT_MIN && env_var::GPUPRIO_PRIORITY.max <= INT_MAX);

std::optional<int> ParsePriority(absl::string_view text) {
  const absl::string_view value = absl::StripAsciiWhitespace(text);
  for (const auto& [name, priority] : kPriorityNames) {
    if (absl::EqualsIgnoreCase(value, name)) return priority;
  }
  int number = 0;
  if (!absl::SimpleAtoi(value, &number) || number < env_var::GPUPRIO_PRIORITY.min ||
      number > env_var::GPUPRIO_PRIORITY.max) {
    return std::nullopt;
  }
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
  env.ReadChoice(env_var::GPUPRIO_LOG, kLogLevelChoices, UsingTheDefault(env_var::GPUPRIO_LOG),
                 level);
}

// A variable counted in `unit` (1000 for microseconds, 1'000'000 for milliseconds) into `*ns`.
void ReadDuration(EnvReader& env, const KnownEnvVar& var, absl::string_view what, uint64_t unit,
                  uint64_t* ns) {
  int64_t count = static_cast<int64_t>(*ns / unit);
  env.ReadInteger(var, what, &count);
  *ns = static_cast<uint64_t>(count) * unit;
}

// An unknown mode could have meant anything, so the process runs as if gpuprio only watched.
void ReadMode(EnvReader& env, Config* config) {
  if (!env.ReadChoice(env_var::GPUPRIO_MODE, kModeChoices, "running unscheduled (passthrough)",
                      &config->mode)) {
    config->mode = Mode::kPassthrough;
  }
}

void ReadPriority(EnvReader& env, Config* config) {
  const std::optional<absl::string_view> text = env.Get("GPUPRIO_PRIORITY");
  if (!text.has_value()) return;
  if (const std::optional<int> priority = ParsePriority(*text)) {
    config->default_priority = *priority;
    return;
  }
  std::string accepted;
  for (const auto& choice : kPriorityNames) absl::StrAppend(&accepted, choice.first, ", ");
  absl::StrAppend(&accepted, "or an integer ", env_var::GPUPRIO_PRIORITY.min, "..",
                  env_var::GPUPRIO_PRIORITY.max);
  env.Reject("GPUPRIO_PRIORITY", accepted, UsingTheDefault(env_var::GPUPRIO_PRIORITY));
}

void ReadMpsClientPriority(EnvReader& env, Config* config) {
  env.ReadChoice(env_var::GPUPRIO_MPS_CLIENT_PRIORITY, kMpsClientPriorityChoices,
                 UsingTheDefault(env_var::GPUPRIO_MPS_CLIENT_PRIORITY),
                 &config->mps_client_priority);
}

}  // namespace

Config ParseMpsClientPriorityConfig(GetenvFunction getenv) {
  EnvReader env(getenv);
  Config config;
  ReadMode(env, &config);
  ReadPriority(env, &config);
  ReadMpsClientPriority(env, &config);
  return config;
}

LogLevel LogLevelFromEnvironment(GetenvFunction getenv) {
  EnvReader env(getenv);
  LogLevel level = kDefaultLogLevel;
  ReadLogLevel(env, &level);
  return level;
}

ParsedEnv<Config> ParseConfig(GetenvFunction getenv) {
  EnvReader env(getenv);
  Config config;
  ReadMode(env, &config);
  ReadLogLevel(env, &config.log_level);
  ReadPriority(env, &config);
  ReadDuration(env, env_var::GPUPRIO_BUDGET_US, "an integer number of microseconds", 1000,
               &config.budget_ns);
  ReadDuration(env, env_var::GPUPRIO_PEER_BUDGET_US, "an integer number of microseconds", 1000,
               &config.peer_budget_ns);
  env.ReadChoice(env_var::GPUPRIO_DIRECT_ISSUE, kOnOffChoices,
                 UsingTheDefault(env_var::GPUPRIO_DIRECT_ISSUE), &config.direct_issue);
  env.ReadChoice(env_var::GPUPRIO_ISOLATION, kIsolationChoices,
                 UsingTheDefault(env_var::GPUPRIO_ISOLATION), &config.isolation);
  int64_t reserved_sms = config.reserved_sms;
  env.ReadInteger(env_var::GPUPRIO_RESERVED_SMS, "an integer number of SMs", &reserved_sms);
  config.reserved_sms = static_cast<int>(reserved_sms);
  if (config.reserved_sms == 0) config.isolation = scheduler::Isolation::kOff;
  int64_t max_queued = static_cast<int64_t>(config.max_queued);
  env.ReadInteger(env_var::GPUPRIO_MAX_QUEUED, "an integer number of ops per stream", &max_queued);
  config.max_queued = static_cast<uint64_t>(max_queued);
  ReadDuration(env, env_var::GPUPRIO_REQUEST_GAP_US, "an integer number of microseconds", 1000,
               &config.request_gap_ns);
  ReadDuration(env, env_var::GPUPRIO_MAX_HOLD_MS, "an integer number of milliseconds", 1'000'000,
               &config.max_hold_ns);
  ReadDuration(env, env_var::GPUPRIO_HOST_YIELD_US, "an integer number of microseconds", 1000,
               &config.host_yield_ns);
  ReadDuration(env, env_var::GPUPRIO_EXIT_TIMEOUT_MS, "an integer number of milliseconds",
               1'000'000, &config.exit_timeout_ns);
  ReadMpsClientPriority(env, &config);
  env.ReadChoice(env_var::GPUPRIO_COORDINATE, kOnOffChoices,
                 UsingTheDefault(env_var::GPUPRIO_COORDINATE), &config.coordinate);
  if (const std::optional<absl::string_view> text = env.Get("GPUPRIO_DOMAIN")) {
    if (coordinator::ValidDomain(*text)) {
      config.domain = std::string(*text);
    } else {
      env.Reject("GPUPRIO_DOMAIN", env_var::GPUPRIO_DOMAIN.accepted,
                 "no coordination with other processes");
      config.coordinate = false;
    }
  }
  if (const std::optional<absl::string_view> text = env.Get("GPUPRIO_SHM_DIR")) {
    // Absolute, so every process names the same directory whatever its working directory.
    if (!text->empty() && text->front() == '/' && text->size() < 4096) {
      config.shm_dir = std::string(*text);
    } else {
      env.Reject("GPUPRIO_SHM_DIR", env_var::GPUPRIO_SHM_DIR.accepted,
                 "no coordination with other processes");
      config.coordinate = false;
    }
  }
  if (const std::optional<absl::string_view> text = env.Get("GPUPRIO_SHARE_GROUP")) {
    if (const std::optional<int64_t> gid = ResolveGroup(*text)) {
      config.share_gid = *gid;
    } else {
      env.Reject("GPUPRIO_SHARE_GROUP", env_var::GPUPRIO_SHARE_GROUP.accepted,
                 "no coordination with other processes");
      config.coordinate = false;
    }
  }
  return {config, env.TakeProblems()};
}

scheduler::SchedulerOptions SchedulerOptionsFor(const Config& config) {
  scheduler::SchedulerOptions options;
  options.default_priority = config.default_priority;
  options.budget_ns = config.budget_ns;
  options.peer_budget_ns = config.peer_budget_ns;
  options.direct_issue = config.direct_issue;
  options.isolation = config.isolation;
  options.reserved_sms = config.reserved_sms;
  options.max_queued_per_stream = config.max_queued;
  options.max_hold_ns = config.max_hold_ns;
  options.request_gap_ns = config.request_gap_ns;
  options.host_yield_ns = config.host_yield_ns;
  options.stop_stall_timeout_ns = config.exit_timeout_ns;
  options.coordinate = config.coordinate;
  options.segment.shm_dir = config.shm_dir;
  options.segment.domain = config.domain;
  options.segment.share_gid = config.share_gid;
  // A kernel never measured counts as a whole budget: one at a time until it has a history.
  options.default_estimate_ns = config.budget_ns;
  return options;
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
