// OpIssuer against scripted driver functions, with no dispatcher thread: an issued op counted in
// flight and in its level's statistics, a start event before an op whose cost is unknown, a
// failure kept on its stream, a confined op on the stream's twin and one the partition refused
// issued again at home, and the issue counts that wake other devices' dispatchers.
#include "scheduler/op_issuer.h"

#include <atomic>
#include <cstdint>

#include "absl/synchronization/mutex.h"
#include "catch2/catch.hpp"
#include "scheduler/op_pool.h"
#include "tests/scheduler/scripted_driver.h"

namespace {

using gpuprio::scheduler::CompletionTracker;
using gpuprio::scheduler::ContextLinks;
using gpuprio::scheduler::DeviceLevels;
using gpuprio::scheduler::DispatcherDirectory;
using gpuprio::scheduler::DriverFunctions;
using gpuprio::scheduler::DurationEstimator;
using gpuprio::scheduler::InFlight;
using gpuprio::scheduler::IsolationPlacement;
using gpuprio::scheduler::kPriorityUnset;
using gpuprio::scheduler::LevelAccounting;
using gpuprio::scheduler::Op;
using gpuprio::scheduler::OpIssuer;
using gpuprio::scheduler::OpPool;
using gpuprio::scheduler::PriorityLevels;
using gpuprio::scheduler::SchedulerOptions;
using gpuprio::scheduler::StreamQueue;
using gpuprio::scheduler::StreamState;
using gpuprio_test::g_event_records;
using gpuprio_test::kScriptedContext;
using gpuprio_test::ScriptedDriver;
using gpuprio_test::ScriptedDriverWithGreenContexts;

// What the scripted op's call did: how often it ran, the stream it ran on, and what it returns
// (on a twin, a refusal can be scripted apart).
int g_calls = 0;
CUstream g_issued_on = nullptr;
CUresult g_result = CUDA_SUCCESS;
CUresult g_result_on_twin = CUDA_SUCCESS;

const CUstream kOwnStream = reinterpret_cast<CUstream>(0x301);

CUresult ScriptedCall(Op& op) {
  ++g_calls;
  g_issued_on = op.IssueStream(kOwnStream);
  return op.confined_stream != nullptr ? g_result_on_twin : g_result;
}

void Retired(void*, StreamQueue*, const InFlight&) {}

const int kKernel = 0;  // its address is the kernel's cost key

struct Fixture {
  explicit Fixture(const DriverFunctions& driver = ScriptedDriver())
      : accounting(0, options, &levels, &here, nullptr),
        tracker(driver, &estimates, &record_mu, &Retired, nullptr),
        placement(0, driver, 16, &record_mu),
        issuer(0, driver, options, &levels, nullptr, nullptr, nullptr, &queued, &estimates,
               &tracker, &placement, &accounting) {
    g_calls = 0;
    g_issued_on = nullptr;
    g_result = CUDA_SUCCESS;
    g_result_on_twin = CUDA_SUCCESS;
    state.context = reinterpret_cast<CUcontext>(kScriptedContext);
    state.stream = kOwnStream;
    q.state = &state;
    q.links = &links;
    links.blocking.push_back(&q);
  }

  // An op as the dispatcher holds it once submitted: counted queued, its stream's count raised.
  Op* Submitted(int priority, const void* cost_key = nullptr) {
    Op* op = OpPool::ForThisThread().Take();
    op->issue = &ScriptedCall;
    op->name = "cuScripted";
    op->stream = &state;
    op->priority = priority;
    op->cost_key = cost_key;
    op->submit_ns = 1;
    queued.fetch_add(1);
    levels.At(priority).ops_unissued.fetch_add(1);
    state.submitted.fetch_add(1);
    return op;
  }

