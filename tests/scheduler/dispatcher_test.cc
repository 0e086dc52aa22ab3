// The Dispatcher in process, against scripted driver functions: how it stops when the GPU makes
// progress and when it makes none, that it hands destroyed streams back for reuse, that work
// below another process's level keeps the cross-process budget, how it measures ops, and how
// little a thread whose work is held back polls (no wake-up for work that cannot go first, marks
// behind direct work throttled, confined work's waits on its queue bound).
#include "scheduler/dispatcher.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "catch2/catch.hpp"
#include "scheduler/base/clock.h"
#include "scheduler/coordinator/gpu_coordinator.h"
#include "tests/test_directory.h"
#include "scheduler/coordinator/segment_name.h"
#include "scheduler/op_pool.h"
#include "tests/scheduler/scripted_driver.h"

namespace {

using gpuprio::scheduler::Dispatcher;
using gpuprio::scheduler::Op;
using gpuprio::scheduler::OpPool;
using gpuprio::scheduler::PriorityLevels;
using gpuprio::scheduler::SchedulerOptions;
using gpuprio::scheduler::StreamState;

using gpuprio_test::g_elapsed_ms;
using gpuprio_test::g_event_records;
using gpuprio_test::g_events_live;
using gpuprio_test::g_gpu_progresses;
using gpuprio_test::g_green_streams_created;
using gpuprio_test::ScriptedDriver;
using gpuprio_test::ScriptedDriverWithGreenContexts;

std::atomic<int> g_issued{0};

CUresult IssueKernel(Op&) {
  ++g_issued;
  return CUDA_SUCCESS;
}

const int kKernel = 0;  // its address is the kernel's cost key

void Submit(Dispatcher& d, StreamState& s, int priority, int count) {
  for (int i = 0; i < count; ++i) {
    Op* op = OpPool::ForThisThread().Take();
    op->issue = &IssueKernel;
    op->name = "kernel";
    op->stream = &s;
    op->priority = priority;
    op->cost_key = &kKernel;
    op->submit_ns = gpuprio::base::SteadyNowNs();
    d.Submit(op);
  }
}

void SubmitLow(Dispatcher& d, StreamState& s, int count) {
  Submit(d, s, /*priority=*/-1, count);  // below the ceiling: on the budget
}

// A created stream of the scripted context, handled by `d`.
void AttachStream(Dispatcher& d, StreamState& s) {
  s.context = reinterpret_cast<CUcontext>(gpuprio_test::kScriptedContext);
  s.stream = reinterpret_cast<CUstream>(0x2000);
  s.dispatcher = &d;
}

SchedulerOptions Options() {
  SchedulerOptions o;
  o.budget_ns = 1'000'000;
  o.default_estimate_ns = 1'000'000;  // an unmeasured kernel fills the budget alone
  o.stop_stall_timeout_ns = 200'000'000;
  return o;
}

TEST_CASE("Stopping at exit issues held work while the GPU progresses", "[dispatcher]") {
  g_gpu_progresses = true;
  g_issued = 0;
  PriorityLevels levels;
  Dispatcher d(0, ScriptedDriver(), Options(), &levels, nullptr);
  StreamState s;
  AttachStream(d, s);
  SubmitLow(d, s, 50);
  d.Stop(/*bounded=*/true);
  CHECK(g_issued.load() == 50);
  CHECK(s.issued.load() == 50);
}

TEST_CASE("Stopping at exit gives up on held work when the GPU completes nothing",
          "[dispatcher]") {
  g_gpu_progresses = false;
  g_issued = 0;
  PriorityLevels levels;
  Dispatcher d(0, ScriptedDriver(), Options(), &levels, nullptr);
  StreamState s;
  AttachStream(d, s);
  SubmitLow(d, s, 10);
  // The first kernel is admitted (one op is always admitted) and never completes, one more waits
  // behind it (nothing more important is about), the others are held by the budget. An
  // unbounded stop would wait forever.
  const auto begin = std::chrono::steady_clock::now();
  d.Stop(/*bounded=*/true);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  INFO("stop took " << seconds << " s");
  CHECK(g_issued.load() == 2);
  CHECK(s.issued.load() == 10);  // abandoned ops count as issued: no waiter is left behind
  CHECK(seconds < 30);           // liveness only; the bound itself is 0.2 s
  g_gpu_progresses = true;
}

TEST_CASE("A released stream's queue and events are freed and its state handed back",
          "[dispatcher]") {
  g_gpu_progresses = true;
  g_issued = 0;
  const int events_before = g_events_live.load();
  PriorityLevels levels;
  Dispatcher d(0, ScriptedDriver(), Options(), &levels, nullptr);
  StreamState s;
  AttachStream(d, s);
  SubmitLow(d, s, 20);
  d.WaitIssued(&s, 20);
  CHECK(g_events_live.load() > events_before);  // completion tracking created events
  d.ReleaseStream(&s);
  StreamState* recycled = nullptr;
  for (int i = 0; i < 5000 && recycled == nullptr; ++i) {
    recycled = d.TakeRecycledStream();
    if (recycled == nullptr) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  CHECK(recycled == &s);
  CHECK(g_events_live.load() == events_before);
  CHECK(s.issued.load() == 20);  // counts go on from where they were
  d.Stop();
}

// Issues `count` low ops on a GPU that completes nothing and returns how many the budget let
// through (the rest stay held until the bounded stop abandons them).
// `recent_level`, when set, is a level of this process that submitted work just before.
int AdmittedWhileNothingCompletes(const SchedulerOptions& options,
                                  std::unique_ptr<gpuprio::coordinator::GpuCoordinator> slot,
                                  int count, std::optional<int> recent_level = std::nullopt) {
  g_gpu_progresses = false;
  g_issued = 0;
  PriorityLevels levels;
  if (recent_level.has_value()) levels.NoteSubmit(*recent_level, gpuprio::base::SteadyNowNs());
  Dispatcher d(0, ScriptedDriver(), options, &levels, nullptr, std::move(slot));
  StreamState s;
  AttachStream(d, s);
  SubmitLow(d, s, count);
  // Admission stops at the budget; the wait ends once the count has been still for 100 ms.
  int seen = -1;
  for (int still_ms = 0; still_ms < 100;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const int now = g_issued.load();
    still_ms = now == seen ? still_ms + 10 : 0;
    seen = now;
  }
  d.Stop(/*bounded=*/true);
  g_gpu_progresses = true;
  return seen;
}

TEST_CASE("Work below another process's level keeps the smaller cross-process budget",
          "[dispatcher][coordinator]") {
  static constexpr uint8_t kUuid[16] = {'d', 'i', 's', 'p', 'a', 't', 'c', 'h'};
  const gpuprio_test::ScopedDirectory shm("dispatcher");  // removed with the segment
  gpuprio::coordinator::SegmentOptions segment;
  segment.shm_dir = shm.path();
  SchedulerOptions options = Options();
  options.budget_ns = 1'000'000;
  options.peer_budget_ns = 300'000;
  options.default_estimate_ns = 100'000;  // every op counts 0.1 ms
  options.coordinate = true;
  auto attach = [&](int priority) {
    auto c = gpuprio::coordinator::GpuCoordinator::Attach(segment, kUuid, priority);
    REQUIRE(c.ok());
    return *std::move(c);
  };
  // Alone on the GPU: the in-process budget, 1 ms = 10 ops queued behind the one running.
  CHECK(AdmittedWhileNothingCompletes(options, attach(-1), 30) == 11);
  // Another process submitted high work within the window (none active now): 0.3 ms = 3 ops.
  auto high = attach(1);
  high->NoteSubmit(1, gpuprio::base::SteadyNowNs());
  high->SetActive(gpuprio::coordinator::kNoPriority);
  CHECK(AdmittedWhileNothingCompletes(options, attach(-1), 30) == 3);
  // The smaller of the two budgets applies, and the op running counts (the other process is
  // about).
  options.peer_budget_ns = 5'000'000;
  CHECK(AdmittedWhileNothingCompletes(options, attach(-1), 30) == 10);
  high.reset();
}

// Whether g_event_records exceeds `records` within `timeout_ms`.
bool RecordedWithin(int records, int timeout_ms) {
  for (int i = 0; i < timeout_ms; ++i) {
    if (g_event_records.load() > records) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return g_event_records.load() > records;
}

TEST_CASE("Direct work wakes a parked dispatcher only from a long park or for a held process",
          "[dispatcher][coordinator]") {
  // A server's ops issued on the fast path, beside another process that holds nothing back
  // (under MPS its work runs confined): waking the dispatcher for each chain, to mark the work
  // and poll its end, only competes with the server's launches for the driver. The dispatcher
  // adopts a listing (one event record: its completion mark) when woken, or when its poll ends.
  static constexpr uint8_t kUuid[16] = {'w', 'a', 'k', 'e'};
  const gpuprio_test::ScopedDirectory shm("wake");  // removed with the segment
  gpuprio::coordinator::SegmentOptions segment;
  segment.shm_dir = shm.path();
  auto high = gpuprio::coordinator::GpuCoordinator::Attach(segment, kUuid, 1);
  auto low = gpuprio::coordinator::GpuCoordinator::Attach(segment, kUuid, -1);
  REQUIRE(high.ok());
  REQUIRE(low.ok());
  gpuprio::coordinator::GpuCoordinator* peer = low->get();
  g_gpu_progresses = false;  // the marks never complete: the level stays active
  SchedulerOptions options = Options();
  options.coordinate = true;
  options.peer_idle_poll_ns = 2'000'000'000;  // the poll never ends within the test
  PriorityLevels levels;
  auto d = std::make_unique<Dispatcher>(0, ScriptedDriver(), options, &levels, nullptr,
                                        *std::move(high));
  StreamState s, t;
  AttachStream(*d, s);
  AttachStream(*d, t);
  t.stream = reinterpret_cast<CUstream>(0x3000);
  auto issue_direct = [&](StreamState& stream) {
    d->PublishDirect(1);
    d->NoteDirect(&stream, 1, gpuprio::base::SteadyNowNs());
  };
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // parked: nothing active

  // From the long park (nothing of this process active): woken at once.
  int records = g_event_records.load();
  issue_direct(s);
  CHECK(RecordedWithin(records, 500));

  // Now parked on the (here endless) poll of that work; the peer holds nothing: not woken. (A
  // dispatcher that had not parked yet, on a loaded machine, adopts the listing in its round:
  // another try then, with the stream listed anew. Woken each time, no try would pass.)
  bool woken_every_time = true;
  for (int attempt = 0; attempt < 5 && woken_every_time; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    records = g_event_records.load();
    issue_direct(s);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    woken_every_time = g_event_records.load() != records;
  }
  CHECK_FALSE(woken_every_time);

  // The peer holds work back, perhaps for this level: woken at once.
  peer->SetHeld(true, gpuprio::base::SteadyNowNs());
  records = g_event_records.load();
  issue_direct(t);
  CHECK(RecordedWithin(records, 500));

  peer->SetHeld(false, gpuprio::base::SteadyNowNs());
  g_gpu_progresses = true;
  d->Stop(/*bounded=*/true);
  d.reset();
  low->reset();
}

TEST_CASE("Work on the budget only for its own level keeps one op behind the one running",
          "[dispatcher]") {
  // Ops as long as the budget (1 ms each, unmeasured: the default estimate). Held to one op in
  // flight, each would be issued only once the one before it was seen complete, and the GPU
  // would idle for the dispatcher's reaction every time.
  SchedulerOptions options = Options();
  CHECK(AdmittedWhileNothingCompletes(options, nullptr, 5) == 2);
  // A more important level of this process submitted within the window: the op running counts,
  // so an arrival waits for at most that op. (The rule's other rows -- a level between, the rule
  // switched off -- are issue_policy_test's, without time: this checks the wiring, the running
  // op's estimate from the streams in flight and the recent level from the level counters.)
  CHECK(AdmittedWhileNothingCompletes(options, nullptr, 5, /*recent_level=*/1) == 1);
}

// Waits until `issued` ops have been issued and the dispatcher has seen every low op complete.
bool WaitIssuedAndSeenComplete(PriorityLevels& levels, int issued) {
  for (int i = 0; i < 5000; ++i) {
    if (g_issued.load() == issued && levels.At(-1).in_flight_ops.load() == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

TEST_CASE("An op queued behind work that had already finished is not measured from it",
          "[dispatcher]") {
  // The scripted GPU finishes everything at once, so when the dispatcher issues an op behind
  // another whose completion it has not seen yet, the GPU was in fact idle in between: the time
  // from the previous mark (50 ms here) is no measure of the op.
  g_gpu_progresses = true;
  g_issued = 0;
  SchedulerOptions options = Options();
  options.budget_ns = 4'000'000;  // room for 3 ops of 1 ms; each is marked alone
  PriorityLevels levels;
  Dispatcher d(0, ScriptedDriver(), options, &levels, nullptr);
  StreamState s;
  AttachStream(d, s);
  g_elapsed_ms = 1.0f;
  SubmitLow(d, s, 1);  // unknown: measured between its own events, 1 ms
  CHECK(WaitIssuedAndSeenComplete(levels, 1));
  g_elapsed_ms = 50.0f;
  SubmitLow(d, s, 3);  // issued back to back behind marks that are already complete
  CHECK(WaitIssuedAndSeenComplete(levels, 4));
  g_gpu_progresses = false;
  SubmitLow(d, s, 1);
  for (int i = 0; i < 5000 && g_issued.load() < 5; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  CHECK(g_issued.load() == 5);
  // The estimate the last op was admitted with: the 1 ms measured exactly, or less (an op alone
  // in flight teaches an upper bound), never the 50 ms.
  CHECK(levels.At(-1).in_flight_estimated_ns.load() <= 1'000'000);
  d.Stop(/*bounded=*/true);
  g_gpu_progresses = true;
  g_elapsed_ms = 1.0f;
}

TEST_CASE("An over-estimate falls once ops alone in flight end sooner than it says",
          "[dispatcher]") {
  // The first op is measured exactly between its own events: 50 ms (say a lazy module load made
  // it slow). Each later op is alone in flight and done as soon as it is issued; no event pair
  // measures it, but the host time from its issue to its observed end bounds it from above.
  // Without that bound the estimate would stay at 50 ms for good: an op that fills the budget
  // (or a twin's queue bound) is always alone, so never measured back to back.
  g_gpu_progresses = true;
  g_issued = 0;
  SchedulerOptions options = Options();
  options.budget_ns = 100'000'000;
  PriorityLevels levels;
  Dispatcher d(0, ScriptedDriver(), options, &levels, nullptr);
  StreamState s;
  AttachStream(d, s);
  g_elapsed_ms = 50.0f;
  for (int i = 1; i <= 5; ++i) {
    SubmitLow(d, s, 1);
    CHECK(WaitIssuedAndSeenComplete(levels, i));
  }
  g_gpu_progresses = false;
  SubmitLow(d, s, 1);
  for (int i = 0; i < 5000 && g_issued.load() < 6; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(g_issued.load() == 6);
  // 50 ms x 0.75^4 after four upper bounds of well under a millisecond: about 16 ms.
  const uint64_t estimate = levels.At(-1).in_flight_estimated_ns.load();
  INFO("estimate " << estimate << " ns");
  CHECK(estimate < 20'000'000);
  d.Stop(/*bounded=*/true);
  g_gpu_progresses = true;
  g_elapsed_ms = 1.0f;
}

int64_t MsSince(std::chrono::steady_clock::time_point begin) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               begin)
      .count();
}

// Waits until a dispatcher held with nothing arriving begins a sleep of about `min_ms` or more:
// its held sleeps double, so one that begins at least `min_ms / 2` after the one before is that
// long (or options.max_held_sleep_ns). Each sleep is counted as it begins (Activity::sleeps).
bool WaitForLongHeldSleep(const Dispatcher& d, int64_t min_ms, int64_t timeout_ms) {
  const auto begin = std::chrono::steady_clock::now();
  uint64_t sleeps = d.activity().sleeps;
  auto last = begin;  // a sleep began here or before (the first interval is an under-estimate)
  while (MsSince(begin) < timeout_ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const uint64_t now_sleeps = d.activity().sleeps;
    if (now_sleeps == sleeps) continue;
    const auto now = std::chrono::steady_clock::now();
    const bool long_one = now - last >= std::chrono::milliseconds(min_ms / 2);
    sleeps = now_sleeps;
    last = now;
    if (long_one) return true;
  }
  return false;
}

TEST_CASE("A dispatcher held back is not woken by work that cannot go first, only by work that can",
          "[dispatcher]") {
  // A batch job submits while its earlier work is held by the budget: its new ops could not be
  // issued before the held one, so waking the dispatcher for each (a round of completion
  // polls, then the held spin and backoff again) only adds driver calls beside a server's own
  // launches. A more important op must still end the sleep at once.
  g_gpu_progresses = false;  // nothing completes: the budget holds the low work
  g_issued = 0;
  SchedulerOptions o = Options();
  o.max_held_sleep_ns = 2'000'000'000;  // timer wake-ups are rare
  PriorityLevels levels;
  Dispatcher d(0, ScriptedDriver(), o, &levels, nullptr);
  StreamState s, t;
  AttachStream(d, s);
  AttachStream(d, t);
  t.stream = reinterpret_cast<CUstream>(0x3000);
  SubmitLow(d, s, 10);  // two issued (see "Stopping at exit gives up..."), eight held
  // Held sleeps double from 20 us: wait for one of at least 400 ms, so no timer wake-up falls in
  // what follows (one would drain the new ops and start the backoff over, and so would each
  // later one).
  REQUIRE(WaitForLongHeldSleep(d, 400, 5000));
  const uint64_t q0 = d.activity().mark_queries;
  const uint64_t sleeps0 = d.activity().sleeps;
  for (int i = 0; i < 50; ++i) {
    SubmitLow(d, s, 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const uint64_t q1 = d.activity().mark_queries;
  const uint64_t sleeps1 = d.activity().sleeps;
  INFO("while 50 low ops arrived: " << q1 - q0 << " mark queries, " << sleeps1 - sleeps0
                                    << " sleeps begun");
  // Woken by each, the dispatcher would poll at least twice per op (hundreds in all); woken and
  // put back to sleep by each, it would begin a sleep per op.
  CHECK(q1 - q0 < 10u);
  CHECK(sleeps1 - sleeps0 < 10u);
  CHECK(g_issued.load() == 2);

  // Above the held op's priority, on another stream: the sleep (hundreds of milliseconds still
  // to go) ends at once and the op is issued.
  const auto submitted = std::chrono::steady_clock::now();
  Submit(d, t, /*priority=*/1, 1);
  bool issued = false;
  for (int i = 0; i < 500 && !issued; ++i) {
    issued = g_issued.load() == 3;
    if (!issued) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  INFO("the more important op waited " << MsSince(submitted) << " ms");
  CHECK(issued);
  CHECK(MsSince(submitted) < 100);
  CHECK(t.issued.load() == 1);

  g_gpu_progresses = true;
  d.Stop(/*bounded=*/true);
  CHECK(g_issued.load() == 61);
  CHECK(s.issued.load() == 60);
  CHECK(t.issued.load() == 1);
}

TEST_CASE("While work is held back, marks behind direct work wait for the held mark interval",
          "[dispatcher]") {
  // A server launches on the fast path while a batch thread's work is held: the dispatcher runs
  // a round every millisecond or less, and a mark per round behind the server's work is an event
  // record on the very stream the server launches on. While the last mark is pending, one more
  // per options.held_mark_interval_ns is enough; the work is still marked, and its end seen.
  g_gpu_progresses = false;
  g_issued = 0;
  SchedulerOptions o = Options();
  o.max_held_sleep_ns = 1'000'000;       // held rounds at least every millisecond
  o.held_mark_interval_ns = 50'000'000;  // throttled marks: one per 50 ms
  PriorityLevels levels;
  Dispatcher d(0, ScriptedDriver(), o, &levels, nullptr);  // no coordinator: no wake-ups
  StreamState s, server;
  AttachStream(d, s);
  AttachStream(d, server);
  server.stream = reinterpret_cast<CUstream>(0x3000);
  SubmitLow(d, s, 10);  // two issued (and marked), eight held
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // held, polling
  const int r0 = g_event_records.load();
  const auto begin = std::chrono::steady_clock::now();
  for (int i = 0; i < 100; ++i) {
    d.NoteDirect(&server, 1, gpuprio::base::SteadyNowNs());
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const int records = g_event_records.load() - r0;
  const int64_t elapsed_ms = MsSince(begin);
  INFO("event records in " << elapsed_ms << " ms of direct work: " << records);
  // The first mark at once (none pending), then one per 50 ms; a mark per round that adopted
  // work would be about one per NoteDirect.
  CHECK(records >= 1);
  CHECK(records <= 2 + elapsed_ms / 50);

  // Liveness: the unmarked work is marked later, and every end is seen once the GPU progresses.
  g_gpu_progresses = true;
  bool done = false;
  for (int i = 0; i < 5000 && !done; ++i) {
    done = g_issued.load() == 10 && levels.At(1).in_flight_ops.load() == 0 &&
           levels.At(-1).in_flight_ops.load() == 0;
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  INFO("issued " << g_issued.load() << ", in flight: level 1 "
                 << levels.At(1).in_flight_ops.load() << ", level -1 "
                 << levels.At(-1).in_flight_ops.load());
  CHECK(done);
  d.Stop(/*bounded=*/true);
}

TEST_CASE("Confined work held by its queue bound is polled once a millisecond, not continually",
          "[dispatcher]") {
  // Every op confined to a twin (kForce); nothing completes, so after 20 ops of 1 ms the twin's
  // queue holds its bound (20 ms) and the rest wait for room. Room comes no sooner than the
  // oldest op's end, and 19 ms of work are queued behind it: the thread sleeps 1 ms between
  // polls, even once the estimated end of that op is past. Polling as if held by the budget
  // (sleeps of max_held_sleep_ns, 200 us) would cost four or five times the driver calls.
  g_gpu_progresses = false;
  g_issued = 0;
  const int twins_before = g_green_streams_created.load();
  SchedulerOptions o = Options();
  o.isolation = gpuprio::scheduler::Isolation::kForce;
  o.confined_queue_ns = 20'000'000;
  o.default_estimate_ns = 1'000'000;
  PriorityLevels levels;
  Dispatcher d(0, ScriptedDriverWithGreenContexts(), o, &levels, nullptr);
  StreamState s;
  AttachStream(d, s);
  SubmitLow(d, s, 40);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // every estimated end is past
  CHECK(g_issued.load() == 20);  // the rest held by the queue bound
  CHECK(g_green_streams_created.load() == twins_before + 1);
  CHECK(levels.At(-1).ops_confined.load() == 20);
  const auto begin = std::chrono::steady_clock::now();
  const uint64_t q0 = d.activity().mark_queries;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const uint64_t q1 = d.activity().mark_queries;
  const int64_t elapsed_ms = MsSince(begin);
  INFO("mark queries in " << elapsed_ms << " ms: " << q1 - q0);
  // One stream tracked: each round queries its oldest pending mark once. Rounds 1 ms apart
  // make at most one query per millisecond; the budget's polling makes four or more.
  CHECK(q1 - q0 <= static_cast<uint64_t>(elapsed_ms + elapsed_ms / 2 + 10));

  g_gpu_progresses = true;
  d.Stop(/*bounded=*/true);
  CHECK(g_issued.load() == 40);
  CHECK(s.issued.load() == 40);
  CHECK(levels.At(-1).ops_confined.load() == 40);
}

}  // namespace
