// The rows whose scheduling needs more than their class's generic handling: event record and
// stream wait event (record -> wait ordering), copies that touch host memory (pageable memory is
// copied synchronously by CUDA, so those run inline), stream query, context synchronize, captures,
// and the destroy/unload calls that must also forget what the scheduler cached.
#ifndef GPUPRIO_HOOK_SCHEDULED_STREAM_CALLS_H_
#define GPUPRIO_HOOK_SCHEDULED_STREAM_CALLS_H_

#include <cuda.h>

#include "hook/param_layout_cache.h"
#include "hook/scheduled_calls.h"

namespace gpuprio::hook {

// True when `p` is host memory the driver does not know (pageable).
bool IsPageableHostMemory(const void* p);

// An event record or a wait on an event: a by-value op that costs a signal, whose Steps are made
// from the scheduler and the call's event.
template <ApiId kId, typename Steps>
struct EventOpHandler {
  template <typename Real, typename... Args>
  static CUresult Call(scheduler::Scheduler* s, Real real, Args... args) {
    Steps steps(s, FirstArg<CUevent>(args...));
    return ScheduleByValue<kId>(s, steps, kSignalCostHintNs, real, args...);
  }
};

// An event record: where it went decides what a later wait on the event must follow.
struct EventRecordSteps : NoExtraSteps {
  EventRecordSteps(scheduler::Scheduler* s, CUevent e) : event(s->BeginRecord(e)) {}
  scheduler::Scheduler::EventState* event;
  bool MayPassQueuedWork() const { return false; }
  // Recorded now: a later wait follows no queue.
  void BeforeCallerRun(scheduler::Scheduler* s, bool) { s->EndRecord(event, nullptr); }
  void AfterSubmit(scheduler::Scheduler* s, scheduler::StreamState* stream) {
    s->EndRecord(event, stream);
  }
};

template <ApiId kId>
using EventRecordHandler = EventOpHandler<kId, EventRecordSteps>;

// A wait on an event follows the event's queued record, wherever the wait runs.
struct StreamWaitEventSteps : NoExtraSteps {
  StreamWaitEventSteps(scheduler::Scheduler* s, CUevent e)
      : event(s->Event(e)), recorder(s->RecordToFollow(event)) {}
  scheduler::Scheduler::EventState* event;
  scheduler::StreamState* recorder;  // Scheduler::RecordToFollow
  bool MayIssueDirect() const { return recorder == nullptr; }
  void BeforeCallerRun(scheduler::Scheduler* s, bool inline_run) {
    if (inline_run) s->WaitRecord(event);
  }
  void BeforeSubmit(scheduler::Scheduler* s, scheduler::Op* op) {
    s->QueueWaitOn(event, recorder, op);
  }
};

template <ApiId kId>
using StreamWaitEventHandler = EventOpHandler<kId, StreamWaitEventSteps>;

// Host pointers are the arguments of type `const void*` / `void*` (HtoD source, DtoH
// destination) or, for cuMemcpyAsync, either unified address.
template <ApiId kId>
struct HostCopyHandler {
  template <typename Real, typename... Args>
  static CUresult Call(scheduler::Scheduler* s, Real real, Args... args) {
    scheduler::StreamState* stream = StreamOfCall<kId>(s, args...);
    NoExtraSteps steps;
    // Issued now (inline or by the fast path), a copy behaves exactly as CUDA's own, pageable
    // memory included; the pointer checks are driver calls, made only for a copy to be queued.
    auto make_op = [&](int priority) {
      bool pageable = false;
      size_t bytes = 0;
      auto inspect = [&](auto arg) {
        using T = decltype(arg);
        if constexpr (std::is_same_v<T, const void*> || std::is_same_v<T, void*>) {
          pageable = pageable || IsPageableHostMemory(arg);
        } else if constexpr (std::is_same_v<T, size_t>) {
          bytes = arg;
        }
      };
      (inspect(args), ...);
      if constexpr (kId == ApiId::k_cuMemcpyAsync || kId == ApiId::k_cuMemcpyAsync_ptsz) {
        const auto dst = reinterpret_cast<const void*>(std::get<0>(std::make_tuple(args...)));
        const auto src = reinterpret_cast<const void*>(std::get<1>(std::make_tuple(args...)));
        pageable = IsPageableHostMemory(dst) || IsPageableHostMemory(src);
      }
      if (pageable) return Deferral{};
      return Deferral{ByValueOp<kId, Real>(stream, priority, CopyCostHintNs(bytes), args...)};
    };
    return ScheduleStreamCall<kId>(s, stream, steps, make_op, [&] { return real(args...); });
  }
};

template <ApiId kId>
struct StreamQueryHandler {
  template <typename Real, typename... Args>
  static CUresult Call(scheduler::Scheduler* s, Real real, Args... args) {
    scheduler::StreamState* stream = StreamOfCall<kId>(s, args...);
    // Queued work is work not yet complete; querying must not block.
    if (stream != nullptr && stream->HasUnissued()) return CUDA_ERROR_NOT_READY;
    // Work on its twin is the stream's work too: back home, one query covers it.
    if (stream != nullptr) s->BringHome(stream);
    const CUresult result = CallDriver(real, args...);
    // A deferred error is reported once the stream's work is done, as a synchronize would.
    if (result == CUDA_ERROR_NOT_READY) return result;
    return WithDeferredError(s, stream, result);
  }
};

template <ApiId kId>
struct ContextSynchronizeHandler {
  template <typename Real, typename... Args>
  static CUresult Call(scheduler::Scheduler* s, Real real, Args... args) {
    CUcontext context = FirstArg<CUcontext>(args...);
    if (context == nullptr) s->driver().ctx_get_current(&context);
    s->WaitContext(context);
    const CUresult result = CallDriver(real, args...);
    const CUresult deferred = s->TakeDeferredError(context);
    return deferred != CUDA_SUCCESS ? deferred : result;
  }
};

// A sync call followed by bookkeeping once the driver has answered.
template <ApiId kId, typename After>
struct SyncThenHandler {
  template <typename Real, typename... Args>
  static CUresult Call(scheduler::Scheduler* s, Real real, Args... args) {
    const CUresult r = GenericSync<kId>::Call(s, real, args...);
    After::Run(s, r, args...);
    return r;
  }
};

// Beginning a capture: quiesce the scheduler first (EnterCapture), so nothing of gpuprio's
// reaches a stream while the driver captures.
template <ApiId kId>
struct CaptureBeginHandler {
  template <typename Real, typename... Args>
  static CUresult Call(scheduler::Scheduler* s, Real real, Args... args) {
    s->EnterCapture();
    const CUresult r = GenericSync<kId>::Call(s, real, args...);
    if (r != CUDA_SUCCESS) s->LeaveCapture();
    return r;
  }
};
struct AfterCaptureEnd {
  template <typename... Args>
  static void Run(scheduler::Scheduler* s, CUresult r, Args...) {
    if (r == CUDA_SUCCESS || r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) s->LeaveCapture();
  }
};
// Destroying a stream: its queued ops are issued first, then the scheduler lets go of it, then
// the driver destroys it (the dispatcher must never record on a destroyed stream).
template <ApiId kId>
struct StreamDestroyHandler {
  template <typename Real, typename... Args>
  static CUresult Call(scheduler::Scheduler* s, Real real, Args... args) {
    (void)WaitBeforeSync<kId>(s, args...);  // a deferred error of the stream goes with it
    // (cuStreamDestroy returns at once natively, with the stream's work still running.)
    s->ForgetStream(FirstArg<CUstream>(args...));
    return CallDriver(real, args...);
  }
};
struct AfterEventDestroy {
  template <typename... Args>
  static void Run(scheduler::Scheduler* s, CUresult r, Args... args) {
    if (r == CUDA_SUCCESS) s->ForgetEvent(FirstArg<CUevent>(args...));
  }
};
struct AfterUnload {
  template <typename... Args>
  static void Run(scheduler::Scheduler*, CUresult, Args...) {
    InvalidateParamLayouts();
  }
};

// Row `symbol` of class `api_class` is handled by `Handler<its ApiId>`; _PTSZ: and its
// per-thread-stream twin row.
#define GPUPRIO_HANDLE_AS(symbol, api_class, Handler) \
  template <>                                         \
  struct ScheduledHandler<ApiId::k_##symbol, ApiClass::api_class> : Handler<ApiId::k_##symbol> {};
#define GPUPRIO_HANDLE_AS_PTSZ(symbol, api_class, Handler) \
  GPUPRIO_HANDLE_AS(symbol, api_class, Handler)            \
  GPUPRIO_HANDLE_AS(symbol##_ptsz, api_class, Handler)

GPUPRIO_HANDLE_AS_PTSZ(cuEventRecord, kOrdered, EventRecordHandler)
GPUPRIO_HANDLE_AS_PTSZ(cuEventRecordWithFlags, kOrdered, EventRecordHandler)
GPUPRIO_HANDLE_AS_PTSZ(cuStreamWaitEvent, kOrdered, StreamWaitEventHandler)
GPUPRIO_HANDLE_AS_PTSZ(cuMemcpyHtoDAsync_v2, kOrdered, HostCopyHandler)
GPUPRIO_HANDLE_AS_PTSZ(cuMemcpyDtoHAsync_v2, kOrdered, HostCopyHandler)
GPUPRIO_HANDLE_AS_PTSZ(cuMemcpyAsync, kOrdered, HostCopyHandler)

GPUPRIO_HANDLE_AS_PTSZ(cuStreamQuery, kSync, StreamQueryHandler)
GPUPRIO_HANDLE_AS(cuCtxSynchronize, kSync, ContextSynchronizeHandler)
GPUPRIO_HANDLE_AS(cuCtxSynchronize_v2, kSync, ContextSynchronizeHandler)

#define GPUPRIO_SYNC_THEN(symbol, after)                                              \
  template <>                                                                         \
  struct ScheduledHandler<ApiId::k_##symbol, ApiClass::kSync>                         \
      : SyncThenHandler<ApiId::k_##symbol, after> {};
GPUPRIO_SYNC_THEN(cuStreamEndCapture, AfterCaptureEnd)
GPUPRIO_SYNC_THEN(cuStreamEndCapture_ptsz, AfterCaptureEnd)
GPUPRIO_SYNC_THEN(cuEventDestroy_v2, AfterEventDestroy)
GPUPRIO_SYNC_THEN(cuModuleUnload, AfterUnload)
GPUPRIO_SYNC_THEN(cuLibraryUnload, AfterUnload)
#undef GPUPRIO_SYNC_THEN

GPUPRIO_HANDLE_AS(cuStreamDestroy_v2, kSync, StreamDestroyHandler)
GPUPRIO_HANDLE_AS_PTSZ(cuStreamBeginCapture_v2, kSync, CaptureBeginHandler)
#undef GPUPRIO_HANDLE_AS_PTSZ
#undef GPUPRIO_HANDLE_AS

}  // namespace gpuprio::hook

#endif  // GPUPRIO_HOOK_SCHEDULED_STREAM_CALLS_H_
