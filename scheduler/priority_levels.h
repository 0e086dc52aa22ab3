// Per-priority counters shared by client threads, the dispatcher and the C API's statistics.
// A fixed array over gpuprio's whole priority range, so every access is an index and an atomic
// operation: no lock, no allocation.
#ifndef GPUPRIO_SCHEDULER_PRIORITY_LEVELS_H_
#define GPUPRIO_SCHEDULER_PRIORITY_LEVELS_H_

#include <atomic>
#include <cstdint>

namespace gpuprio::scheduler {

inline constexpr int kMinPriority = -100;  // == GPUPRIO_PRIORITY_MIN
inline constexpr int kMaxPriority = 100;   // == GPUPRIO_PRIORITY_MAX
inline constexpr int kPriorityLevels = kMaxPriority - kMinPriority + 1;

inline bool PriorityInRange(int p) { return p >= kMinPriority && p <= kMaxPriority; }
inline int ClampPriority(int p) {
  return p < kMinPriority ? kMinPriority : (p > kMaxPriority ? kMaxPriority : p);
}

struct PriorityLevelStats {
  std::atomic<uint64_t> ops_submitted{0};
  std::atomic<uint64_t> ops_issued{0};
  std::atomic<uint64_t> ops_inline{0};
  std::atomic<uint64_t> queue_delay_ns_sum{0};
  std::atomic<uint64_t> queue_delay_ns_max{0};
  std::atomic<uint64_t> in_flight_ops{0};
  std::atomic<uint64_t> in_flight_estimated_ns{0};
  std::atomic<int64_t> last_submit_ns{0};
  std::atomic<bool> seen{false};
};

class PriorityLevels {
 public:
  PriorityLevelStats& At(int priority) { return levels_[ClampPriority(priority) - kMinPriority]; }
  const PriorityLevelStats& At(int priority) const {
    return levels_[ClampPriority(priority) - kMinPriority];
  }

 private:
  PriorityLevelStats levels_[kPriorityLevels];
};

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_PRIORITY_LEVELS_H_
