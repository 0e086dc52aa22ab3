// The hook's side of the scheduler: the process Scheduler (created on first use in schedule mode
// from the real driver's entry points), and the small argument helpers every scheduled wrapper
// uses to find a call's stream or event among its arguments.
#ifndef GPUPRIO_HOOK_SCHEDULER_BRIDGE_H_
#define GPUPRIO_HOOK_SCHEDULER_BRIDGE_H_

#include <cuda.h>

#include <type_traits>

#include "scheduler/scheduler.h"

namespace gpuprio::hook {

// The scheduler, or null when work is not scheduled (GPUPRIO_MODE is not "schedule", or the
// driver lacks what the scheduler needs: then gpuprio says so once and runs as passthrough).
scheduler::Scheduler* ActiveScheduler();

// The scheduler if one was created, else null; never creates one (for the exit summary).
scheduler::Scheduler* ExistingScheduler();

// fork() child side (hook/lifecycle.cc): forgets the parent's scheduler without touching it; the
// child's first scheduled call builds its own. Makes no call and takes no lock.
void AbandonSchedulerInChild();

// The first argument of type T (CUstream, CUevent, CUcontext), or T{} if there is none.
template <typename T, typename... Args>
constexpr bool kHasArg = (std::is_same_v<T, Args> || ...);

template <typename T>
T FirstArg() {
  return T{};
}

template <typename T, typename First, typename... Rest>
T FirstArg(First first, Rest... rest) {
  if constexpr (std::is_same_v<T, First>) {
    return first;
  } else if constexpr (sizeof...(Rest) > 0) {
    return FirstArg<T>(rest...);
  } else {
    return T{};
  }
}


}  // namespace gpuprio::hook

#endif  // GPUPRIO_HOOK_SCHEDULER_BRIDGE_H_
