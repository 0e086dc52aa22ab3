// cuProfilerStart / cuProfilerStop (cudaProfilerStart, torch.cuda.profiler.start): they bound the
// trace when GPUPRIO_TRACE_RANGE=profiler_api, like nsys --capture-range=cudaProfilerApi, and
// then reach the driver unchanged (an nsys or ncu beside gpuprio still sees them).
#ifndef GPUPRIO_HOOK_PROFILER_CALLS_H_
#define GPUPRIO_HOOK_PROFILER_CALLS_H_

#include <cuda.h>

#include "hook/api_table.h"
#include "hook/interceptor.h"
#include "hook/scheduler_bridge.h"
#include "hook/thread_state.h"

namespace gpuprio::hook {

// Both tell the tracer, if one runs (creating the scheduler first: a start can be the program's
// first driver call after cuInit, and the tracer is made with the scheduler).
void NoteProfilerStart();
// Waits until the work submitted before the stop is issued, so the range holds all of it, then
// closes the range (the trace is written on the tracer's own thread).
void NoteProfilerStop();

// Tells the tracer (`note`), then makes the real call.
template <void (*note)()>
struct ProfilerCall {
  template <typename Real>
  static CUresult Call(CallPath /*path*/, Real real) {
    if (!InDriverCall()) note();
    DriverCallScope in_driver;
    return real();
  }
};

template <>
struct Interceptor<ApiId::k_cuProfilerStart, ApiClass::kPassThrough>
    : ProfilerCall<&NoteProfilerStart> {};
template <>
struct Interceptor<ApiId::k_cuProfilerStop, ApiClass::kPassThrough>
    : ProfilerCall<&NoteProfilerStop> {};

}  // namespace gpuprio::hook

#endif  // GPUPRIO_HOOK_PROFILER_CALLS_H_
