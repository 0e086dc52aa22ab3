// Launch forms, parameter logging, CUkernel handles and graph replay of the fake driver.
#include <cuda.h>

#include <cstring>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "tests/fake_cuda/fake_cuda_control.h"
#include "tests/fake_cuda/fake_test_env.h"

using fakecuda_test::FakeEnv;

namespace {

// The record of the last logged call named `api`.
fakecuda_call_record LastCall(const char* api, std::vector<uint8_t>* params = nullptr) {
  fakecuda_call_record rec{};
  for (uint64_t i = fakecuda_call_count(); i-- > 0;) {
    REQUIRE(fakecuda_get_call(i, &rec) == 0);
    if (std::string(rec.api) == api) {
      if (params != nullptr) {
        params->assign(fakecuda_get_call_params(i, nullptr, 0), 0);
        fakecuda_get_call_params(i, params->data(), params->size());
      }
      return rec;
    }
  }
  FAIL("no call of " << api);
  return rec;
}

}  // namespace

TEST_CASE("Launch logs the parameter bytes as they were at call time", "[launch]") {
  FakeEnv env;
  CUfunction mixed = env.Function("mixed");
  uint8_t a = 0x11;
  uint64_t b = 0x2233445566778899ull;
  uint32_t c = 0xaabbccdd;
  uint16_t d = 0xeeff;
  CUdeviceptr out = 0;
  std::vector<uint8_t> expected(32, 0);
  std::memcpy(&expected[0], &a, 1);
  std::memcpy(&expected[8], &b, 8);
  std::memcpy(&expected[16], &c, 4);
  std::memcpy(&expected[20], &d, 2);
  SECTION("kernelParams form, padding zeroed") {
    void* args[] = {&a, &b, &c, &d, &out};
    REQUIRE(cuLaunchKernel(mixed, 2, 3, 4, 5, 6, 7, 128, nullptr, args, nullptr) == CUDA_SUCCESS);
    b = 0;  // later changes must not reach the log
    std::vector<uint8_t> logged;
    const fakecuda_call_record rec = LastCall("cuLaunchKernel", &logged);
    CHECK(logged == expected);
    CHECK(std::string(rec.function) == "mixed");
    CHECK(rec.grid[0] == 2);
    CHECK(rec.grid[2] == 4);
    CHECK(rec.block[1] == 6);
    CHECK(rec.shared_mem_bytes == 128);
    CHECK(rec.stream_kind == FAKECUDA_STREAM_LEGACY);
    CHECK(rec.result == CUDA_SUCCESS);
  }
  SECTION("extra form shorter than the parameter space") {
    std::vector<uint8_t> buffer = expected;
    buffer.resize(24);  // leaves out the last parameter, as NCCL-style callers may
    size_t size = buffer.size();
    void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buffer.data(), CU_LAUNCH_PARAM_BUFFER_SIZE,
                     &size, CU_LAUNCH_PARAM_END};
    CUlaunchConfig config{};
    config.gridDimX = config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = config.blockDimY = config.blockDimZ = 1;
    REQUIRE(cuLaunchKernelEx(&config, mixed, nullptr, extra) == CUDA_SUCCESS);
    std::fill(buffer.begin(), buffer.end(), 0xff);
    std::vector<uint8_t> logged;
    LastCall("cuLaunchKernelEx", &logged);
    CHECK(logged == expected);
  }
  REQUIRE(cuCtxSynchronize() == CUDA_SUCCESS);
}

TEST_CASE("Launch errors are returned at launch time", "[launch]") {
  FakeEnv env;
  CUdeviceptr buf = env.Alloc(64);
  uint32_t value = 1, count = 1;
  void* args[] = {&buf, &value, &count};
  CUfunction fill = env.Function("fill_u32");
  CHECK(cuLaunchKernel(fill, 1, 1, 1, 1025, 1, 1, 0, nullptr, args, nullptr) ==
        CUDA_ERROR_INVALID_VALUE);
  CHECK(cuLaunchKernel(fill, 1, 1, 1, 32, 32, 2, 0, nullptr, args, nullptr) ==
        CUDA_ERROR_INVALID_VALUE);
  CHECK(cuLaunchKernel(reinterpret_cast<CUfunction>(&buf), 1, 1, 1, 1, 1, 1, 0, nullptr, args,
                       nullptr) == CUDA_ERROR_INVALID_HANDLE);
  CHECK(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr) ==
        CUDA_ERROR_INVALID_VALUE);
  CHECK(LastCall("cuLaunchKernel").result == CUDA_ERROR_INVALID_VALUE);
  CHECK(cuLaunchKernel(fill, 1, 1, 1, 1024, 1, 1, 0, nullptr, args, nullptr) == CUDA_SUCCESS);
}

