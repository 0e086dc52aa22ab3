// The one clock of the scheduler and its clients: op submit and issue times, the ceiling window,
// completion times. CLOCK_MONOTONIC, in nanoseconds (steady_clock is CLOCK_MONOTONIC on Linux);
// and the real-time clock for times shared with other processes.
#ifndef GPUPRIO_SCHEDULER_BASE_CLOCK_H_
#define GPUPRIO_SCHEDULER_BASE_CLOCK_H_

#include <time.h>

#include <chrono>
#include <cstdint>

namespace gpuprio::base {

inline int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The same clock at the kernel tick's resolution (1-4 ms) for a third of the cost (about 5 against
// 15-20 ns): for the fast path, whose only use of time is the ceiling window (500 ms, submit times
// kept at 1 ms granularity). At most a tick behind SteadyNowNs.
inline int64_t CoarseNowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// CLOCK_REALTIME at the tick's resolution: for times that other processes compare with their own
// (the shared segment's submit times). It is the one clock time namespaces do not shift, so a
// process in a container reads the same value as one on the host.
inline int64_t SharedCoarseNowNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// CLOCK_REALTIME at full resolution: for shared times that must be finer than a tick (the
// segment's last_drop).
inline int64_t SharedNowNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace gpuprio::base

#endif  // GPUPRIO_SCHEDULER_BASE_CLOCK_H_
