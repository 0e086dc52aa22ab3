#include "scheduler/policy_view.h"

#include <algorithm>
#include <limits>

namespace gpuprio::scheduler {

uint64_t PolicyView::Queries::RunningBelowNs(int ceiling) const {
  return LevelAccounting::BelowCeilingRunningNs(view_->tracker_->tracked(), ceiling);
}

bool PolicyView::Queries::MoreImportantBehind(int priority) const {
  for (const Op* op : q_->pending) {
    if (op->priority > priority) return true;
  }
  return false;
}

bool PolicyView::Queries::SharesSmsWithPeers() const {
  return view_->placement_->SharesSmsWithPeers();
}

int PolicyView::Queries::PeersEverCeiling(int floor) const {
  // An unbounded window: any level that ever submitted.
  return view_->coordinator_->Peers(now_ns_, std::numeric_limits<int64_t>::max() / 2, floor)
      .ceiling;
}

OpView PolicyView::View(const Op& op, bool inherited, int64_t now_ns) const {
  OpView view;
  view.priority = op.priority;
  view.estimate_ns = estimates_->Estimate(op.cost_key, op.cost_hint_ns);
  view.held_ns = op.held_since_ns != 0 ? now_ns - op.held_since_ns : 0;
  view.inherited = inherited;
  view.home_only = op.home_only;
  view.confinable = placement_->Confinable(op.cost_key);
  return view;
}

DeviceSnapshot PolicyView::Snapshot(const StreamQueue& q, int priority,
                                    absl::Span<StreamQueue* const> active, int64_t now_ns,
                                    const Queries* queries) const {
  DeviceSnapshot d;
  d.now_ns = now_ns;
  d.local_ceiling = accounting_->Ceiling(now_ns);
  d.local_above_op = accounting_->Ceiling(now_ns, priority);
  d.local_above_op_here = priority;
  for (const LevelLoad& l : accounting_->levels()) {
    d.local_max_seen_here = std::max(d.local_max_seen_here, l.priority);
    // Submitted (anywhere) within the window, and had work here within it: in-flight counts are
    // no guide, since the end of work issued by its own thread may be noticed late.
    const bool busy_here =
        levels_->SubmittedWithin(l.priority, now_ns, options_.ceiling_window_ns) &&
        (l.pending > 0 ||
         now_ns - l.last_busy_ns <= static_cast<int64_t>(options_.ceiling_window_ns));
    if (l.priority > d.local_above_op_here && busy_here) d.local_above_op_here = l.priority;
  }
  d.local_whole_device = whole_device_->Highest(now_ns, options_.ceiling_window_ns);
  for (const StreamQueue* other : active) {
    if (other != &q) {
      d.highest_other_head = std::max(d.highest_other_head, other->pending.front()->priority);
    }
  }
  d.levels = accounting_->levels();
  d.queries = queries;
  if (coordinator_ != nullptr) {
    const coordinator::PeerState peers = coordinator_->Peers(
        now_ns, options_.ceiling_window_ns, options_.unbudgeted_priority, options_.request_gap_ns);
    d.coordinated = true;
    d.peers = {peers.highest_active, peers.ceiling, peers.busy, peers.whole_device};
  }
  d.confined_in_flight_ops = q.confined_in_flight_ops;
  d.confined_in_flight_ns = q.confined_in_flight_ns;
  if (q.confined_in_flight_ops > 0) {
    for (const InFlight& f : q.in_flight) {
      if (!f.confined) continue;
      d.oldest_confined_issue_ns = f.issue_ns;
      d.oldest_confined_estimate_ns = f.estimate_ns;
      break;
    }
  }
  return d;
}

}  // namespace gpuprio::scheduler
