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
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "catch2/catch.hpp"
#include "scheduler/base/clock.h"
#include "scheduler/coordinator/gpu_coordinator.h"
#include "scheduler/coordinator/segment_name.h"
#include "scheduler/op_observer.h"
#include "scheduler/op_pool.h"
#include "tests/scheduler/scripted_driver.h"
#include "tests/test_directory.h"

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

// Longer than any test runs: a timer of the dispatcher set to it never ends a wait here, so only
// the event under test can.
constexpr uint64_t kNeverNs = 3'600'000'000'000;

// Polls `done` until it holds. The guard only turns a hang into a failure (well inside the
// test's own timeout); nothing here measures how fast the dispatcher is.
template <typename Done>
bool Eventually(Done done) {
  const auto guard = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!done()) {
    if (std::chrono::steady_clock::now() > guard) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return true;
}

// Until the dispatcher begins a sleep after this call: whatever it was doing when called (an
// issue, a mark, an adoption of direct work) is done. Only where it sleeps again by itself.
bool NextSleep(const Dispatcher& d) {
  const uint64_t sleeps = d.activity().sleeps;
  return Eventually([&] { return d.activity().sleeps > sleeps; });
}

// The wake-ups the calling thread gives while it runs `call`: absl's CondVar tracer reports each
// signal that woke a waiter, on the signalling thread. A client ends a parked dispatcher's sleep
// only by signalling its condition variable (DispatcherParking), so with the dispatcher known to
// be asleep this tells exactly whether the call woke it, without waiting to see it run.
thread_local int t_wakeups = 0;
void CountWakeups(const char* event, const void*) {
  if (std::strcmp(event, "Signal wakeup") == 0 || std::strcmp(event, "SignalAll wakeup") == 0) {
    ++t_wakeups;
  }
}
void TraceWakeups() {
  static const bool registered = (absl::RegisterCondVarTracer(&CountWakeups), true);
  (void)registered;
}
template <typename Call>
int WakeupsBy(Call call) {
  TraceWakeups();
  const int before = t_wakeups;
  call();
  return t_wakeups - before;
}

// Ops the dispatcher has taken into its queues, per level, from its OnQueueState reports (one
// per change of a level's pending count: a rise is an op queued).
class QueueWatch final : public gpuprio::scheduler::OpObserver {
 public:
  int64_t queued(int priority) const {
    absl::MutexLock lock(&mu_);
    auto it = queued_.find(priority);
    return it != queued_.end() ? it->second : 0;
  }

  void OnSubmit(Op&) override {}
  void OnCallerIssue(const char*, int, CUstream, int64_t, int64_t) override {}
  void OnDispatcherStart(int) override {}
  void OnIssueBegin(const Op&) override {}
  void OnIssueEnd(const Op&, CUresult) override {}
  void OnQueueState(int, int priority, int64_t pending, uint64_t) override {
    absl::MutexLock lock(&mu_);
    int64_t& last = pending_[priority];
    if (pending > last) queued_[priority] += pending - last;
    last = pending;
  }

 private:
  mutable absl::Mutex mu_;
  std::map<int, int64_t> pending_ ABSL_GUARDED_BY(mu_);
  std::map<int, int64_t> queued_ ABSL_GUARDED_BY(mu_);
};

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

TEST_CASE("Stopping at exit gives up on held work when the GPU completes nothing", "[dispatcher]") {
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
  // Handed back once the dispatcher has let go of it (ReleaseStream wakes it for that).
  StreamState* recycled = nullptr;
  CHECK(Eventually([&] { return (recycled = d.TakeRecycledStream()) != nullptr; }));
  CHECK(recycled == &s);
  CHECK(g_events_live.load() == events_before);
  CHECK(s.issued.load() == 20);  // counts go on from where they were
  d.Stop();
}

