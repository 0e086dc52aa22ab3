#include "scheduler/level_accounting.h"

#include "scheduler/base/clock.h"

namespace gpuprio::scheduler {

using base::SteadyNowNs;

void LevelAccounting::AdjustPending(int priority, int delta, int64_t delta_ns) {
  LevelLoad* counts = nullptr;
  for (LevelLoad& c : counts_) {
    if (c.priority == priority) counts = &c;
  }
  if (counts == nullptr) counts = &counts_.emplace_back(LevelLoad{priority, 0, 0, 0, 0});
  counts->pending += delta;
  counts->pending_ns += delta_ns;
  const int64_t now = SteadyNowNs();
  counts->last_busy_ns = now;
  here_->NoteWork(priority, now);
  if (observer_ != nullptr) {
    observer_->OnQueueState(device_, priority, counts->pending,
                            BelowCeilingInFlightNs(Ceiling(now)));
  }
}

void LevelAccounting::AdjustInFlight(int priority, int64_t delta_ops, int64_t delta_ns) {
  PriorityLevelStats& level = levels_->At(priority);
  level.in_flight_ops.fetch_add(static_cast<uint64_t>(delta_ops), std::memory_order_relaxed);
  level.in_flight_estimated_ns.fetch_add(static_cast<uint64_t>(delta_ns),
                                         std::memory_order_relaxed);
  const int64_t now = SteadyNowNs();
  here_->NoteWork(priority, now);
  here_->AdjustInFlight(priority, delta_ops);
  for (LevelLoad& c : counts_) {
    if (c.priority == priority) {
      c.in_flight_ops += delta_ops;
      c.in_flight_ns += delta_ns;
      c.last_busy_ns = now;
      return;
    }
  }
  counts_.push_back({priority, 0, delta_ops, delta_ns, 0, now});
}

int LevelAccounting::Ceiling(int64_t now_ns, int floor) const {
  int ceiling = here_->Ceiling(*levels_, floor, now_ns, ceiling_window_ns_);
  // Work queued here counts however long ago it last moved. The fast path, which cannot see
  // these counts, needs no such term: it never issues past more important queued work.
  for (const LevelLoad& c : counts_) {
    if (c.priority > ceiling && c.pending > 0 &&
        levels_->SubmittedWithin(c.priority, now_ns, ceiling_window_ns_)) {
      ceiling = c.priority;
    }
  }
  return ceiling;
}

uint64_t LevelAccounting::BelowCeilingInFlightNs(int ceiling) const {
  int64_t sum = 0;
  for (const LevelLoad& c : counts_) {
    if (c.priority < ceiling) sum += c.in_flight_ns;
  }
  return sum > 0 ? static_cast<uint64_t>(sum) : 0;
}

uint64_t LevelAccounting::BelowCeilingRunningNs(absl::Span<StreamQueue* const> tracked,
                                                int ceiling) {
  uint64_t sum = 0;
  for (const StreamQueue* q : tracked) {
    if (q->in_flight.empty()) continue;
    const InFlight& f = q->in_flight.front();
    // A confined op counts too: the stream's next op goes home behind it (linked), so it
    // starts when that op ends instead of when its end is noticed.
    if (f.priority < ceiling) sum += f.estimate_ns;
  }
  return sum;
}

}  // namespace gpuprio::scheduler
