// Memory of the fake driver: "device" memory is host heap (a CUdeviceptr is the address), copies
// and memsets are stream ops whose effect happens when the virtual device runs them. Addressing is
// unified: one address space for every device, so cuMemcpy(Async) copies across devices too.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "tests/fake_cuda/call_log.h"
#include "tests/fake_cuda/fake_state.h"
#include "tests/fake_cuda/virtual_device.h"

namespace fakecuda {
namespace {

enum class Dir { kHtoD, kDtoH, kDtoD, kAny };

void* AllocBytes(size_t size) {
  const size_t rounded = (size + 255) / 256 * 256;
  return std::aligned_alloc(256, rounded == 0 ? 256 : rounded);
}

CUresult Alloc(void** out, size_t size, MemKind kind) {
  absl::MutexLock lock(&Mu());
  if (CUresult r = CheckInit(); r != CUDA_SUCCESS) return r;
  Context* ctx = CurrentContext();
  if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (out == nullptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
  void* p = AllocBytes(size);
  if (p == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  S().memory[reinterpret_cast<uintptr_t>(p)] = Allocation{size, kind, ctx->device};
  *out = p;
  return CUDA_SUCCESS;
}

CUresult Free(uintptr_t ptr, MemKind kind) ABSL_EXCLUSIVE_LOCKS_REQUIRED(Mu()) {
  auto it = S().memory.find(ptr);
  if (it == S().memory.end() || it->second.kind != kind) return CUDA_ERROR_INVALID_VALUE;
  S().memory.erase(it);
  std::free(reinterpret_cast<void*>(ptr));
  return CUDA_SUCCESS;
}

// Pinned or registered host memory; pageable otherwise.
bool IsPinned(uintptr_t p, size_t n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(Mu()) {
  const Allocation* a = FindAllocation(p, n == 0 ? 1 : n);
  return a != nullptr && a->kind != MemKind::kDevice;
}

bool IsDevice(uintptr_t p, size_t n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(Mu()) {
  const Allocation* a = FindAllocation(p, n == 0 ? 1 : n);
  return a != nullptr && a->kind == MemKind::kDevice;
}

CUresult Copy(CallScope& call, uintptr_t dst, uintptr_t src, size_t n, CUstream h, bool per_thread,
              bool sync, Dir dir) {
  absl::MutexLock lock(&Mu());
  Stream* stream = nullptr;
  if (CUresult r = ResolveStream(h, per_thread, &stream); r != CUDA_SUCCESS) return r;
  call.SetStream(stream);
  call.SetParams(PointerParams({dst, src, n}));
  if (n == 0) return CUDA_SUCCESS;
  if (dst == 0 || src == 0) return CUDA_ERROR_INVALID_VALUE;
  if ((dir == Dir::kHtoD || dir == Dir::kDtoD) && !IsDevice(dst, n)) return CUDA_ERROR_INVALID_VALUE;
  if ((dir == Dir::kDtoH || dir == Dir::kDtoD) && !IsDevice(src, n)) return CUDA_ERROR_INVALID_VALUE;
  if (sync && stream->capture != nullptr) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  std::function<CUresult()> body;
  const bool staged = !sync && dir == Dir::kHtoD && !IsPinned(src, n);
  if (staged) {
    // CUDA stages pageable sources before returning: later writes by the caller don't count.
    auto bytes = std::make_shared<std::vector<uint8_t>>(
        reinterpret_cast<const uint8_t*>(src), reinterpret_cast<const uint8_t*>(src) + n);
    body = [dst, bytes] {
      std::memcpy(reinterpret_cast<void*>(dst), bytes->data(), bytes->size());
      return CUDA_SUCCESS;
    };
  } else {
    body = [dst, src, n] {
      std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n);
      return CUDA_SUCCESS;
    };
  }
  OpPtr op = MakeOp("memcpy", call.order(), std::move(body));
  Enqueue(stream, op);
  // Copies into pageable memory complete before returning, as in CUDA.
  if (sync || (dir == Dir::kDtoH && !IsPinned(dst, n) && stream->capture == nullptr)) {
    WaitDone(op);
  }
  return CUDA_SUCCESS;
}

template <typename T>
CUresult Set(CallScope& call, uintptr_t dst, T value, size_t count, CUstream h, bool per_thread,
             bool sync) {
  absl::MutexLock lock(&Mu());
  Stream* stream = nullptr;
  if (CUresult r = ResolveStream(h, per_thread, &stream); r != CUDA_SUCCESS) return r;
  call.SetStream(stream);
  if (count == 0) return CUDA_SUCCESS;
  if (!IsDevice(dst, count * sizeof(T)) || dst % sizeof(T) != 0) return CUDA_ERROR_INVALID_VALUE;
  if (sync && stream->capture != nullptr) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  OpPtr op = MakeOp("memset", call.order(), [dst, value, count] {
    T* p = reinterpret_cast<T*>(dst);
    for (size_t i = 0; i < count; ++i) p[i] = value;
    return CUDA_SUCCESS;
  });
  Enqueue(stream, op);
  if (sync) WaitDone(op);
  return CUDA_SUCCESS;
}

CUresult AllocAsync(CallScope& call, CUdeviceptr* out, size_t size, CUstream h, bool per_thread) {
  {
    absl::MutexLock lock(&Mu());
    Stream* stream = nullptr;
    if (CUresult r = ResolveStream(h, per_thread, &stream); r != CUDA_SUCCESS) return r;
    call.SetStream(stream);
  }
  void* p = nullptr;
  if (CUresult r = Alloc(&p, size, MemKind::kDevice); r != CUDA_SUCCESS) return r;
  *out = reinterpret_cast<CUdeviceptr>(p);
  absl::MutexLock lock(&Mu());
  Stream* stream = nullptr;
  if (CUresult r = ResolveStream(h, per_thread, &stream); r != CUDA_SUCCESS) return r;
  Enqueue(stream, MakeOp("mem_alloc_async", call.order(), nullptr));
  return CUDA_SUCCESS;
}

CUresult FreeAsync(CallScope& call, CUdeviceptr ptr, CUstream h, bool per_thread) {
  absl::MutexLock lock(&Mu());
  Stream* stream = nullptr;
  if (CUresult r = ResolveStream(h, per_thread, &stream); r != CUDA_SUCCESS) return r;
  call.SetStream(stream);
  auto it = S().memory.find(static_cast<uintptr_t>(ptr));
  if (it == S().memory.end() || it->second.kind != MemKind::kDevice) return CUDA_ERROR_INVALID_VALUE;
  Enqueue(stream, MakeOp("mem_free_async", call.order(), [ptr]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    absl::MutexLock lock(&Mu());
    return Free(static_cast<uintptr_t>(ptr), MemKind::kDevice);
  }));
  return CUDA_SUCCESS;
}

// cuMemcpyPeer(Async): device memory of `src_ctx` into device memory of `dst_ctx`. The async form
// is an op of `h`. The synchronous one is serialised with all work of the current, source and
// destination contexts (as the driver documents): it runs on the current context's legacy (or,
// _ptds, per-thread) stream after every op queued in those three contexts, and returns when done.
CUresult PeerCopy(CallScope& call, uintptr_t dst, CUcontext dst_ctx, uintptr_t src,
                  CUcontext src_ctx, size_t n, CUstream h, bool per_thread, bool sync) {
  absl::MutexLock lock(&Mu());
  if (CUresult r = CheckInit(); r != CUDA_SUCCESS) return r;
  Context* dst_context = Lookup<Context>(dst_ctx, Kind::kContext);
  Context* src_context = Lookup<Context>(src_ctx, Kind::kContext);
  if (dst_context == nullptr || src_context == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  Stream* stream = nullptr;
  if (CUresult r = ResolveStream(h, per_thread, &stream); r != CUDA_SUCCESS) return r;
  call.SetStream(stream);
  if (n == 0) return CUDA_SUCCESS;
  if (!IsDevice(dst, n) || !IsDevice(src, n)) return CUDA_ERROR_INVALID_VALUE;
  if (sync && stream->capture != nullptr) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  OpPtr op = MakeOp("memcpy_peer", call.order(), [dst, src, n] {
    std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n);
    return CUDA_SUCCESS;
  });
  if (sync) {
    for (const Context* ctx : {dst_context, src_context, stream->ctx}) {
      for (const Stream* s : ctx->streams) {
        if (s != stream && s->last != nullptr && !s->last->done) op->deps.push_back(s->last);
      }
    }
  }
  Enqueue(stream, op);
  if (sync) WaitDone(op);
  return CUDA_SUCCESS;
}

uintptr_t U(CUdeviceptr p) { return static_cast<uintptr_t>(p); }
uintptr_t U(const void* p) { return reinterpret_cast<uintptr_t>(p); }

}  // namespace
}  // namespace fakecuda

using fakecuda::CallScope;
using fakecuda::Dir;
using fakecuda::MemKind;
using fakecuda::Mu;
using fakecuda::RunApi;
using fakecuda::U;

extern "C" {

CUresult cuMemAlloc_v2(CUdeviceptr* out, size_t size) {
  return RunApi("cuMemAlloc_v2", [&](CallScope&) {
    void* p = nullptr;
    const CUresult r = fakecuda::Alloc(&p, size, MemKind::kDevice);
    if (r == CUDA_SUCCESS) *out = reinterpret_cast<CUdeviceptr>(p);
    return r;
  });
}

CUresult cuMemFree_v2(CUdeviceptr ptr) {
  return RunApi("cuMemFree_v2", [&](CallScope&) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    absl::MutexLock lock(&Mu());
    if (CUresult r = fakecuda::CheckInit(); r != CUDA_SUCCESS) return r;
    if (ptr == 0) return CUDA_SUCCESS;
    // cuMemFree synchronises: work still using the memory finishes first.
    if (fakecuda::Context* ctx = fakecuda::CurrentContext()) {
      for (fakecuda::Stream* s : ctx->streams) fakecuda::WaitDone(fakecuda::OpPtr(s->last));
    }
    return fakecuda::Free(U(ptr), MemKind::kDevice);
  });
}

CUresult cuMemAllocHost_v2(void** out, size_t size) {
  return RunApi("cuMemAllocHost_v2", [&](CallScope&) { return fakecuda::Alloc(out, size, MemKind::kPinnedHost); });
}
CUresult cuMemHostAlloc(void** out, size_t size, unsigned int) {
  return RunApi("cuMemHostAlloc", [&](CallScope&) { return fakecuda::Alloc(out, size, MemKind::kPinnedHost); });
}
CUresult cuMemFreeHost(void* p) {
  return RunApi("cuMemFreeHost", [&](CallScope&) {
    absl::MutexLock lock(&Mu());
    return fakecuda::Free(U(p), MemKind::kPinnedHost);
  });
}

static CUresult RegisterHost(void* p, size_t size) {
  absl::MutexLock lock(&Mu());
  if (CUresult r = fakecuda::CheckInit(); r != CUDA_SUCCESS) return r;
  if (p == nullptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
  if (fakecuda::FindAllocation(U(p), 1) != nullptr) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  const fakecuda::Context* ctx = fakecuda::CurrentContext();
  fakecuda::S().memory[U(p)] =
      fakecuda::Allocation{size, MemKind::kRegisteredHost, ctx != nullptr ? ctx->device : 0};
  return CUDA_SUCCESS;
}
CUresult cuMemHostRegister(void* p, size_t size, unsigned int) {
  return RunApi("cuMemHostRegister", [&](CallScope&) { return RegisterHost(p, size); });
}
CUresult cuMemHostRegister_v2(void* p, size_t size, unsigned int) {
  return RunApi("cuMemHostRegister_v2", [&](CallScope&) { return RegisterHost(p, size); });
}
CUresult cuMemHostUnregister(void* p) {
  return RunApi("cuMemHostUnregister", [&](CallScope&) {
    absl::MutexLock lock(&Mu());
    auto it = fakecuda::S().memory.find(U(p));
    if (it == fakecuda::S().memory.end() || it->second.kind != MemKind::kRegisteredHost) {
      return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    }
    fakecuda::S().memory.erase(it);
    return CUDA_SUCCESS;
  });
}

CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  return RunApi("cuPointerGetAttribute", [&](CallScope&) {
    absl::MutexLock lock(&Mu());
    if (CUresult r = fakecuda::CheckInit(); r != CUDA_SUCCESS) return r;
    if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
    uintptr_t base = 0;
    const fakecuda::Allocation* a = fakecuda::FindAllocation(U(ptr), 1, &base);
    if (a == nullptr) return CUDA_ERROR_INVALID_VALUE;  // pageable or unknown, like CUDA
    const bool device = a->kind == MemKind::kDevice;
    switch (attribute) {
      case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *static_cast<unsigned*>(data) = device ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
        return CUDA_SUCCESS;
      case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *static_cast<CUdeviceptr*>(data) = ptr;
        return CUDA_SUCCESS;
      case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (device) return CUDA_ERROR_INVALID_VALUE;
        *static_cast<void**>(data) = reinterpret_cast<void*>(U(ptr));
        return CUDA_SUCCESS;
      case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *static_cast<int*>(data) = a->device;
        return CUDA_SUCCESS;
      case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *static_cast<CUdeviceptr*>(data) = static_cast<CUdeviceptr>(base);
        return CUDA_SUCCESS;
      case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *static_cast<size_t*>(data) = a->size;
        return CUDA_SUCCESS;
      default:
        return CUDA_ERROR_INVALID_VALUE;
    }
  });
}

// Synchronous copies: legacy stream, or the per-thread stream for _ptds.
CUresult cuMemcpy(CUdeviceptr d, CUdeviceptr s, size_t n) {
  return RunApi("cuMemcpy", [&](CallScope& c) { return fakecuda::Copy(c, U(d), U(s), n, nullptr, false, true, Dir::kAny); });
}
CUresult cuMemcpy_ptds(CUdeviceptr d, CUdeviceptr s, size_t n) {
  return RunApi("cuMemcpy_ptds", [&](CallScope& c) { return fakecuda::Copy(c, U(d), U(s), n, nullptr, true, true, Dir::kAny); });
}
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void* s, size_t n) {
  return RunApi("cuMemcpyHtoD_v2", [&](CallScope& c) { return fakecuda::Copy(c, U(d), U(s), n, nullptr, false, true, Dir::kHtoD); });
}
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr d, const void* s, size_t n) {
  return RunApi("cuMemcpyHtoD_v2_ptds", [&](CallScope& c) { return fakecuda::Copy(c, U(d), U(s), n, nullptr, true, true, Dir::kHtoD); });
}
CUresult cuMemcpyDtoH_v2(void* d, CUdeviceptr s, size_t n) {
  return RunApi("cuMemcpyDtoH_v2", [&](CallScope& c) { return fakecuda::Copy(c, U(d), U(s), n, nullptr, false, true, Dir::kDtoH); });
}
CUresult cuMemcpyDtoH_v2_ptds(void* d, CUdeviceptr s, size_t n) {
  return RunApi("cuMemcpyDtoH_v2_ptds", [&](CallScope& c) { return fakecuda::Copy(c, U(d), U(s), n, nullptr, true, true, Dir::kDtoH); });
}
CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) {
  return RunApi("cuMemcpyDtoD_v2", [&](CallScope& c) { return fakecuda::Copy(c, U(d), U(s), n, nullptr, false, true, Dir::kDtoD); });
}
CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr d, CUdeviceptr s, size_t n) {
  return RunApi("cuMemcpyDtoD_v2_ptds", [&](CallScope& c) { return fakecuda::Copy(c, U(d), U(s), n, nullptr, true, true, Dir::kDtoD); });
}

