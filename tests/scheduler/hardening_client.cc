// A -lcuda client that reproduces liveness and resource defects of a scheduler under stress, run
// against the fake driver with and without libgpuprio.so preloaded. A watchdog ends any scenario
// that stalls (exit 3, "stalled" on stderr) so a hang fails the test instead of its timeout.
// Scenarios (argv[1]); each prints key=value measurements and `hardening_client: <scenario> ok`:
//   submit_race      32 threads x 500 low-priority launches on the legacy stream: no thread may
//                    wait forever in backpressure while the stream's ops are all issued.
//   fork_while_working  4 threads launch, copy back synchronously and synchronise while the main
//                    thread forks 200 times; every child launches, synchronises and exits.
//   fork_during_resolve  fork() while another thread is inside gpuprio's first look-up of the
//                    driver's entry points (slowed down in the fake); the child's own driver
//                    calls must not wait for that look-up, whose thread does not exist there.
//   fork_in_capture  fork() between cuStreamBeginCapture and cuStreamEndCapture; the graph runs.
//   fork_held        3000 low-priority ops held back on a paused device; fork() returns, the
//                    child exits, the work completes once the device resumes; prints fork_us.
//   error_waits      a deferred launch error: the stream's (or context's) synchronize returns it
//                    only after the 300 ms kernel queued behind the failing launch has finished.
//   held_cpu         200 x 5 ms low-priority kernels held back by the budget; prints the
//                    process's CPU time and the wall time of the run.
//   exit_wedged      low-priority work queued on a paused device that never resumes; main returns
//                    (gpuprio's exit handler must give up instead of waiting forever).
//   stream_churn     20,000 streams created, used (normal and low priority) and destroyed;
//                    prints live driver events and RSS growth after warm-up.
#include <cuda.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/fake_cuda/clients/client_check.h"
#include "tests/fake_cuda/fake_cuda_control.h"
#include "tests/scheduler/client_support.h"

using fake_client::Check;
using fake_client::CheckCu;
using fake_client::Fail;
using sched_client::RssKb;
using sched_client::SetThreadPriority;

namespace {

sched_client::Driver g_driver;

void StartWatchdog(int seconds) {
  std::thread([seconds] {
    std::this_thread::sleep_for(std::chrono::seconds(seconds));
    std::fprintf(stderr, "hardening_client: %s stalled for %d s\n", fake_client::g_scenario,
                 seconds);
    std::fflush(stderr);
    _exit(3);
  }).detach();
}

void Init() { g_driver = sched_client::InitDriver(); }

CUfunction Function(const char* name) { return sched_client::Function(g_driver.module, name); }

int64_t NowUs() { return sched_client::NowNs() / 1000; }

// A non-blocking stream whose work the calling thread submits at low priority (on the budget).
CUstream LowPriorityStream() {
  CUstream stream;
  CheckCu(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "stream");
  SetThreadPriority(-1);
  return stream;
}

void LaunchSleep(CUfunction sleep, uint64_t ns, CUstream stream, const char* what) {
  void* args[] = {&ns};
  CheckCu(cuLaunchKernel(sleep, 1, 1, 1, 1, 1, 1, 0, stream, args, nullptr), what);
}

// Writes every thread's stack of a hung child to stderr, where gdb is installed: a hang that
// shows up once in hundreds of forks is diagnosed from the test log alone.
void DumpStacks(pid_t pid) {
  const std::string command = "gdb -p " + std::to_string(pid) +
                              " -batch -nx -ex 'thread apply all bt' 1>&2 2>/dev/null";
  if (std::system("command -v gdb >/dev/null 2>&1") == 0) std::system(command.c_str());
}

// Waits for `pid` for at most `seconds`; a child still running then is killed and reported.
bool ReapWithin(pid_t pid, int seconds, int* status) {
  const int64_t deadline = NowUs() + int64_t{seconds} * 1000000;
  while (NowUs() < deadline) {
    const pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid) return true;
    Check(r == 0, "waitpid");
    usleep(1000);
  }
  DumpStacks(pid);
  kill(pid, SIGKILL);
  waitpid(pid, status, 0);
  return false;
}

