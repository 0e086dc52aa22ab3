// The hook point between a generated wrapper and the real driver. A wrapper counts the call and
// hands it to Interceptor<id>::Call(path, real, args...); the primary template forwards to the
// driver. cuGetProcAddress (proc_address_hook.h) plugs in by specialising it for its rows. The
// scheduled classes (ordered, sync, inline) all enter through ScheduledEntry, the one place that
// asks for the scheduler; what a row then does is its ScheduledHandler (scheduled_calls.h per
// class, scheduled_*_calls.h per row). Every specialisation must be visible wherever wrappers are
// instantiated: include it from hook/all_interceptors.h.
#ifndef GPUPRIO_HOOK_INTERCEPTOR_H_
#define GPUPRIO_HOOK_INTERCEPTOR_H_

#include <cuda.h>

#include <type_traits>

#include "hook/api_table.h"
#include "hook/call_counters.h"
#include "hook/scheduler_bridge.h"
#include "hook/thread_state.h"
#include "scheduler/scheduler.h"

namespace gpuprio::hook {

// The call, straight to the driver (no scheduler, or work that is not deferred).
template <typename Real, typename... Args>
CUresult CallDriver(Real real, Args... args) {
  DriverCallScope in_driver;
  return real(args...);
}

// A row gpuprio does not schedule: the call goes to the driver.
struct Unscheduled {
  template <typename Real, typename... Args>
  static CUresult Call(CallPath /*path*/, Real real, Args... args) {
    return CallDriver(real, args...);
  }
};

// How a call of a scheduled class meets the scheduler: a static
// `CUresult Call(scheduler::Scheduler* s, Real real, Args... args)`, where `s` is never null.
// Reached only through ScheduledEntry.
template <ApiId kId, ApiClass kClass = Info(kId).api_class>
struct ScheduledHandler;

// Every scheduled row's entry: without a scheduler (GPUPRIO_MODE is not "schedule", or the driver
// lacks what it needs) the call goes straight to the driver; otherwise to the row's handler, with
// the scheduler.
template <ApiId kId>
struct ScheduledEntry {
  template <typename Real, typename... Args>
  static CUresult Call(CallPath /*path*/, Real real, Args... args) {
    scheduler::Scheduler* s = ActiveScheduler();
    if (s == nullptr) return CallDriver(real, args...);
    return ScheduledHandler<kId>::Call(s, real, args...);
  }
};

// The classes the scheduler takes; kPassThrough and kSelf rows go to the driver unless a full
// specialisation of Interceptor takes them (cuGetProcAddress, the profiler calls).
constexpr bool IsScheduledClass(ApiClass c) {
  return c == ApiClass::kOrdered || c == ApiClass::kInline || c == ApiClass::kSync;
}

template <ApiId kId, ApiClass kClass = Info(kId).api_class>
struct Interceptor
    : std::conditional_t<IsScheduledClass(kClass), ScheduledEntry<kId>, Unscheduled> {};

}  // namespace gpuprio::hook

#endif  // GPUPRIO_HOOK_INTERCEPTOR_H_
