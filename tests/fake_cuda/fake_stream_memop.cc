// Stream memory operations of the fake driver: cuStreamWaitValue32/64 and cuStreamWriteValue32/64
// in their v1 (8000/9000) and v2 (11070) ABIs, each with _ptsz.
#include <type_traits>

#include "absl/synchronization/mutex.h"
#include "tests/fake_cuda/call_log.h"
#include "tests/fake_cuda/fake_state.h"
#include "tests/fake_cuda/virtual_device.h"

namespace fakecuda {
namespace {

template <typename T>
CUresult WaitValue(CallScope& call, CUstream h, bool per_thread, CUdeviceptr addr, T value,
                   unsigned flags) {
  absl::MutexLock lock(&Mu());
  Stream* stream = nullptr;
  if (CUresult r = ResolveStream(h, per_thread, &stream); r != CUDA_SUCCESS) return r;
  call.SetStream(stream);
  if (addr == 0 || addr % sizeof(T) != 0) return CUDA_ERROR_INVALID_VALUE;
  const unsigned mode = flags & 0x3;
  OpPtr op = MakeOp("stream_wait_value", call.order(), nullptr);
  op->ready = [addr, value, mode] {
    const T v = __atomic_load_n(reinterpret_cast<T*>(addr), __ATOMIC_ACQUIRE);
    switch (mode) {
      case CU_STREAM_WAIT_VALUE_GEQ:  // cyclic comparison in T's width, as CUDA defines it
        return static_cast<std::make_signed_t<T>>(static_cast<T>(v - value)) >= 0;
      case CU_STREAM_WAIT_VALUE_EQ: return v == value;
      case CU_STREAM_WAIT_VALUE_AND: return (v & value) != 0;
      default: return ~(v | value) != 0;
    }
  };
  Enqueue(stream, op);
  return CUDA_SUCCESS;
}

template <typename T>
CUresult WriteValue(CallScope& call, CUstream h, bool per_thread, CUdeviceptr addr, T value,
                    unsigned /*flags*/) {
  absl::MutexLock lock(&Mu());
  Stream* stream = nullptr;
  if (CUresult r = ResolveStream(h, per_thread, &stream); r != CUDA_SUCCESS) return r;
  call.SetStream(stream);
  if (addr == 0 || addr % sizeof(T) != 0) return CUDA_ERROR_INVALID_VALUE;
  Enqueue(stream, MakeOp("stream_write_value", call.order(), [addr, value] {
    __atomic_store_n(reinterpret_cast<T*>(addr), value, __ATOMIC_RELEASE);
    return CUDA_SUCCESS;
  }));
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace fakecuda

using fakecuda::CallScope;
using fakecuda::RunApi;

#define FAKECUDA_MEMOP(name, fn, T, ptsz)                                                    \
  CUresult name(CUstream h, CUdeviceptr addr, T value, unsigned int flags) {                 \
    return RunApi(#name, [&](CallScope& c) { return fakecuda::fn<T>(c, h, ptsz, addr, value, flags); }); \
  }

extern "C" {
FAKECUDA_MEMOP(cuStreamWaitValue32, WaitValue, cuuint32_t, false)
FAKECUDA_MEMOP(cuStreamWaitValue32_ptsz, WaitValue, cuuint32_t, true)
FAKECUDA_MEMOP(cuStreamWaitValue32_v2, WaitValue, cuuint32_t, false)
FAKECUDA_MEMOP(cuStreamWaitValue32_v2_ptsz, WaitValue, cuuint32_t, true)
FAKECUDA_MEMOP(cuStreamWaitValue64, WaitValue, cuuint64_t, false)
FAKECUDA_MEMOP(cuStreamWaitValue64_ptsz, WaitValue, cuuint64_t, true)
FAKECUDA_MEMOP(cuStreamWaitValue64_v2, WaitValue, cuuint64_t, false)
FAKECUDA_MEMOP(cuStreamWaitValue64_v2_ptsz, WaitValue, cuuint64_t, true)
FAKECUDA_MEMOP(cuStreamWriteValue32, WriteValue, cuuint32_t, false)
FAKECUDA_MEMOP(cuStreamWriteValue32_ptsz, WriteValue, cuuint32_t, true)
FAKECUDA_MEMOP(cuStreamWriteValue32_v2, WriteValue, cuuint32_t, false)
FAKECUDA_MEMOP(cuStreamWriteValue32_v2_ptsz, WriteValue, cuuint32_t, true)
FAKECUDA_MEMOP(cuStreamWriteValue64, WriteValue, cuuint64_t, false)
FAKECUDA_MEMOP(cuStreamWriteValue64_ptsz, WriteValue, cuuint64_t, true)
FAKECUDA_MEMOP(cuStreamWriteValue64_v2, WriteValue, cuuint64_t, false)
FAKECUDA_MEMOP(cuStreamWriteValue64_v2_ptsz, WriteValue, cuuint64_t, true)
}  // extern "C"