CUresult cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h) {
  return RunApi("cuMemcpyAsync", [&](CallScope& c) { return fakecuda::Copy(c, U(d), U(s), n, h, false, false, Dir::kAny); });
}
CUresult cuMemcpyAsync_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h) {
  return RunApi("cuMemcpyAsync_ptsz", [&](CallScope& c) { return fakecuda::Copy(c, U(d), U(s), n, h, true, false, Dir::kAny); });
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void* s, size_t n, CUstream h) {
  return RunApi("cuMemcpyHtoDAsync_v2", [&](CallScope& c) { return fakecuda::Copy(c, U(d), U(s), n, h, false, false, Dir::kHtoD); });
}
CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr d, const void* s, size_t n, CUstream h) {
  return RunApi("cuMemcpyHtoDAsync_v2_ptsz", [&](CallScope& c) { return fakecuda::Copy(c, U(d), U(s), n, h, true, false, Dir::kHtoD); });
}
CUresult cuMemcpyDtoHAsync_v2(void* d, CUdeviceptr s, size_t n, CUstream h) {
  return RunApi("cuMemcpyDtoHAsync_v2", [&](CallScope& c) { return fakecuda::Copy(c, U(d), U(s), n, h, false, false, Dir::kDtoH); });
}
CUresult cuMemcpyDtoHAsync_v2_ptsz(void* d, CUdeviceptr s, size_t n, CUstream h) {
  return RunApi("cuMemcpyDtoHAsync_v2_ptsz", [&](CallScope& c) { return fakecuda::Copy(c, U(d), U(s), n, h, true, false, Dir::kDtoH); });
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h) {
  return RunApi("cuMemcpyDtoDAsync_v2", [&](CallScope& c) { return fakecuda::Copy(c, U(d), U(s), n, h, false, false, Dir::kDtoD); });
}
CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h) {
  return RunApi("cuMemcpyDtoDAsync_v2_ptsz", [&](CallScope& c) { return fakecuda::Copy(c, U(d), U(s), n, h, true, false, Dir::kDtoD); });
}

