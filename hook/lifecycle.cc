// Process lifecycle: the library's constructor, the counts of suppressed log lines and the call and
// priority summary at exit, fork handlers.
// The constructor only registers the exit and fork handlers and sets the MPS client priority's
// variable (hook/mps_client_priority.h): most processes that load the library never use CUDA, and
// everything else waits for the first use (hook/process_start.h). It makes no CUDA call (another
// library may not even have loaded libcuda yet) and reports nothing.
#include "hook/lifecycle.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "absl/base/attributes.h"
#include "absl/strings/str_format.h"
#include "hook/call_counters.h"
#include "hook/config.h"
#include "hook/mps_client_priority.h"
#include "hook/param_layout_cache.h"
#include "hook/process_start.h"
#include "hook/real_driver.h"
#include "hook/scheduler_bridge.h"
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

// Registered first, so it runs after the scheduler's exit handler has issued the last work. A
// process that never used CUDA says nothing, except at GPUPRIO_LOG=debug, where one line tells
// that gpuprio was loaded and stayed idle (is gpuprio in that process at all?).
void AtExit() {
  if (!CudaUsedInThisProcess()) {
    // GPUPRIO_LOG is read here, not at load: the rest of the configuration was never parsed, and
    // a bad value is not reported by a process gpuprio did nothing in.
    const LogLevel level =
        GpuprioStarted() ? GetLogLevel() : LogLevelFromEnvironment(GpuprioGetenv);
    if (level >= LogLevel::kDebug) {
      LogUnfiltered(LogLevel::kDebug, absl::StrFormat("pid %d made no CUDA call", getpid()));
    }
    return;
  }
  LogSuppressedCounts();
  LogCallSummary();
}

// fork(). Every piece of state a thread of the parent may be changing at the moment of the fork
// is made consistent here, because the child has only the forking thread: the parameter-layout
// cache is locked across the fork (so no update is half done), a driver resolve or scheduler
// creation that another thread had begun is started again by the child, and the parent's
// scheduler is abandoned. None of the handlers makes a CUDA call.
// Before the start (hook/process_start.h) none of that state exists, and a fork costs one
// uncontended lock: the start's gate, held across the fork so that the start is never half done
// in the child, and so that whether it happened cannot change between the handlers.
void PrepareFork() {
  LockStartForFork();
  if (GpuprioStarted()) LockParamLayoutsForFork();
}
void ParentAfterFork() {
  if (GpuprioStarted()) UnlockParamLayoutsInParent();
  UnlockStartInParent();
}
void ChildAfterFork() {
  if (GpuprioStarted()) {
    ResetParamLayoutsInChild();
    RestartUnfinishedResolveInChild();
    AbandonSchedulerInChild();
    ResetCallCounts();
  }
  UnlockStartInChild();
}

__attribute__((constructor)) void InitializeGpuprio() {
  RegisterProcessHandlers();
  // Before main, where a preloaded library normally runs while the process has one thread: the
  // time at which changing the environment races no other thread's getenv.
  PrepareMpsClientPriorityAtLoad();
}

}  // namespace

void RegisterProcessHandlers() {
  // A flag, not a function-local static: a fork while another thread is inside a static's
  // initialisation would leave the child's first call waiting for ever. Both callers run before
  // main in practice (the constructor, or the start from another library's constructor).
  ABSL_CONST_INIT static std::atomic<bool> registered{false};
  if (registered.exchange(true, std::memory_order_acq_rel)) return;
  std::atexit(AtExit);
  pthread_atfork(PrepareFork, ParentAfterFork, ChildAfterFork);
}

}  // namespace gpuprio::hook
