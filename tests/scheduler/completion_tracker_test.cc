// CompletionTracker against scripted driver functions, with no dispatcher thread: marks recorded
// behind a stream's work, polled in order while the scripted GPU progresses or not, the entries
// they cover retired (and handed to the owner), a single op's mark teaching its duration, and
// work whose end cannot be observed (a destroyed stream) retired at once.
#include "scheduler/completion_tracker.h"

#include <cstdint>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "catch2/catch.hpp"
#include "scheduler/base/clock.h"
#include "tests/scheduler/scripted_driver.h"

namespace {

using gpuprio::scheduler::CompletionTracker;
using gpuprio::scheduler::DurationEstimator;
using gpuprio::scheduler::InFlight;
using gpuprio::scheduler::StreamQueue;
using gpuprio::scheduler::StreamState;
using gpuprio_test::g_elapsed_ms;
using gpuprio_test::g_event_records;
using gpuprio_test::g_gpu_progresses;
using gpuprio_test::ScriptedDriver;

std::vector<int> g_retired;  // the priorities of the retired entries, in order

void Retired(void*, StreamQueue*, const InFlight& f) { g_retired.push_back(f.priority); }

const int kKernel = 0;  // its address is the kernel's cost key

struct Fixture {
  Fixture() : tracker(ScriptedDriver(), &estimates, &record_mu, &Retired, nullptr) {
    g_retired.clear();
    g_gpu_progresses = false;
    state.stream = reinterpret_cast<CUstream>(0x301);
    q.state = &state;
  }
  ~Fixture() { g_gpu_progresses = true; }
  void Issue(int priority, bool alone = false, CUevent start = nullptr) {
    q.in_flight.push_back({priority, 1000, &kKernel, 0, false, start, false, alone});
    tracker.Track(&q);
  }
  DurationEstimator estimates{1'000'000};
  absl::Mutex record_mu;
  CompletionTracker tracker;
  StreamState state;
  StreamQueue q;
};

TEST_CASE("CompletionTracker: a mark covers the work before it and retires it once passed") {
  Fixture t;
  t.Issue(1);
  t.Issue(2);
  t.tracker.Track(&t.q);  // listed once
  REQUIRE(t.tracker.tracked().size() == 1);
  const int records = g_event_records.load();
  t.tracker.Mark(&t.q);
  CHECK(g_event_records.load() == records + 1);
  REQUIRE(t.q.marks.size() == 1);
  CHECK(t.q.marks.front().covers == 2);
  CHECK_FALSE(t.q.marks.front().single_op);
  CHECK(t.tracker.marks() == 1);
  t.tracker.Mark(&t.q);  // nothing new to cover: no second record
  CHECK(g_event_records.load() == records + 1);

  t.Issue(3);
  t.tracker.Mark(&t.q);
  REQUIRE(t.q.marks.size() == 2);
  CHECK(t.q.marks.back().covers == 3);
  CHECK(t.q.marks.back().single_op);

  CHECK(t.tracker.Poll() == 0);  // the GPU has not reached the first mark
  CHECK(t.tracker.mark_queries() == 1);
  CHECK(g_retired.empty());
  CHECK(t.q.in_flight.size() == 3);

  g_gpu_progresses = true;
  CHECK(t.tracker.Poll() == 2);
  CHECK(g_retired == std::vector<int>{1, 2, 3});
  CHECK(t.q.in_flight.empty());
  CHECK(t.q.marks.empty());
  CHECK(t.q.last_completed != nullptr);  // kept for the next back-to-back measurement
  CHECK(t.tracker.tracked().empty());
  CHECK_FALSE(t.q.tracked);
}

TEST_CASE("CompletionTracker: a measured op's mark teaches its duration") {
  Fixture t;
  CUevent start = t.tracker.TakeEvent(&t.q);
  REQUIRE(start != nullptr);
  t.Issue(1, /*alone=*/true, start);
  t.tracker.Mark(&t.q);
  g_elapsed_ms = 0.25f;
  g_gpu_progresses = true;
  CHECK_FALSE(t.estimates.Knows(&kKernel));
  CHECK(t.tracker.Poll() == 1);
  CHECK(t.estimates.Knows(&kKernel));
  CHECK(t.estimates.Estimate(&kKernel, 0) == 250'000);
  // The start event went back to the pool.
  CHECK(t.tracker.TakeEvent(&t.q) == start);
}

TEST_CASE("CompletionTracker: an op alone in flight bounds an over-estimate from above") {
  Fixture t;
  t.estimates.Observe(&kKernel, 50'000'000);  // measured once at 50 ms (a lazy module load)
  for (int i = 0; i < 4; ++i) {
    // Issued with nothing of its stream in flight, no start event: its host time from issue to
    // its observed end (well under 50 ms) may only lower the estimate.
    t.q.in_flight.push_back({-1, 50'000'000, &kKernel, gpuprio::base::SteadyNowNs(), false,
                             nullptr, false, /*alone=*/true});
    t.tracker.Track(&t.q);
    t.tracker.Mark(&t.q);
    g_gpu_progresses = true;
    REQUIRE(t.tracker.Poll() == 1);
    g_gpu_progresses = false;
  }
  // 50 ms x 0.75^4: about 16 ms.
  CHECK(t.estimates.Estimate(&kKernel, 0) < 20'000'000);
}

TEST_CASE("CompletionTracker: a destroyed stream's work is retired unmarked") {
  Fixture t;
  t.Issue(1);
  t.Issue(2);
  t.state.destroyed = true;
  const int records = g_event_records.load();
  t.tracker.Mark(&t.q);
  CHECK(g_event_records.load() == records);  // nothing recorded on it
  CHECK(g_retired == std::vector<int>{1, 2});
  CHECK(t.q.marks.empty());
  CHECK(t.q.in_flight.empty());
  t.tracker.Untrack(&t.q);
  CHECK(t.tracker.tracked().empty());
  t.tracker.Untrack(&t.q);  // twice: nothing to do
}

TEST_CASE("CompletionTracker: retiring part of the work shifts the marks after it") {
  Fixture t;
  t.Issue(1);
  t.tracker.Mark(&t.q);
  t.Issue(2);
  t.Issue(3);
  t.tracker.Mark(&t.q);
  t.tracker.Retire(&t.q, 1);
  CHECK(g_retired == std::vector<int>{1});
  REQUIRE(t.q.marks.size() == 2);
  CHECK(t.q.marks[0].covers == 0);
  CHECK(t.q.marks[1].covers == 2);
}

}  // namespace
