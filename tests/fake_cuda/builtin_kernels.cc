// The fake driver's built-in kernels: what each one does to "device memory" (host heap) when the
// virtual device runs it.
#include "tests/fake_cuda/builtin_kernels.h"

#include <chrono>
#include <cstring>
#include <thread>

namespace fakecuda {
namespace {

template <typename T>
T Get(const uint8_t* params, size_t offset) {
  T value;
  std::memcpy(&value, params + offset, sizeof(T));
  return value;
}

uint32_t* U32(const uint8_t* params, size_t offset) {
  return reinterpret_cast<uint32_t*>(static_cast<uintptr_t>(Get<uint64_t>(params, offset)));
}

// How long a rendezvous waits for its peer: far longer than any test's work, short enough that
// a broken test fails instead of hanging CI.
constexpr std::chrono::seconds kRendezvousTimeout(20);

CUresult RunNothing(const uint8_t*) { return CUDA_SUCCESS; }

CUresult RunFill(const uint8_t* p) {
  uint32_t* dst = U32(p, 0);
  const uint32_t value = Get<uint32_t>(p, 8), count = Get<uint32_t>(p, 12);
  for (uint32_t i = 0; i < count; ++i) dst[i] = value;
  return CUDA_SUCCESS;
}

CUresult RunAdd(const uint8_t* p) {
  uint32_t* buf = U32(p, 0);
  const uint32_t delta = Get<uint32_t>(p, 8), count = Get<uint32_t>(p, 12);
  for (uint32_t i = 0; i < count; ++i) buf[i] += delta;
  return CUDA_SUCCESS;
}

CUresult RunCopy(const uint8_t* p) {
  std::memmove(U32(p, 0), U32(p, 8), Get<uint32_t>(p, 16) * sizeof(uint32_t));
  return CUDA_SUCCESS;
}

CUresult RunAppend(const uint8_t* p) {
  uint32_t* log = U32(p, 0);
  log[1 + log[0]] = Get<uint32_t>(p, 8);
  ++log[0];
  return CUDA_SUCCESS;
}

CUresult RunMixed(const uint8_t* p) {
  const uint64_t out = Get<uint64_t>(p, 24);
  if (out == 0) return CUDA_SUCCESS;
  const uint64_t sum = Get<uint8_t>(p, 0) + Get<uint64_t>(p, 8) + Get<uint32_t>(p, 16) +
                       Get<uint16_t>(p, 20);
  std::memcpy(reinterpret_cast<void*>(static_cast<uintptr_t>(out)), &sum, sizeof(sum));
  return CUDA_SUCCESS;
}

CUresult RunRendezvous(const uint8_t* p) {
  // The two ranks run on different executor threads: the flags are shared memory between them.
  __atomic_store_n(U32(p, 0), 1u, __ATOMIC_SEQ_CST);
  const uint32_t* peer = U32(p, 8);
  const auto deadline = std::chrono::steady_clock::now() + kRendezvousTimeout;
  while (__atomic_load_n(peer, __ATOMIC_SEQ_CST) != 1) {
    if (std::chrono::steady_clock::now() >= deadline) return CUDA_ERROR_LAUNCH_TIMEOUT;
    // The executor stays occupied; the host core is left to others (tests run on 2 cores).
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  return CUDA_SUCCESS;
}

}  // namespace

const std::vector<BuiltinKernel>& AllBuiltinKernels() {
  // Leaked: executor threads may run kernels while the process exits.
  static const auto* kernels = new std::vector<BuiltinKernel>{
      {"empty", {}, 0, RunNothing, false},
      {"fill_u32", {{0, 8}, {8, 4}, {12, 4}}, 16, RunFill, false},
      {"add_u32", {{0, 8}, {8, 4}, {12, 4}}, 16, RunAdd, false},
      {"copy_u32", {{0, 8}, {8, 8}, {16, 4}}, 24, RunCopy, false},
      {"append_u32", {{0, 8}, {8, 4}}, 16, RunAppend, false},
      {"sleep_ns", {{0, 8}}, 8, RunNothing, true},
      {"mixed", {{0, 1}, {8, 8}, {16, 4}, {20, 2}, {24, 8}}, 32, RunMixed, false},
      {"rendezvous_u32", {{0, 8}, {8, 8}}, 16, RunRendezvous, false},
  };
  return *kernels;
}

const BuiltinKernel* FindBuiltinKernel(const char* name) {
  if (name == nullptr) return nullptr;
  for (const BuiltinKernel& k : AllBuiltinKernels()) {
    if (std::strcmp(k.name, name) == 0) return &k;
  }
  return nullptr;
}

}  // namespace fakecuda
