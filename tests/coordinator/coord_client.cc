// A process sharing the fake GPU with others, for coordination_test. Its priority comes from
// GPUPRIO_PRIORITY, as a user would set it.
//
//   coord_client burst READY_FILE BURSTS PERIOD_US CHAIN KERNEL_US
//       waits for READY_FILE, then BURSTS times: a chain of CHAIN sleep kernels of KERNEL_US on
//       its stream and a stream sync, released every PERIOD_US; prints "burst BEGIN END" per
//       chain (CLOCK_MONOTONIC ns: before the first launch; when its last kernel ended), then
//       "busy START END" per kernel (before its launch -- for the first kernel, when its launch
//       returned, by which time the process's level is published; when it ended on the device):
//       the times this process had work queued or in flight and said so. A slow client thread
//       leaves gaps between them. Last, "kernels N confined C" (PrintConfined).
//   coord_client stream READY_FILE STOP_FILE KERNEL_US
//       back-to-back sleep kernels of KERNEL_US (a stream sync every 8), creating READY_FILE after
//       the first sync and writing the time each sync returned (CLOCK_MONOTONIC ns, decimal) over
//       READY_FILE.progress, until STOP_FILE exists (at most 60 s); prints "issue T" for every
//       cuLaunchKernel the fake driver received (T: when the call began, from any thread), then
//       "kernels N confined C" (PrintConfined).
//   coord_client hold high|low READY_FILE KERNEL_US
//       what holding costs. high: one sleep kernel of KERNEL_US, READY_FILE created once its
//       launch returned (its level is published), then its end awaited with a stream query every
//       2 ms. low: waits for READY_FILE, then one 10 us kernel, awaited the same way. Each prints
//       "cpu_ns C wall_ns W start_ns S end_ns E": the process's CPU time (all threads) and the
//       wall time from just after the launch (high) or just before it (low) to the kernel's end
//       seen by the query, and when its kernel ran on the fake device (CLOCK_MONOTONIC).
//   coord_client hold-threads KERNEL_US
//       the same hold within one process: a high thread (priority 1) launches one sleep kernel of
//       KERNEL_US, then a low thread (priority -1) one 10 us kernel on a stream of its own, each
//       awaited with a stream query every 2 ms. Prints one line as above: the process's CPU and
//       wall time from the low launch to the low kernel's end seen by its query, the low kernel's
//       start and the high kernel's end.
#include <cuda.h>
#include <sys/resource.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/fake_cuda/clients/client_check.h"
#include "tests/fake_cuda/fake_cuda_control.h"
#include "tests/scheduler/client_support.h"

namespace {

using fake_client::Check;
using fake_client::CheckCu;
using sched_client::NowNs;

bool Exists(const char* path) { return access(path, F_OK) == 0; }

void Touch(const char* path) {
  const int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  Check(fd >= 0, "create ready file");
  close(fd);
}

void Launch(CUfunction f, CUstream s, uint64_t ns) {
  void* args[] = {&ns};
  CheckCu(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr), "cuLaunchKernel");
}

// "kernels N confined C": this process's sleep_ns kernels that ran, C of them on a green
// context's stream (spatial isolation's partition).
void PrintConfined() {
  int kernels = 0, confined = 0;
  for (uint64_t i = 0; i < fakecuda_exec_count(); ++i) {
    fakecuda_exec_record e;
    if (fakecuda_get_exec(i, &e) != 0 || std::strcmp(e.what, "sleep_ns") != 0) continue;
    ++kernels;
    confined += e.green;
  }
  std::printf("kernels %d confined %d\n", kernels, confined);
}

