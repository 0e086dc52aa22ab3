// Which wait a dispatcher round that issued nothing takes (scheduler/dispatcher_waits.h): one row
// per rule of DecideHeldWait and DecideIdleWait, and the polling budget. No clock, no threads.
#include "scheduler/dispatcher_waits.h"

#include <string>
#include <vector>

#include "catch2/catch.hpp"

namespace gpuprio::scheduler {
namespace {

constexpr int64_t kNow = 1'000'000'000'000;
constexpr int64_t kUs = 1'000;
constexpr int64_t kMs = 1'000'000;

SchedulerOptions Options() {
  SchedulerOptions o;
  o.tuning.max_held_sleep_ns = 200 * kUs;
  o.tuning.peer_poll_ns = 50 * kUs;
  o.tuning.peer_idle_poll_ns = 1 * kMs;
  o.max_hold_ns = 100 * kMs;
  return o;
}

// Past the spin, held by nothing in particular: the poll.
HeldWaitFacts PastSpin() {
  HeldWaitFacts f;
  f.now_ns = kNow;
  f.rounds = kHeldSpinRounds;
  f.held_priority = 2;
  return f;
}

// Only another process can end the hold (rule 3).
HeldWaitFacts HeldOnPeers() {
  HeldWaitFacts f = PastSpin();
  f.peers_present = true;
  f.nothing_in_flight = true;
  f.peers_highest_active = 5;
  return f;
}

// Held for more important work of this process, past its polling window (rule 4).
HeldWaitFacts HeldLocally() {
  HeldWaitFacts f = PastSpin();
  f.held_for_more_important = true;
  f.held_since_ns = kNow - kLocalHoldPollWindowNs;
  f.has_watcher = true;
  return f;
}

struct HeldRow {
  std::string rule;
  HeldWaitFacts facts;
  SchedulerOptions options;
  HeldWaitAction action;
  int rounds;
  int64_t park_ns;
  int64_t poll_ns;
};

// `t` as `change` leaves it.
template <typename T, typename F>
T With(T t, F change) {
  change(t);
  return t;
}

TEST_CASE("DecideHeldWait: one row per rule", "[dispatcher_waits]") {
  const SchedulerOptions o = Options();
  SchedulerOptions no_hold_bound = o;
  no_hold_bound.max_hold_ns = 0;
  using A = HeldWaitAction;
  const std::vector<HeldRow> rows = {
      {"1: room on the twin due later: park until then, the spin not counted",
       With(PastSpin(), [](auto& f) { f.confined_until_ns = kNow + 500 * kUs, f.rounds = 3; }), o,
       A::kParkForRoom, 3, 500 * kUs, 0},
      {"1: at most kMaxConfinedSleepNs",
       With(PastSpin(), [](auto& f) { f.confined_until_ns = kNow + 5 * kMs, f.rounds = 0; }), o,
       A::kParkForRoom, 0, kMaxConfinedSleepNs, 0},
      {"1: room due within kMinHeldBackoffNs: the usual wait (spin)",
       With(PastSpin(), [](auto& f) { f.confined_until_ns = kNow + 10 * kUs, f.rounds = 0; }), o,
       A::kSpin, 1, 0, 0},
      {"2: the first rounds spin", With(PastSpin(), [](auto& f) { f.rounds = 0; }), o, A::kSpin, 1,
       0, 0},
      {"2: the last spin round", With(PastSpin(), [](auto& f) { f.rounds = kHeldSpinRounds - 1; }),
       o, A::kSpin, kHeldSpinRounds, 0, 0},
      {"3: only peers hold it: their word, kHeldOnPeersParkNs", HeldOnPeers(), o, A::kParkOnPeers,
       kHeldSpinRounds + 1, kHeldOnPeersParkNs, 0},
      {"3: bounded by the earliest held head's hold bound",
       With(HeldOnPeers(), [](auto& f) { f.earliest_head_held_since_ns = kNow - 97 * kMs; }), o,
       A::kParkOnPeers, kHeldSpinRounds + 1, 3 * kMs, 0},
      {"3: a hold bound already passed: kMinHeldBackoffNs",
       With(HeldOnPeers(), [](auto& f) { f.earliest_head_held_since_ns = kNow - 200 * kMs; }), o,
       A::kParkOnPeers, kHeldSpinRounds + 1, kMinHeldBackoffNs, 0},
      {"3: no hold bound: kHeldOnPeersParkNs",
       With(HeldOnPeers(), [](auto& f) { f.earliest_head_held_since_ns = kNow - 97 * kMs; }),
       no_hold_bound, A::kParkOnPeers, kHeldSpinRounds + 1, kHeldOnPeersParkNs, 0},
      {"3 not: the peers' level is not above the held op (poll, the peers' cap)",
       With(HeldOnPeers(), [](auto& f) { f.peers_highest_active = 2; }), o, A::kPoll,
       kHeldSpinRounds + 1, 0, kMinHeldBackoffNs},
      {"3 not: work of this process in flight",
       With(HeldOnPeers(), [](auto& f) { f.nothing_in_flight = false; }), o, A::kPoll,
       kHeldSpinRounds + 1, 0, kMinHeldBackoffNs},
      {"3 not: direct work listed", With(HeldOnPeers(), [](auto& f) { f.direct_listed = true; }), o,
       A::kPoll, kHeldSpinRounds + 1, 0, kMinHeldBackoffNs},
      {"3 not: no held op (any op may end the hold)",
       With(HeldOnPeers(), [](auto& f) { f.held_priority = kNoPriority; }), o, A::kPoll,
       kHeldSpinRounds + 1, 0, kMinHeldBackoffNs},
      {"4: held locally past kLocalHoldPollWindowNs: the watcher, kWatchedParkNs", HeldLocally(), o,
       A::kWatchThenPark, kHeldSpinRounds + 1, kWatchedParkNs, kMinHeldBackoffNs},
      {"4: bounded by the held op's hold bound",
       With(HeldLocally(), [](auto& f) { f.held_since_ns = kNow - 95 * kMs; }), o,
       A::kWatchThenPark, kHeldSpinRounds + 1, 5 * kMs, kMinHeldBackoffNs},
      {"4: a hold bound already passed: kMinHeldBackoffNs",
       With(HeldLocally(), [](auto& f) { f.held_since_ns = kNow - 150 * kMs; }), o,
       A::kWatchThenPark, kHeldSpinRounds + 1, kMinHeldBackoffNs, kMinHeldBackoffNs},
      {"4 not: still in the polling window",
       With(HeldLocally(), [](auto& f) { f.held_since_ns = kNow - kLocalHoldPollWindowNs + 1; }), o,
       A::kPoll, kHeldSpinRounds + 1, 0, kMinHeldBackoffNs},
      {"4 not: no watcher", With(HeldLocally(), [](auto& f) { f.has_watcher = false; }), o,
       A::kPoll, kHeldSpinRounds + 1, 0, kMinHeldBackoffNs},
      {"4 not: held for its level's budget",
       With(HeldLocally(), [](auto& f) { f.held_for_more_important = false; }), o, A::kPoll,
       kHeldSpinRounds + 1, 0, kMinHeldBackoffNs},
      {"5: the poll's backoff doubles", With(PastSpin(), [](auto& f) { f.backoff_ns = 40 * kUs; }),
       o, A::kPoll, kHeldSpinRounds + 1, 0, 80 * kUs},
      {"5: up to max_held_sleep_ns", With(PastSpin(), [](auto& f) { f.backoff_ns = 150 * kUs; }), o,
       A::kPoll, kHeldSpinRounds + 1, 0, 200 * kUs},
      {"5: with peers present, up to peer_poll_ns",
       With(PastSpin(), [](auto& f) { f.backoff_ns = 40 * kUs, f.peers_present = true; }), o,
       A::kPoll, kHeldSpinRounds + 1, 0, 50 * kUs},
  };
  for (const HeldRow& row : rows) {
    INFO(row.rule);
    const HeldWaitStep step = DecideHeldWait(row.facts, row.options);
    CHECK(step.action == row.action);
    CHECK(step.rounds == row.rounds);
    if (row.action != A::kSpin && row.action != A::kPoll) CHECK(step.park_ns == row.park_ns);
    if (row.action == A::kPoll || row.action == A::kWatchThenPark) {
      CHECK(step.poll_ns == row.poll_ns);
    }
  }
}

TEST_CASE("HeldWaitLooksAtPeers: the segment is read only where rule 3 may apply",
          "[dispatcher_waits]") {
  CHECK(HeldWaitLooksAtPeers(HeldOnPeers()));
  CHECK_FALSE(HeldWaitLooksAtPeers(With(HeldOnPeers(), [](auto& f) { f.rounds = 0; })));
  CHECK_FALSE(HeldWaitLooksAtPeers(
      With(HeldOnPeers(), [](auto& f) { f.confined_until_ns = kNow + 500 * kUs; })));
  CHECK_FALSE(HeldWaitLooksAtPeers(With(HeldOnPeers(), [](auto& f) { f.peers_present = false; })));
  CHECK_FALSE(
      HeldWaitLooksAtPeers(With(HeldOnPeers(), [](auto& f) { f.nothing_in_flight = false; })));
  CHECK_FALSE(HeldWaitLooksAtPeers(With(HeldOnPeers(), [](auto& f) { f.direct_listed = true; })));
  CHECK_FALSE(
      HeldWaitLooksAtPeers(With(HeldOnPeers(), [](auto& f) { f.held_priority = kNoPriority; })));
  CHECK(HeldWaitPastSpin(PastSpin()));
  CHECK_FALSE(HeldWaitPastSpin(With(PastSpin(), [](auto& f) { f.rounds = 0; })));
}

// Other processes wait on this one's work in flight (rule 1).
IdleWaitFacts WaitedOn() {
  IdleWaitFacts f;
  f.now_ns = kNow;
  f.local_active = true;
  f.peers_present = true;
  f.peers_any_held = true;
  f.has_watcher = true;
  return f;
}

// A polling budget with room, its wait begun at `since`.
PollWindow Window(int64_t since) {
  PollWindow w;
  w.wait_since_ns = since;
  w.budget_ns = kPollBudgetCapNs;
  w.budget_at_ns = kNow;
  return w;
}

struct IdleRow {
  std::string rule;
  IdleWaitFacts facts;
  PollWindow window;
  SchedulerOptions options;
  IdleWaitAction action;
  int rounds;
  int64_t park_ns;
  int64_t poll_ns;
  int64_t wait_since_ns;  // the window's after the step
};

TEST_CASE("DecideIdleWait: one row per rule", "[dispatcher_waits]") {
  const SchedulerOptions o = Options();
  SchedulerOptions tiny_poll = o;
  tiny_poll.tuning.peer_poll_ns = 1 * kUs;
  using A = IdleWaitAction;
  const std::vector<IdleRow> rows = {
      {"1: the wait's first round starts its window and polls", WaitedOn(), Window(0), o, A::kPoll,
       1, 0, kMinPeerPollNs, kNow},
      {"1: the poll's backoff doubles, up to peer_poll_ns",
       With(WaitedOn(), [](auto& f) { f.rounds = 3, f.backoff_ns = 40 * kUs; }),
       Window(kNow - 100 * kUs), o, A::kPoll, 4, 0, 50 * kUs, kNow - 100 * kUs},
      {"1: at least kMinPeerPollNs",
       With(WaitedOn(), [](auto& f) { f.rounds = 3, f.backoff_ns = 40 * kUs; }),
       Window(kNow - 100 * kUs), tiny_poll, A::kPoll, 4, 0, kMinPeerPollNs, kNow - 100 * kUs},
      {"1: past the window: the watcher, kWatchedParkNs",
       With(WaitedOn(), [](auto& f) { f.rounds = 3, f.backoff_ns = 20 * kUs; }),
       Window(kNow - kPollWindowNs), o, A::kWatchThenPark, 4, kWatchedParkNs, 40 * kUs,
       kNow - kPollWindowNs},
      {"1: the budget spent: the watcher at once", WaitedOn(),
       With(Window(0), [](PollWindow& w) { w.budget_ns = 0; }), o, A::kWatchThenPark, 1,
       kWatchedParkNs, kMinPeerPollNs, kNow},
      {"1: no watcher: polled past the window",
       With(WaitedOn(), [](auto& f) { f.rounds = 3, f.has_watcher = false; }),
       Window(kNow - 10 * kPollWindowNs), o, A::kPoll, 4, 0, kMinPeerPollNs,
       kNow - 10 * kPollWindowNs},
      {"2: peers attached, none waiting: peer_idle_poll_ns, the rounds restart",
       With(WaitedOn(), [](auto& f) { f.rounds = 3, f.peers_any_held = false; }), Window(0), o,
       A::kPeerIdlePoll, 0, 1 * kMs, 0, 0},
      {"3: nothing of this process active: the long park",
       With(WaitedOn(), [](auto& f) { f.rounds = 3, f.local_active = false; }), Window(0), o,
       A::kLongPark, 0, 1'000 * kMs, 0, 0},
      {"3: no peers: the long park", With(WaitedOn(), [](auto& f) { f.peers_present = false; }),
       Window(0), o, A::kLongPark, 0, 1'000 * kMs, 0, 0},
  };
  for (IdleRow row : rows) {
    INFO(row.rule);
    const IdleWaitStep step = DecideIdleWait(row.facts, &row.window, row.options);
    CHECK(step.action == row.action);
    CHECK(step.rounds == row.rounds);
    if (row.action != A::kPoll) CHECK(step.park_ns == row.park_ns);
    if (row.action == A::kPoll || row.action == A::kWatchThenPark) {
      CHECK(step.poll_ns == row.poll_ns);
    }
    CHECK(row.window.wait_since_ns == row.wait_since_ns);
  }
}

TEST_CASE("PollWindow: a window of kPollWindowNs, a budget refilled at 1/kPollShareDivisor",
          "[dispatcher_waits]") {
  PollWindow w;
  w.wait_since_ns = kNow;
  w.budget_at_ns = kNow;
  // No budget yet: closed, though the window is open.
  CHECK_FALSE(w.Open(kNow, /*has_watcher=*/true));
  // Without a watcher nothing else notices the end: open, the budget untouched.
  CHECK(w.Open(kNow + 10 * kMs, /*has_watcher=*/false));
  CHECK(w.budget_at_ns == kNow);
  // 2 ms later: 0.1 ms of budget, and the window has closed.
  CHECK_FALSE(w.Open(kNow + 2 * kMs, /*has_watcher=*/true));
  CHECK(w.budget_ns == 2 * kMs / kPollShareDivisor);
  // A new wait, within its window, with budget.
  w.wait_since_ns = kNow + 2 * kMs;
  CHECK(w.Open(kNow + 2 * kMs + 500 * kUs, /*has_watcher=*/true));
  CHECK(w.budget_ns == (2 * kMs + 500 * kUs) / kPollShareDivisor);
  // Spent: closed until refilled.
  w.Spend(1 * kMs);
  CHECK_FALSE(w.Open(kNow + 2 * kMs + 500 * kUs, /*has_watcher=*/true));
  // The refill is capped.
  CHECK_FALSE(w.Open(kNow + 10'000 * kMs, /*has_watcher=*/true));  // the window has closed
  CHECK(w.budget_ns == kPollBudgetCapNs);
}

}  // namespace
}  // namespace gpuprio::scheduler
