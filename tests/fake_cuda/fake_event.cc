// Events of the fake driver: a record is an op; waits and queries bind to the latest record.
#include "absl/synchronization/mutex.h"
#include "tests/fake_cuda/call_log.h"
#include "tests/fake_cuda/fake_state.h"
#include "tests/fake_cuda/virtual_device.h"

namespace fakecuda {
namespace {

CUresult Record(CallScope& call, CUevent h, CUstream hs, bool ptsz, unsigned flags) {
  absl::MutexLock lock(&Mu());
  Event* event = Lookup<Event>(h, Kind::kEvent);
  if (CUresult r = CheckInit(); r != CUDA_SUCCESS) return r;
  if (event == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (flags != 0 && flags != CU_EVENT_RECORD_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
  Stream* stream = nullptr;
  if (CUresult r = ResolveStream(hs, ptsz, &stream); r != CUDA_SUCCESS) return r;
  call.SetStream(stream);
  call.SetParams(PointerParams({reinterpret_cast<uintptr_t>(h)}));
  if (stream->capture != nullptr) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  OpPtr op = MakeOp("event_record", call.order(), nullptr);
  Enqueue(stream, op);
  event->last_record = op;
  return CUDA_SUCCESS;
}

CUresult Destroy(CUevent h) {
  absl::MutexLock lock(&Mu());
  Event* event = Lookup<Event>(h, Kind::kEvent);
  if (event == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  Unregister(event);
  delete event;  // pending records are ops owned by their streams
  return CUDA_SUCCESS;
}

CUresult Elapsed(float* ms, CUevent hstart, CUevent hend) {
  absl::MutexLock lock(&Mu());
  Event* start = Lookup<Event>(hstart, Kind::kEvent);
  Event* end = Lookup<Event>(hend, Kind::kEvent);
  if (ms == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (start == nullptr || end == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if ((start->flags | end->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
  if (start->last_record == nullptr || end->last_record == nullptr) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (!start->last_record->done || !end->last_record->done) return CUDA_ERROR_NOT_READY;
  *ms = static_cast<float>(static_cast<double>(end->last_record->end_ns) -
                           static_cast<double>(start->last_record->end_ns)) / 1e6f;
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace fakecuda

using fakecuda::CallScope;
using fakecuda::Mu;
using fakecuda::RunApi;

extern "C" {

CUresult cuEventCreate(CUevent* out, unsigned int flags) {
  return RunApi("cuEventCreate", [&](CallScope&) {
    absl::MutexLock lock(&Mu());
    if (CUresult r = fakecuda::CheckInit(); r != CUDA_SUCCESS) return r;
    fakecuda::Context* ctx = fakecuda::CurrentContext();
    if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
    if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
    auto* event = new fakecuda::Event;
    event->ctx = ctx;
    event->flags = flags;
    fakecuda::Register(event, fakecuda::Kind::kEvent);
    *out = reinterpret_cast<CUevent>(event);
    return CUDA_SUCCESS;
  });
}

CUresult cuEventRecord(CUevent e, CUstream s) {
  return RunApi("cuEventRecord", [&](CallScope& c) { return fakecuda::Record(c, e, s, false, 0); });
}
CUresult cuEventRecord_ptsz(CUevent e, CUstream s) {
  return RunApi("cuEventRecord_ptsz", [&](CallScope& c) { return fakecuda::Record(c, e, s, true, 0); });
}
CUresult cuEventRecordWithFlags(CUevent e, CUstream s, unsigned int f) {
  return RunApi("cuEventRecordWithFlags", [&](CallScope& c) { return fakecuda::Record(c, e, s, false, f); });
}
CUresult cuEventRecordWithFlags_ptsz(CUevent e, CUstream s, unsigned int f) {
  return RunApi("cuEventRecordWithFlags_ptsz", [&](CallScope& c) { return fakecuda::Record(c, e, s, true, f); });
}

CUresult cuEventSynchronize(CUevent h) {
  return RunApi("cuEventSynchronize", [&](CallScope&) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    absl::MutexLock lock(&Mu());
    auto* event = fakecuda::Lookup<fakecuda::Event>(h, fakecuda::Kind::kEvent);
    if (event == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    fakecuda::OpPtr op = event->last_record;  // the event may be destroyed while we wait
    fakecuda::WaitDone(op);
    return CUDA_SUCCESS;
  });
}

CUresult cuEventQuery(CUevent h) {
  return RunApi("cuEventQuery", [&](CallScope&) {
    absl::MutexLock lock(&Mu());
    auto* event = fakecuda::Lookup<fakecuda::Event>(h, fakecuda::Kind::kEvent);
    if (event == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    if (event->last_record != nullptr && !event->last_record->done) return CUDA_ERROR_NOT_READY;
    return CUDA_SUCCESS;
  });
}

CUresult cuEventElapsedTime(float* ms, CUevent a, CUevent b) {
  return RunApi("cuEventElapsedTime", [&](CallScope&) { return fakecuda::Elapsed(ms, a, b); });
}
CUresult cuEventElapsedTime_v2(float* ms, CUevent a, CUevent b) {
  return RunApi("cuEventElapsedTime_v2", [&](CallScope&) { return fakecuda::Elapsed(ms, a, b); });
}

CUresult cuEventDestroy(CUevent e) {
  return RunApi("cuEventDestroy", [&](CallScope&) { return fakecuda::Destroy(e); });
}
CUresult cuEventDestroy_v2(CUevent e) {
  return RunApi("cuEventDestroy_v2", [&](CallScope&) { return fakecuda::Destroy(e); });
}

}  // extern "C"
