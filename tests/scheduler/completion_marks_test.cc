// When issued work gets a completion mark, and what a passed mark teaches the estimates
// (scheduler/completion_marks.h): table-driven, no driver, no clock.
#include "scheduler/completion_marks.h"

#include <optional>

#include "catch2/catch.hpp"

namespace gpuprio::scheduler {
namespace {

SchedulerOptions Options() {
  SchedulerOptions o;
  o.tuning.ops_per_completion_event = 32;
  o.tuning.budgeted_ops_per_completion_event = 8;
  o.tuning.held_mark_interval_ns = 200'000;
  return o;
}

TEST_CASE("MarkAfterIssue: measured ops alone, budgeted work often, the rest every 32 ops",
          "[marks]") {
  const SchedulerOptions o = Options();
  struct Row {
    int ops_since_mark;
    bool measured;
    uint64_t budget_ns;
    uint64_t estimate_ns;
    bool mark;
  };
  const Row rows[] = {
      {1, true, 0, 0, true},                  // measured: its mark covers it alone
      {31, false, 0, 1'000'000, false},       // unbudgeted
      {32, false, 0, 0, true},                // every 32 ops
      {7, false, 2'000'000, 100'000, false},  // budgeted, small
      {8, false, 2'000'000, 100'000, true},   // budgeted: every 8 ops
      {1, false, 2'000'000, 250'000, true},   // an eighth of its budget: alone
      {1, false, 2'000'000, 249'999, false},
  };
  for (const Row& r : rows) {
    INFO("ops " << r.ops_since_mark << " measured " << r.measured << " budget " << r.budget_ns
                << " estimate " << r.estimate_ns);
    CHECK(MarkAfterIssue(r.ops_since_mark, r.measured, r.budget_ns, r.estimate_ns, o) == r.mark);
  }
}

TEST_CASE("MarkDueWhileHeld: only a client's own work waits for the interval", "[marks]") {
  const SchedulerOptions o = Options();
  // The dispatcher's own work: at once.
  CHECK(MarkDueWhileHeld(false, false, true, 0, o));
  // A client's direct work behind a pending mark: after the interval.
  CHECK_FALSE(MarkDueWhileHeld(true, false, true, 199'999, o));
  CHECK(MarkDueWhileHeld(true, false, true, 200'000, o));
  // No mark pending on the stream, or another process waits: at once.
  CHECK(MarkDueWhileHeld(true, false, false, 0, o));
  CHECK(MarkDueWhileHeld(true, true, true, 0, o));
}

TEST_CASE("DurationSample: a measurement, else an upper bound that only lowers", "[marks]") {
  CHECK(DurationSample(150'000, false, 0, 0) == std::optional<uint64_t>(150'000));
  CHECK(DurationSample(0, true, 5'000'000, 1'000'000) == std::optional<uint64_t>(0));
  // No measurement: an op alone in flight bounds its time from above.
  CHECK(DurationSample(-1, true, 400'000, 1'000'000) == std::optional<uint64_t>(400'000));
  CHECK(DurationSample(-1, true, 1'000'000, 1'000'000) == std::nullopt);  // would not lower it
  CHECK(DurationSample(-1, true, 0, 1'000'000) == std::nullopt);
  CHECK(DurationSample(-1, false, 400'000, 1'000'000) == std::nullopt);  // not alone: nothing
}

}  // namespace
}  // namespace gpuprio::scheduler