  SchedulerOptions options;
  PriorityLevels levels;
  DeviceLevels here;
  LevelAccounting accounting;
  DurationEstimator estimates{1'000'000};
  absl::Mutex record_mu;
  CompletionTracker tracker;
  IsolationPlacement placement;
  std::atomic<int64_t> queued{0};
  OpIssuer issuer;
  ContextLinks links;
  StreamState state;
  StreamQueue q;
};

TEST_CASE("OpIssuer: an issued op is in flight, counted, and counted issued once it leaves") {
  Fixture t;
  Op* op = t.Submitted(4);
  std::atomic<int> waits{1};
  op->issued_counter = &waits;
  t.issuer.Issue(&t.q, op, CUDA_SUCCESS, /*budget_ns=*/0, /*confine=*/false);
  CHECK(g_calls == 1);
  CHECK(g_issued_on == kOwnStream);
  CHECK(op->confined_stream == nullptr);
  REQUIRE(t.q.in_flight.size() == 1);
  CHECK(t.q.in_flight.front().priority == 4);
  CHECK(t.q.in_flight.front().estimate_ns == 1'000'000);  // the default estimate
  CHECK(t.q.in_flight.front().start == nullptr);          // no cost key: nothing to learn
  CHECK(t.q.in_flight.front().alone);
  CHECK(t.tracker.tracked().size() == 1);
  CHECK(t.q.ops_issued == 1);  // a blocking stream: the legacy stream's order counts it
  CHECK(t.levels.At(4).ops_issued.load() == 1);
  CHECK(t.levels.At(4).queue_delay_ns_sum.load() > 0);
  CHECK(t.levels.At(4).ops_held.load() == 0);
  CHECK(t.levels.At(4).in_flight_ops.load() == 1);
  CHECK(t.accounting.BelowCeilingInFlightNs(5) == 1'000'000);
  CHECK(t.state.deferred_error.load() == CUDA_SUCCESS);

  CHECK(t.state.issued.load() == 0);  // not counted until it leaves
  t.issuer.CountIssued(op);
  CHECK(t.state.issued.load() == 1);
  CHECK(t.queued.load() == 0);
  CHECK(t.levels.At(4).ops_unissued.load() == 0);
  CHECK(waits.load() == 0);
}

TEST_CASE("OpIssuer: an op whose cost is unknown is measured between its own events") {
  Fixture t;
  Op* held = t.Submitted(1);
  held->held_since_ns = 1;
  t.issuer.Issue(&t.q, held, CUDA_SUCCESS, 0, false);
  t.issuer.CountIssued(held);
  CHECK(t.levels.At(1).ops_held.load() == 1);
  CHECK(t.q.marks.empty());  // unbudgeted work is marked every 32 ops

  const int records = g_event_records.load();
  Op* op = t.Submitted(1, &kKernel);
  t.issuer.Issue(&t.q, op, CUDA_SUCCESS, 0, false);
  t.issuer.CountIssued(op);
  // A mark behind the earlier op, the start event, and the op's own mark.
  CHECK(g_event_records.load() == records + 3);
  REQUIRE(t.q.in_flight.size() == 2);
  CHECK(t.q.in_flight.back().start != nullptr);
  REQUIRE(t.q.marks.size() == 2);
  CHECK(t.q.marks.back().single_op);
  CHECK(t.q.marks.back().covers == 2);
}

TEST_CASE("OpIssuer: a failed op is kept on its stream and not in flight") {
  Fixture t;
  g_result = CUDA_ERROR_INVALID_VALUE;
  Op* op = t.Submitted(2, &kKernel);
  t.issuer.Issue(&t.q, op, CUDA_SUCCESS, 0, false);
  t.issuer.CountIssued(op);
  CHECK(g_calls == 1);
  CHECK(t.state.deferred_error.load() == CUDA_ERROR_INVALID_VALUE);
  CHECK(t.q.in_flight.empty());
  CHECK(t.q.free_events.size() == 1);  // the start event goes back to the pool
  CHECK(t.levels.At(2).in_flight_ops.load() == 0);
  CHECK(t.state.issued.load() == 1);  // counted issued all the same

  // The first error stays.
  g_result = CUDA_ERROR_OUT_OF_MEMORY;
  Op* later = t.Submitted(2);
  t.issuer.Issue(&t.q, later, CUDA_SUCCESS, 0, false);
  t.issuer.CountIssued(later);
  CHECK(t.state.deferred_error.load() == CUDA_ERROR_INVALID_VALUE);
}

TEST_CASE("OpIssuer: an op whose context could not be made current fails with that error") {
  Fixture t;
  Op* op = t.Submitted(2);
  t.issuer.Issue(&t.q, op, CUDA_ERROR_INVALID_CONTEXT, 0, /*confine=*/true);
  t.issuer.CountIssued(op);
  CHECK(g_calls == 0);
  CHECK(op->confined_stream == nullptr);  // not moved to a twin either
  CHECK(t.state.deferred_error.load() == CUDA_ERROR_INVALID_CONTEXT);
  CHECK(t.q.in_flight.empty());
}

TEST_CASE("OpIssuer: confined work runs on the twin; a refused call runs again at home") {
  Fixture t(ScriptedDriverWithGreenContexts());
  REQUIRE(t.placement.EnsurePartition());
  Op* op = t.Submitted(-1, &kKernel);
  t.issuer.Issue(&t.q, op, CUDA_SUCCESS, 0, /*confine=*/true);
  t.issuer.CountIssued(op);
  CHECK(g_calls == 1);
  CHECK(g_issued_on != kOwnStream);
  CHECK(g_issued_on == t.q.twin);
  CHECK(t.levels.At(-1).ops_confined.load() == 1);
  CHECK(t.q.confined_in_flight_ops == 1);
  REQUIRE(t.q.in_flight.size() == 1);
  CHECK(t.q.in_flight.front().confined);

  // The partition refuses the next call (CUDA error 912 on an H100): it runs on the stream's own
  // stream after the twin's work, and its function is never confined again.
  g_result_on_twin = static_cast<CUresult>(912);
  Op* refused = t.Submitted(-1, &kKernel);
  t.issuer.Issue(&t.q, refused, CUDA_SUCCESS, 0, /*confine=*/true);
  t.issuer.CountIssued(refused);
  CHECK(g_calls == 3);
  CHECK(g_issued_on == kOwnStream);
  CHECK(t.state.deferred_error.load() == CUDA_SUCCESS);
  CHECK_FALSE(t.placement.Confinable(&kKernel));
  CHECK(t.q.confined_in_flight_ops == 1);
  REQUIRE(t.q.in_flight.size() == 2);
  CHECK_FALSE(t.q.in_flight.back().confined);
  CHECK(t.q.in_flight.back().start == nullptr);  // recorded on the twin: not kept
}

TEST_CASE("OpIssuer: a home-only marker brings its stream home and issues nothing") {
  Fixture t(ScriptedDriverWithGreenContexts());
  REQUIRE(t.placement.EnsurePartition());
  Op* confined = t.Submitted(-1);
  t.issuer.Issue(&t.q, confined, CUDA_SUCCESS, 0, /*confine=*/true);
  t.issuer.CountIssued(confined);
  REQUIRE(t.q.away);
  Op* home = t.Submitted(-1);
  home->home_only = true;
  t.issuer.Issue(&t.q, home, CUDA_SUCCESS, 0, false);
  t.issuer.CountIssued(home);
  CHECK(g_calls == 1);
  CHECK_FALSE(t.q.away);
  CHECK(t.levels.At(-1).ops_issued.load() == 1);
  CHECK(t.q.in_flight.size() == 1);
  CHECK(t.state.issued.load() == 2);
}

TEST_CASE("OpIssuer: waits across devices are asked for and cleared once met") {
  Fixture t;
  // Another device's stream has issued 5 ops; an op here waits for its third.
  StreamState other;
  other.issued.store(5);
  Op* op = t.Submitted(3);
  op->depends_on = &other;
  op->depends_on_count = 3;
  CHECK_FALSE(t.issuer.AskOtherDevice(*op, 6));  // already issued: nothing to wait for
  CHECK(other.awaited_count.load() == 3);
  CHECK(other.awaited_priority.load() == 6);
  CHECK(other.awaited_by.load() == DispatcherDirectory::Bit(0));
  op->depends_on = nullptr;

  // Device 2 waits for this stream's second op: counting the first keeps the request, counting
  // the second clears it (no directory here: nobody to wake).
  t.state.awaited_count.store(2);
  t.state.awaited_priority.store(6);
  t.state.awaited_by.store(DispatcherDirectory::Bit(2));
  t.issuer.Issue(&t.q, op, CUDA_SUCCESS, 0, false);
  t.issuer.CountIssued(op);
  CHECK(t.state.awaited_by.load() == DispatcherDirectory::Bit(2));
  Op* second = t.Submitted(3);
  t.issuer.Issue(&t.q, second, CUDA_SUCCESS, 0, false);
  t.issuer.CountIssued(second);
  CHECK(t.state.awaited_by.load() == 0);
  CHECK(t.state.awaited_priority.load() == kPriorityUnset);
}

}  // namespace
