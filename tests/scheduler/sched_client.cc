// A -lcuda client for the scheduling tests, run against the fake driver with and without
// libgpuprio.so preloaded. Scenarios (argv[1]); each exits 0 only if every check holds and prints
// `sched_client: <scenario> ok` (plus key=value measurements) last:
//   stress    16 threads x 8 shared streams: appends, random syncs, queries, event record -> wait
//             copies; every append lands, in per-(thread, stream) order; every waited copy sees
//             the data its event covered; no deadlock.
//   error     the dispatcher's launch fails (injected): with gpuprio the launch returned
//             CUDA_SUCCESS and the stream's next synchronize returns the error; natively the
//             launch itself returns it. argv[2] = "scheduled" or "native" says which to expect.
//   priority  a low-priority thread queues 40 x 5 ms kernels, then a high-priority thread runs a
//             chain of 5 x 200 us kernels; prints the chain's latency and the most low-priority
//             kernels ever in flight (from the fake's logs).
//   direct    the fast path: (1) a default-priority thread alone launches 50 kernels; prints how
//             many reached the driver from the client's own thread; (2) a high-priority thread
//             launches one 30 ms kernel and does not wait; a low-priority thread then launches 3
//             kernels; prints whether the first low launch reached the driver only after the high
//             kernel ended (work a client issued itself still holds lower priorities back).
//   backpressure  a low-priority thread launches 400 x 200 us kernels, held back by the budget;
//             prints how many had reached the driver when its last launch returned (with
//             GPUPRIO_MAX_QUEUED=N, at least 400 - N: the thread waited instead of queueing all).
//   call_time one thread launches 5 kernels while each real cuLaunchKernel takes 20 ms (the
//             fake's call delay) and synchronizes: what the exit summary's call times say
//             depends on which thread made the real calls. With argv[2] = "inline": one
//             cuMemAllocAsync (an inline row) taking 20 ms, then cuMemFreeAsync, instead.
#include <cuda.h>
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/fake_cuda/clients/client_check.h"
#include "tests/fake_cuda/fake_cuda_control.h"
#include "tests/scheduler/append_log.h"
#include "tests/scheduler/client_support.h"

using fake_client::Check;
using fake_client::CheckCu;
using fake_client::Fail;
using sched_client::Alloc;
using sched_client::NowNs;
using sched_client::ReadBack;
using sched_client::SetThreadPriority;

