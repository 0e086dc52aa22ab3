// LevelAccounting without a dispatcher: levels created on first use and kept, pending and
// in-flight work summed per level with the shared counters in step, the ceiling and the budget's
// sums below it, and the queue state reported to an observer that wants timings.
#include "scheduler/level_accounting.h"

#include <cstdint>
#include <vector>

#include "catch2/catch.hpp"
#include "scheduler/base/clock.h"

namespace {

using gpuprio::scheduler::DeviceLevels;
using gpuprio::scheduler::InFlight;
using gpuprio::scheduler::LevelAccounting;
using gpuprio::scheduler::LevelLoad;
using gpuprio::scheduler::Op;
using gpuprio::scheduler::OpObserver;
using gpuprio::scheduler::PriorityLevels;
using gpuprio::scheduler::SchedulerOptions;
using gpuprio::scheduler::StreamQueue;

struct QueueState {
  int device;
  int priority;
  int64_t pending;
  uint64_t budget_in_use_ns;
};

class RecordingObserver : public OpObserver {
 public:
  explicit RecordingObserver(bool wants_timings) : wants_timings_(wants_timings) {}
  bool WantsTimings() const override { return wants_timings_; }
  void OnSubmit(Op&) override {}
  void OnCallerIssue(const char*, int, CUstream, int64_t, int64_t) override {}
  void OnDispatcherStart(int) override {}
  void OnIssueBegin(const Op&) override {}
  void OnIssueEnd(const Op&, CUresult) override {}
  void OnQueueState(int device, int priority, int64_t pending, uint64_t in_use) override {
    states.push_back({device, priority, pending, in_use});
  }
  std::vector<QueueState> states;

