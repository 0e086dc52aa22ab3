// Streams of the fake driver: create/destroy, queries, synchronisation, waits, host callbacks.
#include "absl/synchronization/mutex.h"
#include "tests/fake_cuda/call_log.h"
#include "tests/fake_cuda/fake_state.h"
#include "tests/fake_cuda/virtual_device.h"

namespace fakecuda {
namespace {

constexpr int kLeastPriority = 0;
constexpr int kGreatestPriority = -5;

CUresult Create(CUstream* out, unsigned flags, int priority) {
  absl::MutexLock lock(&Mu());
  if (CUresult r = CheckInit(); r != CUDA_SUCCESS) return r;
  if (out == nullptr || (flags & ~CU_STREAM_NON_BLOCKING) != 0) return CUDA_ERROR_INVALID_VALUE;
  Context* ctx = CurrentContext();
  if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  // Out-of-range priorities are clamped, as CUDA does.
  if (priority > kLeastPriority) priority = kLeastPriority;
  if (priority < kGreatestPriority) priority = kGreatestPriority;
  *out = reinterpret_cast<CUstream>(NewStream(ctx, flags, priority, StreamRole::kUser));
  return CUDA_SUCCESS;
}

// Resolves `handle` under the lock, logs it, and runs `fn(Stream*)`.
template <typename Fn>
CUresult WithStream(CallScope& call, CUstream handle, bool ptsz, Fn&& fn)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(Mu()) {
  Stream* stream = nullptr;
  if (CUresult r = ResolveStream(handle, ptsz, &stream); r != CUDA_SUCCESS) return r;
  call.SetStream(stream);
  return fn(stream);
}

CUresult GetPriority(CallScope& call, CUstream h, bool ptsz, int* priority) {
  absl::MutexLock lock(&Mu());
  return WithStream(call, h, ptsz, [&](Stream* s) {
    if (priority == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *priority = s->priority;
    return CUDA_SUCCESS;
  });
}

CUresult GetFlags(CallScope& call, CUstream h, bool ptsz, unsigned* flags) {
  absl::MutexLock lock(&Mu());
  return WithStream(call, h, ptsz, [&](Stream* s) {
    if (flags == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *flags = s->flags;
    return CUDA_SUCCESS;
  });
}

CUresult GetDevice(CallScope& call, CUstream h, bool ptsz, CUdevice* device) {
  absl::MutexLock lock(&Mu());
  return WithStream(call, h, ptsz, [&](Stream* s) {
    if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *device = s->ctx->device;
    return CUDA_SUCCESS;
  });
}

CUresult GetCtx(CallScope& call, CUstream h, bool ptsz, CUcontext* pctx, CUgreenCtx* green) {
  absl::MutexLock lock(&Mu());
  return WithStream(call, h, ptsz, [&](Stream* s) {
    if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *pctx = reinterpret_cast<CUcontext>(s->ctx);
    if (green != nullptr) {
      *green = s->ctx->green ? reinterpret_cast<CUgreenCtx>(s->ctx->green_handle) : nullptr;
    }
    return CUDA_SUCCESS;
  });
}

CUresult Destroy(CallScope& call, CUstream h) {
  absl::MutexLock lock(&Mu());
  if (h == nullptr || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  return WithStream(call, h, false, [&](Stream* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(Mu()) {
    DestroyStream(s);
    return CUDA_SUCCESS;
  });
}

CUresult Synchronize(CallScope& call, CUstream h, bool ptsz) {
  absl::MutexLock lock(&Mu());
  return WithStream(call, h, ptsz, [&](Stream* s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (s->capture != nullptr) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    return SyncStream(s);
  });
}

CUresult Query(CallScope& call, CUstream h, bool ptsz) {
  absl::MutexLock lock(&Mu());
  return WithStream(call, h, ptsz, [&](Stream* s) {
    if (s->capture != nullptr) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (s->last != nullptr && !s->last->done) return CUDA_ERROR_NOT_READY;
    const CUresult r = s->pending_error;
    s->pending_error = CUDA_SUCCESS;
    return r;
  });
}

CUresult WaitEvent(CallScope& call, CUstream h, bool ptsz, CUevent hevent, unsigned flags) {
  absl::MutexLock lock(&Mu());
  return WithStream(call, h, ptsz, [&](Stream* s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    Event* event = Lookup<Event>(hevent, Kind::kEvent);
    call.SetParams(PointerParams({reinterpret_cast<uintptr_t>(hevent)}));
    if (event == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    if (flags != 0 && flags != CU_EVENT_WAIT_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
    if (s->capture != nullptr) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    // The wait binds to the record that is latest now, not to later re-records.
    OpPtr op = MakeOp("stream_wait_event", call.order(), nullptr);
    if (event->last_record != nullptr && !event->last_record->done) {
      op->deps.push_back(event->last_record);
    }
    Enqueue(s, op);
    return CUDA_SUCCESS;
  });
}

CUresult HostFunc(CallScope& call, CUstream h, bool ptsz, std::function<CUresult()> fn) {
  absl::MutexLock lock(&Mu());
  return WithStream(call, h, ptsz, [&](Stream* s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    Enqueue(s, MakeOp("host_func", call.order(), std::move(fn)));
    return CUDA_SUCCESS;
  });
}

}  // namespace
}  // namespace fakecuda

using fakecuda::CallScope;
using fakecuda::RunApi;

extern "C" {

CUresult cuStreamCreate(CUstream* out, unsigned int flags) {
  return RunApi("cuStreamCreate", [&](CallScope&) { return fakecuda::Create(out, flags, 0); });
}
CUresult cuStreamCreateWithPriority(CUstream* out, unsigned int flags, int priority) {
  return RunApi("cuStreamCreateWithPriority",
                [&](CallScope&) { return fakecuda::Create(out, flags, priority); });
}

CUresult cuStreamGetPriority(CUstream h, int* p) {
  return RunApi("cuStreamGetPriority", [&](CallScope& c) { return fakecuda::GetPriority(c, h, false, p); });
}
CUresult cuStreamGetPriority_ptsz(CUstream h, int* p) {
  return RunApi("cuStreamGetPriority_ptsz", [&](CallScope& c) { return fakecuda::GetPriority(c, h, true, p); });
}
CUresult cuStreamGetFlags(CUstream h, unsigned int* f) {
  return RunApi("cuStreamGetFlags", [&](CallScope& c) { return fakecuda::GetFlags(c, h, false, f); });
}
CUresult cuStreamGetFlags_ptsz(CUstream h, unsigned int* f) {
  return RunApi("cuStreamGetFlags_ptsz", [&](CallScope& c) { return fakecuda::GetFlags(c, h, true, f); });
}
CUresult cuStreamGetDevice(CUstream h, CUdevice* d) {
  return RunApi("cuStreamGetDevice", [&](CallScope& c) { return fakecuda::GetDevice(c, h, false, d); });
}
CUresult cuStreamGetDevice_ptsz(CUstream h, CUdevice* d) {
  return RunApi("cuStreamGetDevice_ptsz", [&](CallScope& c) { return fakecuda::GetDevice(c, h, true, d); });
}
CUresult cuStreamGetCtx(CUstream h, CUcontext* p) {
  return RunApi("cuStreamGetCtx", [&](CallScope& c) { return fakecuda::GetCtx(c, h, false, p, nullptr); });
}
CUresult cuStreamGetCtx_ptsz(CUstream h, CUcontext* p) {
  return RunApi("cuStreamGetCtx_ptsz", [&](CallScope& c) { return fakecuda::GetCtx(c, h, true, p, nullptr); });
}
CUresult cuStreamGetCtx_v2(CUstream h, CUcontext* p, CUgreenCtx* g) {
  return RunApi("cuStreamGetCtx_v2", [&](CallScope& c) { return fakecuda::GetCtx(c, h, false, p, g); });
}
CUresult cuStreamGetCtx_v2_ptsz(CUstream h, CUcontext* p, CUgreenCtx* g) {
  return RunApi("cuStreamGetCtx_v2_ptsz", [&](CallScope& c) { return fakecuda::GetCtx(c, h, true, p, g); });
}

CUresult cuStreamDestroy(CUstream h) {
  return RunApi("cuStreamDestroy", [&](CallScope& c) { return fakecuda::Destroy(c, h); });
}
CUresult cuStreamDestroy_v2(CUstream h) {
  return RunApi("cuStreamDestroy_v2", [&](CallScope& c) { return fakecuda::Destroy(c, h); });
}

CUresult cuStreamSynchronize(CUstream h) {
  return RunApi("cuStreamSynchronize", [&](CallScope& c) { return fakecuda::Synchronize(c, h, false); });
}
CUresult cuStreamSynchronize_ptsz(CUstream h) {
  return RunApi("cuStreamSynchronize_ptsz", [&](CallScope& c) { return fakecuda::Synchronize(c, h, true); });
}
CUresult cuStreamQuery(CUstream h) {
  return RunApi("cuStreamQuery", [&](CallScope& c) { return fakecuda::Query(c, h, false); });
}
CUresult cuStreamQuery_ptsz(CUstream h) {
  return RunApi("cuStreamQuery_ptsz", [&](CallScope& c) { return fakecuda::Query(c, h, true); });
}

CUresult cuStreamWaitEvent(CUstream h, CUevent e, unsigned int flags) {
  return RunApi("cuStreamWaitEvent", [&](CallScope& c) { return fakecuda::WaitEvent(c, h, false, e, flags); });
}
CUresult cuStreamWaitEvent_ptsz(CUstream h, CUevent e, unsigned int flags) {
  return RunApi("cuStreamWaitEvent_ptsz", [&](CallScope& c) { return fakecuda::WaitEvent(c, h, true, e, flags); });
}

CUresult cuStreamAddCallback(CUstream h, CUstreamCallback cb, void* data, unsigned int flags) {
  return RunApi("cuStreamAddCallback", [&](CallScope& c) {
    if (cb == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    return fakecuda::HostFunc(c, h, false, [h, cb, data] { cb(h, CUDA_SUCCESS, data); return CUDA_SUCCESS; });
  });
}
CUresult cuStreamAddCallback_ptsz(CUstream h, CUstreamCallback cb, void* data, unsigned int flags) {
  return RunApi("cuStreamAddCallback_ptsz", [&](CallScope& c) {
    if (cb == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    return fakecuda::HostFunc(c, h, true, [h, cb, data] { cb(h, CUDA_SUCCESS, data); return CUDA_SUCCESS; });
  });
}

CUresult cuLaunchHostFunc(CUstream h, CUhostFn fn, void* data) {
  return RunApi("cuLaunchHostFunc", [&](CallScope& c) {
    if (fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
    return fakecuda::HostFunc(c, h, false, [fn, data] { fn(data); return CUDA_SUCCESS; });
  });
}
CUresult cuLaunchHostFunc_ptsz(CUstream h, CUhostFn fn, void* data) {
  return RunApi("cuLaunchHostFunc_ptsz", [&](CallScope& c) {
    if (fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
    return fakecuda::HostFunc(c, h, true, [fn, data] { fn(data); return CUDA_SUCCESS; });
  });
}

}  // extern "C"
