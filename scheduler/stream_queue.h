// A stream as its dispatcher keeps it: its queued ops in submission order, its work in flight and
// the completion marks behind it, and where its work runs under spatial isolation (its own stream
// or its twin, and the links that keep the legacy stream's order). Dispatcher thread only.
#ifndef GPUPRIO_SCHEDULER_STREAM_QUEUE_H_
#define GPUPRIO_SCHEDULER_STREAM_QUEUE_H_

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "scheduler/op.h"
#include "scheduler/stream_state.h"

namespace gpuprio::scheduler {

// An issued op (or a client's direct work) until a completion mark behind it has passed.
struct InFlight {
  int priority;
  uint64_t estimate_ns;
  const void* cost_key;
  int64_t issue_ns;
  bool back_to_back;  // queued behind the mark before it while that mark's work still ran
  CUevent start;      // recorded just before the op when its cost is being learned, or null
  bool confined;      // issued on the stream's twin
  // Issued with nothing of its stream in flight: it started at once, so the host time from its
  // issue to its observed end bounds its GPU time from above.
  bool alone = false;
};
struct CompletionMark {
  CUevent event;
  size_t covers;  // in-flight entries [0, covers) of the stream complete with this event
  bool single_op;
};
struct StreamQueue;
// Per context: what the legacy stream's implicit order involves, and the event that links two
// streams (re-recorded for every link: a wait is bound to the record before it).
struct ContextLinks {
  StreamQueue* legacy = nullptr;
  std::vector<StreamQueue*> blocking;  // blocking streams that are not the legacy one
  uint64_t legacy_ops = 0;
  int away = 0;  // its streams that are on their twin now
  CUevent link_event = nullptr;
};
struct StreamQueue {
  StreamState* state = nullptr;
  std::deque<Op*> pending;
  std::deque<InFlight> in_flight;
  std::deque<CompletionMark> marks;
  CUevent last_completed = nullptr;  // kept for the next elapsed-time measurement
  // Recorded behind its work when other processes wait for it (WatchInFlight): a blocking-sync
  // event the watcher sleeps on. Created on first use.
  CUevent watch_event = nullptr;
  std::vector<CUevent> free_events;  // created in this stream's context
  int ops_since_mark = 0;
  int64_t last_mark_ns = 0;  // when its latest completion mark was recorded
  // Work its client issued itself (the fast path) is in flight and not behind a mark yet.
  bool direct_uncovered = false;
  bool tracked = false;  // listed among its dispatcher's streams with work in flight
  // Spatial isolation. The twin is created the first time the stream's work is confined.
  ContextLinks* links = nullptr;  // of the stream's context
  CUstream twin = nullptr;
  bool twin_failed = false;
  bool away = false;  // its latest work is on the twin (mirrored in StreamState::away)
  // Its confined ops in flight and their estimated GPU time (options.confined_queue_ns).
  int confined_in_flight_ops = 0;
  int64_t confined_in_flight_ns = 0;
  // Legacy NULL-stream order across a twin (ContextLinks): ops issued on this blocking stream,
  // how many of them the legacy stream is known to follow, and how many legacy ops this
  // stream is known to follow.
  uint64_t ops_issued = 0;
  uint64_t ops_followed_by_legacy = 0;
  uint64_t legacy_ops_followed = 0;
};

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_STREAM_QUEUE_H_