int SubmitRace() {
  StartWatchdog(120);
  Init();
  CUfunction empty = Function("empty");
  constexpr int kThreads = 32;
  constexpr int kLaunches = 500;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      CheckCu(cuCtxSetCurrent(g_driver.ctx), "cuCtxSetCurrent (thread)");
      SetThreadPriority(-1);
      for (int i = 0; i < kLaunches; ++i) {
        if (cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr) != 0) {
          ++failures;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  CheckCu(cuCtxSynchronize(), "cuCtxSynchronize");
  Check(failures.load() == 0, "every launch succeeds");
  const uint64_t reached = fakecuda_count_calls("cuLaunchKernel");
  std::printf("launches=%d reached=%llu\n", kThreads * kLaunches,
              static_cast<unsigned long long>(reached));
  Check(reached == uint64_t{kThreads} * kLaunches, "every launch reaches the driver once");
  return fake_client::Succeed();
}

// A child of a process that used the driver: initialises the driver again (the fake, like a
// fresh process, starts uninitialised in a child), launches on a new stream and synchronises.
[[noreturn]] void ChildWork() {
  CUdevice dev;
  CUcontext ctx;
  CUmodule module;
  CUfunction fill;
  static const char kImage[] = "fake module image";
  if (cuInit(0) != 0 || cuDeviceGet(&dev, 0) != 0 || cuDevicePrimaryCtxRetain(&ctx, dev) != 0 ||
      cuCtxSetCurrent(ctx) != 0 || cuModuleLoadData(&module, kImage) != 0 ||
      cuModuleGetFunction(&fill, module, "fill_u32") != 0) {
    _exit(9);
  }
  CUstream stream;
  CUdeviceptr buf;
  uint32_t out[4] = {};
  uint32_t value = 42, count = 4;
  if (cuStreamCreate(&stream, 0) != 0 || cuMemAlloc(&buf, 16) != 0) _exit(10);
  void* args[] = {&buf, &value, &count};
  if (cuLaunchKernel(fill, 1, 1, 1, 4, 1, 1, 0, stream, args, nullptr) != 0) _exit(11);
  if (cuStreamSynchronize(stream) != 0) _exit(12);
  if (cuMemcpyDtoH(out, buf, 16) != 0) _exit(13);
  _exit(out[3] == 42 ? 0 : 14);
}

int ForkWhileWorking() {
  StartWatchdog(240);
  Init();
  CUfunction sleep = Function("sleep_ns");
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < 4; ++t) {
    workers.emplace_back([&, t] {
      CheckCu(cuCtxSetCurrent(g_driver.ctx), "cuCtxSetCurrent (worker)");
      SetThreadPriority(t % 2 == 0 ? -1 : 0);
      CUstream stream;
      CheckCu(cuStreamCreate(&stream, t == 3 ? CU_STREAM_NON_BLOCKING : 0), "worker stream");
      CUdeviceptr buf;
      CheckCu(cuMemAlloc(&buf, 16), "worker alloc");
      uint32_t out[4];
      for (int i = 0; !stop.load(); ++i) {
        LaunchSleep(sleep, 20000, stream, "worker launch");
        LaunchSleep(sleep, 20000, nullptr, "worker legacy launch");
        if (i % 3 == 0) CheckCu(cuMemcpyDtoH(out, buf, 16), "worker cuMemcpyDtoH");
        if (i % 5 == 0) CheckCu(cuStreamSynchronize(stream), "worker sync");
        if (i % 7 == 0) {
          CUstream extra;
          CheckCu(cuStreamCreate(&extra, 0), "worker extra stream");
          LaunchSleep(sleep, 1000, extra, "worker extra launch");
          CheckCu(cuStreamDestroy(extra), "worker destroy");
        }
      }
      CheckCu(cuStreamSynchronize(stream), "worker final sync");
    });
  }
  constexpr int kForks = 200;
  int hung = 0, failed = 0;
  for (int i = 0; i < kForks; ++i) {
    const pid_t pid = fork();
    Check(pid >= 0, "fork");
    if (pid == 0) ChildWork();
    int status = 0;
    if (!ReapWithin(pid, 30, &status)) {
      ++hung;
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      ++failed;
    }
  }
  stop = true;
  for (auto& w : workers) w.join();
  CheckCu(cuCtxSynchronize(), "cuCtxSynchronize");
  std::printf("forks=%d hung_children=%d failed_children=%d\n", kForks, hung, failed);
  Check(hung == 0, "no child deadlocks");
  Check(failed == 0, "every child launches and synchronises");
  return fake_client::Succeed();
}

