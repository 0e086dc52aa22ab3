// The fake driver with two devices: stream work runs on the stream's own device whatever context
// is current, module functions stay on their device, events and peer copies cross devices, and
// the rendezvous kernel pairs two devices.
#include <cuda.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "catch2/catch.hpp"
#include "tests/fake_cuda/fake_cuda_control.h"

namespace {

using V = std::vector<uint32_t>;

// The fake reads FAKECUDA_DEVICES when its state is first made, on this binary's first driver
// call: set before any test runs.
const bool kTwoDevices = [] { return setenv("FAKECUDA_DEVICES", "2", 1) == 0; }();

// Both primary contexts, a module loaded in each, device 0's context current.
struct TwoDevices {
  TwoDevices() {
    REQUIRE(kTwoDevices);
    fakecuda_reset();
    REQUIRE(cuInit(0) == CUDA_SUCCESS);
    int count = 0;
    REQUIRE(cuDeviceGetCount(&count) == CUDA_SUCCESS);
    REQUIRE(count == 2);
    static const char kImage[] = "image";
    for (int d = 0; d < 2; ++d) {
      REQUIRE(cuDevicePrimaryCtxRetain(&ctx[d], d) == CUDA_SUCCESS);
      REQUIRE(cuCtxSetCurrent(ctx[d]) == CUDA_SUCCESS);
      REQUIRE(cuModuleLoadData(&module[d], kImage) == CUDA_SUCCESS);
      REQUIRE(cuStreamCreate(&stream[d], CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    }
    REQUIRE(cuCtxSetCurrent(ctx[0]) == CUDA_SUCCESS);
  }
  ~TwoDevices() {
    // Streams are kept: the fake leaks a destroyed stream's object by design (its queued ops may
    // still name it), which LeakSanitizer would report.
    for (int d = 0; d < 2; ++d) {
      cuCtxSetCurrent(ctx[d]);
      cuModuleUnload(module[d]);
    }
    fakecuda_reset();
  }

  CUfunction Function(int device, const char* name) const {
    CUfunction f = nullptr;
    REQUIRE(cuModuleGetFunction(&f, module[device], name) == CUDA_SUCCESS);
    return f;
  }

  // Zeroed device memory of `device` (allocated with its context current).
  CUdeviceptr Alloc(int device, size_t bytes) const {
    CUcontext previous = nullptr;
    REQUIRE(cuCtxGetCurrent(&previous) == CUDA_SUCCESS);
    REQUIRE(cuCtxSetCurrent(ctx[device]) == CUDA_SUCCESS);
    CUdeviceptr p = 0;
    REQUIRE(cuMemAlloc(&p, bytes) == CUDA_SUCCESS);
    REQUIRE(cuMemsetD8(p, 0, bytes) == CUDA_SUCCESS);
    REQUIRE(cuCtxSetCurrent(previous) == CUDA_SUCCESS);
    return p;
  }

  static uint32_t Read(CUdeviceptr p) {
    return __atomic_load_n(reinterpret_cast<uint32_t*>(p), __ATOMIC_ACQUIRE);
  }

  CUcontext ctx[2] = {};
  CUmodule module[2] = {};
  CUstream stream[2] = {};
};

// The device field of every exec record named `what` from record `from` on, in execution order.
std::vector<int> DevicesOf(const char* what, uint64_t from = 0) {
  std::vector<int> devices;
  for (uint64_t i = from; i < fakecuda_exec_count(); ++i) {
    fakecuda_exec_record rec;
    REQUIRE(fakecuda_get_exec(i, &rec) == 0);
    if (std::strcmp(rec.what, what) == 0) devices.push_back(rec.device);
  }
  return devices;
}

}  // namespace

TEST_CASE("Stream work runs on the stream's device whatever context is current", "[multi_device]") {
  TwoDevices env;
  CUlibrary lib;
  static const char kImage[] = "library";
  REQUIRE(cuLibraryLoadData(&lib, kImage, nullptr, nullptr, 0, nullptr, nullptr, 0) ==
          CUDA_SUCCESS);
  CUkernel fill;
  REQUIRE(cuLibraryGetKernel(&fill, lib, "fill_u32") == CUDA_SUCCESS);
  const CUdeviceptr buf = env.Alloc(1, 16);
  const uint64_t from = fakecuda_exec_count();
  // Device 0's context is current; every op goes to device 1's stream.
  uint32_t value = 5, count = 4;
  void* args[] = {const_cast<CUdeviceptr*>(&buf), &value, &count};
  REQUIRE(cuLaunchKernel(reinterpret_cast<CUfunction>(fill), 1, 1, 1, 4, 1, 1, 0, env.stream[1],
                         args, nullptr) == CUDA_SUCCESS);
  REQUIRE(cuMemsetD32Async(buf, 9, 1, env.stream[1]) == CUDA_SUCCESS);
  CUevent event;
  REQUIRE(cuEventCreate(&event, 0) == CUDA_SUCCESS);
  REQUIRE(cuEventRecord(event, env.stream[1]) == CUDA_SUCCESS);
  REQUIRE(cuStreamSynchronize(env.stream[1]) == CUDA_SUCCESS);
  CHECK(DevicesOf("fill_u32", from) == std::vector<int>{1});
  CHECK(DevicesOf("memset", from) == std::vector<int>{1});
  CHECK(DevicesOf("event_record", from) == std::vector<int>{1});
  CHECK(TwoDevices::Read(buf) == 9);
  CHECK(TwoDevices::Read(buf + 4) == 5);
  int ordinal = -1;
  REQUIRE(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, buf) ==
          CUDA_SUCCESS);
  CHECK(ordinal == 1);
  REQUIRE(cuEventDestroy(event) == CUDA_SUCCESS);
  REQUIRE(cuLibraryUnload(lib) == CUDA_SUCCESS);
}

TEST_CASE("A module's function launches on its own device only; a CUkernel on any",
          "[multi_device]") {
  TwoDevices env;
  uint64_t ns = 0;
  void* args[] = {&ns};
  SECTION("module functions") {
    CHECK(cuLaunchKernel(env.Function(0, "sleep_ns"), 1, 1, 1, 1, 1, 1, 0, env.stream[1], args,
                         nullptr) == CUDA_ERROR_INVALID_HANDLE);
    CHECK(cuLaunchKernel(env.Function(1, "sleep_ns"), 1, 1, 1, 1, 1, 1, 0, env.stream[0], args,
                         nullptr) == CUDA_ERROR_INVALID_HANDLE);
    // Whichever context is current: the function's device and the stream's must match.
    CHECK(cuLaunchKernel(env.Function(1, "sleep_ns"), 1, 1, 1, 1, 1, 1, 0, env.stream[1], args,
                         nullptr) == CUDA_SUCCESS);
  }
  SECTION("library kernels and their per-context functions") {
    CUlibrary lib;
    static const char kImage[] = "library";
    REQUIRE(cuLibraryLoadData(&lib, kImage, nullptr, nullptr, 0, nullptr, nullptr, 0) ==
            CUDA_SUCCESS);
    CUkernel kernel;
    REQUIRE(cuLibraryGetKernel(&kernel, lib, "sleep_ns") == CUDA_SUCCESS);
    for (int d = 0; d < 2; ++d) {
      CHECK(cuLaunchKernel(reinterpret_cast<CUfunction>(kernel), 1, 1, 1, 1, 1, 1, 0, env.stream[d],
                           args, nullptr) == CUDA_SUCCESS);
    }
    CUfunction f0, f1, f0_again;
    REQUIRE(cuKernelGetFunction(&f0, kernel) == CUDA_SUCCESS);
    REQUIRE(cuKernelGetFunction(&f0_again, kernel) == CUDA_SUCCESS);
    REQUIRE(cuCtxSetCurrent(env.ctx[1]) == CUDA_SUCCESS);
    REQUIRE(cuKernelGetFunction(&f1, kernel) == CUDA_SUCCESS);
    CHECK(f0 == f0_again);
    CHECK(f0 != f1);
    CHECK(cuLaunchKernel(f1, 1, 1, 1, 1, 1, 1, 0, env.stream[1], args, nullptr) == CUDA_SUCCESS);
    CHECK(cuLaunchKernel(f0, 1, 1, 1, 1, 1, 1, 0, env.stream[1], args, nullptr) ==
          CUDA_ERROR_INVALID_HANDLE);
    REQUIRE(cuCtxSynchronize() == CUDA_SUCCESS);
    REQUIRE(cuLibraryUnload(lib) == CUDA_SUCCESS);
  }
}

TEST_CASE("An event recorded on one device orders a stream of the other", "[multi_device]") {
  TwoDevices env;
  const CUdeviceptr flag = env.Alloc(0, 4);
  const CUdeviceptr log = env.Alloc(1, 64);
  // Device 0's stream is held by a wait on a host-written flag; device 1's appends wait for it.
  REQUIRE(cuStreamWaitValue32(env.stream[0], flag, 1, CU_STREAM_WAIT_VALUE_GEQ) == CUDA_SUCCESS);
  CUevent event;
  REQUIRE(cuEventCreate(&event, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS);
  REQUIRE(cuEventRecord(event, env.stream[0]) == CUDA_SUCCESS);
  REQUIRE(cuCtxSetCurrent(env.ctx[1]) == CUDA_SUCCESS);
  REQUIRE(cuStreamWaitEvent(env.stream[1], event, 0) == CUDA_SUCCESS);
  CUdeviceptr log_arg = log;
  uint32_t value = 7;
  void* args[] = {&log_arg, &value};
  REQUIRE(cuLaunchKernel(env.Function(1, "append_u32"), 1, 1, 1, 1, 1, 1, 0, env.stream[1], args,
                         nullptr) == CUDA_SUCCESS);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(cuStreamQuery(env.stream[1]) == CUDA_ERROR_NOT_READY);
  CHECK(TwoDevices::Read(log) == 0);
  __atomic_store_n(reinterpret_cast<uint32_t*>(flag), 1u, __ATOMIC_RELEASE);
  REQUIRE(cuStreamSynchronize(env.stream[1]) == CUDA_SUCCESS);
  CHECK(TwoDevices::Read(log) == 1);
  CHECK(TwoDevices::Read(log + 4) == 7);
  REQUIRE(cuEventDestroy(event) == CUDA_SUCCESS);
}

TEST_CASE("Peer copies move device memory between devices in stream order", "[multi_device]") {
  TwoDevices env;
  const CUdeviceptr src = env.Alloc(0, 16);
  const CUdeviceptr dst = env.Alloc(1, 16);
  REQUIRE(cuMemsetD32(src, 41, 4) == CUDA_SUCCESS);
  SECTION("cuMemcpyPeerAsync: an op of the stream, run when the device reaches it") {
    const CUdeviceptr flag = env.Alloc(1, 4);
    REQUIRE(cuStreamWaitValue32(env.stream[1], flag, 1, CU_STREAM_WAIT_VALUE_GEQ) == CUDA_SUCCESS);
    REQUIRE(cuMemcpyPeerAsync(dst, env.ctx[1], src, env.ctx[0], 16, env.stream[1]) == CUDA_SUCCESS);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    CHECK(TwoDevices::Read(dst + 12) == 0);
    __atomic_store_n(reinterpret_cast<uint32_t*>(flag), 1u, __ATOMIC_RELEASE);
    REQUIRE(cuStreamSynchronize(env.stream[1]) == CUDA_SUCCESS);
    CHECK(TwoDevices::Read(dst + 12) == 41);
    CHECK(DevicesOf("memcpy_peer") == std::vector<int>{1});
  }
  SECTION("cuMemcpyPeer: after the source context's queued work, done when it returns") {
    uint64_t ns = 30'000'000;
    void* args[] = {&ns};
    REQUIRE(cuLaunchKernel(env.Function(0, "sleep_ns"), 1, 1, 1, 1, 1, 1, 0, env.stream[0], args,
                           nullptr) == CUDA_SUCCESS);
    REQUIRE(cuMemsetD32Async(src, 43, 4, env.stream[0]) == CUDA_SUCCESS);
    REQUIRE(cuMemcpyPeer(dst, env.ctx[1], src, env.ctx[0], 16) == CUDA_SUCCESS);
    CHECK(TwoDevices::Read(dst + 12) == 43);
  }
  SECTION("bad contexts and host memory are refused") {
    uint32_t host[4] = {};
    CHECK(cuMemcpyPeerAsync(dst, nullptr, src, env.ctx[0], 16, env.stream[1]) ==
          CUDA_ERROR_INVALID_CONTEXT);
    CHECK(cuMemcpyPeerAsync(reinterpret_cast<CUdeviceptr>(host), env.ctx[1], src, env.ctx[0], 16,
                            env.stream[1]) == CUDA_ERROR_INVALID_VALUE);
  }
}

TEST_CASE("rendezvous_u32 pairs two devices and occupies each until its peer arrives",
          "[multi_device]") {
  TwoDevices env;
  const CUdeviceptr flags = env.Alloc(0, 8);
  const CUdeviceptr log = env.Alloc(0, 64);
  CUdeviceptr mine = flags, peer = flags + 4;
  void* rank0[] = {&mine, &peer};
  void* rank1[] = {&peer, &mine};
  REQUIRE(cuLaunchKernel(env.Function(0, "rendezvous_u32"), 1, 1, 1, 1, 1, 1, 0, env.stream[0],
                         rank0, nullptr) == CUDA_SUCCESS);
  // Device 0 is occupied: work of another of its streams waits for the rendezvous to end.
  CUstream other;
  REQUIRE(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
  CUdeviceptr log_arg = log;
  uint32_t value = 3;
  void* append[] = {&log_arg, &value};
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(cuLaunchKernel(env.Function(0, "append_u32"), 1, 1, 1, 1, 1, 1, 0, other, append,
                         nullptr) == CUDA_SUCCESS);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  CHECK(TwoDevices::Read(flags) == 1);
  CHECK(TwoDevices::Read(log) == 0);
  CHECK(cuStreamQuery(env.stream[0]) == CUDA_ERROR_NOT_READY);
  REQUIRE(cuLaunchKernel(env.Function(1, "rendezvous_u32"), 1, 1, 1, 1, 1, 1, 0, env.stream[1],
                         rank1, nullptr) == CUDA_SUCCESS);
  CHECK(cuStreamSynchronize(env.stream[0]) == CUDA_SUCCESS);
  CHECK(cuStreamSynchronize(env.stream[1]) == CUDA_SUCCESS);
  REQUIRE(cuStreamSynchronize(other) == CUDA_SUCCESS);
  CHECK(TwoDevices::Read(log) == 1);
}
