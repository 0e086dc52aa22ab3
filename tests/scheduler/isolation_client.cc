// A -lcuda client for the spatial-isolation tests, run against the fake driver with
// libgpuprio.so preloaded. One scenario, checked from the fake's logs of what ran where; prints
// `isolation_client: ok` and key=value facts last, exits 0 only if every check holds:
//   1. A low-priority thread alone: nothing is confined and no green context exists (the hidden
//      cost of isolation is nil for a program with one level).
//   2. A high-priority thread runs a kernel (its level becomes active). The low thread then
//      appends 30 values on a blocking stream, interleaved with appends on the legacy NULL stream
//      and with a pageable-memory copy run on the caller: every one ran, in its stream's order
//      and in CUDA's legacy order (a blocking stream's op after earlier legacy work and the
//      reverse), its kernels on a green context of the expected SM count; the high kernel ran
//      on the whole GPU; a synchronize of the stream returned after its last kernel ran.
//   With EXPECTED_CONFINED_SMS 0 (a driver without green contexts), nothing is confined and the
//   rest holds as well.
//   A high-priority thread keeps its level active through steps 2 and 3 (HighSteps, a
//   RepeatingActivity), and a watchdog ends a pause of the device that a blocked call would make
//   endless (DevicePause).
//   3. A confined stream keeps a bounded queue on its twin: with the device paused, of four
//      20 ms kernels (the first one measured) the dispatcher issues one and holds the rest, so
//      the stream's return to the whole GPU waits for one long kernel, not four; all run confined.
//   4. After the activity window (0.5 s) with no high work, the low thread's new kernels run on
//      the whole GPU again, still in order after the confined ones.
#include <cuda.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "tests/fake_cuda/clients/client_check.h"
#include "tests/fake_cuda/fake_cuda_control.h"
#include "tests/scheduler/append_log.h"
#include "tests/scheduler/client_support.h"
#include "tests/scheduler/repeating_activity.h"

using fake_client::Check;
using fake_client::CheckCu;
using fake_client::Fail;
using sched_client::AppendLog;
using sched_client::SetThreadPriority;

namespace {

struct Ran {
  int total = 0;
  int green = 0;
  int sm_count_of_green = 0;  // the last green op's
  uint64_t last_end_ns = 0;
};

// What the fake executed of `kernel` from exec record `from` on.
Ran RanSince(uint64_t from, const char* kernel) {
  Ran r;
  for (uint64_t i = from, n = fakecuda_exec_count(); i < n; ++i) {
    fakecuda_exec_record e;
    fakecuda_get_exec(i, &e);
    if (std::strcmp(e.what, kernel) != 0) continue;
    ++r.total;
    if (e.green) {
      ++r.green;
      r.sm_count_of_green = e.sm_count;
    }
    r.last_end_ns = std::max(r.last_end_ns, e.end_ns);
  }
  return r;
}

// Keeps a more important level active while it lives: a high-priority thread sets a word on its
// stream every 50 ms (a memset, so the steps' kernel and launch counts are not touched). A step
// that expects its work confined must not outlast the activity window (0.5 s) since the last
// high op, as it can in a sanitizer build on a loaded machine: its work would then run on the
// whole GPU under the budget, and be held for good while the device is paused.
sched_client::RepeatingActivity::Steps HighSteps(CUcontext ctx, CUstream stream) {
  auto word = std::make_shared<CUdeviceptr>(0);
  sched_client::RepeatingActivity::Steps steps;
  steps.setup = [ctx, word] {
    CheckCu(cuCtxSetCurrent(ctx), "cuCtxSetCurrent (high activity)");
    SetThreadPriority(1);
    *word = sched_client::Alloc(sizeof(uint32_t));
  };
  steps.round = [stream, word] { CheckCu(cuMemsetD32Async(*word, 1, 1, stream), "high memset"); };
  return steps;
}

// Pauses device 0 until Resume, or for at most 5 s: a call that blocks while the device is paused
// (waiting for work a paused device never completes) then fails the check instead of hanging it.
class DevicePause {
 public:
  DevicePause()
      : watchdog_([this] {
          absl::MutexLock lock(&mu_);
          if (!mu_.AwaitWithTimeout(absl::Condition(&resumed_), absl::Seconds(5))) {
            expired_.store(true);
            fakecuda_set_device_paused(0, 0);
          }
        }) {
    fakecuda_set_device_paused(0, 1);
  }
  ~DevicePause() { Resume(); }

  // Resumes the device; false if the watchdog had to.
  bool Resume() {
    if (watchdog_.joinable()) {
      {
        absl::MutexLock lock(&mu_);
        resumed_ = true;
      }
      watchdog_.join();
      fakecuda_set_device_paused(0, 0);
    }
    return !expired_.load();
  }