int Burst(char** argv) {
  const char* ready = argv[2];
  const int bursts = std::atoi(argv[3]);
  const int64_t period_ns = std::atoll(argv[4]) * 1000;
  const int chain = std::atoi(argv[5]);
  const uint64_t kernel_ns = std::strtoull(argv[6], nullptr, 10) * 1000;
  const sched_client::Driver d = sched_client::InitDriver();
  CUfunction f = sched_client::Function(d.module, "sleep_ns");
  CUstream s;
  CheckCu(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  for (int i = 0; i < 6000 && !Exists(ready); ++i) usleep(10'000);
  Check(Exists(ready), "the stream process never got ready");
  int64_t release = NowNs();
  for (int b = 0; b < bursts; ++b) {
    while (NowNs() < release) usleep(200);
    std::vector<int64_t> starts(chain);
    int64_t first_returned = 0;
    for (int k = 0; k < chain; ++k) {
      starts[k] = NowNs();
      Launch(f, s, kernel_ns);
      if (k == 0) first_returned = NowNs();
    }
    CheckCu(cuStreamSynchronize(s), "cuStreamSynchronize");
    // When each kernel ended on the device (what other processes wait for), not the sync's
    // return, which a busy machine may delay by milliseconds: the last `chain` sleep_ns
    // executions (the log also holds the dispatcher's event records).
    std::vector<int64_t> ends;
    for (uint64_t i = fakecuda_exec_count(); i > 0 && static_cast<int>(ends.size()) < chain; --i) {
      fakecuda_exec_record r;
      Check(fakecuda_get_exec(i - 1, &r) == 0, "exec log");
      if (std::strcmp(r.what, "sleep_ns") == 0) ends.insert(ends.begin(), r.end_ns);
    }
    Check(static_cast<int>(ends.size()) == chain, "the chain's executions");
    std::printf("burst %lld %lld\n", static_cast<long long>(starts.front()),
                static_cast<long long>(ends.back()));
    for (int k = 0; k < chain; ++k) {
      std::printf("busy %lld %lld\n", static_cast<long long>(k == 0 ? first_returned : starts[k]),
                  static_cast<long long>(ends[k]));
    }
    release = std::max(release + period_ns, NowNs());
  }
  PrintConfined();
  std::fflush(stdout);
  return 0;
}

int Stream(char** argv) {
  const char* ready = argv[2];
  const char* stop = argv[3];
  const uint64_t kernel_ns = std::strtoull(argv[4], nullptr, 10) * 1000;
  const sched_client::Driver d = sched_client::InitDriver();
  CUfunction f = sched_client::Function(d.module, "sleep_ns");
  CUstream s;
  CheckCu(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  const int64_t deadline = NowNs() + int64_t{60} * 1'000'000'000;
  const std::string progress_path = std::string(ready) + ".progress";
  const int progress = open(progress_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  Check(progress >= 0, "the progress file");
  for (int i = 0; (i < 8 || !Exists(stop)) && NowNs() < deadline; ++i) {
    Launch(f, s, kernel_ns);
    if (i % 8 == 7) {
      CheckCu(cuStreamSynchronize(s), "cuStreamSynchronize");
      char text[32];
      const int n = std::snprintf(text, sizeof(text), "%020lld", static_cast<long long>(NowNs()));
      Check(pwrite(progress, text, static_cast<size_t>(n), 0) == n, "the progress file");
      if (i == 7) Touch(ready);
    }
  }
  close(progress);
  CheckCu(cuStreamSynchronize(s), "cuStreamSynchronize");
  const uint64_t calls = fakecuda_call_count();
  for (uint64_t i = 0; i < calls; ++i) {
    fakecuda_call_record r;
    if (fakecuda_get_call(i, &r) != 0) continue;
    if (std::strcmp(r.api, "cuLaunchKernel") == 0) {
      std::printf("issue %llu\n", static_cast<unsigned long long>(r.start_ns));
    }
  }
  PrintConfined();
  std::fflush(stdout);
  return 0;
}

int64_t ProcessCpuNs() {
  rusage u{};
  Check(getrusage(RUSAGE_SELF, &u) == 0, "getrusage");
  return (int64_t{u.ru_utime.tv_sec} + u.ru_stime.tv_sec) * 1'000'000'000 +
         (int64_t{u.ru_utime.tv_usec} + u.ru_stime.tv_usec) * 1000;
}

// The first or the last sleep_ns execution of the fake device's log (a process's own kernel is
// the last; in a one-process hold the high kernel started first and the low one ran last).
fakecuda_exec_record SleepExecution(bool last) {
  fakecuda_exec_record e{};
  const uint64_t n = fakecuda_exec_count();
  for (uint64_t k = 0; k < n; ++k) {
    const uint64_t i = last ? n - 1 - k : k;
    Check(fakecuda_get_exec(i, &e) == 0, "exec log");
    if (std::strcmp(e.what, "sleep_ns") == 0) return e;
  }
  Check(false, "a sleep kernel's execution");
  return e;
}

void AwaitStream(CUstream s) {
  CUresult r;
  while ((r = cuStreamQuery(s)) == CUDA_ERROR_NOT_READY) usleep(2000);
  CheckCu(r, "cuStreamQuery");
}

int Hold(char** argv) {
  const bool high = std::strcmp(argv[2], "high") == 0;
  const char* ready = argv[3];
  const uint64_t kernel_ns = high ? std::strtoull(argv[4], nullptr, 10) * 1000 : 10'000;
  const sched_client::Driver d = sched_client::InitDriver();
  CUfunction f = sched_client::Function(d.module, "sleep_ns");
  CUstream s;
  CheckCu(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  if (!high) {
    for (int i = 0; i < 60'000 && !Exists(ready); ++i) usleep(1000);
    Check(Exists(ready), "the high process never got ready");
  }
  int64_t wall0 = NowNs();
  int64_t cpu0 = ProcessCpuNs();
  Launch(f, s, kernel_ns);
  if (high) {
    Touch(ready);
    wall0 = NowNs();
    cpu0 = ProcessCpuNs();
  }
  AwaitStream(s);
  const int64_t wall = NowNs() - wall0;
  const int64_t cpu = ProcessCpuNs() - cpu0;
  const fakecuda_exec_record e = SleepExecution(/*last=*/true);
  std::printf("cpu_ns %lld wall_ns %lld start_ns %lld end_ns %lld\n", static_cast<long long>(cpu),
              static_cast<long long>(wall), static_cast<long long>(e.start_ns),
              static_cast<long long>(e.end_ns));
  std::fflush(stdout);
  return 0;
}

}  // namespace

int HoldThreads(char** argv) {
  const uint64_t kernel_ns = std::strtoull(argv[2], nullptr, 10) * 1000;
  const sched_client::Driver d = sched_client::InitDriver();
  CUfunction f = sched_client::Function(d.module, "sleep_ns");
  CUstream high_stream, low_stream;
  CheckCu(cuStreamCreate(&high_stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  CheckCu(cuStreamCreate(&low_stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  std::thread high([&] {
    CheckCu(cuCtxSetCurrent(d.ctx), "cuCtxSetCurrent");
    sched_client::SetThreadPriority(1);
    Launch(f, high_stream, kernel_ns);
  });
  high.join();  // launched: the high level is active from here to the kernel's end
  int64_t wall = 0, cpu = 0;
  std::thread low([&] {
    CheckCu(cuCtxSetCurrent(d.ctx), "cuCtxSetCurrent");
    sched_client::SetThreadPriority(-1);
    const int64_t wall0 = NowNs();
    const int64_t cpu0 = ProcessCpuNs();
    Launch(f, low_stream, 10'000);
    AwaitStream(low_stream);
    wall = NowNs() - wall0;
    cpu = ProcessCpuNs() - cpu0;
  });
  low.join();
  AwaitStream(high_stream);
  const fakecuda_exec_record high_exec = SleepExecution(/*last=*/false);
  const fakecuda_exec_record low_exec = SleepExecution(/*last=*/true);
  std::printf("cpu_ns %lld wall_ns %lld start_ns %lld end_ns %lld\n", static_cast<long long>(cpu),
              static_cast<long long>(wall), static_cast<long long>(low_exec.start_ns),
              static_cast<long long>(high_exec.end_ns));
  std::fflush(stdout);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "hold-threads") == 0) return HoldThreads(argv);
  if (argc == 5 && std::strcmp(argv[1], "hold") == 0) return Hold(argv);
  if (argc == 7 && std::strcmp(argv[1], "burst") == 0) return Burst(argv);
  if (argc == 5 && std::strcmp(argv[1], "stream") == 0) return Stream(argv);
  std::fprintf(stderr, "usage: see coord_client.cc\n");
  return 2;
}