TEST_CASE("A CUkernel cast to CUfunction launches its kernel", "[launch]") {
  FakeEnv env;
  CUlibrary lib;
  static const char kImage[] = "library";
  REQUIRE(cuLibraryLoadData(&lib, kImage, nullptr, nullptr, 0, nullptr, nullptr, 0) ==
          CUDA_SUCCESS);
  CUkernel kernel;
  REQUIRE(cuLibraryGetKernel(&kernel, lib, "fill_u32") == CUDA_SUCCESS);
  size_t offset = 0, size = 0;
  CHECK(cuKernelGetParamInfo(kernel, 2, &offset, &size) == CUDA_SUCCESS);
  CHECK(offset == 12);
  CHECK(size == 4);
  CHECK(cuKernelGetParamInfo(kernel, 3, &offset, &size) == CUDA_ERROR_INVALID_VALUE);
  CUfunction f;
  REQUIRE(cuKernelGetFunction(&f, kernel) == CUDA_SUCCESS);
  CHECK(reinterpret_cast<void*>(f) != reinterpret_cast<void*>(kernel));
  CHECK(cuFuncGetParamInfo(f, 3, &offset, &size) == CUDA_ERROR_INVALID_VALUE);
  const char* name = nullptr;
  REQUIRE(cuFuncGetName(&name, f) == CUDA_SUCCESS);
  CHECK(std::string(name) == "fill_u32");
  int threads = 0;
  REQUIRE(cuFuncGetAttribute(&threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f) == CUDA_SUCCESS);
  CHECK(threads == 1024);

  CUdeviceptr buf = env.Alloc(16);
  uint32_t value = 31, count = 4;
  void* args[] = {&buf, &value, &count};
  REQUIRE(cuLaunchKernel(reinterpret_cast<CUfunction>(kernel), 1, 1, 1, 4, 1, 1, 0, nullptr, args,
                         nullptr) == CUDA_SUCCESS);
  uint32_t out[4] = {};
  REQUIRE(cuMemcpyDtoH(out, buf, sizeof(out)) == CUDA_SUCCESS);
  CHECK(out[3] == 31);
  CHECK(std::string(LastCall("cuLaunchKernel").function) == "fill_u32");
  REQUIRE(cuLibraryUnload(lib) == CUDA_SUCCESS);
}

TEST_CASE("Captured work runs only when the graph is launched", "[launch][graph]") {
  FakeEnv env;
  CUstream s;
  REQUIRE(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
  CUdeviceptr buf = env.Alloc(16);
  REQUIRE(cuMemsetD32(buf, 100, 4) == CUDA_SUCCESS);
  REQUIRE(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  CUstreamCaptureStatus status;
  REQUIRE(cuStreamIsCapturing(s, &status) == CUDA_SUCCESS);
  CHECK(status == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  uint32_t delta = 1, count = 4;
  void* args[] = {&buf, &delta, &count};
  REQUIRE(cuLaunchKernel(env.Function("add_u32"), 1, 1, 1, 4, 1, 1, 0, s, args, nullptr) ==
          CUDA_SUCCESS);
  delta = 10;
  REQUIRE(cuLaunchKernel(env.Function("add_u32"), 1, 1, 1, 4, 1, 1, 0, s, args, nullptr) ==
          CUDA_SUCCESS);
  CHECK(cuStreamSynchronize(s) == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CUgraph graph;
  REQUIRE(cuStreamEndCapture(s, &graph) == CUDA_SUCCESS);
  uint32_t out = 0;
  REQUIRE(cuMemcpyDtoH(&out, buf, 4) == CUDA_SUCCESS);
  CHECK(out == 100);
  CUgraphExec exec;
  REQUIRE(cuGraphInstantiateWithFlags(&exec, graph, 0) == CUDA_SUCCESS);
  REQUIRE(cuGraphLaunch(exec, s) == CUDA_SUCCESS);
  REQUIRE(cuGraphLaunch(exec, s) == CUDA_SUCCESS);
  REQUIRE(cuStreamSynchronize(s) == CUDA_SUCCESS);
  REQUIRE(cuMemcpyDtoH(&out, buf, 4) == CUDA_SUCCESS);
  CHECK(out == 122);
  REQUIRE(cuGraphExecDestroy(exec) == CUDA_SUCCESS);
  REQUIRE(cuGraphDestroy(graph) == CUDA_SUCCESS);
}

TEST_CASE("Stream 0 resolves to the per-thread stream through _ptsz entry points", "[launch]") {
  FakeEnv env;
  REQUIRE(cuLaunchKernel(env.Function("empty"), 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr) ==
          CUDA_SUCCESS);
  CHECK(LastCall("cuLaunchKernel").stream_kind == FAKECUDA_STREAM_LEGACY);
  REQUIRE(cuLaunchKernel(env.Function("empty"), 1, 1, 1, 1, 1, 1, 0, CU_STREAM_PER_THREAD, nullptr,
                         nullptr) == CUDA_SUCCESS);
  const fakecuda_call_record rec = LastCall("cuLaunchKernel");
  CHECK(rec.stream_kind == FAKECUDA_STREAM_PER_THREAD);
  CHECK(static_cast<int64_t>(rec.stream_owner_tid) == rec.tid);
  REQUIRE(cuCtxSynchronize() == CUDA_SUCCESS);
}