 private:
  absl::Mutex mu_;
  bool resumed_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> expired_{false};
  std::thread watchdog_;  // last: it starts once the members it uses exist
};

uint64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(ts.tv_nsec);
}

int Run(int expected_sms) {
  const sched_client::Driver driver = sched_client::InitDriver();
  CUfunction append = sched_client::Function(driver.module, "append_u32");
  CUfunction sleep = sched_client::Function(driver.module, "sleep_ns");
  CUstream low_stream, high_stream;
  // A higher CUDA priority than the legacy stream's: were the legacy order lost, the fake device
  // (which starts the highest-priority ready op first) would run the blocking stream's appends
  // ahead of earlier legacy ones.
  CheckCu(cuStreamCreateWithPriority(&low_stream, 0, -1), "low stream (blocking)");
  CheckCu(cuStreamCreate(&high_stream, CU_STREAM_NON_BLOCKING), "high stream");
  // Writers: 0 the blocking stream, 1 the legacy stream; one log, so the legacy order between
  // the two shows in it.
  AppendLog log(256);
  std::vector<uint32_t> launched(2, 0);
  std::vector<uint32_t> sequence;  // every value in launch order
  auto append_on = [&](int writer, CUstream stream) {
    const uint32_t value = AppendLog::Encode(writer, 1, launched[writer]++);
    sequence.push_back(value);
    CheckCu(log.Append(append, stream, value), "append");
  };

  // 1. Alone.
  std::thread alone([&] {
    CheckCu(cuCtxSetCurrent(driver.ctx), "cuCtxSetCurrent (alone)");
    SetThreadPriority(-1);
    for (int i = 0; i < 5; ++i) append_on(0, low_stream);
    CheckCu(cuStreamSynchronize(low_stream), "alone sync");
  });
  alone.join();
  const uint64_t after_alone = fakecuda_exec_count();
  const Ran alone_ran = RanSince(0, "append_u32");
  Check(alone_ran.total == 5 && alone_ran.green == 0, "a lone level's work ran on the whole GPU");
  Check(fakecuda_count_calls("cuGreenCtxCreate") == 0, "no green context for a lone level");

  // A short kernel of a high-priority thread: its level is active for the next 0.5 s.
  auto run_high = [&] {
    std::thread high([&] {
      CheckCu(cuCtxSetCurrent(driver.ctx), "cuCtxSetCurrent (high)");
      SetThreadPriority(1);
      uint64_t ns = 20'000;
      void* args[] = {&ns};
      CheckCu(cuLaunchKernel(sleep, 1, 1, 1, 1, 1, 1, 0, high_stream, args, nullptr), "high");
      CheckCu(cuStreamSynchronize(high_stream), "high sync");
    });
    high.join();
  };

  // 2. A more important level is active.
  run_high();
  uint64_t sync_returned_ns = 0;
  bool resumed_in_time = true;
  std::optional<sched_client::RepeatingActivity> high_activity;
  high_activity.emplace(HighSteps(driver.ctx, high_stream), absl::Milliseconds(50));
  std::thread low([&] {
    CheckCu(cuCtxSetCurrent(driver.ctx), "cuCtxSetCurrent (low)");
    SetThreadPriority(-1);
    std::vector<uint32_t> host(4, 7);  // pageable: the copy runs on this thread
    CUdeviceptr scratch = sched_client::Alloc(host.size() * sizeof(uint32_t));
    // Paused, the device only queues: the order it then runs the work in is what the streams and
    // their links allow, not the order of arrival. (Not without a partition: budgeted work waits
    // for completions.) Not across the inline copy either: it waits until the stream's earlier
    // work is issued, and the twin's queue bound may hold some of it until work completes (how
    // much depends on the appends' measured durations, which a loaded machine inflates).
    std::optional<DevicePause> paused;
    if (expected_sms != 0) paused.emplace();
    for (int i = 0; i < 30; ++i) {
      append_on(0, low_stream);
      if (i % 5 == 0) append_on(1, nullptr);  // the legacy NULL stream
      if (i == 12) {
        if (paused) resumed_in_time &= paused->Resume();
        CheckCu(cuMemcpyHtoDAsync(scratch, host.data(), host.size() * sizeof(uint32_t),
                                  low_stream),
                "pageable copy");
        if (paused) {
          paused.reset();
          paused.emplace();
        }
      }
    }
    if (paused) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the dispatcher issues it all
      resumed_in_time &= paused->Resume();
    }
    CheckCu(cuStreamSynchronize(low_stream), "low sync");
    sync_returned_ns = MonotonicNs();
  });
  low.join();
  high_activity.reset();
  Check(resumed_in_time, "no call of the low thread blocked while the device was paused");
  const Ran confined = RanSince(after_alone, "append_u32");
  const Ran high_ran = RanSince(after_alone, "sleep_ns");
  Check(high_ran.total == 1 && high_ran.green == 0, "the high kernel ran on the whole GPU");
  Check(confined.total == 36, "every low append ran once");
  if (expected_sms == 0) {
    Check(confined.green == 0, "without green contexts nothing was confined");
  } else {
    Check(confined.green == confined.total, "low work below an active level was confined");
    Check(confined.sm_count_of_green == expected_sms, "the partition has the expected SMs");
  }
  // The fake's clock is CLOCK_MONOTONIC too.
  Check(confined.last_end_ns <= sync_returned_ns,
        "the stream's synchronize returned only after its confined work ran");
  Check(fakecuda_count_calls("cuGreenCtxCreate") == (expected_sms == 0 ? 0 : 1),
        "one green context for the device");

  // 3. A bounded queue on the twin (options.confined_queue_ns: 10 ms).
  if (expected_sms != 0) {
    const uint64_t before_long = fakecuda_exec_count();
    run_high();
    high_activity.emplace(HighSteps(driver.ctx, high_stream), absl::Milliseconds(50));
    uint64_t launches_while_paused = 0;
    // A kernel of its own: the estimate is per function, and sleep_ns is known as short.
    CUfunction long_kernel = sched_client::Function(driver.module, "empty");
    fakecuda_set_kernel_duration_ns("empty", 20'000'000);
    std::thread deep([&] {
      CheckCu(cuCtxSetCurrent(driver.ctx), "cuCtxSetCurrent (deep)");
      SetThreadPriority(-1);
      auto launch = [&] {
        CheckCu(cuLaunchKernel(long_kernel, 1, 1, 1, 1, 1, 1, 0, low_stream, nullptr, nullptr),
                "long");
      };
      launch();  // measured: its duration is known from here on
      CheckCu(cuStreamSynchronize(low_stream), "long sync");
      DevicePause paused;
      const uint64_t reached = fakecuda_count_calls("cuLaunchKernel");
      for (int i = 0; i < 4; ++i) launch();
      std::this_thread::sleep_for(std::chrono::milliseconds(60));
      launches_while_paused = fakecuda_count_calls("cuLaunchKernel") - reached;
      resumed_in_time = paused.Resume();
      CheckCu(cuStreamSynchronize(low_stream), "deep sync");
    });
    deep.join();
    high_activity.reset();
    Check(resumed_in_time, "no launch blocked while the device was paused");
    const Ran long_ran = RanSince(before_long, "empty");
    Check(launches_while_paused == 1,
          ("one long kernel queued on the twin at a time (issued while paused: " +
           std::to_string(launches_while_paused) + ")")
              .c_str());
    Check(long_ran.total == 5 && long_ran.green == 5, "the long low kernels all ran confined");
  }

  // 4. Quiet for longer than the activity window: back on the whole GPU.
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  const uint64_t after_confined = fakecuda_exec_count();
  std::thread later([&] {
    CheckCu(cuCtxSetCurrent(driver.ctx), "cuCtxSetCurrent (later)");
    SetThreadPriority(-1);
    for (int i = 0; i < 5; ++i) append_on(0, low_stream);
    append_on(1, nullptr);
    CheckCu(cuCtxSynchronize(), "later sync");
  });
  later.join();
  const Ran home = RanSince(after_confined, "append_u32");
  Check(home.total == 6 && home.green == 0, "after the window, low work used the whole GPU");

  const AppendLog::Verdict v = log.Check(launched, 1);
  if (!v.ok()) Fail(("append log: " + v.first_problem).c_str());
  // One thread launched every append, alternating a blocking stream and the legacy stream, which
  // CUDA orders against each other: the log is exactly the launch sequence.
  const std::vector<uint32_t> ran = sched_client::ReadBack(log.device(), sequence.size() + 1);
  Check(std::vector<uint32_t>(ran.begin() + 1, ran.end()) == sequence,
        "the legacy stream and the blocking stream kept CUDA's order across the twins");
  std::printf("confined=%d sm_count=%d home=%d\n", confined.green, confined.sm_count_of_green,
              home.total);
  return fake_client::Succeed();
}

}  // namespace

int main(int argc, char** argv) {
  fake_client::g_client_name = "isolation_client";
  fake_client::g_scenario = "isolation";
  if (argc < 2) Fail("usage: isolation_client EXPECTED_CONFINED_SMS");
  return Run(std::stoi(argv[1]));
}
