// A dispatcher's work per priority level: ops queued and in flight with their estimated GPU time
// (what the policy and the other processes see), kept in step with the levels' shared in-flight
// counters, and the sums the in-flight budget is checked against.
#ifndef GPUPRIO_SCHEDULER_LEVEL_ACCOUNTING_H_
#define GPUPRIO_SCHEDULER_LEVEL_ACCOUNTING_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "scheduler/issue_policy.h"
#include "scheduler/op_observer.h"
#include "scheduler/options.h"
#include "scheduler/priority_levels.h"
#include "scheduler/stream_queue.h"

namespace gpuprio::scheduler {

// Dispatcher thread only.
class LevelAccounting {
 public:
  // `levels`, `here` (the device's levels, which this keeps stamped with its work) and
  // `observer` (may be null) must outlive this. With an observer that wants timings, every change
  // of a level's queue is reported to it (OnQueueState).
  LevelAccounting(int device, const SchedulerOptions& options, PriorityLevels* levels,
                  DeviceLevels* here, OpObserver* observer)
      : device_(device),
        unbudgeted_priority_(options.unbudgeted_priority),
        ceiling_window_ns_(options.ceiling_window_ns),
        levels_(levels),
        here_(here),
        observer_(observer != nullptr && observer->WantsTimings() ? observer : nullptr) {}
  LevelAccounting(const LevelAccounting&) = delete;
  LevelAccounting& operator=(const LevelAccounting&) = delete;

  // Every level that ever had work here (few levels are ever active).
  absl::Span<const LevelLoad> levels() const { return counts_; }

  // `delta` ops of `priority` with `delta_ns` of estimated GPU time joined (> 0) or left (< 0)
  // the queues.
  void AdjustPending(int priority, int delta, int64_t delta_ns);
  // The same for the work in flight; the level's shared counters follow.
  void AdjustInFlight(int priority, int64_t delta_ops, int64_t delta_ns);

  // This device's ceiling: the highest level that submitted work within
  // options.ceiling_window_ns and had work here within it (DeviceLevels::Ceiling) or has work
  // queued here now, at least `floor` (by default the unbudgeted level): levels below it are on
  // the in-flight budget.
  int Ceiling(int64_t now_ns) const { return Ceiling(now_ns, unbudgeted_priority_); }
  int Ceiling(int64_t now_ns, int floor) const;
  // Estimated GPU time in flight below `ceiling` (the budget in use).
  uint64_t BelowCeilingInFlightNs(int ceiling) const;
  // The estimated time of the op each of `tracked` runs now (its oldest in flight, on its twin
  // or not) below `ceiling`: while nothing more important is about, the budget counts only what
  // is queued behind those ops (options.h, idle_budget_excludes_running).
  static uint64_t BelowCeilingRunningNs(absl::Span<StreamQueue* const> tracked, int ceiling);

 private:
  const int device_;
  const int unbudgeted_priority_;
  const uint64_t ceiling_window_ns_;
  PriorityLevels* const levels_;
  DeviceLevels* const here_;
  OpObserver* const observer_;  // null unless it wants timings
  std::vector<LevelLoad> counts_;
};

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_LEVEL_ACCOUNTING_H_
