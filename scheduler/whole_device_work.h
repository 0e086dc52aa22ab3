// The most important level of this process that recently launched work needing the whole GPU on
// one device (a CUDA graph): less important work there is held rather than confined below it,
// since a reserve of SMs would not hold that work (issue_policy.h, rule 4).
#ifndef GPUPRIO_SCHEDULER_WHOLE_DEVICE_WORK_H_
#define GPUPRIO_SCHEDULER_WHOLE_DEVICE_WORK_H_

#include <atomic>
#include <cstdint>

#include "scheduler/coordinator/segment_layout.h"

namespace gpuprio::scheduler {

// Lock-free; any thread.
class WholeDeviceWork {
 public:
  // A launch of `priority` at `now_ns` (CLOCK_MONOTONIC). The stamp keeps the highest level
  // noted within `window_ns`; a level's own stamp is refreshed at most once a millisecond.
  void Note(int priority, int64_t now_ns, uint64_t window_ns) {
    coordinator::NoteLevelStamp(word_, priority, now_ns, static_cast<int64_t>(window_ns),
                                kRefreshNs);
  }

  // The level noted within `window_ns` before `now_ns` (kNoPriority: none).
  // A note a moment ahead of `now_ns` (another thread's clock read) counts too.
  int Highest(int64_t now_ns, uint64_t window_ns) const {
    return coordinator::LevelStampWithin(word_.load(std::memory_order_relaxed), now_ns,
                                         static_cast<int64_t>(window_ns), kRefreshNs);
  }

 private:
  static constexpr int64_t kRefreshNs = 1'000'000;
  // coordinator::LevelStampWord on CLOCK_MONOTONIC (0: nothing noted).
  std::atomic<uint64_t> word_{0};
};

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_WHOLE_DEVICE_WORK_H_