 private:
  const bool wants_timings_;
};

const LevelLoad* Find(const LevelAccounting& a, int priority) {
  for (const LevelLoad& l : a.levels()) {
    if (l.priority == priority) return &l;
  }
  return nullptr;
}

TEST_CASE("LevelAccounting: per-level work, with the shared counters in step") {
  PriorityLevels levels;
  DeviceLevels here;
  LevelAccounting a(0, SchedulerOptions(), &levels, &here, nullptr);
  CHECK(a.levels().empty());

  a.AdjustPending(5, +2, 3000);
  a.AdjustInFlight(-3, +1, 700);
  REQUIRE(a.levels().size() == 2);
  const LevelLoad* high = Find(a, 5);
  REQUIRE(high != nullptr);
  CHECK(high->pending == 2);
  CHECK(high->pending_ns == 3000);
  CHECK(high->in_flight_ops == 0);
  CHECK(high->last_busy_ns > 0);
  const LevelLoad* low = Find(a, -3);
  REQUIRE(low != nullptr);
  CHECK(low->pending == 0);
  CHECK(low->in_flight_ops == 1);
  CHECK(low->in_flight_ns == 700);
  CHECK(levels.At(-3).in_flight_ops.load() == 1);
  CHECK(levels.At(-3).in_flight_estimated_ns.load() == 700);
  // The device's levels are stamped with that work.
  CHECK(here.MaxSeen() == 5);
  CHECK(here.WorkWithin(5, high->last_busy_ns, 0));
  CHECK(here.WorkWithin(-3, low->last_busy_ns, 0));
  CHECK_FALSE(here.WorkWithin(4, high->last_busy_ns, 1'000'000'000));
  CHECK(here.InFlight(-3));
  CHECK_FALSE(here.InFlight(5));

  // The queued ops go in flight, then complete: the level stays listed, empty.
  a.AdjustPending(5, -2, -3000);
  a.AdjustInFlight(5, +2, 3000);
  a.AdjustInFlight(5, -2, -3000);
  REQUIRE(a.levels().size() == 2);
  high = Find(a, 5);
  CHECK(high->pending == 0);
  CHECK(high->pending_ns == 0);
  CHECK(high->in_flight_ops == 0);
  CHECK(high->in_flight_ns == 0);
  CHECK(levels.At(5).in_flight_ops.load() == 0);
  CHECK(levels.At(5).in_flight_estimated_ns.load() == 0);
}

TEST_CASE("LevelAccounting: the ceiling and the budget in use below it") {
  PriorityLevels levels;
  DeviceLevels here;
  SchedulerOptions options;
  options.unbudgeted_priority = 0;
  options.ceiling_window_ns = 1'000'000'000;
  LevelAccounting a(0, options, &levels, &here, nullptr);
  const int64_t now = gpuprio::base::SteadyNowNs();
  CHECK(a.Ceiling(now) == 0);  // nothing submitted: the unbudgeted level
  levels.NoteSubmit(7, now);
  here.NoteWork(7, now);
  CHECK(a.Ceiling(now) == 7);
  CHECK(a.Ceiling(now, /*floor=*/9) == 9);
  CHECK(a.Ceiling(now + 2'000'000'000) == 0);  // past the window

  a.AdjustInFlight(7, +1, 100);
  a.AdjustInFlight(2, +1, 200);
  a.AdjustInFlight(-4, +2, 300);
  CHECK(a.BelowCeilingInFlightNs(7) == 500);
  CHECK(a.BelowCeilingInFlightNs(2) == 300);
  CHECK(a.BelowCeilingInFlightNs(-4) == 0);
}

TEST_CASE("LevelAccounting: the ceiling is each device's own") {
  // Level 7 submits (its process-wide stamp), but has work on device 0 only: device 1's ceiling
  // stays the unbudgeted level until level 7 has work there too.
  PriorityLevels levels;
  DeviceLevels here[2];
  SchedulerOptions options;
  options.unbudgeted_priority = 0;
  options.ceiling_window_ns = 1'000'000'000;
  LevelAccounting gpu0(0, options, &levels, &here[0], nullptr);
  LevelAccounting gpu1(1, options, &levels, &here[1], nullptr);
  const int64_t now = gpuprio::base::SteadyNowNs();
  levels.NoteSubmit(7, now);
  gpu0.AdjustPending(7, +1, 100);
  CHECK(gpu0.Ceiling(now) == 7);
  CHECK(gpu1.Ceiling(now) == 0);
  CHECK(gpu1.Ceiling(now, /*floor=*/-3) == -3);  // the op's own level: nothing above it here
  // A level that has not submitted within the window raises the ceiling only while it has work
  // in flight here (a kernel issued long ago, still running).
  gpu1.AdjustInFlight(5, +1, 100);
  CHECK(gpu1.Ceiling(now) == 5);
  gpu1.AdjustInFlight(5, -1, -100);
  CHECK(gpu1.Ceiling(now) == 0);
  // Once level 7 has work on device 1 too, both devices are budgeted below it.
  gpu1.AdjustPending(7, +1, 100);
  CHECK(gpu1.Ceiling(now) == 7);
  // Queued work counts however long ago it moved, as long as its level submits; work that left
  // device 0 counts only within the window.
  const int64_t later = now + 2'000'000'000;
  levels.NoteSubmit(7, later);
  CHECK(gpu0.Ceiling(later) == 7);  // still queued
  gpu1.AdjustPending(7, -1, -100);  // stamped now, long before `later`
  CHECK(gpu1.Ceiling(later) == 0);
  // Work in flight counts however long it runs, and whether or not its level still submits: a
  // kernel issued long before `much_later` and still running keeps the ceiling, here and in what
  // the fast path reads.
  gpu1.AdjustInFlight(7, +1, 100);
  const int64_t much_later = later + 2'000'000'000;
  CHECK(gpu1.Ceiling(much_later) == 7);
  CHECK(here[1].Ceiling(levels, 0, much_later, options.ceiling_window_ns) == 7);
  gpu1.AdjustInFlight(7, -1, -100);
  CHECK(gpu1.Ceiling(much_later) == 0);
  CHECK(here[1].Ceiling(levels, 0, much_later, options.ceiling_window_ns) == 0);
}

TEST_CASE("LevelAccounting: the running ops below the ceiling are each stream's oldest") {
  StreamQueue idle;
  StreamQueue busy;
  busy.in_flight.push_back({1, 400, nullptr, 0, false, nullptr, false});
  busy.in_flight.push_back({1, 900, nullptr, 0, false, nullptr, false});
  StreamQueue confined;
  confined.in_flight.push_back({-2, 50, nullptr, 0, false, nullptr, /*confined=*/true});
  StreamQueue above;
  above.in_flight.push_back({8, 1000, nullptr, 0, false, nullptr, false});
  const std::vector<StreamQueue*> tracked = {&idle, &busy, &confined, &above};
  CHECK(LevelAccounting::BelowCeilingRunningNs(tracked, 8) == 450);
  CHECK(LevelAccounting::BelowCeilingRunningNs(tracked, 1) == 50);
  CHECK(LevelAccounting::BelowCeilingRunningNs({}, 8) == 0);
}

TEST_CASE("LevelAccounting: queue changes reach an observer only if it wants timings") {
  PriorityLevels levels;
  SchedulerOptions options;
  options.unbudgeted_priority = 10;  // everything below is budgeted
  RecordingObserver quiet(/*wants_timings=*/false);
  DeviceLevels here;
  LevelAccounting without(3, options, &levels, &here, &quiet);
  without.AdjustPending(1, +1, 10);
  CHECK(quiet.states.empty());

  RecordingObserver observer(/*wants_timings=*/true);
  LevelAccounting a(3, options, &levels, &here, &observer);
  a.AdjustInFlight(2, +1, 250);
  CHECK(observer.states.empty());  // in-flight changes are not queue changes
  a.AdjustPending(1, +3, 30);
  a.AdjustPending(1, -1, -10);
  REQUIRE(observer.states.size() == 2);
  CHECK(observer.states[0].device == 3);
  CHECK(observer.states[0].priority == 1);
  CHECK(observer.states[0].pending == 3);
  CHECK(observer.states[0].budget_in_use_ns == 250);
  CHECK(observer.states[1].pending == 2);
}

}  // namespace
