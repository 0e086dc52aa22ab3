// A -lcuda client for the trace tests: run against the fake driver with libgpuprio.so preloaded,
// GPUPRIO_TRACE set and GPUPRIO_CUPTI_LIBRARY pointing at the fake libcupti. Scenarios (argv[1]);
// each launches argv[2] empty kernels (default 20) on a stream of its own (fork: the per-thread
// stream) and synchronises it, then:
//   exit      returns from main (the trace is written by the exit handler).
//   fork      forks; the child initialises CUDA, launches 5 kernels and returns from its main (so it runs the exit
//             handlers it inherited); the parent waits for it, prints child_wrote_trace=0|1 (did
//             GPUPRIO_TRACE exist after the child ended?) and child_exit=<status>, then returns.
//   sigterm   sends itself SIGTERM and waits; prints survived_sigterm and exits 2 if still alive
//             after 30 s.
//   app_handler  installs its own SIGTERM handler after the first CUDA call (after gpuprio's),
//             sends itself SIGTERM, and exits 3 from main once its handler ran.
//   phases    (capture windows) sleeps argv[3] ms, launches as many kernels again, sleeps
//             argv[3] ms, prints trace_before_exit=0|1, launches them a third time and returns.
//   profiler_range  cuProfilerStart, as many launches again without a synchronize, cuProfilerStop;
//             waits up to 10 s for the trace file, prints trace_before_exit=0|1 and how many
//             cuProfilerStart/Stop calls the driver received (driver_profiler_calls), launches
//             a third time and returns.
// Prints `trace_client: <scenario> ok` and pid=<pid> before it ends (for sigterm: before the
// signal).
#include <cuda.h>
#include <cudaProfiler.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tests/fake_cuda/clients/client_check.h"
#include "tests/fake_cuda/fake_cuda_control.h"
#include "tests/scheduler/client_support.h"

using fake_client::Check;
using fake_client::CheckCu;
using fake_client::Fail;

namespace {

CUfunction g_empty = nullptr;
CUstream g_stream = nullptr;

void Init() {
  const sched_client::Driver driver = sched_client::InitDriver();
  g_empty = sched_client::Function(driver.module, "empty");
  CheckCu(cuStreamCreate(&g_stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
}

void Launch(int count, CUstream stream, bool synchronize = true) {
  for (int i = 0; i < count; ++i) {
    CheckCu(cuLaunchKernel(g_empty, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr),
            "cuLaunchKernel");
  }
  if (synchronize) CheckCu(cuStreamSynchronize(stream), "cuStreamSynchronize");
}

bool TraceExists() {
  const char* path = std::getenv("GPUPRIO_TRACE");
  return path != nullptr && access(path, F_OK) == 0;
}

int Fork() {
  std::fflush(stdout);
  const pid_t child = fork();
  Check(child >= 0, "fork");
  if (child == 0) {
    fake_client::g_scenario = "fork (child)";
    Init();  // a forked child starts CUDA afresh (the fake driver, like CUDA, requires it)
    Launch(5, CU_STREAM_PER_THREAD);
    return 0;  // the exit handlers run, as in any child that returns from main
  }
  int status = 0;
  Check(waitpid(child, &status, 0) == child, "waitpid");
  std::printf("child_exit=%d child_wrote_trace=%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1,
              TraceExists() ? 1 : 0);
  return fake_client::Succeed();
}

int ProfilerRange(int launches) {
  CheckCu(cuProfilerStart(), "cuProfilerStart");
  Launch(launches, g_stream, /*synchronize=*/false);
  CheckCu(cuProfilerStop(), "cuProfilerStop");
  for (int i = 0; i < 1000 && !TraceExists(); ++i) usleep(10 * 1000);
  std::printf("trace_before_exit=%d\n", TraceExists() ? 1 : 0);
  std::printf("driver_profiler_calls=%llu\n",
              static_cast<unsigned long long>(fakecuda_count_calls("cuProfilerStart") +
                                              fakecuda_count_calls("cuProfilerStop")));
  Launch(launches, g_stream);
  return fake_client::Succeed();
}

int SigTerm() {
  fake_client::Succeed();
  kill(getpid(), SIGTERM);
  for (int i = 0; i < 300; ++i) usleep(100 * 1000);
  std::printf("survived_sigterm\n");
  return 2;
}

volatile sig_atomic_t g_app_handler_ran = 0;
void AppHandler(int) { g_app_handler_ran = 1; }

int AppHandlerScenario() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = &AppHandler;
  sigemptyset(&sa.sa_mask);
  Check(sigaction(SIGTERM, &sa, nullptr) == 0, "sigaction");
  kill(getpid(), SIGTERM);
  for (int i = 0; i < 300 && !g_app_handler_ran; ++i) usleep(10 * 1000);
  Check(g_app_handler_ran, "the program's SIGTERM handler ran");
  fake_client::Succeed();
  return 3;
}

}  // namespace

int main(int argc, char** argv) {
  fake_client::g_client_name = "trace_client";
  if (argc < 2) {
    Fail("usage: trace_client exit|fork|sigterm|app_handler|phases|profiler_range [launches "
         "[sleep_ms]]");
  }
  fake_client::g_scenario = argv[1];
  const std::string scenario = argv[1];
  const int launches = argc > 2 ? std::atoi(argv[2]) : 20;
  std::printf("pid=%d\n", static_cast<int>(getpid()));
  Init();
  // The fork scenario stays on the per-thread stream: a created stream makes the scheduler call
  // the fake driver under its own lock, and the fake holds its locks across fork (replacing them
  // in the child), which TSan then reports as a lock-order inversion in the child.
  Launch(launches, scenario == "fork" ? CU_STREAM_PER_THREAD : g_stream);
  if (scenario == "exit") return fake_client::Succeed();
  if (scenario == "fork") return Fork();
  if (scenario == "sigterm") return SigTerm();
  if (scenario == "app_handler") return AppHandlerScenario();
  if (scenario == "profiler_range") return ProfilerRange(launches);
  if (scenario == "phases") {
    const int sleep_ms = argc > 3 ? std::atoi(argv[3]) : 1000;
    usleep(static_cast<useconds_t>(sleep_ms) * 1000);
    Launch(launches, g_stream);
    usleep(static_cast<useconds_t>(sleep_ms) * 1000);
    std::printf("trace_before_exit=%d\n", TraceExists() ? 1 : 0);
    Launch(launches, g_stream);
    return fake_client::Succeed();
  }
  Fail("unknown scenario");
}
