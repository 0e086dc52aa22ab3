// A program for startup_test: what a preloaded libgpuprio.so does in a process before and after
// its first CUDA call.
//
//   startup_probe none        makes no CUDA call (it forks a child that exits normally, too)
//   startup_probe cuda N      N threads look up and call cuInit and cuGetProcAddress_v2 at the
//                             same moment (dlopen of libcuda.so.1, as the CUDA runtime does)
//   startup_probe fork_cuda   calls cuInit, then forks one child that makes a CUDA call of its own
//                             (cuDriverGetVersion) and one that makes none; waits for both
//
// Prints key=value lines on stdout: threads (this process's threads when it is done, children
// joined), child_pid (fork_cuda: the child that used CUDA), done=yes. Exits non-zero on failure.
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using InitFn = int (*)(unsigned);
using GetProcAddressFn = int (*)(const char*, void**, int, unsigned long long, int*);
using VersionFn = int (*)(int*);

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "startup_probe: %s failed\n", what);
  std::exit(1);
}

// The "Threads:" count of /proc/self/status.
int ThreadCount() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::atoi(line.c_str() + 8);
  }
  return -1;
}

void* Driver() {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW);
  if (driver == nullptr) Fail("dlopen of libcuda.so.1");
  return driver;
}

void CallInit(void* driver) {
  const auto init = reinterpret_cast<InitFn>(dlsym(driver, "cuInit"));
  if (init == nullptr || init(0) != 0) Fail("cuInit");
}

// cuGetProcAddress_v2 is intercepted (and cuInit, passed through): the exit summary counts it.
void CallGetProcAddress(void* driver) {
  const auto get = reinterpret_cast<GetProcAddressFn>(dlsym(driver, "cuGetProcAddress_v2"));
  void* entry = nullptr;
  int status = -1;
  if (get == nullptr || get("cuDriverGetVersion", &entry, 12000, 0, &status) != 0 ||
      entry == nullptr) {
    Fail("cuGetProcAddress_v2");
  }
}

// Forks a child that runs `body` and exits with exit() (so exit handlers run); returns its pid.
template <typename Body>
pid_t ForkChild(Body body) {
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid < 0) Fail("fork");
  if (pid == 0) {
    body();
    std::exit(0);
  }
  return pid;
}

void Wait(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    Fail("child");
  }
}

void ConcurrentInit(int threads) {
  void* driver = Driver();
  std::atomic<int> ready{0};
  std::vector<std::thread> workers;
  for (int i = 0; i < threads; ++i) {
    workers.emplace_back([&] {
      ready.fetch_add(1);
      while (ready.load() < threads) {
      }
      CallInit(driver);
      CallGetProcAddress(driver);
    });
  }
  for (std::thread& worker : workers) worker.join();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "";
  if (what == "none") {
    Wait(ForkChild([] {}));
  } else if (what == "cuda" && argc > 2) {
    ConcurrentInit(std::atoi(argv[2]));
  } else if (what == "fork_cuda") {
    void* driver = Driver();
    CallInit(driver);
    const pid_t user = ForkChild([driver] {
      int version = 0;
      const auto get = reinterpret_cast<VersionFn>(dlsym(driver, "cuDriverGetVersion"));
      if (get == nullptr || get(&version) != 0) Fail("cuDriverGetVersion in the child");
    });
    const pid_t idle = ForkChild([] {});
    Wait(user);
    Wait(idle);
    std::printf("child_pid=%d\n", static_cast<int>(user));
  } else {
    std::fprintf(stderr, "usage: startup_probe none | cuda N | fork_cuda\n");
    return 2;
  }
  std::printf("threads=%d\n", ThreadCount());
  std::printf("done=yes\n");
  return 0;
}