CUresult cuMemcpyPeer(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n) {
  return RunApi("cuMemcpyPeer", [&](CallScope& c) {
    return fakecuda::PeerCopy(c, U(d), dc, U(s), sc, n, nullptr, false, true);
  });
}
CUresult cuMemcpyPeer_ptds(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n) {
  return RunApi("cuMemcpyPeer_ptds", [&](CallScope& c) {
    return fakecuda::PeerCopy(c, U(d), dc, U(s), sc, n, nullptr, true, true);
  });
}
CUresult cuMemcpyPeerAsync(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n,
                           CUstream h) {
  return RunApi("cuMemcpyPeerAsync", [&](CallScope& c) {
    return fakecuda::PeerCopy(c, U(d), dc, U(s), sc, n, h, false, false);
  });
}
CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc,
                                size_t n, CUstream h) {
  return RunApi("cuMemcpyPeerAsync_ptsz", [&](CallScope& c) {
    return fakecuda::PeerCopy(c, U(d), dc, U(s), sc, n, h, true, false);
  });
}

CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) {
  return RunApi("cuMemsetD8_v2", [&](CallScope& c) { return fakecuda::Set<uint8_t>(c, U(d), v, n, nullptr, false, true); });
}
CUresult cuMemsetD8_v2_ptds(CUdeviceptr d, unsigned char v, size_t n) {
  return RunApi("cuMemsetD8_v2_ptds", [&](CallScope& c) { return fakecuda::Set<uint8_t>(c, U(d), v, n, nullptr, true, true); });
}
CUresult cuMemsetD16_v2(CUdeviceptr d, unsigned short v, size_t n) {
  return RunApi("cuMemsetD16_v2", [&](CallScope& c) { return fakecuda::Set<uint16_t>(c, U(d), v, n, nullptr, false, true); });
}
CUresult cuMemsetD16_v2_ptds(CUdeviceptr d, unsigned short v, size_t n) {
  return RunApi("cuMemsetD16_v2_ptds", [&](CallScope& c) { return fakecuda::Set<uint16_t>(c, U(d), v, n, nullptr, true, true); });
}
CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned int v, size_t n) {
  return RunApi("cuMemsetD32_v2", [&](CallScope& c) { return fakecuda::Set<uint32_t>(c, U(d), v, n, nullptr, false, true); });
}
CUresult cuMemsetD32_v2_ptds(CUdeviceptr d, unsigned int v, size_t n) {
  return RunApi("cuMemsetD32_v2_ptds", [&](CallScope& c) { return fakecuda::Set<uint32_t>(c, U(d), v, n, nullptr, true, true); });
}
CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream h) {
  return RunApi("cuMemsetD8Async", [&](CallScope& c) { return fakecuda::Set<uint8_t>(c, U(d), v, n, h, false, false); });
}
CUresult cuMemsetD8Async_ptsz(CUdeviceptr d, unsigned char v, size_t n, CUstream h) {
  return RunApi("cuMemsetD8Async_ptsz", [&](CallScope& c) { return fakecuda::Set<uint8_t>(c, U(d), v, n, h, true, false); });
}
CUresult cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, CUstream h) {
  return RunApi("cuMemsetD16Async", [&](CallScope& c) { return fakecuda::Set<uint16_t>(c, U(d), v, n, h, false, false); });
}
CUresult cuMemsetD16Async_ptsz(CUdeviceptr d, unsigned short v, size_t n, CUstream h) {
  return RunApi("cuMemsetD16Async_ptsz", [&](CallScope& c) { return fakecuda::Set<uint16_t>(c, U(d), v, n, h, true, false); });
}
CUresult cuMemsetD32Async(CUdeviceptr d, unsigned int v, size_t n, CUstream h) {
  return RunApi("cuMemsetD32Async", [&](CallScope& c) { return fakecuda::Set<uint32_t>(c, U(d), v, n, h, false, false); });
}
CUresult cuMemsetD32Async_ptsz(CUdeviceptr d, unsigned int v, size_t n, CUstream h) {
  return RunApi("cuMemsetD32Async_ptsz", [&](CallScope& c) { return fakecuda::Set<uint32_t>(c, U(d), v, n, h, true, false); });
}

CUresult cuMemAllocAsync(CUdeviceptr* p, size_t n, CUstream h) {
  return RunApi("cuMemAllocAsync", [&](CallScope& c) { return fakecuda::AllocAsync(c, p, n, h, false); });
}
CUresult cuMemAllocAsync_ptsz(CUdeviceptr* p, size_t n, CUstream h) {
  return RunApi("cuMemAllocAsync_ptsz", [&](CallScope& c) { return fakecuda::AllocAsync(c, p, n, h, true); });
}
CUresult cuMemFreeAsync(CUdeviceptr p, CUstream h) {
  return RunApi("cuMemFreeAsync", [&](CallScope& c) { return fakecuda::FreeAsync(c, p, h, false); });
}
CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream h) {
  return RunApi("cuMemFreeAsync_ptsz", [&](CallScope& c) { return fakecuda::FreeAsync(c, p, h, true); });
}

}  // extern "C"