namespace {

CUmodule g_module = nullptr;
CUcontext g_ctx = nullptr;

void Init() {
  const sched_client::Driver driver = sched_client::InitDriver();
  g_ctx = driver.ctx;
  g_module = driver.module;
}

CUfunction Function(const char* name) { return sched_client::Function(g_module, name); }

int Stress() {
  Init();
  constexpr int kThreads = 16;
  constexpr int kStreams = 8;
  constexpr int kIterations = 150;
  CUfunction append = Function("append_u32");
  CUfunction fill = Function("fill_u32");
  CUfunction copy = Function("copy_u32");
  fakecuda_set_kernel_duration_ns("fill_u32", 20000);  // a slow producer exposes early waits
  std::vector<CUstream> streams(kStreams);
  for (int s = 0; s < kStreams; ++s) {
    CheckCu(cuStreamCreateWithPriority(&streams[s], s % 2 ? CU_STREAM_NON_BLOCKING : 0, -(s % 3)),
            "cuStreamCreateWithPriority");
  }
  std::vector<sched_client::AppendLog> logs;
  for (int s = 0; s < kStreams; ++s) logs.emplace_back(kThreads * kIterations);
  std::vector<CUdeviceptr> produced(kThreads), consumed(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    produced[t] = Alloc(kIterations * 4);
    consumed[t] = Alloc(kIterations * 4);
  }
  std::vector<std::vector<uint32_t>> appended(kThreads, std::vector<uint32_t>(kStreams, 0));
  std::vector<std::vector<uint32_t>> expect_copy(kThreads, std::vector<uint32_t>(kIterations, 0));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      CheckCu(cuCtxSetCurrent(g_ctx), "cuCtxSetCurrent (thread)");
      std::mt19937 rng(1234 + t);
      CUevent event;
      CheckCu(cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
      for (int i = 0; i < kIterations; ++i) {
        const int s = rng() % kStreams;
        const int what = rng() % 10;
        if (what < 6) {
          // The op must own its copy of the parameters: Append's argument dies when it returns.
          const uint32_t value = sched_client::AppendLog::Encode(t, 0, appended[t][s]++);
          if (logs[s].Append(append, streams[s], value) != CUDA_SUCCESS) ++failures;
        } else if (what == 6) {
          if (cuStreamSynchronize(streams[s]) != CUDA_SUCCESS) ++failures;
        } else if (what == 7) {
          const CUresult r = cuStreamQuery(streams[s]);
          if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY) ++failures;
        } else {
          // Produce on s, record, make another stream wait, consume there.
          const int s2 = (s + 1 + rng() % (kStreams - 1)) % kStreams;
          uint32_t value = 1000000 + t * 1000 + i;
          uint32_t one = 1;
          CUdeviceptr src = produced[t] + i * 4;
          CUdeviceptr dst = consumed[t] + i * 4;
          void* fill_args[] = {&src, &value, &one};
          void* copy_args[] = {&dst, &src, &one};
          expect_copy[t][i] = value;
          if (cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, streams[s], fill_args, nullptr) != 0 ||
              cuEventRecord(event, streams[s]) != 0 || cuStreamWaitEvent(streams[s2], event, 0) != 0 ||
              cuLaunchKernel(copy, 1, 1, 1, 1, 1, 1, 0, streams[s2], copy_args, nullptr) != 0) {
            ++failures;
          }
        }
      }
      cuEventDestroy(event);
    });
  }
  for (auto& th : threads) th.join();
  CheckCu(cuCtxSynchronize(), "cuCtxSynchronize");
  Check(failures.load() == 0, "every call succeeded");
  uint64_t total = 0;
  for (int s = 0; s < kStreams; ++s) {
    std::vector<uint32_t> launched(kThreads);
    for (int t = 0; t < kThreads; ++t) launched[t] = appended[t][s];
    const sched_client::AppendLog::Verdict v = logs[s].Check(launched, 0);
    if (!v.ok()) Fail(("stream " + std::to_string(s) + ": " + v.first_problem).c_str());
    total += v.entries;
  }
  for (int t = 0; t < kThreads; ++t) {
    const std::vector<uint32_t> got = ReadBack(consumed[t], kIterations);
    for (int i = 0; i < kIterations; ++i) {
      if (got[i] != expect_copy[t][i]) {
        Fail(("thread " + std::to_string(t) + " copy " + std::to_string(i) +
              " ran before the event it waited for").c_str());
      }
    }
  }
  std::printf("appends=%lu\n", static_cast<unsigned long>(total));
  return fake_client::Succeed();
}

