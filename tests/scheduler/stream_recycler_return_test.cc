// StreamRecycler's dispatcher side with a queue to let go of: released streams sorted by the
// dispatcher's answer into reused and kept for a later round, and every event kept for a released
// stream's queue taken out of it to be destroyed.
#include <cuda.h>

#include <vector>

#include "catch2/catch.hpp"
#include "scheduler/stream_queue.h"
#include "scheduler/stream_recycler.h"

namespace {

using gpuprio::scheduler::StreamQueue;
using gpuprio::scheduler::StreamRecycler;
using gpuprio::scheduler::StreamState;

CUevent Event(uintptr_t n) { return reinterpret_cast<CUevent>(n); }

TEST_CASE("StreamRecycler: the dispatcher's answer sorts released streams") {
  StreamRecycler recycler;
  StreamState a;
  StreamState b;
  StreamState c;
  recycler.Release(&a);
  recycler.Release(&b);
  recycler.Release(&c);
  std::vector<StreamState*> asked;
  recycler.Return(recycler.TakeReleased(), [&](StreamState* s) {
    asked.push_back(s);
    return s != &b;  // b still has ops queued
  });
  CHECK(asked == std::vector<StreamState*>{&a, &b, &c});
  CHECK(recycler.HasReleased());
  CHECK(recycler.TakeRecycled() == &c);
  CHECK(recycler.TakeRecycled() == &a);
  CHECK(recycler.TakeRecycled() == nullptr);

  recycler.Return(recycler.TakeReleased(), [](StreamState*) { return true; });
  CHECK_FALSE(recycler.HasReleased());
  CHECK(recycler.TakeRecycled() == &b);
}

TEST_CASE("StreamRecycler: every event kept for a queue is taken out of it") {
  StreamQueue q;
  CHECK(StreamRecycler::TakeEvents(&q).empty());

  q.free_events = {Event(0x10), Event(0x20)};
  q.marks.push_back({Event(0x30), 1, true});
  q.marks.push_back({Event(0x40), 3, false});
  q.last_completed = Event(0x50);
  q.watch_event = Event(0x60);
  const std::vector<CUevent> events = StreamRecycler::TakeEvents(&q);
  CHECK(events == std::vector<CUevent>{Event(0x10), Event(0x20), Event(0x30), Event(0x40),
                                       Event(0x50), Event(0x60)});
  CHECK(q.free_events.empty());
  CHECK(q.marks.empty());
  CHECK(q.last_completed == nullptr);
  CHECK(q.watch_event == nullptr);
  CHECK(StreamRecycler::TakeEvents(&q).empty());  // nothing is destroyed twice
}

}  // namespace
