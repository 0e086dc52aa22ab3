// The hook point between a generated wrapper and the real driver. A wrapper counts the call and
// hands it to Interceptor<id>::Call(path, real, args...); the primary template forwards to the
// driver. cuGetProcAddress (proc_address_hook.h) and, in schedule mode, the scheduler's stream
// work plug in by specialising it for their rows. Every specialisation must be visible wherever
// wrappers are instantiated: include it from hook/interceptors.h.
#ifndef GPUPRIO_HOOK_INTERCEPTOR_H_
#define GPUPRIO_HOOK_INTERCEPTOR_H_

#include <cuda.h>

#include "hook/api_table.h"
#include "hook/call_counters.h"
#include "hook/thread_state.h"

namespace gpuprio::hook {

template <ApiId kId>
struct Interceptor {
  template <typename Real, typename... Args>
  static CUresult Call(CallPath /*path*/, Real real, Args... args) {
    DriverCallScope in_driver;
    return real(args...);
  }
};

}  // namespace gpuprio::hook

#endif  // GPUPRIO_HOOK_INTERCEPTOR_H_
