// What the scheduler tests' -lcuda clients share: driver set-up against the fake's built-in
// module, gpuprio's C API reached through dlsym (so a client also runs without libgpuprio.so),
// device memory helpers, clocks and the process's resident set size.
#ifndef GPUPRIO_TESTS_SCHEDULER_CLIENT_SUPPORT_H_
#define GPUPRIO_TESTS_SCHEDULER_CLIENT_SUPPORT_H_

#include <cuda.h>
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "tests/fake_cuda/clients/client_check.h"

namespace sched_client {

struct Driver {
  CUcontext ctx = nullptr;
  CUmodule module = nullptr;
};

// cuInit, the primary context of device 0 (or FAKE_CLIENT_DEVICE) made current, and a module (the fake's module images
// are not parsed: every module holds the built-in kernels).
inline Driver InitDriver() {
  Driver d;
  fake_client::CheckCu(cuInit(0), "cuInit");
  CUdevice dev;
  // FAKE_CLIENT_DEVICE picks another ordinal (a process that numbers its GPUs differently).
  const char* ordinal = std::getenv("FAKE_CLIENT_DEVICE");
  fake_client::CheckCu(cuDeviceGet(&dev, ordinal != nullptr ? std::atoi(ordinal) : 0),
                       "cuDeviceGet");
  fake_client::CheckCu(cuDevicePrimaryCtxRetain(&d.ctx, dev), "cuDevicePrimaryCtxRetain");
  fake_client::CheckCu(cuCtxSetCurrent(d.ctx), "cuCtxSetCurrent");
  static const char kImage[] = "fake module image";
  fake_client::CheckCu(cuModuleLoadData(&d.module, kImage), "cuModuleLoadData");
  return d;
}

inline CUfunction Function(CUmodule module, const char* name) {
  CUfunction f;
  fake_client::CheckCu(cuModuleGetFunction(&f, module, name), name);
  return f;
}

// gpuprio_set_thread_priority if libgpuprio.so is loaded; a no-op otherwise.
inline void SetThreadPriority(int priority) {
  using Fn = int (*)(int);
  static const auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "gpuprio_set_thread_priority"));
  if (fn != nullptr) fake_client::Check(fn(priority) == 0, "gpuprio_set_thread_priority");
}

// Device memory, zeroed.
inline CUdeviceptr Alloc(size_t bytes) {
  CUdeviceptr p;
  fake_client::CheckCu(cuMemAlloc(&p, bytes), "cuMemAlloc");
  fake_client::CheckCu(cuMemsetD8(p, 0, bytes), "cuMemsetD8");
  return p;
}

inline std::vector<uint32_t> ReadBack(CUdeviceptr p, size_t count) {
  std::vector<uint32_t> v(count);
  fake_client::CheckCu(cuMemcpyDtoH(v.data(), p, count * 4), "cuMemcpyDtoH");
  return v;
}

inline int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline int64_t Tid() { return static_cast<int64_t>(syscall(SYS_gettid)); }

inline long RssKb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

// A fakecuda_* control looked up at run time: null when the driver is not the fake (the soak
// client also runs against tools/bench/null_driver).
template <typename Fn>
Fn FakeControl(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

}  // namespace sched_client

#endif  // GPUPRIO_TESTS_SCHEDULER_CLIENT_SUPPORT_H_