int Error(bool scheduled) {
  Init();
  CUfunction fill = Function("fill_u32");
  CUstream stream;
  CheckCu(cuStreamCreate(&stream, 0), "cuStreamCreate");
  CUdeviceptr buf = Alloc(16);
  uint32_t value = 7, count = 4;
  void* args[] = {&buf, &value, &count};
  CheckCu(cuLaunchKernel(fill, 1, 1, 1, 4, 1, 1, 0, stream, args, nullptr), "first launch");
  CheckCu(cuStreamSynchronize(stream), "sync before the failure");
  fakecuda_fail_next_call("cuLaunchKernel", CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
  const CUresult launch = cuLaunchKernel(fill, 1, 1, 1, 4, 1, 1, 0, stream, args, nullptr);
  const CUresult sync = cuStreamSynchronize(stream);
  const CUresult again = cuStreamSynchronize(stream);
  std::printf("launch=%d sync=%d again=%d\n", launch, sync, again);
  if (scheduled) {
    Check(launch == CUDA_SUCCESS, "the scheduled launch returns at once");
    Check(sync == CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "the next sync reports the deferred error");
  } else {
    Check(launch == CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "the native launch fails itself");
    Check(sync == CUDA_SUCCESS, "nothing left to report");
  }
  Check(again == CUDA_SUCCESS, "the error is reported once");
  // Errors CUDA reports at launch time stay immediate.
  Check(cuLaunchKernel(fill, 1, 1, 1, 2048, 1, 1, 0, stream, args, nullptr) ==
            CUDA_ERROR_INVALID_VALUE,
        "a block of 2048 threads is rejected at launch time");
  return fake_client::Succeed();
}

int Priority() {
  Init();
  CUfunction sleep = Function("sleep_ns");
  // The chain uses another kernel: gpuprio learns durations per function, and a function whose
  // runs took 200 us would make the 5 ms low-priority kernels look cheap to the budget.
  CUfunction chain_kernel = Function("empty");
  constexpr uint64_t kHighNs = 200000;
  fakecuda_set_kernel_duration_ns("empty", kHighNs);
  CUstream low_stream, high_stream;
  CheckCu(cuStreamCreate(&low_stream, CU_STREAM_NON_BLOCKING), "low stream");
  CheckCu(cuStreamCreate(&high_stream, CU_STREAM_NON_BLOCKING), "high stream");
  constexpr int kLow = 40;
  constexpr uint64_t kLowNs = 5'000'000;
  constexpr int kHigh = 5;
  std::thread low([&] {
    CheckCu(cuCtxSetCurrent(g_ctx), "cuCtxSetCurrent (low)");
    SetThreadPriority(-1);
    uint64_t ns = kLowNs;
    void* args[] = {&ns};
    for (int i = 0; i < kLow; ++i) {
      CheckCu(cuLaunchKernel(sleep, 1, 1, 1, 1, 1, 1, 0, low_stream, args, nullptr), "low launch");
    }
  });
  low.join();
  // Let some low-priority work reach the device first.
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  int64_t submit_ns = 0, done_ns = 0;
  std::thread high([&] {
    CheckCu(cuCtxSetCurrent(g_ctx), "cuCtxSetCurrent (high)");
    SetThreadPriority(1);
    submit_ns = NowNs();
    for (int i = 0; i < kHigh; ++i) {
      CheckCu(cuLaunchKernel(chain_kernel, 1, 1, 1, 1, 1, 1, 0, high_stream, nullptr, nullptr),
              "high launch");
    }
    CheckCu(cuStreamSynchronize(high_stream), "high sync");
    done_ns = NowNs();
  });
  high.join();
  CheckCu(cuStreamSynchronize(low_stream), "low sync");
  // Low-priority kernels in flight: issued to the device (the fake saw the launch call) and not
  // yet finished executing, at each moment a low-priority launch reached the device. The low
  // kernels are told apart by name (only they run sleep_ns), not by stream: with spatial
  // isolation they run on a twin stream of low_stream.
  std::vector<std::pair<uint64_t, uint64_t>> low_ops;  // issue time, end of execution
  std::vector<uint64_t> low_issue, low_end;
  const uint64_t calls = fakecuda_call_count();
  for (uint64_t i = 0; i < calls; ++i) {
    fakecuda_call_record c;
    fakecuda_get_call(i, &c);
    if (std::strncmp(c.api, "cuLaunchKernel", 64) == 0 && std::strcmp(c.function, "sleep_ns") == 0) {
      low_issue.push_back(c.start_ns);
    }
  }
  const uint64_t execs = fakecuda_exec_count();
  for (uint64_t i = 0; i < execs; ++i) {
    fakecuda_exec_record e;
    fakecuda_get_exec(i, &e);
    if (std::strcmp(e.what, "sleep_ns") == 0) {
      low_end.push_back(e.end_ns);
    }
  }
  if (low_issue.size() != kLow || low_end.size() != kLow) {
    std::printf("low launches logged=%zu executed=%zu\n", low_issue.size(), low_end.size());
    Fail("every low-priority kernel ran");
  }
  int max_in_flight = 0;
  for (size_t i = 0; i < low_issue.size(); ++i) {
    int in_flight = 1;
    for (size_t j = 0; j < i; ++j) in_flight += low_end[j] > low_issue[i];
    max_in_flight = std::max(max_in_flight, in_flight);
  }
  std::printf("high_latency_us=%lu high_work_us=%lu low_max_in_flight=%d low_kernel_us=%lu\n",
              static_cast<unsigned long>((done_ns - submit_ns) / 1000),
              static_cast<unsigned long>(kHigh * kHighNs / 1000), max_in_flight,
              static_cast<unsigned long>(kLowNs / 1000));
  return fake_client::Succeed();
}

long Tid() { return static_cast<long>(syscall(SYS_gettid)); }

int Direct() {
  Init();
  CUfunction sleep = Function("sleep_ns");
  CUstream alone, high_stream, low_stream;
  CheckCu(cuStreamCreate(&alone, CU_STREAM_NON_BLOCKING), "alone stream");
  CheckCu(cuStreamCreate(&high_stream, CU_STREAM_NON_BLOCKING), "high stream");
  CheckCu(cuStreamCreate(&low_stream, CU_STREAM_NON_BLOCKING), "low stream");
  uint64_t ns = 1000;
  void* args[] = {&ns};
  const long client_tid = Tid();
  for (int i = 0; i < 50; ++i) {
    CheckCu(cuLaunchKernel(sleep, 1, 1, 1, 1, 1, 1, 0, alone, args, nullptr), "alone launch");
  }
  CheckCu(cuStreamSynchronize(alone), "alone sync");

  uint64_t high_ns = 30'000'000;
  void* high_args[] = {&high_ns};
  std::thread high([&] {
    CheckCu(cuCtxSetCurrent(g_ctx), "cuCtxSetCurrent (high)");
    SetThreadPriority(1);
    CheckCu(cuLaunchKernel(sleep, 1, 1, 1, 1, 1, 1, 0, high_stream, high_args, nullptr),
            "high launch");
  });
  high.join();
  std::thread low([&] {
    CheckCu(cuCtxSetCurrent(g_ctx), "cuCtxSetCurrent (low)");
    SetThreadPriority(-1);
    for (int i = 0; i < 3; ++i) {
      CheckCu(cuLaunchKernel(sleep, 1, 1, 1, 1, 1, 1, 0, low_stream, args, nullptr), "low launch");
    }
  });
  low.join();
  CheckCu(cuCtxSynchronize(), "cuCtxSynchronize");

  int alone_total = 0, alone_from_client = 0;
  uint64_t low_first_issue = UINT64_MAX;
  for (uint64_t i = 0, n = fakecuda_call_count(); i < n; ++i) {
    fakecuda_call_record c;
    fakecuda_get_call(i, &c);
    if (std::strcmp(c.api, "cuLaunchKernel") != 0) continue;
    if (c.stream == reinterpret_cast<uint64_t>(alone)) {
      ++alone_total;
      alone_from_client += c.tid == client_tid;
    } else if (c.stream == reinterpret_cast<uint64_t>(low_stream)) {
      low_first_issue = std::min(low_first_issue, c.start_ns);
    }
  }
  uint64_t high_end = 0;
  for (uint64_t i = 0, n = fakecuda_exec_count(); i < n; ++i) {
    fakecuda_exec_record e;
    fakecuda_get_exec(i, &e);
    if (e.stream == reinterpret_cast<uint64_t>(high_stream)) high_end = e.end_ns;
  }
  Check(alone_total == 50 && high_end != 0 && low_first_issue != UINT64_MAX,
        "every launch reached the driver");
  std::printf("alone_launches=%d alone_from_client=%d low_after_high_end=%d\n", alone_total,
              alone_from_client, low_first_issue >= high_end ? 1 : 0);
  return fake_client::Succeed();
}

int Backpressure() {
  Init();
  CUfunction sleep = Function("sleep_ns");
  CUstream stream;
  CheckCu(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "stream");
  SetThreadPriority(-1);
  constexpr int kLaunches = 400;
  uint64_t ns = 200'000;
  void* args[] = {&ns};
  for (int i = 0; i < kLaunches; ++i) {
    CheckCu(cuLaunchKernel(sleep, 1, 1, 1, 1, 1, 1, 0, stream, args, nullptr), "launch");
  }
  int reached = 0;
  for (uint64_t i = 0, n = fakecuda_call_count(); i < n; ++i) {
    fakecuda_call_record c;
    fakecuda_get_call(i, &c);
    reached += std::strcmp(c.api, "cuLaunchKernel") == 0 &&
               c.stream == reinterpret_cast<uint64_t>(stream);
  }
  CheckCu(cuStreamSynchronize(stream), "sync");
  std::printf("launches=%d reached_driver_at_return=%d\n", kLaunches, reached);
  return fake_client::Succeed();
}

int CallTime(bool inline_row) {
  Init();
  CUstream stream;
  CheckCu(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "stream");
  if (inline_row) {
    // A row of the inline class (it runs on its caller after its stream's work), then an ordered
    // free: two calls.
    fakecuda_set_call_delay_ns("cuMemAllocAsync", 20'000'000);
    CUdeviceptr p = 0;
    CheckCu(cuMemAllocAsync(&p, 256, stream), "cuMemAllocAsync");
    CheckCu(cuMemFreeAsync(p, stream), "cuMemFreeAsync");
  } else {
    CUfunction empty = Function("empty");
    fakecuda_set_call_delay_ns("cuLaunchKernel", 20'000'000);
    for (int i = 0; i < 5; ++i) {
      CheckCu(cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr), "launch");
    }
  }
  CheckCu(cuStreamSynchronize(stream), "sync");
  return fake_client::Succeed();
}

}  // namespace

