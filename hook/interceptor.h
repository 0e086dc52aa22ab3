// The hook point between a generated wrapper and the real driver. A wrapper counts the call and
// hands it to Interceptor<id>::Call(path, real, args...); the primary template forwards to the
// driver. cuGetProcAddress (proc_address_hook.h) plugs in by specialising it for its rows, the
// scheduler (scheduled_calls.h) by specialising it for the ordered, sync and inline classes and
// for the rows that need more than the class's generic handling. Every specialisation must be visible wherever
// wrappers are instantiated: include it from hook/all_interceptors.h.
#ifndef GPUPRIO_HOOK_INTERCEPTOR_H_
#define GPUPRIO_HOOK_INTERCEPTOR_H_

#include <cuda.h>

#include "hook/api_table.h"
#include "hook/call_counters.h"
#include "hook/thread_state.h"

namespace gpuprio::hook {

template <ApiId kId, ApiClass kClass = Info(kId).api_class>
struct Interceptor {
  template <typename Real, typename... Args>
  static CUresult Call(CallPath /*path*/, Real real, Args... args) {
    DriverCallScope in_driver;
    return real(args...);
  }
};

}  // namespace gpuprio::hook

#endif  // GPUPRIO_HOOK_INTERCEPTOR_H_
