// How a dispatcher learns that its issued work completed: completion marks (pooled events)
// recorded behind each stream's work in flight, polled in order, each passed mark retiring the
// entries it covers and teaching the duration estimates (completion_marks.h's rules).
#ifndef GPUPRIO_SCHEDULER_COMPLETION_TRACKER_H_
#define GPUPRIO_SCHEDULER_COMPLETION_TRACKER_H_

#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "scheduler/driver_functions.h"
#include "scheduler/duration_estimator.h"
#include "scheduler/stream_queue.h"

namespace gpuprio::scheduler {

// Dispatcher thread only, except the activity counters (read at exit). Driver calls are made in
// whatever context is current: the caller makes the stream's current first.
class CompletionTracker {
 public:
  // Called for each in-flight entry as it is retired (before it leaves the stream's queue), so
  // the owner can take it off its counts.
  using RetiredFn = void (*)(void* owner, StreamQueue* q, const InFlight& f);
  // `estimates` and `record_mu` must outlive the tracker. `record_mu` is held while a mark is
  // recorded on an application's stream, so nothing is recorded on a destroyed one
  // (StreamState::destroyed).
  CompletionTracker(const DriverFunctions& driver, DurationEstimator* estimates,
                    absl::Mutex* record_mu, RetiredFn retired, void* owner)
      : driver_(driver),
        estimates_(estimates),
        record_mu_(record_mu),
        retired_(retired),
        owner_(owner) {}
  CompletionTracker(const CompletionTracker&) = delete;
  CompletionTracker& operator=(const CompletionTracker&) = delete;

  // The streams with work in flight or marks pending; Track lists one (once), Untrack takes a
  // released stream's queue off the list.
  const std::vector<StreamQueue*>& tracked() const { return tracking_; }
  void Track(StreamQueue* q) {
    if (q->tracked) return;
    q->tracked = true;
    tracking_.push_back(q);
  }
  void Untrack(StreamQueue* q);

  // Puts a mark behind `q`'s work not yet covered by one (on its twin while it is away). Work
  // whose end cannot be observed (a destroyed stream, a driver error) is retired at once rather
  // than hold others back forever.
  void Mark(StreamQueue* q);
  // Queries every tracked stream's marks in order, retiring what the passed ones cover; the
  // number of marks passed. Streams with nothing left are no longer tracked.
  int Poll();
  // event_query of a completion mark, counted (mark_queries).
  CUresult QueryMark(CUevent event);
  // `count` of `q`'s oldest in-flight entries are done.
  void Retire(StreamQueue* q, size_t count);
  // A pooled event of `q`'s context (created when the pool is empty), or null.
  CUevent TakeEvent(StreamQueue* q);

  // Activity: marks recorded and queries of them (one writer: the dispatcher thread).
  uint64_t marks() const { return marks_.load(std::memory_order_relaxed); }
  uint64_t mark_queries() const { return mark_queries_.load(std::memory_order_relaxed); }

 private:
  // A passed mark over the one op `f`: its duration, measured or bounded, for the estimates.
  void LearnFromMark(const StreamQueue& q, const InFlight& f, CUevent mark);
  bool Destroyed(const StreamState* s) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(record_mu_) {
    return s->destroyed.load(std::memory_order_acquire);
  }
  static void Count(std::atomic<uint64_t>& counter) {
    counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  const DriverFunctions driver_;
  DurationEstimator* const estimates_;
  absl::Mutex* const record_mu_;
  const RetiredFn retired_;
  void* const owner_;
  std::vector<StreamQueue*> tracking_;  // streams with in-flight entries
  std::atomic<uint64_t> marks_{0};
  std::atomic<uint64_t> mark_queries_{0};
};

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_COMPLETION_TRACKER_H_
