// Abseil state that is initialised lazily, under a once or a spinlock, the first time a thread
// needs it -- and that a forked child would find "being initialised" for ever if the fork came
// at that moment. Initialising it eagerly, before the program has threads, closes the window.
#ifndef GPUPRIO_SCHEDULER_BASE_ABSEIL_FORK_SAFETY_H_
#define GPUPRIO_SCHEDULER_BASE_ABSEIL_FORK_SAFETY_H_

#include "absl/base/internal/cycleclock.h"
#include "absl/base/internal/low_level_scheduling.h"
#include "absl/time/clock.h"

namespace gpuprio::base {

// Call before any thread of the library runs, with forks held off (hook/process_start.cc does, at
// the process's first CUDA call). Reads the CPU count and the clock; where the kernel gives no
// TSC frequency, Abseil calibrates the cycle clock by sleeping about 3 ms, which is why this is
// not done when the library loads.
inline void InitializeAbseilLazyState() {
  // The spin and sleep limits of a contended absl::Mutex (and the CPU count they are computed
  // from): first computed by whichever thread first contends a Mutex. A fork then left the
  // child's every contended Mutex spinning for ever (seen in the fork-while-working test).
  (void)absl::synchronization_internal::MutexDelay(0, /*GENTLE=*/1);
  // The cycle counter's frequency, read by a Mutex's slow path when it queues a waiter (seen hung
  // in the same test once the limits above were initialised early).
  (void)absl::base_internal::CycleClock::Frequency();
  // The clock's calibration, behind its own once and spinlock (absl::Now, waits with deadlines).
  (void)absl::Now();
}

}  // namespace gpuprio::base

#endif  // GPUPRIO_SCHEDULER_BASE_ABSEIL_FORK_SAFETY_H_
