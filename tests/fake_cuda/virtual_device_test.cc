// Ordering, priorities and asynchronous errors of the fake's virtual device.
#include <cuda.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <thread>
#include <vector>

#include "catch2/catch.hpp"
#include "tests/fake_cuda/fake_cuda_control.h"
#include "tests/fake_cuda/fake_test_env.h"

using fakecuda_test::FakeEnv;
using V = std::vector<uint32_t>;

namespace {

// Holds a stream until Release(): a stream-wait-value on a host flag the test controls.
struct Gate {
  explicit Gate(const FakeEnv& env) : flag(env.Alloc(4)) {
    REQUIRE(cuMemsetD32(flag, 0, 1) == CUDA_SUCCESS);
  }
  void Block(CUstream s) const {
    REQUIRE(cuStreamWaitValue32(s, flag, 1, CU_STREAM_WAIT_VALUE_GEQ) == CUDA_SUCCESS);
  }
  void Release() const {
    __atomic_store_n(reinterpret_cast<uint32_t*>(flag), 1u, __ATOMIC_RELEASE);
  }
  CUdeviceptr flag;
};

}  // namespace

TEST_CASE("Executor runs the highest-priority ready stream first", "[virtual_device]") {
  FakeEnv env;
  CUstream low, high;
  REQUIRE(cuStreamCreateWithPriority(&low, 0, 0) == CUDA_SUCCESS);
  REQUIRE(cuStreamCreateWithPriority(&high, 0, -5) == CUDA_SUCCESS);
  int least = 1, greatest = 1;
  REQUIRE(cuCtxGetStreamPriorityRange(&least, &greatest) == CUDA_SUCCESS);
  CHECK(least == 0);
  CHECK(greatest == -5);
  CUdeviceptr log = env.NewLog();
  fakecuda_set_device_paused(0, 1);
  env.Append(low, log, 1);
  env.Append(low, log, 2);
  env.Append(high, log, 3);
  fakecuda_set_device_paused(0, 0);
  REQUIRE(cuCtxSynchronize() == CUDA_SUCCESS);
  CHECK(env.Log(log) == V{3, 1, 2});
  fakecuda_exec_record rec;
  bool found = false;
  for (uint64_t i = 0; i < fakecuda_exec_count(); ++i) {
    REQUIRE(fakecuda_get_exec(i, &rec) == 0);
    if (std::string(rec.what) == "append_u32") {
      CHECK(rec.priority == -5);  // the first append executed is the high-priority one
      found = true;
      break;
    }
  }
  CHECK(found);
}

