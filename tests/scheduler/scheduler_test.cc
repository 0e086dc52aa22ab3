// The Scheduler in process, against scripted driver functions (no fake libcuda, no hook): the
// ordering rules it owns. Per-stream FIFO across threads and priorities, the legacy stream's
// implicit order, event record -> wait with priority inheritance past the budget, backpressure
// on a thread that runs ahead, and the stop/restart around a stream capture.
#include "scheduler/scheduler.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "catch2/catch.hpp"
#include "scheduler/base/clock.h"
#include "scheduler/op_pool.h"
#include "tests/scheduler/scripted_driver.h"

namespace {

using gpuprio::scheduler::Op;
using gpuprio::scheduler::OpPool;
using gpuprio::scheduler::Scheduler;
using gpuprio::scheduler::SchedulerOptions;
using gpuprio::scheduler::StreamState;

using gpuprio_test::g_gpu_progresses;
using gpuprio_test::ScriptedDriver;

// Every issued op is logged as (stream handle, tag).
struct Issued {
  uintptr_t stream;
  int tag;
};
absl::Mutex g_log_mu;
std::vector<Issued> g_log ABSL_GUARDED_BY(g_log_mu);

std::vector<Issued> Log() {
  absl::MutexLock lock(&g_log_mu);
  return g_log;
}

// Stream handles (scripted_driver.h: odd ones are blocking): each test case uses handles of its
// own, since the scheduler's per-thread stream cache outlives a test's scheduler.

SchedulerOptions Options() {
  SchedulerOptions o;
  o.budget_ns = 1'000'000;
  o.default_estimate_ns = 1'000'000;  // an unmeasured op fills the budget alone
  o.direct_issue = false;             // every op through the dispatcher
  o.stop_stall_timeout_ns = 200'000'000;
  return o;
}

CUresult IssueLogged(Op& op) {
  int tag = 0;
  std::memcpy(&tag, op.args, sizeof(tag));
  absl::MutexLock lock(&g_log_mu);
  g_log.push_back({reinterpret_cast<uintptr_t>(op.stream->stream), tag});
  return CUDA_SUCCESS;
}

const int kCostKey = 0;  // every test op shares one cost history

Op* TaggedOp(StreamState* stream, int priority, int tag) {
  Op* op = OpPool::ForThisThread().Take();
  std::memcpy(op->args, &tag, sizeof(tag));
  op->issue = &IssueLogged;
  op->name = "test op";
  op->stream = stream;
  op->priority = priority;
  op->cost_key = &kCostKey;
  op->submit_ns = gpuprio::base::SteadyNowNs();
  return op;
}

void Submit(Scheduler& s, StreamState* stream, int priority, int tag) {
  s.Submit(TaggedOp(stream, priority, tag));
}

StreamState* Stream(Scheduler& s, uintptr_t handle) {
  StreamState* state = s.Resolve(reinterpret_cast<CUstream>(handle), false);
  REQUIRE(state != nullptr);
  return state;
}

// Runs `wait` on another thread; true if it returned within `timeout`. The thread is joined
// either way (the caller must make it return, e.g. by letting the GPU progress).
class Waiter {
 public:
  template <typename F>
  explicit Waiter(F wait) : thread_([this, wait] {
      wait();
      done_ = true;
    }) {}
  ~Waiter() { thread_.join(); }
  bool DoneWithin(std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (!done_ && std::chrono::steady_clock::now() < end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return done_;
  }

 private:
  std::atomic<bool> done_{false};
  std::thread thread_;
};

void ResetGpu() {
  g_gpu_progresses = true;
  absl::MutexLock lock(&g_log_mu);
  g_log.clear();
}

TEST_CASE("Each stream's ops issue in submission order, across threads and priorities",
          "[scheduler]") {
  ResetGpu();
  Scheduler s(Options(), ScriptedDriver());
  constexpr int kThreads = 4;
  constexpr int kOps = 300;
  std::vector<std::thread> threads;
  std::vector<StreamState*> streams(kThreads);
  for (int t = 0; t < kThreads; ++t) streams[t] = Stream(s, 0x3001 + 2 * t);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Priorities change from op to op: a stream's order is its submission order regardless.
      for (int i = 0; i < kOps; ++i) Submit(s, streams[t], (i * 7 + t) % 3 - 1, i);
    });
  }
  for (auto& t : threads) t.join();
  s.WaitAll();
  std::vector<int> next(kThreads, 0);
  for (const Issued& e : Log()) {
    const int t = static_cast<int>((e.stream - 0x3001) / 2);
    REQUIRE(t >= 0);
    REQUIRE(t < kThreads);
    CHECK(e.tag == next[t]);
    next[t] = e.tag + 1;
  }
  for (int t = 0; t < kThreads; ++t) CHECK(next[t] == kOps);
}

