// The ordering invariants as a choice among queued streams (scheduler/issue_order.h): the most
// important head, ties in submission order, and what must go first whatever its priority -- an
// event wait's record, the legacy stream's order against blocking streams -- on queues built by
// hand. No dispatcher, no driver.
#include "scheduler/issue_order.h"

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <vector>

#include "catch2/catch.hpp"
#include "scheduler/issue_policy.h"

namespace gpuprio::scheduler {
namespace {

CUcontext Context(int n) { return reinterpret_cast<CUcontext>(static_cast<uintptr_t>(0x100 * n)); }

// Streams, their queues and their ops, owned together.
class Queues {
 public:
  StreamQueue* Add(CUcontext context, bool legacy, bool blocking) {
    states_.emplace_back();
    StreamState& s = states_.back();
    s.context = context;
    s.legacy = legacy;
    s.blocking = blocking;
    queues_.emplace_back();
    queues_.back().state = &s;
    by_state_[&s] = &queues_.back();
    return &queues_.back();
  }
  // Queues an op of `priority` with process-wide sequence number `seq`.
  Op* Push(StreamQueue* q, int priority, uint64_t seq) {
    ops_.emplace_back();
    Op* op = &ops_.back();
    op->priority = priority;
    op->seq = seq;
    op->stream = q->state;
    op->stream_index = q->state->submitted.fetch_add(1) + 1;
    if (q->pending.empty()) active_.push_back(q);
    q->pending.push_back(op);
    return op;
  }
  IssueOrder Order() const { return IssueOrder(active_, queue_of_); }

 private:
  std::deque<StreamState> states_;
  std::deque<StreamQueue> queues_;
  std::deque<Op> ops_;
  std::map<const StreamState*, StreamQueue*> by_state_;
  std::vector<StreamQueue*> active_;
  std::function<StreamQueue*(const StreamState*)> queue_of_ = [this](const StreamState* s) {
    auto it = by_state_.find(s);
    return it != by_state_.end() ? it->second : nullptr;
  };
};

TEST_CASE("The most important head goes first; ties in submission order", "[order]") {
  Queues queues;
  StreamQueue* a = queues.Add(Context(1), false, false);
  StreamQueue* b = queues.Add(Context(1), false, false);
  StreamQueue* c = queues.Add(Context(1), false, false);
  queues.Push(a, 0, 1);
  queues.Push(b, 5, 3);
  queues.Push(c, 5, 2);
  const IssueOrder order = queues.Order();
  int priority = kNoPriority;
  CHECK(order.MostImportantHead({}, &priority) == c);
  CHECK(priority == 5);
  const StreamQueue* skipped[] = {c};
  priority = kNoPriority;
  CHECK(order.MostImportantHead(skipped, &priority) == b);
  const StreamQueue* all[] = {a, b, c};
  priority = kNoPriority;
  CHECK(order.MostImportantHead(all, &priority) == nullptr);
}

TEST_CASE("Another device's wait lends a head its priority", "[order]") {
  Queues queues;
  StreamQueue* low = queues.Add(Context(1), false, false);
  StreamQueue* high = queues.Add(Context(1), false, false);
  queues.Push(low, -5, 1);
  queues.Push(high, 3, 2);
  CHECK(IssueOrder::HeadPriority(*low) == -5);
  low->state->awaited_priority = 7;
  CHECK(IssueOrder::HeadPriority(*low) == -5);  // the wait is for ops not yet reached
  low->state->awaited_count = 1;
  CHECK(IssueOrder::HeadPriority(*low) == 7);
  int priority = kNoPriority;
  CHECK(queues.Order().MostImportantHead({}, &priority) == low);
  CHECK(priority == 7);
}

TEST_CASE("The legacy stream and blocking streams keep their submission order", "[order]") {
  Queues queues;
  StreamQueue* legacy = queues.Add(Context(1), true, true);
  StreamQueue* blocking = queues.Add(Context(1), false, true);
  StreamQueue* non_blocking = queues.Add(Context(1), false, false);
  StreamQueue* other_context = queues.Add(Context(2), false, true);
  queues.Push(other_context, 0, 1);
  queues.Push(non_blocking, 0, 2);
  queues.Push(blocking, 0, 3);
  queues.Push(legacy, 9, 4);
  const IssueOrder order = queues.Order();
  CHECK(order.Blocker(*legacy) == blocking);   // older blocking work goes first
  CHECK(order.Blocker(*blocking) == nullptr);  // the legacy head is newer
  CHECK(order.Blocker(*non_blocking) == nullptr);
  CHECK(order.Blocker(*other_context) == nullptr);
  bool inherited = false;
  bool looped = true;
  CHECK(order.FirstToIssue(legacy, &inherited, &looped) == blocking);
  CHECK(inherited);
  CHECK_FALSE(looped);
}

TEST_CASE("An event wait follows its record's stream while the record is unissued", "[order]") {
  Queues queues;
  StreamQueue* recorder = queues.Add(Context(1), false, false);
  StreamQueue* waiter = queues.Add(Context(1), false, false);
  queues.Push(recorder, -1, 1);  // the record
  Op* wait = queues.Push(waiter, 5, 2);
  wait->depends_on = recorder->state;
  wait->depends_on_count = 1;
  const IssueOrder order = queues.Order();
  CHECK(order.Blocker(*waiter) == recorder);
  SECTION("issued: nothing to follow") {
    recorder->state->issued = 1;
    CHECK(order.Blocker(*waiter) == nullptr);
  }
  SECTION("the recorder's head is newer than the wait: queued after it, not followed") {
    recorder->pending.front()->seq = 3;
    CHECK(order.Blocker(*waiter) == nullptr);
  }
}

TEST_CASE("A chain is followed to its end: a wait, then the legacy order", "[order]") {
  Queues queues;
  StreamQueue* legacy = queues.Add(Context(1), true, true);
  StreamQueue* blocking = queues.Add(Context(1), false, true);
  StreamQueue* waiter = queues.Add(Context(1), false, false);
  queues.Push(legacy, -3, 1);
  queues.Push(blocking, -2, 2);  // the record, behind the legacy op
  Op* wait = queues.Push(waiter, 8, 3);
  wait->depends_on = blocking->state;
  wait->depends_on_count = 1;
  bool inherited = false;
  bool looped = true;
  CHECK(queues.Order().FirstToIssue(waiter, &inherited, &looped) == legacy);
  CHECK(inherited);
  CHECK_FALSE(looped);
}

}  // namespace
}  // namespace gpuprio::scheduler
