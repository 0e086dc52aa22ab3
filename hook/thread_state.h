// Per-thread flags the interceptors consult on every call: whether this thread is inside a real
// driver call (so the driver's own calls into exported cu* names or dlsym pass straight through)
// or inside gpuprio's own lookup code (re-entrancy guard).
#ifndef GPUPRIO_HOOK_THREAD_STATE_H_
#define GPUPRIO_HOOK_THREAD_STATE_H_

#include "scheduler/base/tls.h"

namespace gpuprio::hook {

struct ThreadState {
  int driver_call_depth;
  int hook_depth;
};

// Defined in thread_state.cc; one %fs-relative access (scheduler/base/tls.h).
extern GPUPRIO_THREAD_LOCAL ThreadState t_thread_state;

inline bool InDriverCall() { return t_thread_state.driver_call_depth > 0; }
inline bool InHook() { return t_thread_state.hook_depth > 0; }

// Marks the current thread as calling into the real driver for the scope's lifetime.
class DriverCallScope {
 public:
  DriverCallScope() { ++t_thread_state.driver_call_depth; }
  ~DriverCallScope() { --t_thread_state.driver_call_depth; }
  DriverCallScope(const DriverCallScope&) = delete;
  DriverCallScope& operator=(const DriverCallScope&) = delete;
};

// Marks the current thread as running gpuprio's own lookup code.
class HookScope {
 public:
  HookScope() { ++t_thread_state.hook_depth; }
  ~HookScope() { --t_thread_state.hook_depth; }
  HookScope(const HookScope&) = delete;
  HookScope& operator=(const HookScope&) = delete;
};

}  // namespace gpuprio::hook

#endif  // GPUPRIO_HOOK_THREAD_STATE_H_