int Attributes() {
  Init();
  CUfunction sleep = Function("sleep_ns");
  CUfunction add = Function("add_u32");
  CUstream stream;
  CheckCu(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  constexpr uint32_t kCount = 64;
  constexpr int kRounds = 10;
  CUdeviceptr buf = Alloc(kCount * 4);
  for (int i = 0; i < kRounds; ++i) {
    uint64_t ns = 2'000'000;
    void* sleep_args[] = {&ns};
    CheckCu(cuLaunchKernel(sleep, 1, 1, 1, 1, 1, 1, 0, stream, sleep_args, nullptr), "sleep");
    uint32_t delta = 1, count = kCount;
    void* add_args[] = {&buf, &delta, &count};
    CheckCu(cuFuncSetAttribute(add, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 65536),
            "cuFuncSetAttribute 64 KiB");
    CheckCu(cuLaunchKernel(add, 1, 1, 1, 64, 1, 1, 65536, stream, add_args, nullptr),
            "launch with 64 KiB");
    CheckCu(cuFuncSetAttribute(add, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 1024),
            "cuFuncSetAttribute 1 KiB");
    CheckCu(cuLaunchKernel(add, 1, 1, 1, 64, 1, 1, 512, stream, add_args, nullptr),
            "launch with 512 bytes");
  }
  CheckCu(cuStreamSynchronize(stream), "cuStreamSynchronize");
  const std::vector<uint32_t> v = ReadBack(buf, kCount);
  for (uint32_t x : v) Check(x == 2 * kRounds, "every launch ran once");
  return fake_client::Succeed();
}

int main(int argc, char** argv) {
  fake_client::g_client_name = "sched_client";
  if (argc < 2) Fail("usage: sched_client stress|error scheduled|native|priority|direct|backpressure|call_time|"
       "attributes");
  fake_client::g_scenario = argv[1];
  const std::string scenario = argv[1];
  if (scenario == "stress") return Stress();
  if (scenario == "error") return Error(argc > 2 && std::string(argv[2]) == "scheduled");
  if (scenario == "priority") return Priority();
  if (scenario == "direct") return Direct();
  if (scenario == "backpressure") return Backpressure();
  if (scenario == "call_time") return CallTime(argc > 2 && std::string(argv[2]) == "inline");
  if (scenario == "attributes") return Attributes();
  Fail("unknown scenario");
}
