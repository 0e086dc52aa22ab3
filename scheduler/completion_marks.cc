#include "scheduler/completion_marks.h"

namespace gpuprio::scheduler {

bool MarkAfterIssue(int ops_since_mark, bool measured, uint64_t budget_ns, uint64_t estimate_ns,
                    const SchedulerOptions& o) {
  // Budgeted work is marked every few ops, and each op that is a large part of its budget alone,
  // so each completion frees budget while the next op runs (one mark over the whole budget would
  // let the GPU drain before more is admitted); otherwise a mark every 32 ops keeps the event
  // cost off the launch rate.
  if (measured || ops_since_mark >= o.tuning.ops_per_completion_event) return true;
  return budget_ns > 0 && (ops_since_mark >= o.tuning.budgeted_ops_per_completion_event ||
                           estimate_ns >= budget_ns / 8);
}

bool MarkDueWhileHeld(bool direct_uncovered, bool peers_held, bool mark_pending,
                      int64_t since_last_mark_ns, const SchedulerOptions& o) {
  return !direct_uncovered || peers_held || !mark_pending ||
         since_last_mark_ns >= static_cast<int64_t>(o.tuning.held_mark_interval_ns);
}

std::optional<uint64_t> DurationSample(int64_t exact_ns, bool alone, int64_t host_ns,
                                       uint64_t estimate_ns) {
  if (exact_ns >= 0) return static_cast<uint64_t>(exact_ns);
  if (alone && host_ns > 0 && static_cast<uint64_t>(host_ns) < estimate_ns) {
    return static_cast<uint64_t>(host_ns);
  }
  return std::nullopt;
}

}  // namespace gpuprio::scheduler
