// gpuprio's process configuration, read once from the environment (GPUPRIO_*).
// ParseConfig is pure; GetConfig never fails: a bad value is reported once on stderr and replaced
// by its fallback (docs/user_guide.md): the default for that variable, passthrough for
// GPUPRIO_MODE. gpuprio never takes a program down.
#ifndef GPUPRIO_HOOK_CONFIG_H_
#define GPUPRIO_HOOK_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "scheduler/base/env_reader.h"
#include "scheduler/base/env_vars.h"
#include "scheduler/base/logging.h"
#include "scheduler/options.h"

namespace gpuprio::hook {

enum class Mode {
  kSchedule,     // stream work goes through the priority scheduler
  kPassthrough,  // every call is intercepted, counted and forwarded unchanged
  kOff,          // lookups return the driver's own pointers; nothing is intercepted
};

absl::string_view ModeName(Mode mode);

// The words of each choice variable and what they mean here. config.cc checks, when compiled,
// that they are exactly env_vars.def's ACCEPTED words (what the launcher and the user guide show).
inline constexpr EnvChoice<Mode> kModeChoices[] = {
    {"schedule", Mode::kSchedule}, {"passthrough", Mode::kPassthrough}, {"off", Mode::kOff}};
inline constexpr EnvChoice<LogLevel> kLogLevelChoices[] = {{"error", LogLevel::kError},
                                                           {"warning", LogLevel::kWarning},
                                                           {"info", LogLevel::kInfo},
                                                           {"debug", LogLevel::kDebug},
                                                           {"warn", LogLevel::kWarning}};
inline constexpr EnvChoice<int> kPriorityNames[] = {{"low", -1}, {"normal", 0}, {"high", 1}};
inline constexpr EnvChoice<bool> kOnOffChoices[] = {{"1", true}, {"0", false}};
inline constexpr EnvChoice<scheduler::Isolation> kIsolationChoices[] = {
    {"active", scheduler::Isolation::kActive},
    {"always", scheduler::Isolation::kAlways},
    {"off", scheduler::Isolation::kOff},
    {"force", scheduler::Isolation::kForce}};

// The defaults, each from its variable's DEFAULT in scheduler/base/env_vars.def, the one place a
// default is written (constants, so that a default the reader cannot take fails the build).
inline constexpr Mode kDefaultMode = ChoiceDefault(env_var::GPUPRIO_MODE, kModeChoices);
inline constexpr LogLevel kDefaultLogLevel = ChoiceDefault(env_var::GPUPRIO_LOG, kLogLevelChoices);
inline constexpr int kDefaultPriority = ChoiceDefault(env_var::GPUPRIO_PRIORITY, kPriorityNames);
inline constexpr int64_t kDefaultBudgetUs = IntegerDefault(env_var::GPUPRIO_BUDGET_US);
inline constexpr int64_t kDefaultPeerBudgetUs = IntegerDefault(env_var::GPUPRIO_PEER_BUDGET_US);
inline constexpr bool kDefaultDirectIssue =
    ChoiceDefault(env_var::GPUPRIO_DIRECT_ISSUE, kOnOffChoices);
inline constexpr scheduler::Isolation kDefaultIsolation =
    ChoiceDefault(env_var::GPUPRIO_ISOLATION, kIsolationChoices);
inline constexpr int64_t kDefaultReservedSms = IntegerDefault(env_var::GPUPRIO_RESERVED_SMS);
inline constexpr int64_t kDefaultMaxQueued = IntegerDefault(env_var::GPUPRIO_MAX_QUEUED);
inline constexpr int64_t kDefaultRequestGapUs = IntegerDefault(env_var::GPUPRIO_REQUEST_GAP_US);
inline constexpr int64_t kDefaultMaxHoldMs = IntegerDefault(env_var::GPUPRIO_MAX_HOLD_MS);
inline constexpr int64_t kDefaultHostYieldUs = IntegerDefault(env_var::GPUPRIO_HOST_YIELD_US);
inline constexpr int64_t kDefaultExitTimeoutMs = IntegerDefault(env_var::GPUPRIO_EXIT_TIMEOUT_MS);
inline constexpr bool kDefaultCoordinate =
    ChoiceDefault(env_var::GPUPRIO_COORDINATE, kOnOffChoices);
inline constexpr EnvChoice<bool> kMpsClientPriorityChoices[] = {{"auto", true}, {"off", false}};
inline constexpr bool kDefaultMpsClientPriority =
    ChoiceDefault(env_var::GPUPRIO_MPS_CLIENT_PRIORITY, kMpsClientPriorityChoices);

// Each setting's range, accepted words and meaning: its entry in scheduler/base/env_vars.def.
struct Config {
  Mode mode = kDefaultMode;                    // GPUPRIO_MODE
  LogLevel log_level = kDefaultLogLevel;       // GPUPRIO_LOG
  int default_priority = kDefaultPriority;     // GPUPRIO_PRIORITY
  uint64_t budget_ns = kDefaultBudgetUs * 1000;            // GPUPRIO_BUDGET_US
  uint64_t peer_budget_ns = kDefaultPeerBudgetUs * 1000;   // GPUPRIO_PEER_BUDGET_US
  bool direct_issue = kDefaultDirectIssue;     // GPUPRIO_DIRECT_ISSUE (the scheduler's fast path)
  // GPUPRIO_ISOLATION (spatial isolation, docs/isolation.md).
  scheduler::Isolation isolation = kDefaultIsolation;
  int reserved_sms = kDefaultReservedSms;      // GPUPRIO_RESERVED_SMS; 0 turns isolation off
  uint64_t max_queued = kDefaultMaxQueued;     // GPUPRIO_MAX_QUEUED: unissued ops per stream
  uint64_t request_gap_ns = kDefaultRequestGapUs * 1000;     // GPUPRIO_REQUEST_GAP_US; 0: off
  uint64_t max_hold_ns = kDefaultMaxHoldMs * 1'000'000;      // GPUPRIO_MAX_HOLD_MS; 0: no bound
  uint64_t host_yield_ns = kDefaultHostYieldUs * 1000;       // GPUPRIO_HOST_YIELD_US; 0: off
  // GPUPRIO_EXIT_TIMEOUT_MS: at exit, how long the GPU may complete nothing before queued work is
  // abandoned.
  uint64_t exit_timeout_ns = kDefaultExitTimeoutMs * 1'000'000;
  // GPUPRIO_MPS_CLIENT_PRIORITY: whether a below-normal process asks MPS for a below-normal client
  // priority (hook/mps_client_priority.h).
  bool mps_client_priority = kDefaultMpsClientPriority;
  // Across processes (docs/coordinator.md). GPUPRIO_COORDINATE. GPUPRIO_DOMAIN: the group of
  // processes that coordinate. GPUPRIO_SHARE_GROUP: a group whose members' processes coordinate
  // (segment mode 0660), instead of this user's only (0600); this user must be a member.
  // GPUPRIO_SHM_DIR: the directory (absolute) the segments' own directories are made in. A bad
  // domain, group or directory turns coordination off: joining a group other than the one meant
  // would hold back (or be held back by) strangers.
  bool coordinate = kDefaultCoordinate;
  std::string shm_dir = std::string(env_var::GPUPRIO_SHM_DIR.default_value);
  std::string domain = std::string(env_var::GPUPRIO_DOMAIN.default_value);
  int64_t share_gid = -1;  // GPUPRIO_SHARE_GROUP unset (the table's default): none
};

// The scheduler's settings from the configuration: every user setting, in the scheduler's units.
// The one place they are copied (hook/scheduler_bridge.cc builds the scheduler with it), so that
// a setting cannot be read and then dropped; what no variable sets keeps options.h's value.
scheduler::SchedulerOptions SchedulerOptionsFor(const Config& config);

// One of kPriorityNames or an integer in GPUPRIO_PRIORITY's range; nullopt otherwise.
std::optional<int> ParsePriority(absl::string_view text);

// A group name or number (GPUPRIO_SHARE_GROUP) as a gid; nullopt if there is no such group name.
std::optional<int64_t> ResolveGroup(absl::string_view text);

// Reads GPUPRIO_MODE, GPUPRIO_LOG, GPUPRIO_PRIORITY, GPUPRIO_BUDGET_US, GPUPRIO_PEER_BUDGET_US,
// GPUPRIO_DIRECT_ISSUE, GPUPRIO_ISOLATION, GPUPRIO_RESERVED_SMS, GPUPRIO_MAX_QUEUED,
// GPUPRIO_REQUEST_GAP_US, GPUPRIO_MAX_HOLD_MS, GPUPRIO_HOST_YIELD_US, GPUPRIO_EXIT_TIMEOUT_MS,
// GPUPRIO_MPS_CLIENT_PRIORITY, GPUPRIO_COORDINATE, GPUPRIO_DOMAIN, GPUPRIO_SHM_DIR and
// GPUPRIO_SHARE_GROUP through `getenv` by env_reader.h's rule, each as its env_vars.def entry says.
// A bad GPUPRIO_MODE gives passthrough; a bad domain, group or directory turns coordination off;
// any other bad value gives that variable's default.
ParsedEnv<Config> ParseConfig(GetenvFunction getenv);

// GPUPRIO_MODE, GPUPRIO_PRIORITY and GPUPRIO_MPS_CLIENT_PRIORITY as ParseConfig reads them, the
// rest at their defaults, problems dropped: what the MPS client priority is decided on at load
// (hook/mps_client_priority.h), before the start parses (and reports) the whole configuration.
Config ParseMpsClientPriorityConfig(GetenvFunction getenv);

// GPUPRIO_LOG as ParseConfig reads it, a bad value taken as the default and not reported: for a
// process that made no CUDA call, which parses nothing else and reports nothing
// (hook/process_start.h).
LogLevel LogLevelFromEnvironment(GetenvFunction getenv);

// The process configuration, parsed from the real environment (GpuprioGetenv) on first use; its
// problems are logged then. Thread-safe.
const Config& GetConfig();

}  // namespace gpuprio::hook

#endif  // GPUPRIO_HOOK_CONFIG_H_
