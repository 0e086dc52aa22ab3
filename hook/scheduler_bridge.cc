#include "hook/scheduler_bridge.h"

#include <cudaTypedefs.h>

#include <cstdlib>
#include <new>

#include "absl/base/attributes.h"
#include "absl/base/call_once.h"
#include "cupti_tracer/tracer_factory.h"
#include "hook/api_table.h"
#include "hook/config.h"
#include "hook/process_start.h"
#include "hook/real_driver.h"
#include "scheduler/coordinator/segment_registry.h"
#include "hook/thread_state.h"
#include "scheduler/base/logging.h"
#include "scheduler/base/tls.h"

namespace gpuprio::hook {
namespace {

ABSL_CONST_INIT absl::once_flag g_once;
ABSL_CONST_INIT std::atomic<scheduler::Scheduler*> g_scheduler{nullptr};

}  // namespace

// Set on the thread that creates the scheduler: loading the tracer (libcupti) there may call the
// driver through gpuprio's wrappers, which must then pass straight through instead of waiting for
// the scheduler being created.
GPUPRIO_THREAD_LOCAL bool t_creating_scheduler = false;

namespace {

void MarkThreadAsDriver() { ++t_thread_state.driver_call_depth; }

// Registered when the scheduler is created, which is after the CUDA runtime registered its own
// exit handler (the runtime initialises before the first launch), so it runs before the runtime
// tears the driver down: queued work is issued and the dispatchers stop while the driver lives.
// Bounded: a GPU that completes nothing for GPUPRIO_EXIT_TIMEOUT_MS cannot keep the process alive.
void StopDispatchersAtExit() {
  if (scheduler::Scheduler* s = g_scheduler.load(std::memory_order_acquire)) {
    s->StopDispatchers(/*bounded=*/true);
    s->LeaveSharedSegments();
    // Every op is issued: the trace is complete (the tracer flushes CUPTI while the driver lives).
    tracer::FinishTracerAtExit();
  }
}

// Set in a forked child (AbandonSchedulerInChild): its scheduler records no trace.
ABSL_CONST_INIT std::atomic<bool> g_in_forked_child{false};

void CreateScheduler() {
  // Reached through a use of CUDA, which started gpuprio already, or through the C API's stats:
  // the scheduler's threads must not start before Abseil's lazy state is initialised.
  StartGpuprio();
  const Config& config = GetConfig();
  if (config.mode != Mode::kSchedule) return;
  if (!ResolveRealDriver()) return;
  scheduler::DriverFunctions d = RealDriverFunctions();
  d.on_dispatcher_thread_start = &MarkThreadAsDriver;
  if (!d.Complete()) {
    Log(LogLevel::kError,
        "the driver lacks entry points the scheduler needs; running unscheduled (passthrough)");
    return;
  }
  scheduler::SchedulerOptions options = SchedulerOptionsFor(config);
  // The exit summary that reports the time is printed at info.
  options.time_calls = LogEnabled(LogLevel::kInfo);
  // The tracer (GPUPRIO_TRACE), or the Kineto id carrier when libcupti is loaded, or none. Never
  // destroyed, like the scheduler: work may be submitted until the last moment of the process.
  // A forked child records no trace: the parent's tracer and its events stay the parent's.
  scheduler::OpObserver* observer = nullptr;
  if (!g_in_forked_child.load(std::memory_order_relaxed)) {
    t_creating_scheduler = true;
    DriverCallScope in_driver;
    observer = tracer::MakeTracerFromEnvironment().release();
    t_creating_scheduler = false;
  }
  g_scheduler.store(new scheduler::Scheduler(options, d, observer), std::memory_order_release);
  // A forked child inherits its parent's handlers: registered once per process tree.
  static bool handlers_registered = false;
  if (!handlers_registered) {
    handlers_registered = true;
    std::atexit(StopDispatchersAtExit);
  }
}

}  // namespace

// fork(). The parent's dispatchers keep running through a fork: nothing is drained or stopped,
// so fork() costs what it costs natively whatever is queued. The child has none of the parent's
// threads, and CUDA cannot be used across fork (a child must initialise its own driver), so the
// child abandons the parent's scheduler -- never touching it, since its locks may be held by
// threads that do not exist there -- and builds a new one on its first scheduled call.
void AbandonSchedulerInChild() {
  g_in_forked_child.store(true, std::memory_order_relaxed);
  // The parent's segment descriptors carry its slot locks: a child that kept them open would keep
  // the parent's slots looking alive after the parent is gone.
  coordinator::CloseInheritedSegments();
  g_scheduler.store(nullptr, std::memory_order_relaxed);
  // A fresh once flag: the parent's is done, or held by a thread that is gone. once_flag is a
  // trivially destructible atomic word, so constructing a new one in place is all it takes.
  new (&g_once) absl::once_flag();
}

scheduler::Scheduler* ExistingScheduler() { return g_scheduler.load(std::memory_order_acquire); }

scheduler::Scheduler* ActiveScheduler() {
  scheduler::Scheduler* s = g_scheduler.load(std::memory_order_acquire);
  if (s != nullptr) return s;
  if (t_creating_scheduler) return nullptr;
  absl::call_once(g_once, CreateScheduler);
  return g_scheduler.load(std::memory_order_acquire);
}

}  // namespace gpuprio::hook
