// Per-priority counters shared by client threads, the dispatcher and the C API's statistics.
// A fixed array over gpuprio's whole priority range, so every access is an index and an atomic
// operation: no lock, no allocation.
#ifndef GPUPRIO_SCHEDULER_PRIORITY_LEVELS_H_
#define GPUPRIO_SCHEDULER_PRIORITY_LEVELS_H_

#include <atomic>
#include <cstdint>
#include <limits>

#include "scheduler/base/atomic_max.h"
#include "scheduler/latency_histogram.h"

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
  std::atomic<uint64_t> ops_on_caller{0};
  std::atomic<uint64_t> ops_confined{0};  // issued on a twin stream (spatial isolation)
  std::atomic<uint64_t> queue_delay_ns_sum{0};
  std::atomic<uint64_t> queue_delay_ns_max{0};
  // Ops the policy refused at least once, and how long they waited from that refusal to issue.
  std::atomic<uint64_t> ops_held{0};
  std::atomic<uint64_t> held_ns_sum{0};
  std::atomic<uint64_t> held_ns_max{0};
  // Of those, issued because the hold reached its bound (SchedulerOptions::max_hold_ns).
  std::atomic<uint64_t> ops_hold_bound{0};
  std::atomic<uint64_t> in_flight_ops{0};
  std::atomic<uint64_t> in_flight_estimated_ns{0};
  std::atomic<int64_t> last_submit_ns{0};
  // Ops submitted to a dispatcher and not yet issued (or abandoned), on any device: the fast
  // path of a more important level may pass queued work only when none is at its level or above.
  std::atomic<int64_t> ops_unissued{0};
  std::atomic<bool> seen{false};
  // With SchedulerOptions::time_calls: the application's stream calls at this level (however
  // they went: queued, fast path, inline), the wall time its threads spent in them (backpressure
  // and the waits before an inline call included), and the part of it in real driver calls made
  // on the caller's thread.
  std::atomic<uint64_t> calls_timed{0};
  std::atomic<uint64_t> call_ns_sum{0};
  std::atomic<uint64_t> call_ns_max{0};
  std::atomic<uint64_t> caller_driver_ns_sum{0};
  // Ops whose caller stepped aside for a more important thread of this process (HostYield), and
  // for how long in all.
  std::atomic<uint64_t> host_yields{0};
  std::atomic<uint64_t> host_yield_ns_sum{0};
  // The queueing delays summed above, for percentiles; last, so the words above share lines.
  LatencyHistogram queue_delay_histogram;
};

class PriorityLevels {
 public:
  PriorityLevelStats& At(int priority) { return levels_[ClampPriority(priority) - kMinPriority]; }
  const PriorityLevelStats& At(int priority) const {
    return levels_[ClampPriority(priority) - kMinPriority];
  }

  // A level submitted work at `now_ns`. The shared words are written only when they change (the
  // submit time at most once a millisecond), so threads submitting at one level do not contend.
  void NoteSubmit(int priority, int64_t now_ns) {
    PriorityLevelStats& level = At(priority);
    if (now_ns - level.last_submit_ns.load(std::memory_order_relaxed) > kSubmitTimeGranularityNs) {
      level.last_submit_ns.store(now_ns, std::memory_order_relaxed);
    }
    if (!level.seen.load(std::memory_order_relaxed)) level.seen.store(true, std::memory_order_relaxed);
    base::AtomicMax(max_seen_, priority);
  }

  // The highest priority that ever submitted work (below kMinPriority if none).
  int MaxSeen() const { return max_seen_.load(std::memory_order_relaxed); }

  // Whether `priority` submitted work within `window_ns` of `now_ns`.
  bool SubmittedWithin(int priority, int64_t now_ns, uint64_t window_ns) const {
    const PriorityLevelStats& level = At(priority);
    return level.seen.load(std::memory_order_relaxed) &&
           now_ns - level.last_submit_ns.load(std::memory_order_relaxed) <=
               static_cast<int64_t>(window_ns);
  }

 private:
  static constexpr int64_t kSubmitTimeGranularityNs = 1'000'000;
  PriorityLevelStats levels_[kPriorityLevels];
  std::atomic<int> max_seen_{kMinPriority - 1};
};