TEST_CASE("Work on the legacy stream follows the blocking streams' queued work", "[scheduler]") {
  ResetGpu();
  Scheduler s(Options(), ScriptedDriver());
  StreamState* high = Stream(s, 0x4002);
  StreamState* blocking = Stream(s, 0x4001);
  StreamState* legacy = s.Resolve(nullptr, false);
  REQUIRE(legacy != nullptr);
  REQUIRE(legacy->legacy);
  // A high op that never completes keeps the low level on its budget: one low op in flight.
  g_gpu_progresses = false;
  Submit(s, high, 1, 0);
  for (int i = 0; i < 5; ++i) Submit(s, blocking, -1, i);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(blocking->HasUnissued());
  {
    // Inline work on the legacy stream must wait for the blocking stream's held ops.
    Waiter inline_on_legacy([&] { s.WaitBeforeInline(legacy); });
    CHECK_FALSE(inline_on_legacy.DoneWithin(std::chrono::milliseconds(100)));
    g_gpu_progresses = true;
    CHECK(inline_on_legacy.DoneWithin(std::chrono::seconds(20)));
  }
  CHECK_FALSE(blocking->HasUnissued());
  // And inline work on a blocking stream follows the legacy stream's queue.
  g_gpu_progresses = false;
  Submit(s, high, 1, 1);
  for (int i = 0; i < 5; ++i) Submit(s, legacy, -1, 100 + i);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(legacy->HasUnissued());
  {
    Waiter inline_on_blocking([&] { s.WaitBeforeInline(blocking); });
    CHECK_FALSE(inline_on_blocking.DoneWithin(std::chrono::milliseconds(100)));
    g_gpu_progresses = true;
    CHECK(inline_on_blocking.DoneWithin(std::chrono::seconds(20)));
  }
  CHECK_FALSE(legacy->HasUnissued());
}

TEST_CASE("A wait on an event follows its queued record, which inherits the waiter's priority",
          "[scheduler]") {
  ResetGpu();
  Scheduler s(Options(), ScriptedDriver());
  StreamState* low = Stream(s, 0x5002);
  StreamState* high = Stream(s, 0x5004);
  const CUevent event = reinterpret_cast<CUevent>(0x5555);
  // The GPU stalls with a high op in flight: low work is held by the budget.
  g_gpu_progresses = false;
  Submit(s, high, 1, 0);
  for (int i = 0; i < 4; ++i) Submit(s, low, -1, i);
  Scheduler::EventState* state = s.BeginRecord(event);
  Submit(s, low, -1, 4);  // the record
  s.EndRecord(state, low);
  Submit(s, low, -1, 5);  // after the record: the wait must not pull it forward
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(low->HasUnissued());
  StreamState* recorder = s.RecordToFollow(state);
  CHECK(recorder == low);
  Op* wait = TaggedOp(high, 1, 1);
  s.QueueWaitOn(state, recorder, wait);
  s.Submit(wait);
  Submit(s, high, 1, 2);
  {
    // The high stream's wait issues although the GPU completes nothing: the low ops up to the
    // record inherit its priority and skip the budget.
    Waiter high_issued([&] { s.WaitStream(high); });
    CHECK(high_issued.DoneWithin(std::chrono::seconds(20)));
    const std::vector<Issued> log = Log();
    int record_at = -1, wait_at = -1, after_record_at = -1;
    for (int i = 0; i < static_cast<int>(log.size()); ++i) {
      if (log[i].stream == 0x5002 && log[i].tag == 4) record_at = i;
      if (log[i].stream == 0x5002 && log[i].tag == 5) after_record_at = i;
      if (log[i].stream == 0x5004 && log[i].tag == 1) wait_at = i;
    }
    CHECK(record_at >= 0);
    CHECK(wait_at > record_at);
    CHECK(after_record_at == -1);  // still held: only the record's predecessors were inherited
    g_gpu_progresses = true;
  }
  // A later record issued by its caller leaves nothing to follow.
  s.WaitAll();
  CHECK(s.RecordToFollow(state) == nullptr);
  s.EndRecord(s.BeginRecord(event), nullptr);
  CHECK(s.RecordToFollow(state) == nullptr);
}

