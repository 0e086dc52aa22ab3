// PolicyView without a dispatcher or a coordinator: the op at a stream's head as the policy sees
// it (its estimate, how long it was held, whether the partition refused its function), and its
// device's snapshot (the ceilings, the other streams' heads, the levels' counts, the oldest
// confined op on its twin) with the queries answered from the queues on demand.
#include "scheduler/policy_view.h"

#include <vector>

#include "absl/synchronization/mutex.h"
#include "catch2/catch.hpp"
#include "tests/scheduler/scripted_driver.h"

namespace {

using gpuprio::scheduler::CompletionTracker;
using gpuprio::scheduler::DeviceLevels;
using gpuprio::scheduler::DeviceSnapshot;
using gpuprio::scheduler::DurationEstimator;
using gpuprio::scheduler::InFlight;
using gpuprio::scheduler::IsolationPlacement;
using gpuprio::scheduler::kNoPriority;
using gpuprio::scheduler::LevelAccounting;
using gpuprio::scheduler::Op;
using gpuprio::scheduler::OpView;
using gpuprio::scheduler::PolicyView;
using gpuprio::scheduler::PriorityLevels;
using gpuprio::scheduler::SchedulerOptions;
using gpuprio::scheduler::StreamQueue;
using gpuprio::scheduler::WholeDeviceWork;
using gpuprio_test::ScriptedDriver;

void Retired(void*, StreamQueue*, const InFlight&) {}

const int kKernel = 0;  // its address is the kernel's cost key

struct Fixture {
  Fixture()
      : accounting(0, options, &levels, &here, nullptr),
        tracker(ScriptedDriver(), &estimates, &record_mu, &Retired, nullptr),
        placement(0, ScriptedDriver(), 16, &record_mu),
        view(options, &levels, &accounting, &estimates, &tracker, &placement, &whole_device,
             nullptr) {}
  // `q` with ops of `priorities` queued, in order.
  std::vector<Op> Queue(StreamQueue* q, std::vector<int> priorities) {
    std::vector<Op> ops(priorities.size());
    for (size_t i = 0; i < ops.size(); ++i) ops[i].priority = priorities[i];
    for (Op& op : ops) q->pending.push_back(&op);
    return ops;
  }
  SchedulerOptions options;
  PriorityLevels levels;
  DeviceLevels here;
  LevelAccounting accounting;
  DurationEstimator estimates{1'000'000};
  absl::Mutex record_mu;
  CompletionTracker tracker;
  IsolationPlacement placement;
  WholeDeviceWork whole_device;
  PolicyView view;
};

TEST_CASE("PolicyView: the op at a stream's head") {
  Fixture t;
  Op op;
  op.priority = 3;
  op.cost_key = &kKernel;
  op.cost_hint_ns = 5000;
  OpView v = t.view.View(op, /*inherited=*/false, /*now_ns=*/1000);
  CHECK(v.priority == 3);
  CHECK(v.estimate_ns == 5000);  // no history: the hint
  CHECK(v.held_ns == 0);
  CHECK_FALSE(v.inherited);
  CHECK_FALSE(v.home_only);
  CHECK(v.confinable);

  op.held_since_ns = 400;
  op.home_only = true;
  t.placement.NoteUnconfinable(&kKernel);
  v = t.view.View(op, /*inherited=*/true, 1000);
  CHECK(v.held_ns == 600);
  CHECK(v.inherited);
  CHECK(v.home_only);
  CHECK_FALSE(v.confinable);
}

TEST_CASE("PolicyView: the device as one stream's head sees it") {
  Fixture t;
  StreamQueue mine;
  StreamQueue other;
  StreamQueue lower;
  const std::vector<Op> my_ops = t.Queue(&mine, {1, 4, 2});
  const std::vector<Op> other_ops = t.Queue(&other, {6});
  const std::vector<Op> lower_ops = t.Queue(&lower, {-2});
  const std::vector<StreamQueue*> active = {&mine, &other, &lower};
  t.levels.NoteSubmit(6, 1'000);
  t.accounting.AdjustPending(1, +3, 3000);
  t.accounting.AdjustInFlight(-2, +1, 700);
  // Two ops in flight on `mine`, the second confined to its twin.
  mine.in_flight.push_back({1, 300, nullptr, 10, false, nullptr, false});
  mine.in_flight.push_back({1, 800, nullptr, 20, false, nullptr, /*confined=*/true});
  mine.confined_in_flight_ops = 1;
  mine.confined_in_flight_ns = 800;
  t.tracker.Track(&mine);

  const PolicyView::Queries queries(&t.view, &mine, 2'000);
  const DeviceSnapshot d = t.view.Snapshot(mine, 1, active, 2'000, &queries);
  CHECK(d.now_ns == 2'000);
  // Level 6 submitted (in this process) but has had no work on this device: it raises neither
  // ceiling here (rule 2), and rule 4 looks at levels 1 and -2 only, which have; level 1 is the
  // op's own.
  CHECK(d.local_ceiling == 0);
  CHECK(d.local_above_op == 1);
  CHECK(d.local_above_op_here == 1);
  CHECK(d.local_max_seen_here == 1);
  CHECK(d.highest_other_head == 6);  // its own head does not count
  CHECK(d.levels.size() == 2);
  CHECK_FALSE(d.coordinated);
  CHECK(d.peers.highest_active == kNoPriority);
  CHECK(d.local_whole_device == kNoPriority);
  CHECK(d.confined_in_flight_ops == 1);
  CHECK(d.confined_in_flight_ns == 800);
  CHECK(d.oldest_confined_issue_ns == 20);
  CHECK(d.oldest_confined_estimate_ns == 800);
  REQUIRE(d.queries == &queries);

  // Behind `mine`'s head of 1 waits an op of 4.
  CHECK(d.queries->MoreImportantBehind(1));
  CHECK(d.queries->MoreImportantBehind(3));
  CHECK_FALSE(d.queries->MoreImportantBehind(4));
  // Only each stream's oldest op in flight counts as running.
  CHECK(d.queries->RunningBelowNs(6) == 300);
  CHECK(d.queries->RunningBelowNs(1) == 0);
  CHECK_FALSE(d.queries->SharesSmsWithPeers());  // no MPS on the scripted driver

  // The lowest stream sees both others' heads; nothing of it is confined.
  const PolicyView::Queries lower_queries(&t.view, &lower, 2'000);
  const DeviceSnapshot l = t.view.Snapshot(lower, -2, active, 2'000, &lower_queries);
  CHECK(l.highest_other_head == 6);
  CHECK(l.oldest_confined_issue_ns == 0);
  CHECK(l.confined_in_flight_ops == 0);

  // Once level 6 has work here, it is the ceiling on this device for both rules.
  t.accounting.AdjustPending(6, +1, 1000);
  const DeviceSnapshot busy = t.view.Snapshot(mine, 1, active, 2'000, &queries);
  CHECK(busy.local_ceiling == 6);
  CHECK(busy.local_above_op == 6);
  CHECK(busy.local_above_op_here == 6);
  CHECK(busy.local_max_seen_here == 6);
}

TEST_CASE("PolicyView: a level's whole-device work shows within the window") {
  Fixture t;
  t.options.ceiling_window_ns = 500'000'000;  // the view copied the options: only the notes'
  StreamQueue q;
  const std::vector<Op> ops = t.Queue(&q, {-1});
  const std::vector<StreamQueue*> active = {&q};
  const PolicyView::Queries queries(&t.view, &q, 0);
  constexpr int64_t kT = 10'000'000'000;
  t.whole_device.Note(2, kT, 500'000'000);
  t.whole_device.Note(1, kT + 1'000, 500'000'000);  // a lower level does not replace it
  CHECK(t.view.Snapshot(q, -1, active, kT + 2'000, &queries).local_whole_device == 2);
  // The view's window is the options' ceiling window (0.5 s by default).
  const int64_t late = kT + static_cast<int64_t>(SchedulerOptions().ceiling_window_ns) + 1'000'000;
  CHECK(t.view.Snapshot(q, -1, active, late, &queries).local_whole_device == kNoPriority);
  // Once the higher stamp is older than the window, a lower level's note replaces it.
  t.whole_device.Note(1, late, 500'000'000);
  CHECK(t.view.Snapshot(q, -1, active, late, &queries).local_whole_device == 1);
}

}  // namespace
