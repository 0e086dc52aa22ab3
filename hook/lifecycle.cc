// Process lifecycle: configuration and environment checks at load (and the start line `gpuprio run`
// asks for), the counts of suppressed log lines and the call and priority summary at exit, fork
// handlers.
// The constructor makes no CUDA call (another library may not even have loaded libcuda yet).
#include <pthread.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "absl/synchronization/mutex.h"
#include "cupti_tracer/trace_path_pattern.h"
#include "hook/call_counters.h"
#include "scheduler/base/abseil_fork_safety.h"
#include "hook/config.h"
#include "hook/param_layout_cache.h"
#include "hook/real_driver.h"
#include "hook/scheduler_bridge.h"
#include "scheduler/base/env_reader.h"
#include "scheduler/base/env_vars.h"
#include "scheduler/base/log_throttle.h"
#include "scheduler/base/logging.h"
#include "scheduler/base/version.h"
#include "scheduler/priority_summary.h"

namespace gpuprio::hook {
namespace {

void LogCallSummary() {
  if (!LogEnabled(LogLevel::kInfo)) return;
  const CallCountTable counts = SumCallCounts();
  Logf(LogLevel::kInfo, "call summary: pid=%d mode=%s version=%s", getpid(),
       ModeName(GetConfig().mode), base::kVersion);
  for (const std::string& line : FormatCallSummary(counts)) Log(LogLevel::kInfo, line);
  if (scheduler::Scheduler* s = ExistingScheduler()) {
    for (const std::string& line : scheduler::FormatPrioritySummary(s->levels())) {
      Log(LogLevel::kInfo, line);
    }
    for (const std::string& line : scheduler::FormatDispatcherSummary(s->DispatcherActivity())) {
      Log(LogLevel::kInfo, line);
    }
  }
}

// One line saying how gpuprio runs, when GPUPRIO_ANNOUNCE=1: `gpuprio run` sets it, so its user
// sees that gpuprio is in the process, while a plain LD_PRELOAD stays quiet.
void Announce(const Config& config) {
  EnvReader env(GpuprioGetenv);
  bool announce = false;
  env.ReadChoice<bool>("GPUPRIO_ANNOUNCE", {{"0", false}, {"1", true}}, "not announcing",
                       &announce);
  for (const std::string& problem : env.TakeProblems()) Log(LogLevel::kError, problem);
  if (!announce) return;
  const char* priority_name = config.default_priority == 1    ? "high"
                              : config.default_priority == 0  ? "normal"
                              : config.default_priority == -1 ? "low"
                                                              : nullptr;
  const std::string priority =
      priority_name != nullptr ? priority_name : std::to_string(config.default_priority);
  // The file this process's tracer will write: the pattern expanded as the tracer expands it, so
  // each process of a multi-process job names its own file. The tracer reports any placeholder
  // that did not expand when it starts; saying it here too would say it twice.
  const std::optional<absl::string_view> pattern = env.Get("GPUPRIO_TRACE");
  const std::string trace =
      pattern.has_value()
          ? tracer::ExpandTracePath(*pattern, tracer::CurrentTracePathContext(), GpuprioGetenv)
                .path
          : "none";
  // At the error level, which every GPUPRIO_LOG shows: the user asked for this line.
  Logf(LogLevel::kError, "pid %d mode=%s priority=%s budget=%dus trace=%s version=%s", getpid(),
       ModeName(config.mode), priority, config.budget_ns / 1000, Escaped(trace), base::kVersion);
}

// Registered first, so it runs after the scheduler's exit handler has issued the last work.
void AtExit() {
  LogSuppressedCounts();
  LogCallSummary();
}

// fork(). Every piece of state a thread of the parent may be changing at the moment of the fork
// is made consistent here, because the child has only the forking thread: the parameter-layout
// cache is locked across the fork (so no update is half done), a driver resolve or scheduler
// creation that another thread had begun is started again by the child, and the parent's
// scheduler is abandoned. None of the handlers makes a CUDA call.
void PrepareFork() { LockParamLayoutsForFork(); }
void ParentAfterFork() { UnlockParamLayoutsInParent(); }
void ChildAfterFork() {
  ResetParamLayoutsInChild();
  RestartUnfinishedResolveInChild();
  AbandonSchedulerInChild();
  ResetCallCounts();
}

__attribute__((constructor)) void InitializeGpuprio() {
  base::InitializeAbseilLazyState();  // before any thread of gpuprio's can race a fork with it
  const Config& config = GetConfig();  // a bad GPUPRIO_* value is reported now, once
  // A setting not honoured is reported at the level of a bad value, whatever GPUPRIO_LOG says.
  for (const std::string& warning : ProcessEnvironmentWarnings()) Log(LogLevel::kError, warning);
  Announce(config);
  std::atexit(AtExit);
  pthread_atfork(PrepareFork, ParentAfterFork, ChildAfterFork);
  // Abseil's debug-build deadlock detector takes one global spinlock inside every blocking Mutex
  // operation; a fork while another thread holds it leaves it held in the child, whose first
  // Mutex operation then never returns (about 1 fork in 200 under load in the fork-while-working
  // test). Optimised builds (NDEBUG) have no detector; debug and sanitizer builds now behave the
  // same way.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace
}  // namespace gpuprio::hook