// The levels as one device sees them: when each last had work there (submitted to it, queued or
// in flight), and the highest that ever had. The ceiling is decided per GPU from it, so a level
// busy on one GPU leaves another's work off the budget. Written by the clients that submit to the
// device and by its dispatcher, read by both: atomics only, no lock, no allocation.
class DeviceLevels {
 public:
  DeviceLevels() {
    for (std::atomic<int64_t>& stamp : last_work_ns_) {
      stamp.store(kNever, std::memory_order_relaxed);
    }
    for (std::atomic<int64_t>& ops : in_flight_ops_) ops.store(0, std::memory_order_relaxed);
  }
  DeviceLevels(const DeviceLevels&) = delete;
  DeviceLevels& operator=(const DeviceLevels&) = delete;

  // `priority` had work on this device at `now_ns`. As PriorityLevels::NoteSubmit, the stamp is
  // written at most once a millisecond, so the threads of one level do not contend for it.
  // A maximum, so a writer that read its clock earlier (a submit time, a preempted thread) never
  // moves a stamp back.
  void NoteWork(int priority, int64_t now_ns) {
    std::atomic<int64_t>& stamp = last_work_ns_[ClampPriority(priority) - kMinPriority];
    if (now_ns - stamp.load(std::memory_order_relaxed) > kWorkTimeGranularityNs) {
      base::AtomicMax(stamp, now_ns);
    }
    // Release, after the stamp: a reader that sees the level (acquire) sees its stamp.
    base::AtomicMax(max_seen_, priority, std::memory_order_release);
  }

  // The dispatcher: `delta` ops of `priority` entered (> 0) or left (< 0) the GPU here. Work in
  // flight counts for the ceiling however long ago it was issued (a kernel may run for longer
  // than the window).
  void AdjustInFlight(int priority, int64_t delta) {
    in_flight_ops_[ClampPriority(priority) - kMinPriority].fetch_add(delta,
                                                                     std::memory_order_relaxed);
  }

  // The highest priority that ever had work here (below kMinPriority if none).
  int MaxSeen() const { return max_seen_.load(std::memory_order_acquire); }

  // Whether `priority` had work here (submitted, queued, issued or completed) within `window_ns`
  // of `now_ns`.
  bool WorkWithin(int priority, int64_t now_ns, uint64_t window_ns) const {
    return now_ns - last_work_ns_[ClampPriority(priority) - kMinPriority].load(
                        std::memory_order_relaxed) <=
           static_cast<int64_t>(window_ns);
  }
  // Whether `priority` has work in flight here now.
  bool InFlight(int priority) const {
    return in_flight_ops_[ClampPriority(priority) - kMinPriority].load(std::memory_order_relaxed) >
           0;
  }

  // This device's ceiling: the highest level above `floor` that has work in flight here, or that
  // submitted work (anywhere in the process: `levels`) within `window_ns` of `now_ns` and had
  // work here within it; else `floor`. Levels below it are on the in-flight budget. Costs a few
  // loads per level between the floor and the highest level ever seen here (usually none or one).
  int Ceiling(const PriorityLevels& levels, int floor, int64_t now_ns, uint64_t window_ns) const {
    for (int p = MaxSeen(); p > floor; --p) {
      if (InFlight(p) ||
          (WorkWithin(p, now_ns, window_ns) && levels.SubmittedWithin(p, now_ns, window_ns))) {
        return p;
      }
    }
    return floor;
  }

 private:
  static constexpr int64_t kWorkTimeGranularityNs = 1'000'000;
  // Far enough in the past that no window reaches it, and far enough from the limit that
  // `now_ns - kNever` does not overflow.
  static constexpr int64_t kNever = std::numeric_limits<int64_t>::min() / 2;
  std::atomic<int64_t> last_work_ns_[kPriorityLevels];
  std::atomic<int64_t> in_flight_ops_[kPriorityLevels];
  std::atomic<int> max_seen_{kMinPriority - 1};
};

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_PRIORITY_LEVELS_H_
