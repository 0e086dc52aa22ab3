#include "scheduler/completion_tracker.h"

#include <algorithm>
#include <optional>

#include "scheduler/base/clock.h"
#include "scheduler/completion_marks.h"
#include "scheduler/isolation_placement.h"

namespace gpuprio::scheduler {

using base::SteadyNowNs;

void CompletionTracker::Untrack(StreamQueue* q) {
  if (!q->tracked) return;
  q->tracked = false;
  tracking_.erase(std::find(tracking_.begin(), tracking_.end(), q));
}

void CompletionTracker::Mark(StreamQueue* q) {
  const size_t covered = q->marks.empty() ? 0 : q->marks.back().covers;
  q->direct_uncovered = false;  // covered already, marked below, or counted complete
  if (q->in_flight.size() <= covered) return;
  q->ops_since_mark = 0;
  absl::MutexLock lock(record_mu_);
  if (Destroyed(q->state)) {
    // The application destroyed the stream after its ops were issued: nothing more may be
    // recorded on it, and its unmarked work is counted as complete.
    Retire(q, q->in_flight.size());
    return;
  }
  CUevent event = TakeEvent(q);
  if (event == nullptr ||
      driver_.event_record(event, IsolationPlacement::Location(*q)) != CUDA_SUCCESS) {
    // Completion cannot be observed: count the work as done rather than hold others forever.
    if (event != nullptr) q->free_events.push_back(event);
    Retire(q, q->in_flight.size());
    return;
  }
  q->marks.push_back({event, q->in_flight.size(), q->in_flight.size() - covered == 1});
  q->last_mark_ns = SteadyNowNs();
  Count(marks_);
}

CUresult CompletionTracker::QueryMark(CUevent event) {
  Count(mark_queries_);
  return driver_.event_query(event);
}

void CompletionTracker::Retire(StreamQueue* q, size_t count) {
  for (size_t i = 0; i < count && !q->in_flight.empty(); ++i) {
    const InFlight& f = q->in_flight.front();
    retired_(owner_, q, f);
    if (f.start != nullptr) q->free_events.push_back(f.start);
    q->in_flight.pop_front();
  }
  for (CompletionMark& m : q->marks) m.covers = m.covers > count ? m.covers - count : 0;
}

CUevent CompletionTracker::TakeEvent(StreamQueue* q) {
  if (!q->free_events.empty()) {
    CUevent e = q->free_events.back();
    q->free_events.pop_back();
    return e;
  }
  CUevent e = nullptr;
  if (driver_.event_create(&e, CU_EVENT_DEFAULT) != CUDA_SUCCESS) return nullptr;
  return e;
}

void CompletionTracker::LearnFromMark(const StreamQueue& q, const InFlight& f, CUevent mark) {
  // GPU time between the op's start event (or, back to back, the previous mark) and its mark.
  const CUevent from =
      f.start != nullptr ? f.start : (f.back_to_back ? q.last_completed : nullptr);
  float ms = 0;
  int64_t exact_ns = -1;
  if (from != nullptr && driver_.event_elapsed_time(&ms, from, mark) == CUDA_SUCCESS && ms >= 0) {
    exact_ns = static_cast<int64_t>(static_cast<double>(ms) * 1e6);
  }
  const bool alone = f.alone && f.cost_key != nullptr;
  if (exact_ns < 0 && !alone) return;  // nothing to learn: no clock read, no look-up
  const std::optional<uint64_t> sample =
      exact_ns >= 0 ? DurationSample(exact_ns, alone, 0, 0)
                    : DurationSample(exact_ns, alone, SteadyNowNs() - f.issue_ns,
                                     estimates_->Estimate(f.cost_key, 0));
  if (sample.has_value()) estimates_->Observe(f.cost_key, *sample);
}

int CompletionTracker::Poll() {
  int passed = 0;
  for (size_t i = 0; i < tracking_.size();) {
    StreamQueue* q = tracking_[i];
    while (!q->marks.empty()) {
      const CompletionMark m = q->marks.front();
      if (QueryMark(m.event) == CUDA_ERROR_NOT_READY) break;
      if (m.single_op && m.covers >= 1) LearnFromMark(*q, q->in_flight[m.covers - 1], m.event);
      q->marks.pop_front();
      ++passed;
      Retire(q, m.covers);
      if (q->last_completed != nullptr) q->free_events.push_back(q->last_completed);
      q->last_completed = m.event;
    }
    if (q->in_flight.empty() && q->marks.empty()) {
      q->tracked = false;
      tracking_[i] = tracking_.back();
      tracking_.pop_back();
    } else {
      ++i;
    }
  }
  return passed;
}

}  // namespace gpuprio::scheduler
