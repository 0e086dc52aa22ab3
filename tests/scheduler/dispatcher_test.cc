// The Dispatcher in process, against scripted driver functions: how it stops when the GPU makes
// progress and when it makes none, that it hands destroyed streams back for reuse, and that work
// below another process's level keeps the cross-process budget.
#include "scheduler/dispatcher.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "catch2/catch.hpp"
#include "scheduler/base/clock.h"
#include "scheduler/coordinator/gpu_coordinator.h"
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
using gpuprio_test::ScriptedDriver;

std::atomic<int> g_issued{0};

CUresult IssueKernel(Op&) {
  ++g_issued;
  return CUDA_SUCCESS;
}

const int kKernel = 0;  // its address is the kernel's cost key

void SubmitLow(Dispatcher& d, StreamState& s, int count) {
  for (int i = 0; i < count; ++i) {
    Op* op = OpPool::ForThisThread().Take();
    op->issue = &IssueKernel;
    op->name = "kernel";
    op->stream = &s;
    op->priority = -1;  // below the ceiling: on the budget
    op->cost_key = &kKernel;
    op->submit_ns = gpuprio::base::SteadyNowNs();
    d.Submit(op);
  }
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
  gpuprio::coordinator::SegmentOptions segment;
  segment.domain = absl::StrCat("dispatcher-", getpid(), "-", absl::Hex(std::random_device()()));
  const std::string name = gpuprio::coordinator::SegmentName(segment.domain, geteuid(), -1, kUuid);
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
  shm_unlink(name.c_str());
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
  gpuprio::coordinator::SegmentOptions segment;
  segment.domain = absl::StrCat("wake-", getpid(), "-", absl::Hex(std::random_device()()));
  const std::string name = gpuprio::coordinator::SegmentName(segment.domain, geteuid(), -1, kUuid);
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
  shm_unlink(name.c_str());
}

TEST_CASE("Work on the budget only for its own level keeps one op behind the one running",
          "[dispatcher]") {
  // Ops as long as the budget (1 ms each, unmeasured: the default estimate). Held to one op in
  // flight, each would be issued only once the one before it was seen complete, and the GPU
  // would idle for the dispatcher's reaction every time.
  SchedulerOptions options = Options();
  CHECK(AdmittedWhileNothingCompletes(options, nullptr, 5) == 2);
  // A more important level of this process submitted within the window: the op running counts,
  // so an arrival waits for at most that op.
  CHECK(AdmittedWhileNothingCompletes(options, nullptr, 5, /*recent_level=*/1) == 1);
  // A level between: the same (normal work is not on a budget, but it is more important).
  CHECK(AdmittedWhileNothingCompletes(options, nullptr, 5, /*recent_level=*/0) == 1);
  // The rule switched off.
  options.idle_budget_excludes_running = false;
  CHECK(AdmittedWhileNothingCompletes(options, nullptr, 5) == 1);
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

}  // namespace
