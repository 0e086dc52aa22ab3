#include "hook/profiler_calls.h"

#include "cupti_tracer/cupti_tracer.h"
#include "scheduler/scheduler.h"

namespace gpuprio::hook {

void NoteProfilerStart() {
  (void)ActiveScheduler();
  tracer::OnProfilerStart();
}

void NoteProfilerStop() {
  // Work the program submitted before the stop may still be queued; issued later it would fall
  // outside the range the program asked for.
  if (scheduler::Scheduler* s = ActiveScheduler()) s->WaitAll();
  tracer::OnProfilerStop();
}

}  // namespace gpuprio::hook