TEST_CASE("A thread that runs ahead of its stream's issue waits, and resumes as work issues",
          "[scheduler]") {
  ResetGpu();
  SchedulerOptions options = Options();
  options.max_queued_per_stream = 8;
  Scheduler s(options, ScriptedDriver());
  StreamState* high = Stream(s, 0x6002);
  StreamState* low = Stream(s, 0x6004);
  g_gpu_progresses = false;
  Submit(s, high, 1, 0);
  std::atomic<int> submitted{0};
  {
    Waiter producer([&] {
      for (int i = 0; i < 40; ++i) {
        Submit(s, low, -1, i);
        ++submitted;
      }
    });
    CHECK_FALSE(producer.DoneWithin(std::chrono::milliseconds(200)));
    // Bounded: at most the limit queued (plus the op whose submit is waiting) while nothing
    // issues.
    CHECK(submitted.load() <= static_cast<int>(options.max_queued_per_stream) + 2);
    g_gpu_progresses = true;
    CHECK(producer.DoneWithin(std::chrono::seconds(20)));
  }
  s.WaitStream(low);
  int next = 0;
  for (const Issued& e : Log()) {
    if (e.stream != 0x6004) continue;
    CHECK(e.tag == next);
    ++next;
  }
  CHECK(next == 40);
}

TEST_CASE("A long op with more important work queued behind it on its own stream is not held",
          "[scheduler]") {
  ResetGpu();
  Scheduler s(Options(), ScriptedDriver());
  StreamState* shared = Stream(s, 0x8002);
  // A low op longer than the budget (10 ms against 1 ms), then a high op on the same stream: the
  // high op waits for the low one (stream order), so holding the low op while "more important
  // work is busy" would hold that very work, forever.
  Op* low = TaggedOp(shared, -1, 0);
  low->cost_key = nullptr;
  low->cost_hint_ns = 10'000'000;
  s.Submit(low);
  Submit(s, shared, 1, 1);
  {
    Waiter issued([&] { s.WaitStream(shared); });
    const bool done = issued.DoneWithin(std::chrono::seconds(10));
    CHECK(done);
    if (!done) s.StopDispatchers(/*bounded=*/true);  // lets the waiter return
  }
  const std::vector<Issued> log = Log();
  REQUIRE(log.size() == 2);
  CHECK(log[0].tag == 0);
  CHECK(log[1].tag == 1);
}

TEST_CASE("A long op is not held for more important work stuck behind less important work",
          "[scheduler]") {
  ResetGpu();
  Scheduler s(Options(), ScriptedDriver());
  StreamState* first = Stream(s, 0x9002);
  StreamState* second = Stream(s, 0x9004);
  // `first`: a low op longer than the budget. `second`: a short low op, then a high one. The
  // dispatcher takes the oldest of the equal fronts, the long op; the high op behind the short
  // one cannot run before either, so it must not make the long op wait for a pause.
  Op* op = TaggedOp(first, -1, 0);
  op->cost_key = nullptr;
  op->cost_hint_ns = 10'000'000;
  s.Submit(op);
  Submit(s, second, -1, 1);
  Submit(s, second, 1, 2);
  {
    Waiter issued([&] {
      s.WaitStream(first);
      s.WaitStream(second);
    });
    const bool done = issued.DoneWithin(std::chrono::seconds(10));
    CHECK(done);
    if (!done) s.StopDispatchers(/*bounded=*/true);  // lets the waiter return
  }
  CHECK(Log().size() == 3);
}

