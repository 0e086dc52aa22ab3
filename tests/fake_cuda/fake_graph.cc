// Stream capture and graphs of the fake driver, kept simple but real: ops issued to a capturing
// stream are recorded (not run); launching the instantiated graph replays them in order on the
// launch stream. Cross-stream capture (event fork/join) is not supported.
#include "absl/synchronization/mutex.h"
#include "tests/fake_cuda/call_log.h"
#include "tests/fake_cuda/fake_state.h"
#include "tests/fake_cuda/virtual_device.h"

namespace fakecuda {
namespace {

CUresult Begin(CallScope& call, CUstream h, bool ptsz) {
  absl::MutexLock lock(&Mu());
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptsz, &s); r != CUDA_SUCCESS) return r;
  call.SetStream(s);
  if (s->role == StreamRole::kLegacy) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (s->capture != nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  s->capture = new Graph;
  s->capture_id = S().next_capture_id++;
  return CUDA_SUCCESS;
}

CUresult End(CallScope& call, CUstream h, bool ptsz, CUgraph* out) {
  absl::MutexLock lock(&Mu());
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptsz, &s); r != CUDA_SUCCESS) return r;
  call.SetStream(s);
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (s->capture == nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  Register(s->capture, Kind::kGraph);
  *out = reinterpret_cast<CUgraph>(s->capture);
  s->capture = nullptr;
  s->capture_id = 0;
  return CUDA_SUCCESS;
}

CUresult Info(CallScope& call, CUstream h, bool ptsz, CUstreamCaptureStatus* status, cuuint64_t* id,
              CUgraph* graph, const CUgraphNode** deps, const CUgraphEdgeData** edges,
              size_t* num_deps) {
  absl::MutexLock lock(&Mu());
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptsz, &s); r != CUDA_SUCCESS) return r;
  call.SetStream(s);
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const bool active = s->capture != nullptr;
  *status = active ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  if (id != nullptr && active) *id = s->capture_id;
  if (graph != nullptr && active) *graph = reinterpret_cast<CUgraph>(s->capture);
  if (deps != nullptr && active) *deps = nullptr;  // the fake has no graph nodes
  if (edges != nullptr && active) *edges = nullptr;
  if (num_deps != nullptr && active) *num_deps = 0;
  return CUDA_SUCCESS;
}

CUresult LaunchGraph(CallScope& call, CUgraphExec hexec, CUstream h, bool ptsz) {
  absl::MutexLock lock(&Mu());
  auto* exec = Lookup<GraphExec>(hexec, Kind::kGraphExec);
  if (exec == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptsz, &s); r != CUDA_SUCCESS) return r;
  call.SetStream(s);
  for (const OpTemplate& t : exec->ops) {
    OpPtr op = MakeOp(t.what.c_str(), call.order(), t.body);
    op->kernel = t.kernel;
    op->sleep_ns = t.sleep_ns;
    op->ready = t.ready;
    Enqueue(s, op);
  }
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace fakecuda

using fakecuda::CallScope;
using fakecuda::Kind;
using fakecuda::Mu;
using fakecuda::RunApi;

