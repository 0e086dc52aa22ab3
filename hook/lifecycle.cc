// Process lifecycle: configuration read at load, the call summary at exit, fork handlers.
// The constructor makes no CUDA call (another library may not even have loaded libcuda yet).
#include <pthread.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_format.h"
#include "hook/call_counters.h"
#include "hook/config.h"
#include "hook/scheduler_bridge.h"
#include "scheduler/logging.h"

namespace gpuprio::hook {
namespace {

void LogCallSummaryAtExit() {
  if (!LogEnabled(LogLevel::kInfo)) return;
  const CallCountTable counts = SumCallCounts();
  Log(LogLevel::kInfo, absl::StrFormat("call summary: pid=%d mode=%s", getpid(),
                                       ModeName(GetConfig().mode)));
  for (const std::string& line : FormatCallSummary(counts)) Log(LogLevel::kInfo, line);
}

void AfterForkInChild() { ResetCallCounts(); }

__attribute__((constructor)) void InitializeGpuprio() {
  (void)GetConfig();  // a bad GPUPRIO_* value is reported now, once
  std::atexit(LogCallSummaryAtExit);
  pthread_atfork(nullptr, nullptr, AfterForkInChild);
  InstallForkHandlers();
}

}  // namespace
}  // namespace gpuprio::hook
