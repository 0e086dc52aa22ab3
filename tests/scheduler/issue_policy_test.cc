// The scheduling policy as a pure function (scheduler/issue_policy.h): every
// rule, table-driven, on snapshots built by hand. No threads, no driver, no
// clock.
#include "scheduler/issue_policy.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "catch2/catch.hpp"
#include "scheduler/priority_levels.h"

namespace gpuprio::scheduler {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr int64_t kNow = 10'000'000'000;  // far from 0, so "never busy" is far in the past

// The queries answered from fixed values, counting how often each is asked.
struct FixedQueries final : DeviceQueries {
  uint64_t running_below_ns = 0;
  bool more_important_behind = false;
  bool shares_sms = false;
  int peers_ever_ceiling = kNoPriority;
  mutable int asked_running = 0;
  mutable int asked_shares_sms = 0;
  mutable int asked_ever = 0;
  uint64_t RunningBelowNs(int) const override {
    ++asked_running;
    return running_below_ns;
  }
  bool MoreImportantBehind(int) const override { return more_important_behind; }
  bool SharesSmsWithPeers() const override {
    ++asked_shares_sms;
    return shares_sms;
  }
  int PeersEverCeiling(int floor) const override {
    ++asked_ever;
    return peers_ever_ceiling > floor ? peers_ever_ceiling : floor;
  }
};

SchedulerOptions Options() {
  SchedulerOptions o;
  o.budget_ns = 2 * kMs;
  o.peer_budget_ns = kMs / 2;
  o.unbudgeted_priority = 0;
  o.ceiling_window_ns = 500 * kMs;
  o.tuning.idle_budget_excludes_running = true;
  o.tuning.long_op_idle_ns = 5 * kMs;
  o.tuning.long_op_max_hold_ns = 50 * kMs;
  o.max_hold_ns = 100 * kMs;
  o.tuning.confined_queue_ns = 10 * kMs;
  return o;
}

// A device with nothing but the op: local ceiling at the unbudgeted level.
DeviceSnapshot Idle(const FixedQueries* q) {
  DeviceSnapshot d;
  d.now_ns = kNow;
  d.local_ceiling = 0;
  d.local_above_op = kNoPriority;  // set per op below
  d.local_above_op_here = kNoPriority;
  d.local_max_seen_here = kNoPriority;
  d.queries = q;
  return d;
}

// One row: an op, the device's state, the expected answer.
struct Row {
  Row(std::string row_name, OpView row_op) : name(std::move(row_name)), op(row_op) {}
  template <typename T, typename V>
  Row With(T Row::*field, V value) const {
    Row row = *this;
    row.*field = static_cast<T>(value);
    return row;
  }
  Row Expect(Verdict v, Reason r) const {
    Row row = *this;
    row.verdict = v;
    row.reason = r;
    return row;
  }

