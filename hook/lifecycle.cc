// Process lifecycle: configuration and environment checks at load, the counts of suppressed log
// lines and the call summary at exit, fork handlers.
// The constructor makes no CUDA call (another library may not even have loaded libcuda yet).
#include <pthread.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/synchronization/mutex.h"
#include "hook/call_counters.h"
#include "scheduler/base/abseil_fork_safety.h"
#include "hook/config.h"
#include "hook/param_layout_cache.h"
#include "hook/real_driver.h"
#include "hook/scheduler_bridge.h"
#include "scheduler/base/env_vars.h"
#include "scheduler/base/log_throttle.h"
#include "scheduler/base/logging.h"
#include "scheduler/base/version.h"

namespace gpuprio::hook {
namespace {

void LogCallSummary() {
  if (!LogEnabled(LogLevel::kInfo)) return;
  const CallCountTable counts = SumCallCounts();
  Logf(LogLevel::kInfo, "call summary: pid=%d mode=%s version=%s", getpid(),
       ModeName(GetConfig().mode), base::kVersion);
  for (const std::string& line : FormatCallSummary(counts)) Log(LogLevel::kInfo, line);
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
  (void)GetConfig();  // a bad GPUPRIO_* value is reported now, once
  // A setting not honoured is reported at the level of a bad value, whatever GPUPRIO_LOG says.
  for (const std::string& warning : ProcessEnvironmentWarnings()) Log(LogLevel::kError, warning);
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