TEST_CASE("The fast path passes less important work the dispatcher holds, and nothing else",
          "[scheduler]") {
  ResetGpu();
  SchedulerOptions options = Options();
  options.direct_issue = true;
  Scheduler s(options, ScriptedDriver());
  StreamState* batch = Stream(s, 0xa002);   // non-blocking
  StreamState* server = Stream(s, 0xa004);  // non-blocking
  StreamState* blocking = Stream(s, 0xa005);
  // A stalled GPU: the budget holds most of the low ops, so the dispatcher is not idle.
  g_gpu_progresses = false;
  for (int i = 0; i < 6; ++i) Submit(s, batch, -1, i);
  for (int i = 0; i < 1000 && Log().size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(batch->HasUnissued());
  // The more important op is issued first whatever the dispatcher does: its thread may issue it.
  CHECK(s.MayIssueDirect(server, 1, /*may_pass_queued=*/true));
  s.NoteDirect(server, 1);
  // Not when the call must not pass queued work (an event record), ...
  CHECK_FALSE(s.MayIssueDirect(server, 1, /*may_pass_queued=*/false));
  // ... nor on a blocking stream (CUDA orders it against the legacy stream's queued work), ...
  CHECK_FALSE(s.MayIssueDirect(blocking, 1, /*may_pass_queued=*/true));
  // ... nor on the stream that holds the queued work (its own order), ...
  CHECK_FALSE(s.MayIssueDirect(batch, 1, /*may_pass_queued=*/true));
  // ... nor for the held level itself.
  StreamState* other = Stream(s, 0xa006);
  CHECK_FALSE(s.MayIssueDirect(other, -1, /*may_pass_queued=*/true));
  // Queued work at the op's own level (here behind a held low op on its stream): the dispatcher
  // orders the two, so the op waits its turn.
  StreamState* mixed = Stream(s, 0xa008);
  Submit(s, mixed, -1, 200);
  Submit(s, mixed, 1, 201);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(mixed->HasUnissued());
  CHECK_FALSE(s.MayIssueDirect(server, 1, /*may_pass_queued=*/true));
  // Once everything is issued, the dispatcher is idle and the plain fast path applies.
  g_gpu_progresses = true;
  s.WaitStream(batch);
  s.WaitStream(mixed);
  CHECK(s.MayIssueDirect(server, 1, /*may_pass_queued=*/false));
}

// Streams whose handle has this bit are on device 1; the others on device 0.
constexpr uintptr_t kOnDevice1 = 0x100000;
CUresult StreamDevice(CUstream stream, CUdevice* device) {
  *device = (reinterpret_cast<uintptr_t>(stream) & kOnDevice1) != 0 ? 1 : 0;
  return CUDA_SUCCESS;
}

TEST_CASE("A level busy on one GPU budgets that GPU's work only, on both paths", "[scheduler]") {
  ResetGpu();
  SchedulerOptions options = Options();
  options.direct_issue = true;
  options.ceiling_window_ns = 3'600'000'000'000;  // level 1 stays recent however slow the test
  gpuprio::scheduler::DriverFunctions driver = ScriptedDriver();
  driver.stream_get_device = &StreamDevice;
  Scheduler s(options, driver);
  StreamState* server = Stream(s, 0xc002);
  StreamState* normal0 = Stream(s, 0xc004);
  StreamState* normal1 = Stream(s, 0xc006 | kOnDevice1);
  REQUIRE(normal0->dispatcher == server->dispatcher);
  REQUIRE(normal1->dispatcher != server->dispatcher);
  // Level 1 has work on device 0 only.
  Submit(s, server, 1, 0);
  s.WaitStream(server);
  // The fast path: default-priority work is at device 1's ceiling, below device 0's (whose
  // dispatcher is idle: level 1 itself may pass there).
  CHECK(s.MayIssueDirect(normal1, 0, /*may_pass_queued=*/false));
  CHECK(s.MayIssueDirect(server, 1, /*may_pass_queued=*/false));
  CHECK_FALSE(s.MayIssueDirect(normal0, 0, /*may_pass_queued=*/false));
  // The dispatchers: with the GPU completing nothing, device 1 issues all of its default-priority
  // ops; device 0 keeps them within the budget, which one unmeasured op fills.
  constexpr int kOps = 4;
  g_gpu_progresses = false;
  for (int i = 0; i < kOps; ++i) {
    Submit(s, normal0, 0, 10 + i);
    Submit(s, normal1, 0, 20 + i);
  }
  {
    Waiter issued([&] { s.WaitStream(normal1); });
    const bool done = issued.DoneWithin(std::chrono::seconds(10));
    CHECK(done);
    if (!done) g_gpu_progresses = true;  // lets the waiter return
  }
  auto issued_on = [](uintptr_t stream) {
    int n = 0;
    for (const Issued& i : Log()) n += i.stream == stream ? 1 : 0;
    return n;
  };
  CHECK(issued_on(0xc006 | kOnDevice1) == kOps);
  CHECK(issued_on(0xc004) <= 1);
  CHECK(normal0->HasUnissued());
  g_gpu_progresses = true;
  s.WaitStream(normal0);
  CHECK(issued_on(0xc004) == kOps);
}

CUresult IssueFailing(Op&) { return CUDA_ERROR_LAUNCH_FAILED; }

TEST_CASE(
    "A process-wide synchronisation waits for work queued on any GPU, and a context's "
    "returns a failed op's error once",
    "[scheduler]") {
  ResetGpu();
  SchedulerOptions options = Options();
  options.max_hold_ns = 0;  // the low op stays held while the high one runs
  gpuprio::scheduler::DriverFunctions driver = ScriptedDriver();
  driver.stream_get_device = &StreamDevice;
  Scheduler s(options, driver);
  StreamState* other = Stream(s, 0xd002);  // device 0: a dispatcher with nothing queued
  StreamState* high = Stream(s, 0xd004 | kOnDevice1);
  StreamState* low = Stream(s, 0xd006 | kOnDevice1);
  REQUIRE(other->dispatcher != high->dispatcher);
  Submit(s, other, 0, 1);
  s.WaitAll();  // nothing held: returns once issued
  CHECK_FALSE(other->HasUnissued());
  g_gpu_progresses = false;
  Submit(s, high, 1, 2);
  Submit(s, low, -1, 3);  // held: the high op is in flight on device 1 and never completes
  {
    Waiter all([&] { s.WaitAll(); });
    CHECK_FALSE(all.DoneWithin(std::chrono::milliseconds(200)));
    CHECK(low->HasUnissued());
    g_gpu_progresses = true;
    CHECK(all.DoneWithin(std::chrono::seconds(20)));
  }
  CHECK_FALSE(low->HasUnissued());
  CHECK(s.TakeDeferredError(low->context) == CUDA_SUCCESS);
  Op* failing = TaggedOp(low, -1, 4);
  failing->issue = &IssueFailing;
  s.Submit(failing);
  s.WaitAll();
  CHECK(s.TakeDeferredError(low->context) == CUDA_ERROR_LAUNCH_FAILED);
  CHECK(s.TakeDeferredError(low->context) == CUDA_SUCCESS);  // reported once
}

TEST_CASE("A process-wide synchronisation brings work home from a twin with nothing queued",
          "[scheduler]") {
  ResetGpu();
  SchedulerOptions options = Options();
  options.isolation = gpuprio::scheduler::Isolation::kForce;  // every op through a twin
  Scheduler s(options, gpuprio_test::ScriptedDriverWithGreenContexts());
  StreamState* stream = Stream(s, 0xe002);
  Submit(s, stream, 0, 1);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (stream->HasUnissued() && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE_FALSE(stream->HasUnissued());
  REQUIRE(stream->away.load());  // issued on its twin, nothing queued
  s.WaitAll();
  CHECK_FALSE(stream->away.load());
}

TEST_CASE("A capture stops the dispatchers after issuing everything, and its end restarts them",
          "[scheduler]") {
  ResetGpu();
  Scheduler s(Options(), ScriptedDriver());
  StreamState* stream = Stream(s, 0x7002);
  for (int i = 0; i < 10; ++i) Submit(s, stream, 0, i);
  s.EnterCapture();
  CHECK(s.CaptureActive());
  CHECK_FALSE(stream->HasUnissued());  // issued before the driver may begin capturing
  CHECK(Log().size() == 10);
  // While capturing nothing is queued: stream work runs on its caller.
  CHECK(s.Resolve(reinterpret_cast<CUstream>(0x7002), false) == nullptr);
  s.LeaveCapture();
  CHECK_FALSE(s.CaptureActive());
  StreamState* again = s.Resolve(reinterpret_cast<CUstream>(0x7002), false);
  REQUIRE(again == stream);
  for (int i = 10; i < 20; ++i) Submit(s, again, 0, i);
  s.WaitStream(again);
  const std::vector<Issued> log = Log();
  REQUIRE(log.size() == 20);
  for (int i = 0; i < 20; ++i) CHECK(log[i].tag == i);
}

}  // namespace