  std::string name;
  OpView op;
  // The device.
  int local_ceiling = 0;
  int local_above_op = kNoPriority;  // kNoPriority: the op's own priority
  int highest_other_head = kNoPriority;
  std::vector<LevelLoad> levels;
  bool coordinated = false;
  PeerView peers;
  uint64_t running_below_ns = 0;
  bool more_important_behind = false;
  bool confine = false;
  int confined_in_flight_ops = 0;
  int64_t confined_in_flight_ns = 0;
  int64_t oldest_confined_issue_ns = 0;
  uint64_t oldest_confined_estimate_ns = 0;
  // The answer.
  Verdict verdict = Verdict::kIssue;
  Reason reason = Reason::kUnbudgeted;
  uint64_t budget_ns = 0;
  int64_t look_again_ns = 0;
  bool passed_hold_bound = false;
};

OpView Op(int priority, uint64_t estimate_ns, int64_t held_ns = 0) {
  OpView v;
  v.priority = priority;
  v.estimate_ns = estimate_ns;
  v.held_ns = held_ns;
  return v;
}

OpView Inherited(OpView v) {
  v.inherited = true;
  return v;
}

LevelLoad InFlight(int priority, int64_t ops, int64_t ns, int64_t last_busy_ns = kNow) {
  return {priority, 0, ops, ns, 0, last_busy_ns};
}

LevelLoad Pending(int priority, int64_t last_busy_ns) {
  return {priority, 1, 0, 0, 0, last_busy_ns};
}

TEST_CASE("Decide: every rule the dispatcher applies", "[scheduler][policy]") {
  const SchedulerOptions o = Options();
  const std::vector<Row> rows = {
      // Rule 1: more important work pending or in flight holds it.
      Row("a more important head holds it", Op(0, 10'000))
          .With(&Row::highest_other_head, 1)
          .With(&Row::look_again_ns, kNow + 100 * static_cast<int64_t>(kMs))
          .Expect(Verdict::kHold, Reason::kHigherPriority),
      Row("more important work in flight holds it", Op(-1, 10'000))
          .With(&Row::levels, std::vector<LevelLoad>{InFlight(1, 1, 10'000)})
          .With(&Row::look_again_ns, kNow + 100 * static_cast<int64_t>(kMs))
          .Expect(Verdict::kHold, Reason::kHigherPriority),
      Row("an equally important head does not", Op(0, 10'000))
          .With(&Row::highest_other_head, 0)
          .Expect(Verdict::kIssue, Reason::kUnbudgeted),
      Row("another process's active level holds it", Op(1, 10'000))
          .With(&Row::coordinated, true)
          .With(&Row::peers, PeerView{2, 0})
          .With(&Row::look_again_ns, kNow + 100 * static_cast<int64_t>(kMs))
          .Expect(Verdict::kHold, Reason::kHigherPriority),
      Row("held for the bound: the budget alone decides", Op(-1, 10'000, /*held_ns=*/100 * kMs))
          .With(&Row::highest_other_head, 1)
          .With(&Row::levels, std::vector<LevelLoad>{InFlight(1, 1, 10'000)})
          .With(&Row::budget_ns, 2 * kMs)
          .With(&Row::passed_hold_bound, true)
          .Expect(Verdict::kIssue, Reason::kHoldBound),
      Row("held for the bound, over the budget: held for the budget",
          Op(-1, 10'000, /*held_ns=*/100 * kMs))
          .With(&Row::levels,
                std::vector<LevelLoad>{InFlight(1, 1, 10'000), InFlight(-1, 1, 2 * kMs)})
          .Expect(Verdict::kHold, Reason::kBudget),
      Row("held just short of the bound: still held", Op(-1, 10'000, /*held_ns=*/100 * kMs - 1))
          .With(&Row::highest_other_head, 1)
          .With(&Row::look_again_ns, kNow + 1)
          .Expect(Verdict::kHold, Reason::kHigherPriority),

      // Rule 2: the budget below the ceiling.
      Row("at the ceiling: unbudgeted", Op(0, 50 * kMs))
          .With(&Row::levels, std::vector<LevelLoad>{InFlight(0, 3, 30 * kMs)})
          .Expect(Verdict::kIssue, Reason::kUnbudgeted),
      Row("below the ceiling, within the budget", Op(-1, kMs / 2))
          .With(&Row::local_ceiling, 1)
          .With(&Row::local_above_op, 1)
          .With(&Row::levels, std::vector<LevelLoad>{InFlight(-1, 1, 3 * kMs / 2)})
          .With(&Row::budget_ns, 2 * kMs)
          .Expect(Verdict::kIssue, Reason::kWithinBudget),
      Row("below the ceiling, beyond the budget", Op(-1, 600'000))
          .With(&Row::local_ceiling, 1)
          .With(&Row::local_above_op, 1)
          .With(&Row::levels, std::vector<LevelLoad>{InFlight(-1, 1, 3 * kMs / 2)})
          .Expect(Verdict::kHold, Reason::kBudget),
      Row("one op is admitted when nothing below the ceiling is in flight", Op(-1, kMs))
          .With(&Row::local_ceiling, 1)
          .With(&Row::local_above_op, 1)
          .With(&Row::levels,
                std::vector<LevelLoad>{InFlight(1, 0, 0, kNow - 10 * static_cast<int64_t>(kMs))})
          .With(&Row::budget_ns, 2 * kMs)
          .Expect(Verdict::kIssue, Reason::kWithinBudget),
      Row("below a peer's ceiling: the smaller peer budget", Op(0, 200'000))
          .With(&Row::levels, std::vector<LevelLoad>{InFlight(0, 1, 400'000)})
          .With(&Row::coordinated, true)
          .With(&Row::peers, PeerView{kNoPriority, 1})
          .Expect(Verdict::kHold, Reason::kBudget),
      Row("below a peer's ceiling, within the peer budget", Op(0, 100'000))
          .With(&Row::levels, std::vector<LevelLoad>{InFlight(0, 1, 400'000)})
          .With(&Row::coordinated, true)
          .With(&Row::peers, PeerView{kNoPriority, 1})
          .With(&Row::budget_ns, kMs / 2)
          .Expect(Verdict::kIssue, Reason::kWithinBudget),

      // Rule 2, nothing more important about: the op each stream runs does not
      // count.
      Row("low work alone: the running op is left out", Op(-1, kMs))
          .With(&Row::levels, std::vector<LevelLoad>{InFlight(-1, 2, 2 * kMs)})
          .With(&Row::running_below_ns, kMs)
          .With(&Row::budget_ns, 2 * kMs)
          .Expect(Verdict::kIssue, Reason::kWithinBudget),
      Row("low work beside a recent level above it: the running op counts", Op(-1, kMs))
          .With(&Row::local_above_op, 0)
          .With(&Row::levels, std::vector<LevelLoad>{InFlight(-1, 2, 2 * kMs)})
          .With(&Row::running_below_ns, kMs)
          .Expect(Verdict::kHold, Reason::kBudget),
      Row("low work beside a peer's level: the running op counts", Op(-1, kMs))
          .With(&Row::levels, std::vector<LevelLoad>{InFlight(-1, 2, 2 * kMs)})
          .With(&Row::coordinated, true)
          .With(&Row::peers, PeerView{kNoPriority, 0})
          .With(&Row::running_below_ns, kMs)
          .Expect(Verdict::kHold, Reason::kBudget),

      // Rule 3: the long-op rule.
      Row("a long op waits while more important work was busy lately", Op(-1, 3 * kMs))
          .With(&Row::local_ceiling, 1)
          .With(&Row::local_above_op, 1)
          .With(&Row::levels, std::vector<LevelLoad>{InFlight(1, 0, 0, kNow - 1'000'000)})
          .With(&Row::look_again_ns, kNow + 50 * static_cast<int64_t>(kMs))
          .Expect(Verdict::kHold, Reason::kLongOp),
      Row("a long op goes once more important work has been idle long enough", Op(-1, 3 * kMs))
          .With(&Row::local_ceiling, 1)
          .With(&Row::local_above_op, 1)
          .With(&Row::levels,
                std::vector<LevelLoad>{InFlight(1, 0, 0, kNow - 5 * static_cast<int64_t>(kMs))})
          .With(&Row::budget_ns, 2 * kMs)
          .Expect(Verdict::kIssue, Reason::kWithinBudget),
      Row("a long op goes at its hold bound", Op(-1, 3 * kMs, /*held_ns=*/50 * kMs))
          .With(&Row::local_ceiling, 1)
          .With(&Row::local_above_op, 1)
          .With(&Row::levels, std::vector<LevelLoad>{InFlight(1, 0, 0, kNow)})
          .With(&Row::budget_ns, 2 * kMs)
          .Expect(Verdict::kIssue, Reason::kWithinBudget),
      Row("a long op goes when more important work waits behind it", Op(-1, 3 * kMs))
          .With(&Row::local_ceiling, 1)
          .With(&Row::local_above_op, 1)
          .With(&Row::levels, std::vector<LevelLoad>{Pending(1, kNow)})
          .With(&Row::more_important_behind, true)
          .With(&Row::budget_ns, 2 * kMs)
          .Expect(Verdict::kIssue, Reason::kWithinBudget),
      Row("a long op at the ceiling is no long op", Op(1, 3 * kMs))
          .With(&Row::local_ceiling, 1)
          .With(&Row::levels, std::vector<LevelLoad>{InFlight(2, 0, 0, kNow)})
          .Expect(Verdict::kIssue, Reason::kUnbudgeted),

      // Rule 4: confinement.
      Row("confined work ignores rules 1-3", Op(-1, 50 * kMs))
          .With(&Row::local_ceiling, 1)
          .With(&Row::local_above_op, 1)
          .With(&Row::highest_other_head, 1)
          .With(&Row::levels, std::vector<LevelLoad>{InFlight(-1, 5, 50 * kMs)})
          .With(&Row::confine, true)
          .Expect(Verdict::kIssueConfined, Reason::kConfined),
      Row("confined, the twin full: held until room is due", Op(-1, 2 * kMs))
          .With(&Row::confine, true)
          .With(&Row::confined_in_flight_ops, 2)
          .With(&Row::confined_in_flight_ns, 9 * kMs)
          .With(&Row::oldest_confined_issue_ns, kNow - 1'000)
          .With(&Row::oldest_confined_estimate_ns, 8 * kMs)
          .With(&Row::look_again_ns, kNow - 1'000 + 8 * static_cast<int64_t>(kMs))
          .Expect(Verdict::kHold, Reason::kTwinFull),
      Row("confined, the twin full with much queued behind: not sooner "
          "than a sleep",
          Op(-1, 2 * kMs))
          .With(&Row::confine, true)
          .With(&Row::confined_in_flight_ops, 3)
          .With(&Row::confined_in_flight_ns, 9 * kMs)
          .With(&Row::oldest_confined_issue_ns, kNow - 10 * static_cast<int64_t>(kMs))
          .With(&Row::oldest_confined_estimate_ns, 2 * kMs)
          .With(&Row::look_again_ns, kNow + kMaxConfinedSleepNs)
          .Expect(Verdict::kHold, Reason::kTwinFull),
      Row("confined, the twin empty: one op always goes", Op(-1, 50 * kMs))
          .With(&Row::confine, true)
          .Expect(Verdict::kIssueConfined, Reason::kConfined),

      // Rule 5: inheritance and home-only markers.
      Row("an op another waits for goes, on the budget below the ceiling",
          Inherited(Op(-1, 10 * kMs)))
          .With(&Row::local_ceiling, 1)
          .With(&Row::highest_other_head, 2)
          .With(&Row::levels, std::vector<LevelLoad>{InFlight(-1, 5, 50 * kMs)})
          .With(&Row::budget_ns, 2 * kMs)
          .Expect(Verdict::kIssue, Reason::kInherited),
      Row("an op another waits for goes to a full twin", Inherited(Op(-1, 10 * kMs)))
          .With(&Row::confine, true)
          .With(&Row::confined_in_flight_ops, 1)
          .With(&Row::confined_in_flight_ns, 10 * kMs)
          .Expect(Verdict::kIssueConfined, Reason::kInherited),
  };
  for (const Row& row : rows) {
    INFO(row.name);
    FixedQueries queries;
    queries.running_below_ns = row.running_below_ns;
    queries.more_important_behind = row.more_important_behind;
    DeviceSnapshot d = Idle(&queries);
    d.local_ceiling = row.local_ceiling;
    d.local_above_op = row.local_above_op == kNoPriority ? row.op.priority : row.local_above_op;
    d.highest_other_head = row.highest_other_head;
    d.levels = row.levels;
    d.coordinated = row.coordinated;
    d.peers = row.peers;
    d.confined_in_flight_ops = row.confined_in_flight_ops;
    d.confined_in_flight_ns = row.confined_in_flight_ns;
    d.oldest_confined_issue_ns = row.oldest_confined_issue_ns;
    d.oldest_confined_estimate_ns = row.oldest_confined_estimate_ns;
    const Decision decision = Decide(row.op, d, row.confine, o);
    CHECK(decision.verdict == row.verdict);
    CHECK(decision.reason == row.reason);
    CHECK(decision.budget_ns == row.budget_ns);
    CHECK(decision.look_again_ns == row.look_again_ns);
    CHECK(decision.passed_hold_bound == row.passed_hold_bound);
  }
}

TEST_CASE("Decide: a home-only marker is never held", "[scheduler][policy]") {
  FixedQueries queries;
  DeviceSnapshot d = Idle(&queries);
  d.highest_other_head = 5;
  OpView op = Op(-5, 100 * kMs);
  op.home_only = true;
  const Decision decision = Decide(op, d, /*confine=*/false, Options());
  CHECK(decision.verdict == Verdict::kIssue);
  CHECK(decision.reason == Reason::kHomeOnly);
  CHECK(decision.budget_ns == 0);
  CHECK_FALSE(WantsConfinement(op, d, Options()));
}

TEST_CASE("Decide: the rules switched off", "[scheduler][policy]") {
  SchedulerOptions o = Options();
  FixedQueries queries;
  queries.running_below_ns = kMs;
  DeviceSnapshot d = Idle(&queries);
  const std::vector<LevelLoad> levels = {InFlight(-1, 2, 2 * kMs), InFlight(1, 1, 10'000)};
  d.levels = levels;
  SECTION("idle_budget_excludes_running off: the running op counts") {
    d.levels = absl::MakeConstSpan(levels).subspan(0, 1);
    o.tuning.idle_budget_excludes_running = false;
    CHECK(Decide(Op(-1, kMs), d, false, o).reason == Reason::kBudget);
    CHECK(queries.asked_running == 0);
  }
  SECTION("max_hold_ns 0: no hold bound") {
    o.max_hold_ns = 0;
    const Decision decision = Decide(Op(-1, 10'000, /*held_ns=*/1'000 * kMs), d, false, o);
    CHECK(decision.reason == Reason::kHigherPriority);
    CHECK(decision.look_again_ns == 0);
  }
}

TEST_CASE("Decide: the request gap holds work in the gaps of more important work",
          "[scheduler][policy]") {
  SchedulerOptions o = Options();
  o.request_gap_ns = kMs;
  FixedQueries queries;
  DeviceSnapshot d = Idle(&queries);
  d.local_ceiling = 1;
  const int64_t gap = static_cast<int64_t>(kMs);
  SECTION("a level of this process that had work until less than the gap ago holds it") {
    // Level 1's last op ended 0.4 ms ago: nothing of it is queued or in flight.
    const std::vector<LevelLoad> levels = {InFlight(1, 0, 0, kNow - 400'000)};
    d.levels = levels;
    const Decision held = Decide(Op(-1, 10'000), d, false, o);
    CHECK(held.verdict == Verdict::kHold);
    CHECK(held.reason == Reason::kHigherPriority);
    SECTION("the same gap, the rule off: the budget admits it") {
      o.request_gap_ns = 0;
      CHECK(Decide(Op(-1, 10'000), d, false, o).verdict == Verdict::kIssue);
    }
    SECTION("an op of the busy level itself, or above it, is not held by it") {
      CHECK(Decide(Op(1, 10'000), d, false, o).verdict == Verdict::kIssue);
      CHECK(Decide(Op(2, 10'000), d, false, o).verdict == Verdict::kIssue);
    }
    SECTION("confined work is not held (rule 4 first)") {
      CHECK(Decide(Op(-1, 10'000), d, /*confine=*/true, o).verdict == Verdict::kIssueConfined);
    }
    SECTION("the hold bound still applies") {
      const Decision bound = Decide(Op(-1, 10'000, /*held_ns=*/100 * gap), d, false, o);
      CHECK(bound.verdict == Verdict::kIssue);
      CHECK(bound.reason == Reason::kHoldBound);
    }
  }
  SECTION("a level whose ops are only queued (behind this one, on its stream) does not") {
    // Queued work counts through the heads; ops queued behind the judged op wait for it.
    const std::vector<LevelLoad> levels = {Pending(1, kNow - 400'000)};
    d.levels = levels;
    CHECK(Decide(Op(-1, 10'000), d, false, o).verdict == Verdict::kIssue);
  }
  SECTION("a level whose work ended longer ago than the gap does not") {
    const std::vector<LevelLoad> levels = {InFlight(1, 0, 0, kNow - gap - 1)};
    d.levels = levels;
    CHECK(Decide(Op(-1, 10'000), d, false, o).verdict == Verdict::kIssue);
  }
  SECTION("another process's level busy within the gap (PeerState::busy) holds it") {
    d.coordinated = true;
    d.peers = {kNoPriority, 1, /*busy=*/1};
    const Decision held = Decide(Op(-1, 10'000), d, false, o);
    CHECK(held.verdict == Verdict::kHold);
    CHECK(held.reason == Reason::kHigherPriority);
    d.peers.busy = -1;  // a busy level below the op's does not
    CHECK(Decide(Op(-1, 10'000), d, false, o).verdict == Verdict::kIssue);
    d.peers.busy = 1;
    o.request_gap_ns = 0;  // without the rule, busy is not read
    CHECK(Decide(Op(-1, 10'000), d, false, o).verdict == Verdict::kIssue);
  }
}

TEST_CASE("WantsConfinement: each isolation mode", "[scheduler][policy]") {
  SchedulerOptions o = Options();
  FixedQueries queries;
  DeviceSnapshot d = Idle(&queries);
  const OpView low = Op(-1, kMs);
  d.local_above_op = -1;
  d.local_above_op_here = -1;
  SECTION("off: never") {
    o.isolation = Isolation::kOff;
    d.local_above_op_here = 1;
    CHECK_FALSE(WantsConfinement(low, d, o));
  }
  SECTION("force: always, unless the partition refused the kernel") {
    o.isolation = Isolation::kForce;
    CHECK(WantsConfinement(low, d, o));
    OpView refused = low;
    refused.confinable = false;
    CHECK_FALSE(WantsConfinement(refused, d, o));
  }
  SECTION("active: a more important level of this process within the window, on this device") {
    o.isolation = Isolation::kActive;
    CHECK_FALSE(WantsConfinement(low, d, o));
    d.local_above_op = 0;  // active in this process, but on another device only
    CHECK_FALSE(WantsConfinement(low, d, o));
    d.local_above_op_here = 0;
    CHECK(WantsConfinement(low, d, o));
    CHECK(queries.asked_shares_sms == 0);
  }
  SECTION("active: a peer's level counts only when SMs are shared (MPS)") {
    o.isolation = Isolation::kActive;
    d.coordinated = true;
    d.peers = {kNoPriority, 0};
    CHECK_FALSE(WantsConfinement(low, d, o));
    CHECK(queries.asked_shares_sms == 1);
    queries.shares_sms = true;
    CHECK(WantsConfinement(low, d, o));
  }
  SECTION("always: any level ever seen above, here or (MPS) in a peer") {
    o.isolation = Isolation::kAlways;
    CHECK_FALSE(WantsConfinement(low, d, o));
    CHECK(queries.asked_shares_sms == 0);  // not coordinated
    d.local_max_seen_here = 0;
    CHECK(WantsConfinement(low, d, o));
    d.local_max_seen_here = -1;
    d.coordinated = true;
    queries.peers_ever_ceiling = 3;
    CHECK_FALSE(WantsConfinement(low, d, o));
    CHECK(queries.asked_ever == 0);  // asked only with SMs shared
    queries.shares_sms = true;
    CHECK(WantsConfinement(low, d, o));
  }
  SECTION(
      "active and always: not below a level whose work needs the whole GPU, here or in a peer") {
    for (const Isolation mode : {Isolation::kActive, Isolation::kAlways}) {
      INFO("mode " << static_cast<int>(mode));
      o.isolation = mode;
      d.local_above_op_here = 1;
      d.local_max_seen_here = 1;
      d.local_whole_device = kNoPriority;
      d.coordinated = false;
      d.peers = {};
      CHECK(WantsConfinement(low, d, o));
      d.local_whole_device = 1;  // the level above launched a graph within the window
      int held_below = kNoPriority;
      CHECK_FALSE(WantsConfinement(low, d, o, &held_below));
      CHECK(held_below == 1);     // what the dispatcher says once
      d.local_whole_device = -1;  // the op's own level: it still confines its work below 1
      CHECK(WantsConfinement(low, d, o));
      d.coordinated = true;
      d.peers.whole_device = 2;    // another process's level: its graphs share these SMs only
      queries.shares_sms = false;  // under MPS
      CHECK(WantsConfinement(low, d, o));
      queries.shares_sms = true;
      held_below = kNoPriority;
      CHECK_FALSE(WantsConfinement(low, d, o, &held_below));
      CHECK(held_below == 2);  // would be confined but for it: the dispatcher says so once
      d.coordinated = false;  // read only where other processes take part
      CHECK(WantsConfinement(low, d, o));
      queries.shares_sms = false;
    }
    o.isolation = Isolation::kForce;  // the debug switch confines everything regardless
    d.local_whole_device = 1;
    int held_below = kNoPriority;
    CHECK(WantsConfinement(low, d, o, &held_below));
    CHECK(held_below == kNoPriority);
    o.isolation = Isolation::kOff;  // nothing is confined, so nothing is said of graphs
    CHECK_FALSE(WantsConfinement(low, d, o, &held_below));
    CHECK(held_below == kNoPriority);
  }
}

// The client's view, from fixed values, recording what was read.
struct FixedClientView {
  int op_priority = 0;
  bool nothing_more_important_queued = true;
  bool away_work_orders = false;
  int max_seen = kNoPriority;
  int local_ceiling = 0;
  bool peers_allow = true;
  mutable int ceiling_reads = 0;
  mutable int peer_reads = 0;
  int priority() const { return op_priority; }
  bool NothingMoreImportantQueued() const { return nothing_more_important_queued; }
  bool AwayWorkOrders() const { return away_work_orders; }
  int MaxSeen() const { return max_seen; }
  int LocalCeiling() const {
    ++ceiling_reads;
    return local_ceiling;
  }
  bool PeersAllowDirect() const {
    ++peer_reads;
    return peers_allow;
  }
};

TEST_CASE(
    "DirectIssueAllowed: the fast path asks what the dispatcher would do "
    "at once",
    "[scheduler][policy]") {
  SchedulerOptions o = Options();
  FixedClientView v;
  SECTION("nothing about: yes, without reading the clock") {
    CHECK(DirectIssueAllowed(v, o));
    CHECK(v.ceiling_reads == 0);
    CHECK(v.peer_reads == 1);
  }
  SECTION("switched off") {
    o.direct_issue = false;
    CHECK_FALSE(DirectIssueAllowed(v, o));
  }
  SECTION("below the unbudgeted level: always budgeted") {
    v.op_priority = -1;
    CHECK_FALSE(DirectIssueAllowed(v, o));
  }
  SECTION("more important (or ordered) work queued") {
    v.nothing_more_important_queued = false;
    CHECK_FALSE(DirectIssueAllowed(v, o));
  }
  SECTION("below the ceiling") {
    v.max_seen = 1;
    v.local_ceiling = 1;
    CHECK_FALSE(DirectIssueAllowed(v, o));
    v.local_ceiling = 0;  // the level above went quiet
    CHECK(DirectIssueAllowed(v, o));
  }
  SECTION("another process's level above") {
    v.peers_allow = false;
    CHECK_FALSE(DirectIssueAllowed(v, o));
  }
  SECTION("isolation: work on a twin orders it, force, always below a level seen") {
    o.isolation = Isolation::kActive;
    CHECK(DirectIssueAllowed(v, o));
    v.away_work_orders = true;
    CHECK_FALSE(DirectIssueAllowed(v, o));
    v.away_work_orders = false;
    o.isolation = Isolation::kForce;
    CHECK_FALSE(DirectIssueAllowed(v, o));
    o.isolation = Isolation::kAlways;
    v.max_seen = 1;
    v.local_ceiling = 0;
    CHECK_FALSE(DirectIssueAllowed(v, o));
    o.isolation = Isolation::kActive;
    CHECK(DirectIssueAllowed(v, o));
  }
}

TEST_CASE("Rule 2 is decided per device, by the dispatcher and the fast path alike",
          "[scheduler][policy]") {
  // Level 1 submits and has work on device 0 only (and had some on device 1 longer ago than the
  // window). Each device's snapshot and client view are read from its own levels, as
  // PolicyView and the fast path read them: on device 0 default-priority work is budgeted below
  // level 1, on device 1 it is at the ceiling, and both paths say so.
  const SchedulerOptions o = Options();
  PriorityLevels levels;
  DeviceLevels gpu[2];
  levels.NoteSubmit(1, kNow - 10 * static_cast<int64_t>(kMs));
  gpu[0].NoteWork(1, kNow - 10 * static_cast<int64_t>(kMs));
  gpu[1].NoteWork(1, kNow - 600 * static_cast<int64_t>(kMs));
  const OpView normal = Op(0, kMs);
  FixedQueries q;
  for (int g = 0; g < 2; ++g) {
    DeviceSnapshot d = Idle(&q);
    d.local_ceiling = gpu[g].Ceiling(levels, o.unbudgeted_priority, kNow, o.ceiling_window_ns);
    d.local_above_op = gpu[g].Ceiling(levels, normal.priority, kNow, o.ceiling_window_ns);
    // Two unmeasured ops of its level in flight: together with this one, beyond the budget.
    const std::vector<LevelLoad> loads = {InFlight(0, 2, 2 * static_cast<int64_t>(kMs))};
    d.levels = loads;
    FixedClientView v;
    v.max_seen = gpu[g].MaxSeen();
    v.local_ceiling = gpu[g].Ceiling(levels, o.unbudgeted_priority, kNow, o.ceiling_window_ns);
    const Decision decision = Decide(normal, d, /*confine=*/false, o);
    INFO("device " << g);
    if (g == 0) {
      CHECK(d.local_ceiling == 1);
      CHECK(decision.verdict == Verdict::kHold);
      CHECK(decision.reason == Reason::kBudget);
      CHECK_FALSE(DirectIssueAllowed(v, o));
    } else {
      CHECK(d.local_ceiling == 0);
      CHECK(decision.verdict == Verdict::kIssue);
      CHECK(decision.reason == Reason::kUnbudgeted);
      CHECK(decision.budget_ns == 0);
      CHECK(DirectIssueAllowed(v, o));
    }
  }
}

TEST_CASE("Admit holds work while higher-priority work is pending or in flight", "[scheduler]") {
  const AdmissionSnapshot s{/*highest_pending_or_in_flight=*/1, /*ceiling=*/1,
                            /*below_ceiling_in_flight_ns=*/0,
                            /*budget_ns=*/2'000'000};
  CHECK(Admit(0, 1000, s) == Admission::kHoldForHigherPriority);
  CHECK(Admit(1, 1000, s) == Admission::kIssue);
  CHECK(Admit(2, 1000, s) == Admission::kIssue);
}

TEST_CASE("Admit keeps work below the ceiling within the budget", "[scheduler]") {
  AdmissionSnapshot s{kNoPriority, /*ceiling=*/1,
                      /*below_ceiling_in_flight_ns=*/1'500'000,
                      /*budget_ns=*/2'000'000};
  CHECK(Admit(0, 400'000, s) == Admission::kIssue);
  CHECK(Admit(0, 600'000, s) == Admission::kHoldForBudget);
  SECTION("the ceiling level itself is never budgeted") {
    CHECK(Admit(1, 10'000'000, s) == Admission::kIssue);
  }
  SECTION("one op is admitted when nothing below the ceiling is in flight") {
    s.below_ceiling_in_flight_ns = 0;
    CHECK(Admit(0, 50'000'000, s) == Admission::kIssue);
  }
}

}  // namespace
}  // namespace gpuprio::scheduler