int ForkDuringResolve() {
  StartWatchdog(60);
  // About 120 look-ups at 2 ms each: the resolve takes a quarter of a second.
  fakecuda_set_call_delay_ns("cuGetProcAddress_v2", 2000000);
  std::atomic<bool> started{false};
  std::atomic<bool> finished{false};
  std::thread first_call([&] {
    started = true;
    // The process's first intercepted call (cuInit is a pass-through row): it resolves the driver.
    CheckCu(cuInit(0), "cuInit (thread)");
    finished = true;
  });
  while (!started.load()) usleep(100);
  const int64_t deadline = NowUs() + 5000000;
  while (fakecuda_count_calls("cuGetProcAddress_v2") < 5 && NowUs() < deadline) usleep(100);
  const bool mid_resolve = !finished.load() && fakecuda_count_calls("cuGetProcAddress_v2") >= 5;
  const pid_t pid = fork();
  Check(pid >= 0, "fork");
  if (pid == 0) ChildWork();
  int status = 0;
  const bool reaped = ReapWithin(pid, 20, &status);
  first_call.join();
  Init();  // the context and the module, now that the driver is resolved
  std::printf("forked_mid_resolve=%d child_hung=%d child_exit=%d\n", mid_resolve ? 1 : 0,
              reaped ? 0 : 1, reaped && WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  Check(mid_resolve, "the fork happened while the first call was resolving the driver");
  Check(reaped, "the child does not hang");
  Check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child launches and synchronises");
  return fake_client::Succeed();
}

int ForkInCapture() {
  StartWatchdog(60);
  Init();
  CUfunction fill = Function("fill_u32");
  CUstream stream;
  CheckCu(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "stream");
  CUdeviceptr buf;
  CheckCu(cuMemAlloc(&buf, 16), "alloc");
  uint32_t value = 9, count = 4;
  void* args[] = {&buf, &value, &count};
  CheckCu(cuStreamBeginCapture_v2(stream, CU_STREAM_CAPTURE_MODE_RELAXED), "begin capture");
  CheckCu(cuLaunchKernel(fill, 1, 1, 1, 4, 1, 1, 0, stream, args, nullptr), "captured launch");
  const pid_t pid = fork();
  Check(pid >= 0, "fork");
  if (pid == 0) _exit(0);
  int status = 0;
  Check(ReapWithin(pid, 20, &status) && WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "the child exits");
  CUgraph graph;
  CheckCu(cuStreamEndCapture(stream, &graph), "end capture");
  CUgraphExec exec;
  CheckCu(cuGraphInstantiate(&exec, graph, 0), "instantiate");
  CheckCu(cuGraphLaunch(exec, stream), "graph launch");
  CheckCu(cuStreamSynchronize(stream), "sync");
  uint32_t out[4] = {};
  CheckCu(cuMemcpyDtoH(out, buf, 16), "read back");
  Check(out[0] == 9 && out[3] == 9, "the captured kernel ran");
  // The scheduler still schedules after the capture.
  value = 5;
  CheckCu(cuLaunchKernel(fill, 1, 1, 1, 4, 1, 1, 0, stream, args, nullptr), "launch after");
  CheckCu(cuStreamSynchronize(stream), "sync after");
  CheckCu(cuMemcpyDtoH(out, buf, 16), "read back after");
  Check(out[0] == 5, "work after the capture ran");
  return fake_client::Succeed();
}

int ForkHeld() {
  StartWatchdog(120);
  Init();
  CUfunction sleep = Function("sleep_ns");
  const CUstream stream = LowPriorityStream();
  fakecuda_set_device_paused(0, 1);
  constexpr int kOps = 3000;
  for (int i = 0; i < kOps; ++i) LaunchSleep(sleep, 1000, stream, "held launch");
  const int64_t begin = NowUs();
  const pid_t pid = fork();
  Check(pid >= 0, "fork");
  if (pid == 0) _exit(0);
  const int64_t fork_us = NowUs() - begin;
  int status = 0;
  const bool reaped = ReapWithin(pid, 20, &status);
  fakecuda_set_device_paused(0, 0);
  Check(reaped && WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child exits");
  CheckCu(cuStreamSynchronize(stream), "sync");
  const uint64_t reached = fakecuda_count_calls("cuLaunchKernel");
  std::printf("fork_us=%lld ops=%d reached=%llu\n", static_cast<long long>(fork_us), kOps,
              static_cast<unsigned long long>(reached));
  Check(reached == kOps, "every held op is issued once after the fork");
  return fake_client::Succeed();
}

int ErrorWaits() {
  StartWatchdog(60);
  Init();
  CUfunction sleep = Function("sleep_ns");
  constexpr uint64_t kLongNs = 300'000'000;
  for (const bool whole_context : {false, true}) {
    CUstream stream;
    CheckCu(cuStreamCreate(&stream, 0), "stream");
    fakecuda_reset();
    fakecuda_fail_next_call("cuLaunchKernel", CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
    LaunchSleep(sleep, 1000, stream, "failing launch");
    LaunchSleep(sleep, kLongNs, stream, "long launch");
    const CUresult sync = whole_context ? cuCtxSynchronize() : cuStreamSynchronize(stream);
    const uint64_t returned_ns = static_cast<uint64_t>(NowUs()) * 1000;
    // The long kernel must have finished before the sync returned.
    bool long_done = false;
    for (uint64_t i = 0, n = fakecuda_exec_count(); i < n; ++i) {
      fakecuda_exec_record e;
      fakecuda_get_exec(i, &e);
      if (std::strcmp(e.what, "sleep_ns") == 0 && e.end_ns - e.start_ns >= kLongNs / 2 &&
          e.end_ns != 0 && e.end_ns <= returned_ns) {
        long_done = true;
      }
    }
    const CUresult again = whole_context ? cuCtxSynchronize() : cuStreamSynchronize(stream);
    std::printf("%s: sync=%d long_done_at_return=%d again=%d\n",
                whole_context ? "context" : "stream", sync, long_done ? 1 : 0, again);
    Check(sync == CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "the sync reports the deferred error");
    Check(long_done, "the sync returned only after the stream's later work finished");
    Check(again == CUDA_SUCCESS, "the error is reported once");
    CheckCu(cuStreamDestroy(stream), "destroy");
  }
  return fake_client::Succeed();
}

double CpuSeconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

int HeldCpu() {
  StartWatchdog(120);
  Init();
  CUfunction sleep = Function("sleep_ns");
  const CUstream stream = LowPriorityStream();
  // Warm up: the kernel's duration is learned, so the budget then holds ~budget/5 ms of it.
  LaunchSleep(sleep, 5'000'000, stream, "warm-up launch");
  CheckCu(cuStreamSynchronize(stream), "warm-up sync");
  const double cpu0 = CpuSeconds();
  const int64_t wall0 = NowUs();
  for (int i = 0; i < 200; ++i) LaunchSleep(sleep, 5'000'000, stream, "held launch");
  CheckCu(cuStreamSynchronize(stream), "sync");
  const double cpu_ms = (CpuSeconds() - cpu0) * 1e3;
  const double wall_ms = static_cast<double>(NowUs() - wall0) / 1e3;
  std::printf("cpu_ms=%.0f wall_ms=%.0f cpu_per_held_s_ms=%.1f\n", cpu_ms, wall_ms,
              cpu_ms / (wall_ms / 1e3));
  return fake_client::Succeed();
}

int ExitWedged() {
  StartWatchdog(60);
  Init();
  CUfunction sleep = Function("sleep_ns");
  const CUstream stream = LowPriorityStream();
  fakecuda_set_device_paused(0, 1);
  for (int i = 0; i < 10; ++i) LaunchSleep(sleep, 1000, stream, "held launch");
  return fake_client::Succeed();  // exit handlers run with the device still paused
}

int StreamChurn() {
  StartWatchdog(240);
  Init();
  CUfunction empty = Function("empty");
  constexpr int kWarmUp = 2000;
  constexpr int kStreams = 20000;
  long rss_after_warm_up = 0;
  // Driver events created and destroyed since the warm-up, summed before each log reset (the
  // fake's own call log is not gpuprio's memory, so it is cleared every 1000 streams).
  int64_t events_created = 0, events_destroyed = 0;
  auto reset_log = [&] {
    events_created += static_cast<int64_t>(fakecuda_count_calls("cuEventCreate"));
    events_destroyed += static_cast<int64_t>(fakecuda_count_calls("cuEventDestroy_v2"));
    fakecuda_reset();
  };
  for (int i = 0; i < kWarmUp + kStreams; ++i) {
    if (i == kWarmUp) {
      fakecuda_reset();
      rss_after_warm_up = RssKb();
    }
    SetThreadPriority(i % 2 == 0 ? -1 : 0);
    CUstream stream;
    CheckCu(cuStreamCreate(&stream, i % 3 == 0 ? CU_STREAM_NON_BLOCKING : 0), "create");
    for (int k = 0; k < 3; ++k) {
      CheckCu(cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr), "launch");
    }
    if (i % 4 == 0) CheckCu(cuStreamSynchronize(stream), "sync");
    CheckCu(cuStreamDestroy(stream), "destroy");
    if (i % 1000 == 999 && i > kWarmUp) reset_log();
  }
  SetThreadPriority(0);
  CheckCu(cuCtxSynchronize(), "cuCtxSynchronize");
  reset_log();
  const long rss_growth_kb = RssKb() - rss_after_warm_up;
  std::printf("streams=%d events_live=%lld rss_growth_kb=%ld\n", kStreams,
              static_cast<long long>(events_created - events_destroyed), rss_growth_kb);
  return fake_client::Succeed();
}

}  // namespace

int main(int argc, char** argv) {
  fake_client::g_client_name = "hardening_client";
  if (argc < 2) Fail("usage: hardening_client SCENARIO");
  fake_client::g_scenario = argv[1];
  const std::string scenario = argv[1];
  if (scenario == "submit_race") return SubmitRace();
  if (scenario == "fork_while_working") return ForkWhileWorking();
  if (scenario == "fork_during_resolve") return ForkDuringResolve();
  if (scenario == "fork_in_capture") return ForkInCapture();
  if (scenario == "fork_held") return ForkHeld();
  if (scenario == "error_waits") return ErrorWaits();
  if (scenario == "held_cpu") return HeldCpu();
  if (scenario == "stream_churn") return StreamChurn();
  if (scenario == "exit_wedged") return ExitWedged();
  Fail("unknown scenario");
}
