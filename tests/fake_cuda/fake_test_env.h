// Test fixture for the fake driver's own tests (linked in-process): initialises the driver,
// makes the primary context current and loads a module holding the built-in kernels.
#ifndef GPUPRIO_TESTS_FAKE_CUDA_FAKE_TEST_ENV_H_
#define GPUPRIO_TESTS_FAKE_CUDA_FAKE_TEST_ENV_H_

#include <cuda.h>

#include <cstdint>
#include <vector>

#include "catch2/catch.hpp"
#include "tests/fake_cuda/fake_cuda_control.h"

namespace fakecuda_test {

struct FakeEnv {
  FakeEnv() {
    fakecuda_reset();
    REQUIRE(cuInit(0) == CUDA_SUCCESS);
    REQUIRE(cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS);
    REQUIRE(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
    static const char kImage[] = "image";
    REQUIRE(cuModuleLoadData(&module, kImage) == CUDA_SUCCESS);
  }
  ~FakeEnv() {
    cuModuleUnload(module);
    fakecuda_reset();
  }

  CUfunction Function(const char* name) const {
    CUfunction f = nullptr;
    REQUIRE(cuModuleGetFunction(&f, module, name) == CUDA_SUCCESS);
    return f;
  }

  CUdeviceptr Alloc(size_t bytes) const {
    CUdeviceptr p = 0;
    REQUIRE(cuMemAlloc(&p, bytes) == CUDA_SUCCESS);
    return p;
  }

  // Launches append_u32(log, value) on `stream`: the log records execution order.
  void Append(CUstream stream, CUdeviceptr log, uint32_t value) const {
    void* args[] = {&log, &value};
    REQUIRE(cuLaunchKernel(Function("append_u32"), 1, 1, 1, 1, 1, 1, 0, stream, args, nullptr) ==
            CUDA_SUCCESS);
  }

  // The values appended to `log` so far, in execution order (synchronous copy).
  std::vector<uint32_t> Log(CUdeviceptr log) const {
    uint32_t n = 0;
    REQUIRE(cuMemcpyDtoH(&n, log, 4) == CUDA_SUCCESS);
    std::vector<uint32_t> values(n + 1);
    REQUIRE(cuMemcpyDtoH(values.data(), log, 4 * (n + 1)) == CUDA_SUCCESS);
    return std::vector<uint32_t>(values.begin() + 1, values.end());
  }

  CUdeviceptr NewLog() const {
    CUdeviceptr log = Alloc(4 * 64);
    REQUIRE(cuMemsetD32(log, 0, 64) == CUDA_SUCCESS);
    return log;
  }

  CUcontext ctx = nullptr;
  CUmodule module = nullptr;
};

}  // namespace fakecuda_test

#endif  // GPUPRIO_TESTS_FAKE_CUDA_FAKE_TEST_ENV_H_