extern "C" {

CUresult cuStreamBeginCapture(CUstream h) {
  return RunApi("cuStreamBeginCapture", [&](CallScope& c) { return fakecuda::Begin(c, h, false); });
}
CUresult cuStreamBeginCapture_ptsz(CUstream h) {
  return RunApi("cuStreamBeginCapture_ptsz", [&](CallScope& c) { return fakecuda::Begin(c, h, true); });
}
CUresult cuStreamBeginCapture_v2(CUstream h, CUstreamCaptureMode) {
  return RunApi("cuStreamBeginCapture_v2", [&](CallScope& c) { return fakecuda::Begin(c, h, false); });
}
CUresult cuStreamBeginCapture_v2_ptsz(CUstream h, CUstreamCaptureMode) {
  return RunApi("cuStreamBeginCapture_v2_ptsz", [&](CallScope& c) { return fakecuda::Begin(c, h, true); });
}
CUresult cuStreamEndCapture(CUstream h, CUgraph* g) {
  return RunApi("cuStreamEndCapture", [&](CallScope& c) { return fakecuda::End(c, h, false, g); });
}
CUresult cuStreamEndCapture_ptsz(CUstream h, CUgraph* g) {
  return RunApi("cuStreamEndCapture_ptsz", [&](CallScope& c) { return fakecuda::End(c, h, true, g); });
}
CUresult cuStreamIsCapturing(CUstream h, CUstreamCaptureStatus* st) {
  return RunApi("cuStreamIsCapturing", [&](CallScope& c) {
    return fakecuda::Info(c, h, false, st, nullptr, nullptr, nullptr, nullptr, nullptr);
  });
}
CUresult cuStreamIsCapturing_ptsz(CUstream h, CUstreamCaptureStatus* st) {
  return RunApi("cuStreamIsCapturing_ptsz", [&](CallScope& c) {
    return fakecuda::Info(c, h, true, st, nullptr, nullptr, nullptr, nullptr, nullptr);
  });
}
CUresult cuStreamGetCaptureInfo(CUstream h, CUstreamCaptureStatus* st, cuuint64_t* id) {
  return RunApi("cuStreamGetCaptureInfo", [&](CallScope& c) {
    return fakecuda::Info(c, h, false, st, id, nullptr, nullptr, nullptr, nullptr);
  });
}
CUresult cuStreamGetCaptureInfo_ptsz(CUstream h, CUstreamCaptureStatus* st, cuuint64_t* id) {
  return RunApi("cuStreamGetCaptureInfo_ptsz", [&](CallScope& c) {
    return fakecuda::Info(c, h, true, st, id, nullptr, nullptr, nullptr, nullptr);
  });
}
CUresult cuStreamGetCaptureInfo_v2(CUstream h, CUstreamCaptureStatus* st, cuuint64_t* id,
                                   CUgraph* g, const CUgraphNode** deps, size_t* n) {
  return RunApi("cuStreamGetCaptureInfo_v2", [&](CallScope& c) {
    return fakecuda::Info(c, h, false, st, id, g, deps, nullptr, n);
  });
}
CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream h, CUstreamCaptureStatus* st, cuuint64_t* id,
                                        CUgraph* g, const CUgraphNode** deps, size_t* n) {
  return RunApi("cuStreamGetCaptureInfo_v2_ptsz", [&](CallScope& c) {
    return fakecuda::Info(c, h, true, st, id, g, deps, nullptr, n);
  });
}
CUresult cuStreamGetCaptureInfo_v3(CUstream h, CUstreamCaptureStatus* st, cuuint64_t* id,
                                   CUgraph* g, const CUgraphNode** deps,
                                   const CUgraphEdgeData** edges, size_t* n) {
  return RunApi("cuStreamGetCaptureInfo_v3", [&](CallScope& c) {
    return fakecuda::Info(c, h, false, st, id, g, deps, edges, n);
  });
}
CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream h, CUstreamCaptureStatus* st, cuuint64_t* id,
                                        CUgraph* g, const CUgraphNode** deps,
                                        const CUgraphEdgeData** edges, size_t* n) {
  return RunApi("cuStreamGetCaptureInfo_v3_ptsz", [&](CallScope& c) {
    return fakecuda::Info(c, h, true, st, id, g, deps, edges, n);
  });
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec* out, CUgraph hgraph, unsigned long long) {
  return RunApi("cuGraphInstantiateWithFlags", [&](CallScope&) {
    absl::MutexLock lock(&Mu());
    auto* graph = fakecuda::Lookup<fakecuda::Graph>(hgraph, Kind::kGraph);
    if (graph == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
    auto* exec = new fakecuda::GraphExec{graph->ops};
    fakecuda::Register(exec, Kind::kGraphExec);
    *out = reinterpret_cast<CUgraphExec>(exec);
    return CUDA_SUCCESS;
  });
}

CUresult cuGraphLaunch(CUgraphExec e, CUstream h) {
  return RunApi("cuGraphLaunch", [&](CallScope& c) { return fakecuda::LaunchGraph(c, e, h, false); });
}
CUresult cuGraphLaunch_ptsz(CUgraphExec e, CUstream h) {
  return RunApi("cuGraphLaunch_ptsz", [&](CallScope& c) { return fakecuda::LaunchGraph(c, e, h, true); });
}

CUresult cuGraphExecDestroy(CUgraphExec e) {
  return RunApi("cuGraphExecDestroy", [&](CallScope&) {
    absl::MutexLock lock(&Mu());
    auto* exec = fakecuda::Lookup<fakecuda::GraphExec>(e, Kind::kGraphExec);
    if (exec == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    fakecuda::Unregister(exec);
    delete exec;  // launched ops hold their own copies of the bodies
    return CUDA_SUCCESS;
  });
}

CUresult cuGraphDestroy(CUgraph g) {
  return RunApi("cuGraphDestroy", [&](CallScope&) {
    absl::MutexLock lock(&Mu());
    auto* graph = fakecuda::Lookup<fakecuda::Graph>(g, Kind::kGraph);
    if (graph == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    fakecuda::Unregister(graph);
    delete graph;
    return CUDA_SUCCESS;
  });
}

}  // extern "C"
