// Process lifecycle: configuration and environment checks at load, the counts of suppressed log
// lines and the call summary at exit, fork handlers.
// The constructor makes no CUDA call (another library may not even have loaded libcuda yet).
#include <pthread.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/synchronization/mutex.h"
#include "hook/call_counters.h"
#include "hook/config.h"
#include "hook/scheduler_bridge.h"
#include "scheduler/env_vars.h"
#include "scheduler/log_throttle.h"
#include "scheduler/logging.h"

namespace gpuprio::hook {
namespace {

void LogCallSummary() {
  if (!LogEnabled(LogLevel::kInfo)) return;
  const CallCountTable counts = SumCallCounts();
  Logf(LogLevel::kInfo, "call summary: pid=%d mode=%s", getpid(), ModeName(GetConfig().mode));
  for (const std::string& line : FormatCallSummary(counts)) Log(LogLevel::kInfo, line);
}

// Registered first, so it runs after the scheduler's exit handler has issued the last work.
void AtExit() {
  LogSuppressedCounts();
  LogCallSummary();
}

void AfterForkInChild() { ResetCallCounts(); }

__attribute__((constructor)) void InitializeGpuprio() {
  (void)GetConfig();  // a bad GPUPRIO_* value is reported now, once
  // A setting not honoured is reported at the level of a bad value, whatever GPUPRIO_LOG says.
  for (const std::string& warning : ProcessEnvironmentWarnings()) Log(LogLevel::kError, warning);
  std::atexit(AtExit);
  pthread_atfork(nullptr, nullptr, AfterForkInChild);
  InstallForkHandlers();
  // Abseil's debug-build deadlock detector takes one global spinlock inside every blocking Mutex
  // operation; a fork while another thread holds it leaves it held in the child, whose first
  // Mutex operation then never returns (about 1 fork in 200 under load in the fork-while-working
  // test). Optimised builds (NDEBUG) have no detector; debug and sanitizer builds now behave the
  // same way.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace
}  // namespace gpuprio::hook
