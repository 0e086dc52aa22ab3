// NvtxAnnotator: the fallback OpObserver when CUPTI belongs to another tool (nsys, ncu,
// torch.profiler) or cannot be loaded. It annotates instead of tracing, so the other tool's
// timeline still shows what gpuprio did:
//   - each dispatcher thread is named "gpuprio dispatcher (GPU n)" (nvtxNameOsThreadA, gettid);
//   - each real call is inside a range "cuLaunchKernel op 123 p=1" (nvtxRangePushA/Pop);
//   - each op's queueing is a process range "queued op 123 p=1" from submit to issue
//     (nvtxRangeStartEx/End; the id rides in OpTraceContext::nvtx_range).
// It also carries Kineto's external ids (ExternalIdCarrier), so torch.profiler links kernels.
//
// NVTX3 is header-only and does nothing (one indirect call) unless a tool injected itself, which
// is exactly when these annotations are wanted. Thread-safe; no lock.
#ifndef GPUPRIO_CUPTI_TRACER_NVTX_ANNOTATOR_H_
#define GPUPRIO_CUPTI_TRACER_NVTX_ANNOTATOR_H_

#include <atomic>
#include <cstdint>

#include "cupti_tracer/external_id_carrier.h"
#include "scheduler/op.h"
#include "scheduler/op_observer.h"

namespace gpuprio::tracer {

class NvtxAnnotator : public scheduler::OpObserver {
 public:
  explicit NvtxAnnotator(ExternalIdCarrier::Finder finder = &FindLoadedCupti)
      : carrier_(finder) {}

  void OnSubmit(scheduler::Op& op) override;
  bool WantsTimings() const override { return false; }
  void OnCallerIssue(const char*, int, CUstream, int64_t, int64_t) override {}
  void OnDispatcherStart(int device) override;
  void OnIssueBegin(const scheduler::Op& op) override;
  void OnIssueEnd(const scheduler::Op& op, CUresult result) override;
  void OnQueueState(int, int, int64_t, uint64_t) override {}

 private:
  ExternalIdCarrier carrier_;
  std::atomic<uint64_t> next_op_id_{1};
};

}  // namespace gpuprio::tracer

#endif  // GPUPRIO_CUPTI_TRACER_NVTX_ANNOTATOR_H_