// Issues `count` low ops on a GPU that completes nothing and returns how many the budget let
// through (the rest stay held until the bounded stop abandons them).
// `recent_level`, when set, is a level of this process that ran an op on this GPU just before
// (seen complete before the GPU stalls).
int AdmittedWhileNothingCompletes(const SchedulerOptions& options,
                                  std::unique_ptr<gpuprio::coordinator::GpuCoordinator> slot,
                                  int count, std::optional<int> recent_level = std::nullopt) {
  g_gpu_progresses = true;
  g_issued = 0;
  PriorityLevels levels;
  StreamState s, recent;  // before the dispatcher: they outlive it
  Dispatcher d(0, ScriptedDriver(), options, &levels, nullptr, std::move(slot));
  AttachStream(d, s);
  if (recent_level.has_value()) {
    AttachStream(d, recent);
    recent.stream = reinterpret_cast<CUstream>(0x2010);
    Submit(d, recent, *recent_level, 1);
    REQUIRE(Eventually([&] {
      return g_issued.load() == 1 && levels.At(*recent_level).in_flight_ops.load() == 0;
    }));
    g_issued = 0;
  }
  g_gpu_progresses = false;
  SubmitLow(d, s, count);
  // The stop is the handshake: a bounded stop keeps issuing whatever the budget admits, and
  // abandons the rest only after a round that could issue nothing, and stop_stall_timeout_ns
  // without progress. Nothing completes, so what such a round holds stays held: once the thread
  // is joined, the count is all the budget let through.
  d.Stop(/*bounded=*/true);
  g_gpu_progresses = true;
  return g_issued.load();
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
  options.ceiling_window_ns = kNeverNs;  // the other process's submit stays recent however slow
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

// The first issue time of each tagged op (Op::cost_hint_ns is the tag), and whether it was
// issued onto a twin.
std::atomic<int64_t> g_tag_issued_ns[3];
std::atomic<bool> g_tag_confined[3];

CUresult IssueTagged(Op& op) {
  int64_t unset = 0;
  g_tag_confined[op.cost_hint_ns] = op.confined_stream != nullptr;
  g_tag_issued_ns[op.cost_hint_ns].compare_exchange_strong(unset, gpuprio::base::SteadyNowNs());
  return CUDA_SUCCESS;
}

void SubmitTagged(Dispatcher& d, StreamState& s, int priority, uint64_t tag) {
  Op* op = OpPool::ForThisThread().Take();
  op->issue = &IssueTagged;
  op->name = "kernel";
  op->stream = &s;
  op->priority = priority;
  op->cost_key = &kKernel;
  op->cost_hint_ns = tag;
  op->submit_ns = gpuprio::base::SteadyNowNs();
  d.Submit(op);
}

TEST_CASE("Work below a more important level waits out its request gap, on that GPU only",
          "[dispatcher][coordinator]") {
  // A level busy less than request_gap_ns ago holds less important work (rule 1) on its own GPU;
  // the same process's other GPU is not held. The gap is long, so that on a loaded machine the
  // low op on the other GPU is issued well inside it; only lower bounds are checked on time.
  static constexpr uint8_t kBusyGpu[16] = {'g', 'a', 'p', '-', 'b', 'u', 's', 'y'};
  static constexpr uint8_t kOtherGpu[16] = {'g', 'a', 'p', '-', 'o', 't', 'h', 'e', 'r'};
  constexpr int64_t kGapNs = 300'000'000;
  constexpr uint64_t kBusy = 0, kOther = 1, kHigh = 2;  // tags
  const gpuprio_test::ScopedDirectory shm("dispatcher_gap");
  gpuprio::coordinator::SegmentOptions segment;
  segment.shm_dir = shm.path();
  SchedulerOptions options = Options();
  options.request_gap_ns = kGapNs;
  options.default_estimate_ns = 100'000;  // within the budget: only rule 1 can hold the op
  options.max_hold_ns = kNeverNs;         // rule 1's bound (0.1 s) would end the hold sooner
  g_gpu_progresses = true;
  for (auto& t : g_tag_issued_ns) t = 0;
  PriorityLevels levels;
  StreamState busy_stream, other_stream;
  int64_t busy_since = 0;  // the more important level's work ended no earlier than this
  std::unique_ptr<gpuprio::coordinator::GpuCoordinator> high;
  std::unique_ptr<Dispatcher> busy, other;

  SECTION("another process's level, dropped a moment ago") {
    options.coordinate = true;
    auto attach = [&](const uint8_t(&uuid)[16], int priority) {
      auto c = gpuprio::coordinator::GpuCoordinator::Attach(segment, uuid, priority);
      REQUIRE(c.ok());
      return *std::move(c);
    };
    high = attach(kBusyGpu, 1);
    high->NoteSubmit(1, gpuprio::base::SteadyNowNs());
    busy_since = gpuprio::base::SteadyNowNs();
    high->SetActive(gpuprio::coordinator::kNoPriority);  // its request's last work just ended
    busy = std::make_unique<Dispatcher>(0, ScriptedDriver(), options, &levels, nullptr,
                                        attach(kBusyGpu, -1));
    other = std::make_unique<Dispatcher>(1, ScriptedDriver(), options, &levels, nullptr,
                                         attach(kOtherGpu, -1));
    AttachStream(*busy, busy_stream);
    AttachStream(*other, other_stream);
  }
  SECTION("a level of this process, whose op on that GPU just completed") {
    busy = std::make_unique<Dispatcher>(0, ScriptedDriver(), options, &levels, nullptr);
    other = std::make_unique<Dispatcher>(1, ScriptedDriver(), options, &levels, nullptr);
    AttachStream(*busy, busy_stream);
    AttachStream(*other, other_stream);
    SubmitTagged(*busy, busy_stream, 1, kHigh);
    REQUIRE(Eventually([] { return g_tag_issued_ns[kHigh].load() != 0; }));
    busy_since = g_tag_issued_ns[kHigh].load();
  }
  SubmitTagged(*busy, busy_stream, -1, kBusy);
  SubmitTagged(*other, other_stream, -1, kOther);
  REQUIRE(Eventually([] { return g_tag_issued_ns[kOther].load() != 0; }));
  if (gpuprio::base::SteadyNowNs() - busy_since < kGapNs / 2) {
    // Still well inside the gap: the op on the busy GPU is held (skipped only on a machine so
    // slow that half the gap went by before the other GPU's op was issued).
    CHECK(g_tag_issued_ns[kBusy].load() == 0);
  }
  REQUIRE(Eventually([] { return g_tag_issued_ns[kBusy].load() != 0; }));
  // The drop is stamped on the real-time clock: a millisecond of slack between the two clocks.
  CHECK(g_tag_issued_ns[kBusy].load() - busy_since >= kGapNs - 1'000'000);
  busy->Stop();
  other->Stop();
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
  options.tuning.peer_idle_poll_ns = kNeverNs;  // the poll never ends within the test
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
  // Parked: with nothing to do, each sleep the dispatcher begins is the long park (of 1 s). The
  // call below comes as a park begins (the first, unless this thread was slow to look), not near
  // its end.
  const uint64_t sleeps = d->activity().sleeps;
  REQUIRE(Eventually([&] { return d->activity().sleeps > sleeps; }));

  // From the long park (nothing of this process active): woken at once, and the work marked.
  int records = g_event_records.load();
  const uint64_t long_parks = d->activity().sleeps;
  CHECK(WakeupsBy([&] { issue_direct(s); }) == 1);
  CHECK(Eventually([&] { return g_event_records.load() > records; }));

  // Now parked on the (here endless) poll of that work: the next sleep to begin. The peer holds
  // nothing: not woken, so the work stays listed, unmarked.
  REQUIRE(Eventually([&] { return d->activity().sleeps > long_parks; }));
  records = g_event_records.load();
  CHECK(WakeupsBy([&] { issue_direct(s); }) == 0);
  CHECK(s.direct_unmarked.load());

  // The peer holds work back, perhaps for this level: woken at once. The round adopts both
  // listings, a mark behind each.
  peer->SetHeld(true, gpuprio::base::SteadyNowNs());
  CHECK(g_event_records.load() == records);  // nothing ended the poll meanwhile
  CHECK(WakeupsBy([&] { issue_direct(t); }) == 1);
  CHECK(Eventually([&] { return g_event_records.load() >= records + 2; }));
  CHECK_FALSE(s.direct_unmarked.load());

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
  options.ceiling_window_ns = kNeverNs;  // the recent level stays recent however slow the test
  CHECK(AdmittedWhileNothingCompletes(options, nullptr, 5) == 2);
  // A more important level of this process had work on this GPU within the window: the op
  // running counts, so an arrival waits for at most that op. (The rule's other rows -- a level
  // between, the rule switched off -- are issue_policy_test's, without time: this checks the
  // wiring, the running op's estimate from the streams in flight and the recent level from the
  // level counters.)
  CHECK(AdmittedWhileNothingCompletes(options, nullptr, 5, /*recent_level=*/1) == 1);
}

// Waits until `issued` ops have been issued and the dispatcher has seen every low op complete.
bool WaitIssuedAndSeenComplete(PriorityLevels& levels, int issued) {
  return Eventually(
      [&] { return g_issued.load() == issued && levels.At(-1).in_flight_ops.load() == 0; });
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
  CHECK(Eventually([] { return g_issued.load() == 5; }));
  // Counted in flight after the issue itself.
  CHECK(Eventually([&] { return levels.At(-1).in_flight_estimated_ns.load() > 0; }));
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
  REQUIRE(Eventually([] { return g_issued.load() == 6; }));
  REQUIRE(Eventually([&] { return levels.At(-1).in_flight_estimated_ns.load() > 0; }));
  // 50 ms x 0.75^4 after four upper bounds of well under a millisecond: about 16 ms.
  const uint64_t estimate = levels.At(-1).in_flight_estimated_ns.load();
  INFO("estimate " << estimate << " ns");
  CHECK(estimate < 20'000'000);
  d.Stop(/*bounded=*/true);
  g_gpu_progresses = true;
  g_elapsed_ms = 1.0f;
}

// Until a held dispatcher begins a sleep of 650 ms or more (or options.tuning.max_held_sleep_ns),
// once `watch` has seen `queued` ops of `priority` queued and `issued` ops issued. Held sleeps
// double from 20 us after each round that queued or issued work, so the 16th sleep to begin after
// the last such round lasts 20 us x 2^15 at least; each is counted as it begins, and the caller's
// next steps come right then, well inside it.
bool WaitForLongHeldSleep(const Dispatcher& d, const QueueWatch& watch, int priority,
                          int64_t queued, int issued) {
  if (!Eventually([&] { return watch.queued(priority) == queued && g_issued.load() == issued; })) {
    return false;
  }
  const uint64_t sleeps = d.activity().sleeps;
  return Eventually([&] { return d.activity().sleeps >= sleeps + 16; });
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
  o.tuning.max_held_sleep_ns = 2'000'000'000;  // held sleeps grow long
  PriorityLevels levels;
  QueueWatch watch;
  Dispatcher d(0, ScriptedDriver(), o, &levels, &watch);
  StreamState s, t;
  AttachStream(d, s);
  AttachStream(d, t);
  t.stream = reinterpret_cast<CUstream>(0x3000);
  SubmitLow(d, s, 10);  // two issued (see "Stopping at exit gives up..."), eight held
  // Asleep, held, for long: each op below comes to a dispatcher asleep with its floor at the
  // held op's level (a timer wake-up would not be a wake-up by the op; none falls among them).
  REQUIRE(WaitForLongHeldSleep(d, watch, -1, 10, 2));
  int woken = 0;
  for (int i = 0; i < 50; ++i) woken += WakeupsBy([&] { SubmitLow(d, s, 1); });
  // Woken by each, the dispatcher would poll at least twice per op (hundreds of completion
  // queries in all) and begin a sleep per op.
  CHECK(woken == 0);
  CHECK(g_issued.load() == 2);

  // The low ops join their queue when that sleep ends by itself; then, asleep for long again,
  // an op above the held op's priority, on another stream: the sleep ends at once (the submit
  // woke it) and the op is issued.
  REQUIRE(WaitForLongHeldSleep(d, watch, -1, 60, 2));
  CHECK(WakeupsBy([&] { Submit(d, t, /*priority=*/1, 1); }) == 1);
  CHECK(Eventually([] { return g_issued.load() == 3; }));
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
  // per options.tuning.held_mark_interval_ns is enough; the work is still marked, and its end seen.
  g_gpu_progresses = false;
  g_issued = 0;
  SchedulerOptions o = Options();
  o.tuning.max_held_sleep_ns = 1'000'000;  // held rounds at least every millisecond
  // Never due again within the test while a mark is pending: the interval's arithmetic is
  // completion_marks_test's; this checks that held rounds apply it to work they adopt.
  o.tuning.held_mark_interval_ns = kNeverNs;
  PriorityLevels levels;
  QueueWatch watch;
  Dispatcher d(0, ScriptedDriver(), o, &levels, &watch);  // no coordinator: no wake-ups
  StreamState s, server;
  AttachStream(d, s);
  AttachStream(d, server);
  server.stream = reinterpret_cast<CUstream>(0x3000);
  SubmitLow(d, s, 10);  // two issued (and marked), eight held
  // Held, polling: all ten queued, two issued, and a sleep begun after that (so the second op's
  // mark is recorded).
  REQUIRE(Eventually([&] { return watch.queued(-1) == 10 && g_issued.load() == 2; }));
  REQUIRE(NextSleep(d));
  const int r0 = g_event_records.load();
  // Each listing adopted by its own held round before the next (the dispatcher clears the flag
  // as it adopts), as a server's chain of launches would be.
  for (int i = 0; i < 100; ++i) {
    d.NoteDirect(&server, 1, gpuprio::base::SteadyNowNs());
    REQUIRE(Eventually([&] { return !server.direct_unmarked.load(); }));
  }
  REQUIRE(NextSleep(d));  // the last adoption's round is over
  const int records = g_event_records.load() - r0;
  INFO("event records for 100 adoptions of direct work: " << records);
  // The first mark at once (none pending), then none while it is pending; a mark per round that
  // adopted work would be one per NoteDirect.
  CHECK(records == 1);

  // Liveness: the unmarked work is marked later, and every end is seen once the GPU progresses.
  g_gpu_progresses = true;
  const bool done = Eventually([&] {
    return g_issued.load() == 10 && levels.At(1).in_flight_ops.load() == 0 &&
           levels.At(-1).in_flight_ops.load() == 0;
  });
  INFO("issued " << g_issued.load() << ", in flight: level 1 " << levels.At(1).in_flight_ops.load()
                 << ", level -1 " << levels.At(-1).in_flight_ops.load());
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
  o.tuning.confined_queue_ns = 20'000'000;
  o.default_estimate_ns = 1'000'000;
  PriorityLevels levels;
  QueueWatch watch;
  Dispatcher d(0, ScriptedDriverWithGreenContexts(), o, &levels, &watch);
  StreamState s;
  AttachStream(d, s);
  SubmitLow(d, s, 40);
  // All queued, twenty issued: the rest held by the queue bound (nothing completes, so no more).
  REQUIRE(Eventually([&] { return watch.queued(-1) == 40 && g_issued.load() == 20; }));
  CHECK(g_green_streams_created.load() == twins_before + 1);
  CHECK(levels.At(-1).ops_confined.load() == 20);
  // The state under test is one of the estimates' clock: every estimated end past, which the
  // last of them is one queue bound after the issues above at most.
  std::this_thread::sleep_for(std::chrono::nanoseconds(o.tuning.confined_queue_ns));
  CHECK(g_issued.load() == 20);
  // A hundred polls, however long they take: rounds 1 ms apart make at most one query per
  // millisecond (one stream tracked: each round queries its oldest pending mark once), so they
  // cannot come sooner; the budget's polling would make them four or more times as fast. Load
  // only slows the polls down.
  const auto begin = std::chrono::steady_clock::now();
  const uint64_t q0 = d.activity().mark_queries;
  uint64_t q1 = q0;
  REQUIRE(Eventually([&] { return (q1 = d.activity().mark_queries) >= q0 + 100; }));
  const int64_t elapsed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::steady_clock::now() - begin)
                                 .count();
  INFO("mark queries in " << elapsed_ms << " ms: " << q1 - q0);
  CHECK(q1 - q0 <= static_cast<uint64_t>(elapsed_ms + elapsed_ms / 2 + 10));

  g_gpu_progresses = true;
  d.Stop(/*bounded=*/true);
  CHECK(g_issued.load() == 40);
  CHECK(s.issued.load() == 40);
  CHECK(levels.At(-1).ops_confined.load() == 40);
}

