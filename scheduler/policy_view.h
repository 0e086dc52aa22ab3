// What the scheduling policy (issue_policy.h) is shown for the op at a stream's head: the op's
// view, its device's snapshot as one dispatcher sees it, and the queries that cost more than a
// load, answered only where a rule asks.
#ifndef GPUPRIO_SCHEDULER_POLICY_VIEW_H_
#define GPUPRIO_SCHEDULER_POLICY_VIEW_H_

#include <cstdint>

#include "absl/types/span.h"
#include "scheduler/completion_tracker.h"
#include "scheduler/coordinator/gpu_coordinator.h"
#include "scheduler/duration_estimator.h"
#include "scheduler/isolation_placement.h"
#include "scheduler/issue_policy.h"
#include "scheduler/level_accounting.h"
#include "scheduler/op.h"
#include "scheduler/options.h"
#include "scheduler/priority_levels.h"
#include "scheduler/stream_queue.h"
#include "scheduler/whole_device_work.h"

namespace gpuprio::scheduler {

// Dispatcher thread only. Everything it is given must outlive it; `coordinator` may be null.
class PolicyView {
 public:
  PolicyView(const SchedulerOptions& options, const PriorityLevels* levels,
             const LevelAccounting* accounting, const DurationEstimator* estimates,
             const CompletionTracker* tracker, IsolationPlacement* placement,
             const WholeDeviceWork* whole_device, coordinator::GpuCoordinator* coordinator)
      : options_(options),
        levels_(levels),
        accounting_(accounting),
        estimates_(estimates),
        tracker_(tracker),
        placement_(placement),
        whole_device_(whole_device),
        coordinator_(coordinator) {}
  PolicyView(const PolicyView&) = delete;
  PolicyView& operator=(const PolicyView&) = delete;

  // The queries for `q`'s head at `now_ns`.
  class Queries final : public DeviceQueries {
   public:
    Queries(const PolicyView* view, const StreamQueue* q, int64_t now_ns)
        : view_(view), q_(q), now_ns_(now_ns) {}
    uint64_t RunningBelowNs(int ceiling) const override;
    bool MoreImportantBehind(int priority) const override;
    bool SharesSmsWithPeers() const override;
    int PeersEverCeiling(int floor) const override;

   private:
    const PolicyView* const view_;
    const StreamQueue* const q_;
    const int64_t now_ns_;
  };

  // `op`, the head of its stream's queue (`inherited`: another op waits for it).
  OpView View(const Op& op, bool inherited, int64_t now_ns) const;
  // The device for `q`'s head of `priority`; `active`: the streams with ops queued. The snapshot
  // refers to `queries` and to this dispatcher's counts: it is good until either changes.
  DeviceSnapshot Snapshot(const StreamQueue& q, int priority, absl::Span<StreamQueue* const> active,
                          int64_t now_ns, const Queries* queries) const;

 private:
  const SchedulerOptions options_;
  const PriorityLevels* const levels_;
  const LevelAccounting* const accounting_;
  const DurationEstimator* const estimates_;
  const CompletionTracker* const tracker_;
  IsolationPlacement* const placement_;
  const WholeDeviceWork* const whole_device_;
  coordinator::GpuCoordinator* const coordinator_;
};

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_POLICY_VIEW_H_
