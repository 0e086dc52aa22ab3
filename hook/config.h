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

struct Config {
  Mode mode = Mode::kSchedule;
  LogLevel log_level = LogLevel::kWarning;
  int default_priority = 0;          // GPUPRIO_PRIORITY: low | normal | high | -100..100
  uint64_t budget_ns = 2'000'000;    // GPUPRIO_BUDGET_US: 1..10000000
  uint64_t peer_budget_ns = 500'000;  // GPUPRIO_PEER_BUDGET_US: 1..10000000 (below another process)
  bool direct_issue = true;          // GPUPRIO_DIRECT_ISSUE: 1 | 0 (the scheduler's fast path)
  // GPUPRIO_ISOLATION: active | always | off | force (spatial isolation, docs/isolation.md).
  scheduler::Isolation isolation = scheduler::Isolation::kActive;
  int reserved_sms = 16;             // GPUPRIO_RESERVED_SMS: 0..1024; 0 turns isolation off
  uint64_t max_queued = 1024;        // GPUPRIO_MAX_QUEUED: unissued ops per stream, 2..1000000
  uint64_t max_hold_ns = 100'000'000;  // GPUPRIO_MAX_HOLD_MS: 0..3600000, 0 no bound
  uint64_t host_yield_ns = 2'000'000;  // GPUPRIO_HOST_YIELD_US: 0..1000000 us, 0 off
  // GPUPRIO_EXIT_TIMEOUT_MS (1..86400000): at exit, how long the GPU may complete nothing before
  // queued work is abandoned.
  uint64_t exit_timeout_ns = 30'000'000'000;
  // Across processes (docs/coordinator.md). GPUPRIO_COORDINATE: 1 | 0. GPUPRIO_DOMAIN: the group
  // of processes that coordinate, [A-Za-z0-9_.-]{1,64}. GPUPRIO_SHARE_GROUP: a group name or gid
  // whose members' processes coordinate (segment mode 0660), instead of this user's only (0600);
  // this user must be a member. GPUPRIO_SHM_DIR: the directory (absolute) the segments' own
  // directories are made in. A bad domain, group or directory turns coordination off: joining a
  // group other than the one meant would hold back (or be held back by) strangers.
  bool coordinate = true;
  std::string shm_dir = "/dev/shm";
  std::string domain = "default";
  int64_t share_gid = -1;
};

// "low" / "normal" / "high" or an integer in [-100, 100]; nullopt otherwise.
std::optional<int> ParsePriority(absl::string_view text);

// A group name or number (GPUPRIO_SHARE_GROUP) as a gid; nullopt if there is no such group name.
std::optional<int64_t> ResolveGroup(absl::string_view text);

// Reads GPUPRIO_MODE (schedule | passthrough | off), GPUPRIO_LOG (error | warning | info |
// debug), GPUPRIO_PRIORITY, GPUPRIO_BUDGET_US, GPUPRIO_PEER_BUDGET_US,
// GPUPRIO_DIRECT_ISSUE, GPUPRIO_ISOLATION, GPUPRIO_RESERVED_SMS, GPUPRIO_MAX_QUEUED, GPUPRIO_MAX_HOLD_MS,
// GPUPRIO_EXIT_TIMEOUT_MS, GPUPRIO_COORDINATE,
// GPUPRIO_DOMAIN and GPUPRIO_SHARE_GROUP through `getenv` by env_reader.h's rule. A bad
// GPUPRIO_MODE gives passthrough; any other bad value gives that variable's default.
ParsedEnv<Config> ParseConfig(GetenvFunction getenv);

// GPUPRIO_LOG as ParseConfig reads it, a bad value taken as the default and not reported: for a
// process that made no CUDA call, which parses nothing else and reports nothing
// (hook/process_start.h).
LogLevel LogLevelFromEnvironment(GetenvFunction getenv);

// The process configuration, parsed from the real environment (GpuprioGetenv) on first use; its
// problems are logged then. Thread-safe.
const Config& GetConfig();

}  // namespace gpuprio::hook

#endif  // GPUPRIO_HOOK_CONFIG_H_