TEST_CASE("A level busy on one GPU puts work on that GPU only on the budget", "[dispatcher]") {
  // Level 1 runs an op on device 0. Then, with the GPU completing nothing, default-priority ops go
  // to both devices. On device 0 they are below level 1 and on the budget, which one unmeasured
  // op fills: one is issued. Level 1 never had work on device 1: its ceiling is the unbudgeted
  // level, and all of them are issued there.
  constexpr int kOps = 5;
  SchedulerOptions options = Options();
  options.ceiling_window_ns = kNeverNs;  // level 1 stays recent however slow the test
  g_gpu_progresses = true;
  PriorityLevels levels;
  StreamState high, normal[2];  // before the dispatchers: they outlive them
  std::unique_ptr<Dispatcher> gpus[2];
  for (int d = 0; d < 2; ++d) {
    gpus[d] = std::make_unique<Dispatcher>(d, ScriptedDriver(), options, &levels, nullptr);
    AttachStream(*gpus[d], normal[d]);
  }
  AttachStream(*gpus[0], high);
  high.stream = reinterpret_cast<CUstream>(0x2010);
  Submit(*gpus[0], high, 1, 1);
  REQUIRE(Eventually([&] { return high.issued.load() == 1; }));
  const int64_t now = gpuprio::base::SteadyNowNs();
  CHECK(gpus[0]->levels_here().Ceiling(levels, 0, now, options.ceiling_window_ns) == 1);
  CHECK(gpus[1]->levels_here().Ceiling(levels, 0, now, options.ceiling_window_ns) == 0);

  g_gpu_progresses = false;
  for (int d = 0; d < 2; ++d) Submit(*gpus[d], normal[d], 0, kOps);
  CHECK(Eventually([&] { return normal[1].issued.load() == kOps; }));
  // Device 0 admits its one op once rule 1 no longer holds it for level 1 (if that op's end was
  // not noticed before the GPU stalled, after max_hold_ns), and no more while nothing completes.
  CHECK(Eventually([&] { return normal[0].issued.load() == 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(normal[0].issued.load() == 1);

  g_gpu_progresses = true;
  for (auto& gpu : gpus) gpu->Stop(/*bounded=*/true);
  CHECK(normal[0].issued.load() == kOps);
}

// Two devices of one process, each with a partition, isolation active. Level 1 runs ops on the
// devices a test picks; then one low op goes to each device, and the test reads which of them ran
// confined.
class TwoIsolatedGpus {
 public:
  explicit TwoIsolatedGpus(uint64_t window_ns = SchedulerOptions().ceiling_window_ns) {
    options_ = Options();
    options_.isolation = gpuprio::scheduler::Isolation::kActive;
    options_.default_estimate_ns = 100'000;
    options_.ceiling_window_ns = window_ns;
    g_gpu_progresses = true;
    for (int d = 0; d < 2; ++d) {
      gpus_[d] = std::make_unique<Dispatcher>(d, ScriptedDriverWithGreenContexts(), options_,
                                              &levels_, nullptr);
      AttachStream(*gpus_[d], high_[d]);
      AttachStream(*gpus_[d], low_[d]);
      low_[d].stream = reinterpret_cast<CUstream>(0x2010);
    }
  }
  ~TwoIsolatedGpus() {
    for (auto& gpu : gpus_) gpu->Stop();
  }

  Dispatcher& gpu(int d) { return *gpus_[d]; }

  // Level 1 submits one op on device `d` (as Scheduler::Submit: the level's submit time, then the
  // op) and it is issued. Returns the submit time.
  int64_t RunHigh(int d) {
    const int64_t at = gpuprio::base::SteadyNowNs();
    levels_.NoteSubmit(1, at);
    const int before = g_issued.load();
    Submit(*gpus_[d], high_[d], 1, 1);
    REQUIRE(Eventually([&] { return g_issued.load() == before + 1; }));
    return at;
  }

  // One low op on each device, until both are issued: whether each ran confined, and when.
  struct Low {
    bool confined[2];
    int64_t issued_ns[2];
  };
  Low RunLow() {
    for (auto& t : g_tag_issued_ns) t = 0;
    for (int d = 0; d < 2; ++d) SubmitTagged(*gpus_[d], low_[d], -1, static_cast<uint64_t>(d));
    REQUIRE(Eventually([] { return g_tag_issued_ns[0] != 0 && g_tag_issued_ns[1] != 0; }));
    return {{g_tag_confined[0].load(), g_tag_confined[1].load()},
            {g_tag_issued_ns[0].load(), g_tag_issued_ns[1].load()}};
  }

 private:
  SchedulerOptions options_;
  PriorityLevels levels_;
  StreamState high_[2], low_[2];  // before the dispatchers: they outlive them
  std::unique_ptr<Dispatcher> gpus_[2];
};

TEST_CASE("Below a level whose work needs the whole GPU, work is not confined, on that GPU only",
          "[dispatcher]") {
  // Level 1 active on both devices. On device 0 it launched a graph (NoteWholeDevice): the
  // reserve would not hold it, so the low op runs on its own stream (rules 1-3 judge it). On
  // device 1 it launched kernels only: confined.
  TwoIsolatedGpus gpus;
  gpus.RunHigh(0);
  gpus.RunHigh(1);
  gpus.gpu(0).NoteWholeDevice(1, gpuprio::base::SteadyNowNs());
  TwoIsolatedGpus::Low low = gpus.RunLow();
  CHECK_FALSE(low.confined[0]);
  CHECK(low.confined[1]);
  // A note of the low level itself changes nothing for its own work: still confined below 1.
  gpus.gpu(1).NoteWholeDevice(-1, gpuprio::base::SteadyNowNs());
  low = gpus.RunLow();
  CHECK(low.confined[1]);
}

TEST_CASE("A level busy on one GPU confines work on that GPU only", "[dispatcher]") {
  // Level 1 has work on device 0 only: the low op on device 1 runs on the whole GPU, since
  // nothing more important uses its SMs.
  TwoIsolatedGpus gpus;
  gpus.RunHigh(0);
  const TwoIsolatedGpus::Low low = gpus.RunLow();
  CHECK(low.confined[0]);
  CHECK_FALSE(low.confined[1]);
}

TEST_CASE("A level that had work on a GPU only longer ago than the window confines nothing there",
          "[dispatcher]") {
  // Level 1 ran one op on device 1 (a warm-up, say), then works on device 0 only. Once that op is
  // older than the window, device 1's low work runs on the whole GPU again, though level 1 keeps
  // submitting (on device 0). The window is short here; the wait is a lower bound only.
  constexpr uint64_t kWindowNs = 100'000'000;
  TwoIsolatedGpus gpus(kWindowNs);
  gpus.RunHigh(1);
  std::this_thread::sleep_for(std::chrono::nanoseconds(2 * kWindowNs));
  const int64_t high_at = gpus.RunHigh(0);
  const TwoIsolatedGpus::Low low = gpus.RunLow();
  // Device 0's op was decided within the window of level 1's op there, unless the machine took
  // longer than the window to get to it: then it may run unconfined, which is right too.
  if (low.issued_ns[0] - high_at < static_cast<int64_t>(kWindowNs)) CHECK(low.confined[0]);
  CHECK_FALSE(low.confined[1]);
}

}  // namespace