TEST_CASE("Legacy stream work waits for blocking streams, not non-blocking ones", "[virtual_device]") {
  FakeEnv env;
  Gate gate(env);
  CUdeviceptr log = env.NewLog();
  SECTION("blocking stream") {
    CUstream s;
    REQUIRE(cuStreamCreate(&s, CU_STREAM_DEFAULT) == CUDA_SUCCESS);
    gate.Block(s);
    env.Append(s, log, 1);
    env.Append(nullptr, log, 2);
    CHECK(cuStreamQuery(CU_STREAM_LEGACY) == CUDA_ERROR_NOT_READY);
    gate.Release();
    REQUIRE(cuStreamSynchronize(nullptr) == CUDA_SUCCESS);
    CHECK(env.Log(log) == V{1, 2});
  }
  SECTION("non-blocking stream") {
    CUstream s;
    REQUIRE(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    gate.Block(s);
    env.Append(s, log, 1);
    env.Append(nullptr, log, 2);
    REQUIRE(cuStreamSynchronize(nullptr) == CUDA_SUCCESS);  // returns although s is held
    CHECK(cuStreamQuery(s) == CUDA_ERROR_NOT_READY);
    gate.Release();
    REQUIRE(cuStreamSynchronize(s) == CUDA_SUCCESS);
    CHECK(env.Log(log) == V{2, 1});
  }
  SECTION("blocking stream work waits for earlier legacy work") {
    CUstream s;
    REQUIRE(cuStreamCreate(&s, CU_STREAM_DEFAULT) == CUDA_SUCCESS);
    CUstream held;
    REQUIRE(cuStreamCreate(&held, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    CUevent e;
    REQUIRE(cuEventCreate(&e, 0) == CUDA_SUCCESS);
    gate.Block(held);
    REQUIRE(cuEventRecord(e, held) == CUDA_SUCCESS);
    REQUIRE(cuStreamWaitEvent(nullptr, e, 0) == CUDA_SUCCESS);  // holds the legacy stream
    env.Append(nullptr, log, 1);
    env.Append(s, log, 2);
    CHECK(cuStreamQuery(s) == CUDA_ERROR_NOT_READY);
    gate.Release();
    REQUIRE(cuStreamSynchronize(s) == CUDA_SUCCESS);
    CHECK(env.Log(log) == V{1, 2});
  }
}

TEST_CASE("Stream wait event binds to the record current at the time of the wait",
          "[virtual_device]") {
  FakeEnv env;
  Gate gate(env);
  CUdeviceptr log = env.NewLog();
  CUstream s1, s2, s3;
  REQUIRE(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
  REQUIRE(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
  REQUIRE(cuStreamCreate(&s3, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
  CUevent e;
  REQUIRE(cuEventCreate(&e, 0) == CUDA_SUCCESS);
  gate.Block(s1);
  env.Append(s1, log, 1);
  REQUIRE(cuEventRecord(e, s1) == CUDA_SUCCESS);
  REQUIRE(cuStreamWaitEvent(s2, e, 0) == CUDA_SUCCESS);
  env.Append(s2, log, 2);
  REQUIRE(cuEventRecord(e, s3) == CUDA_SUCCESS);  // a later record must not release s2
  REQUIRE(cuStreamSynchronize(s3) == CUDA_SUCCESS);
  CHECK(cuEventQuery(e) == CUDA_SUCCESS);
  // Work queued after s2's append runs only after it if s2 was (wrongly) ready.
  REQUIRE(cuLaunchKernel(env.Function("empty"), 1, 1, 1, 1, 1, 1, 0, s3, nullptr, nullptr) ==
          CUDA_SUCCESS);
  REQUIRE(cuStreamSynchronize(s3) == CUDA_SUCCESS);
  CHECK(cuStreamQuery(s2) == CUDA_ERROR_NOT_READY);
  gate.Release();
  REQUIRE(cuStreamSynchronize(s2) == CUDA_SUCCESS);
  CHECK(env.Log(log) == V{1, 2});
}

TEST_CASE("A failing kernel surfaces on the next stream and context sync", "[virtual_device]") {
  FakeEnv env;
  CUstream s;
  REQUIRE(cuStreamCreate(&s, 0) == CUDA_SUCCESS);
  CUdeviceptr buf = env.Alloc(16);
  uint32_t value = 9, count = 4;
  void* args[] = {&buf, &value, &count};
  fakecuda_fail_kernel("fill_u32", CUDA_ERROR_ILLEGAL_ADDRESS);
  SECTION("stream synchronize, once") {
    REQUIRE(cuLaunchKernel(env.Function("fill_u32"), 1, 1, 1, 4, 1, 1, 0, s, args, nullptr) ==
            CUDA_SUCCESS);
    CHECK(cuStreamSynchronize(s) == CUDA_ERROR_ILLEGAL_ADDRESS);
    CHECK(cuStreamSynchronize(s) == CUDA_SUCCESS);
  }
  SECTION("stream query") {
    REQUIRE(cuLaunchKernel(env.Function("fill_u32"), 1, 1, 1, 4, 1, 1, 0, s, args, nullptr) ==
            CUDA_SUCCESS);
    fakecuda_wait_idle();
    CHECK(cuStreamQuery(s) == CUDA_ERROR_ILLEGAL_ADDRESS);
  }
  SECTION("context synchronize") {
    REQUIRE(cuLaunchKernel(env.Function("fill_u32"), 1, 1, 1, 4, 1, 1, 0, s, args, nullptr) ==
            CUDA_SUCCESS);
    CHECK(cuCtxSynchronize() == CUDA_ERROR_ILLEGAL_ADDRESS);
    CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
  }
  fakecuda_fail_kernel("fill_u32", CUDA_SUCCESS);
}

TEST_CASE("fakecuda_fail_next_call fails exactly the next call of that API", "[virtual_device]") {
  FakeEnv env;
  fakecuda_fail_next_call("cuMemAlloc_v2", CUDA_ERROR_OUT_OF_MEMORY);
  CUdeviceptr p = 0;
  CHECK(cuMemAlloc(&p, 64) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(cuMemAlloc(&p, 64) == CUDA_SUCCESS);
  CHECK(fakecuda_count_calls("cuMemAlloc_v2") == 2);
}

TEST_CASE("fakecuda_fail_calls fails the nth to the (nth + count - 1)th matching call",
          "[virtual_device]") {
  FakeEnv env;
  CUdeviceptr p = 0;
  SECTION("nth and count") {
    fakecuda_fail_calls("cuMemAlloc_v2", CUDA_ERROR_OUT_OF_MEMORY, 2, 2, 0);
    const uint64_t first = fakecuda_call_count();
    std::vector<CUresult> results;
    for (int i = 0; i < 5; ++i) results.push_back(cuMemAlloc(&p, 64));
    CHECK(results == std::vector<CUresult>{CUDA_SUCCESS, CUDA_ERROR_OUT_OF_MEMORY,
                                           CUDA_ERROR_OUT_OF_MEMORY, CUDA_SUCCESS, CUDA_SUCCESS});
    fakecuda_call_record rec{};
    REQUIRE(fakecuda_get_call(first + 1, &rec) == 0);
    CHECK(rec.injected == 1);
    REQUIRE(fakecuda_get_call(first + 3, &rec) == 0);
    CHECK(rec.injected == 0);
  }
  SECTION("count 0 fails every later call") {
    fakecuda_fail_calls("cuMemAlloc_v2", CUDA_ERROR_OUT_OF_MEMORY, 1, 0, 0);
    for (int i = 0; i < 3; ++i) CHECK(cuMemAlloc(&p, 64) == CUDA_ERROR_OUT_OF_MEMORY);
    fakecuda_fail_calls("cuMemAlloc_v2", CUDA_SUCCESS, 1, 0, 0);  // removes it
    CHECK(cuMemAlloc(&p, 64) == CUDA_SUCCESS);
  }
  SECTION("only calls of the named thread match") {
    CUresult other = CUDA_ERROR_UNKNOWN;
    int64_t other_tid = 0;
    fakecuda_fail_calls("cuMemAlloc_v2", CUDA_ERROR_OUT_OF_MEMORY, 1, 1,
                        static_cast<int64_t>(syscall(SYS_gettid)) + 1000000);
    std::thread([&] {
      other_tid = static_cast<int64_t>(syscall(SYS_gettid));
      REQUIRE(cuCtxSetCurrent(env.ctx) == CUDA_SUCCESS);
      other = cuMemAlloc(&p, 64);
    }).join();
    CHECK(other == CUDA_SUCCESS);  // armed for a thread that does not exist
    fakecuda_fail_calls("cuMemAlloc_v2", CUDA_ERROR_OUT_OF_MEMORY, 1, 1, other_tid);
    CHECK(cuMemAlloc(&p, 64) == CUDA_SUCCESS);  // this thread's call does not match
    std::thread([&] {
      REQUIRE(cuCtxSetCurrent(env.ctx) == CUDA_SUCCESS);
      other = cuMemAlloc(&p, 64);  // a new thread: another tid, does not match either
    }).join();
    CHECK(other == CUDA_SUCCESS);
  }
}

TEST_CASE("fakecuda_set_call_logging(0) stops logging; injections still apply",
          "[virtual_device]") {
  FakeEnv env;
  CUdeviceptr p = 0;
  REQUIRE(cuMemAlloc(&p, 64) == CUDA_SUCCESS);
  const uint64_t calls = fakecuda_call_count();
  fakecuda_set_call_logging(0);
  fakecuda_fail_next_call("cuMemAlloc_v2", CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(cuMemAlloc(&p, 64) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(cuMemsetD32(p, 0, 16) == CUDA_SUCCESS);
  CHECK(fakecuda_call_count() == calls);
  CHECK(fakecuda_exec_count() == 0);
  fakecuda_set_call_logging(1);
  CHECK(cuMemAlloc(&p, 64) == CUDA_SUCCESS);
  CHECK(fakecuda_call_count() == calls + 1);
}

TEST_CASE("Event elapsed time and synchronize follow the recorded work", "[virtual_device]") {
  FakeEnv env;
  CUstream s;
  REQUIRE(cuStreamCreate(&s, 0) == CUDA_SUCCESS);
  CUevent a, b;
  REQUIRE(cuEventCreate(&a, 0) == CUDA_SUCCESS);
  REQUIRE(cuEventCreate(&b, 0) == CUDA_SUCCESS);
  uint64_t ns = 2000000;
  void* args[] = {&ns};
  REQUIRE(cuEventRecord(a, s) == CUDA_SUCCESS);
  REQUIRE(cuLaunchKernel(env.Function("sleep_ns"), 1, 1, 1, 1, 1, 1, 0, s, args, nullptr) ==
          CUDA_SUCCESS);
  REQUIRE(cuEventRecord(b, s) == CUDA_SUCCESS);
  REQUIRE(cuEventSynchronize(b) == CUDA_SUCCESS);
  float ms = 0;
  REQUIRE(cuEventElapsedTime(&ms, a, b) == CUDA_SUCCESS);
  CHECK(ms >= 2.0f);
}
