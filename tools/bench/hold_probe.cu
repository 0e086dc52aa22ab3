// What holding costs on a real GPU (docs/benchmarks.md, "CPU while held"): one side of a pair of
// processes, as coordination_test's `coord_client hold` is on the fake driver.
//
//   hold_probe high READY_FILE KERNEL_US   one single-thread spin kernel of KERNEL_US (what matters
//                                          is that it is in flight), then READY_FILE created once
//                                          its launch returned (its level is published);
//   hold_probe low READY_FILE              waits for READY_FILE, then one 10 us kernel.
//   hold_probe threads KERNEL_US           both in one process: a high thread (gpuprio priority 1,
//                                          when libgpuprio.so is loaded) launches the long kernel,
//                                          then a low thread (priority -1) the short one on a
//                                          stream of its own. Prints one line: the process's CPU
//                                          and wall time over the low thread's wait, the low
//                                          kernel's start and the high kernel's end.
// Both warm up first; high launches only once low has (READY_FILE.low).
// Each awaits its kernel's end with a stream query every 2 ms (so its own waiting costs little)
// and prints one line: "cpu_ns C wall_ns W start_ns S end_ns E": the process's CPU time (every
// thread: gpuprio's included) and wall time from just after the launch (high) or just before it
// (low) to the end seen by the query, and the kernel's start and end on the GPU's global timer
// (nanoseconds, one clock for every process on the GPU). The held process's reaction: low's S
// minus high's E.
#include <cuda.h>
#include <cuda_runtime.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

__device__ __forceinline__ unsigned long long GlobalTimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void Spin(unsigned long long duration_ns, unsigned long long* times) {
  const unsigned long long start = GlobalTimer();
  while (GlobalTimer() - start < duration_ns) {
  }
  times[0] = start;
  times[1] = GlobalTimer();
}

long long NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

long long CpuNs() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return (static_cast<long long>(u.ru_utime.tv_sec) + u.ru_stime.tv_sec) * 1000000000LL +
         (static_cast<long long>(u.ru_utime.tv_usec) + u.ru_stime.tv_usec) * 1000LL;
}

void Touch(const char* path) {
  const int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  if (fd >= 0) close(fd);
}

void Check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "hold_probe: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// gpuprio's per-thread priority, when the library is loaded (natively a no-op).
void SetThreadPriority(int priority) {
  using Fn = int (*)(int);
  const auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "gpuprio_set_thread_priority"));
  if (fn != nullptr && fn(priority) != 0) {
    std::fprintf(stderr, "hold_probe: gpuprio_set_thread_priority(%d) failed\n", priority);
    std::exit(1);
  }
}

void Await(cudaStream_t s) {
  cudaError_t e;
  while ((e = cudaStreamQuery(s)) == cudaErrorNotReady) usleep(2000);
  Check(e, "cudaStreamQuery");
}

int Threads(unsigned long long duration_ns) {
  Check(cudaSetDevice(0), "cudaSetDevice");
  cudaStream_t high_stream, low_stream;
  Check(cudaStreamCreateWithFlags(&high_stream, cudaStreamNonBlocking), "cudaStreamCreate");
  Check(cudaStreamCreateWithFlags(&low_stream, cudaStreamNonBlocking), "cudaStreamCreate");
  unsigned long long* times;
  Check(cudaMalloc(&times, 4 * sizeof(unsigned long long)), "cudaMalloc");
  long long wall = 0, cpu = 0;
  std::thread high([&] {
    Check(cudaSetDevice(0), "cudaSetDevice");
    SetThreadPriority(1);
    Spin<<<1, 1, 0, high_stream>>>(1000, times);  // warm-up
    Check(cudaStreamSynchronize(high_stream), "warm-up");
    Spin<<<1, 1, 0, high_stream>>>(duration_ns, times);
    Check(cudaGetLastError(), "launch");
  });
  high.join();  // the long kernel is in flight
  std::thread low([&] {
    Check(cudaSetDevice(0), "cudaSetDevice");
    SetThreadPriority(-1);
    const long long wall0 = NowNs(), cpu0 = CpuNs();
    Spin<<<1, 1, 0, low_stream>>>(10000, times + 2);
    Check(cudaGetLastError(), "launch");
    Await(low_stream);
    wall = NowNs() - wall0;
    cpu = CpuNs() - cpu0;
  });
  low.join();
  Await(high_stream);
  unsigned long long t[4];
  Check(cudaMemcpy(t, times, sizeof(t), cudaMemcpyDeviceToHost), "cudaMemcpy");
  std::printf("cpu_ns %lld wall_ns %lld start_ns %llu end_ns %llu\n", cpu, wall, t[2], t[1]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "threads") == 0) {
    return Threads(std::strtoull(argv[2], nullptr, 10) * 1000ULL);
  }
  if (argc < 3 || (std::strcmp(argv[1], "high") == 0 && argc != 4)) {
    std::fprintf(stderr, "usage: hold_probe high READY_FILE KERNEL_US | hold_probe low READY_FILE | "
                 "hold_probe threads KERNEL_US\n");
    return 2;
  }
  const bool high = std::strcmp(argv[1], "high") == 0;
  const char* ready = argv[2];
  const unsigned long long duration_ns =
      high ? std::strtoull(argv[3], nullptr, 10) * 1000ULL : 10000ULL;
  Check(cudaSetDevice(0), "cudaSetDevice");
  cudaStream_t s;
  Check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  unsigned long long* times;
  Check(cudaMalloc(&times, 2 * sizeof(unsigned long long)), "cudaMalloc");
  // Warm-up: module load and first-launch costs stay out of the measurement.
  Spin<<<1, 1, 0, s>>>(1000, times);
  Check(cudaStreamSynchronize(s), "warm-up");
  // Both warm up first (a low warm-up kernel held behind the high kernel would leave nothing to
  // measure): low says it is warm in READY_FILE.low, which high waits for before it launches.
  const std::string low_ready = std::string(ready) + ".low";
  const std::string& wait_for = high ? low_ready : std::string(ready);
  if (!high) Touch(low_ready.c_str());
  // Low checks without sleeping: its kernel must go in while a short high kernel still runs.
  const long long give_up = NowNs() + 60'000'000'000LL;
  while (access(wait_for.c_str(), F_OK) != 0 && NowNs() < give_up) {
    if (high) usleep(500);
  }
  if (access(wait_for.c_str(), F_OK) != 0) {
    std::fprintf(stderr, "hold_probe: %s never appeared\n", wait_for.c_str());
    return 1;
  }
  long long wall0 = NowNs(), cpu0 = CpuNs();
  Spin<<<1, 1, 0, s>>>(duration_ns, times);
  Check(cudaGetLastError(), "launch");
  if (high) {
    Touch(ready);
    wall0 = NowNs();
    cpu0 = CpuNs();
  }
  Await(s);
  const long long wall = NowNs() - wall0, cpu = CpuNs() - cpu0;
  unsigned long long t[2];
  Check(cudaMemcpy(t, times, sizeof(t), cudaMemcpyDeviceToHost), "cudaMemcpy");
  std::printf("cpu_ns %lld wall_ns %lld start_ns %llu end_ns %llu\n", cpu, wall, t[0], t[1]);
  return 0;
}
