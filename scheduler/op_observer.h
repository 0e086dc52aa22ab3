// The narrow interface through which the scheduler tells a tracer about ops (the layering of
// docs/architecture.md: the scheduler calls it, cupti_tracer implements it, hook/ wires the two).
// With no observer installed the scheduler pays one pointer test per op.
//
// Threading contract: OnSubmit and OnCallerIssue run on the client thread that made the call;
// OnIssueBegin / OnIssueEnd run on a dispatcher thread, bracketing exactly the real driver call,
// and must not block (the dispatcher holds no lock then, but every op waits behind it);
// OnDispatcherStart runs first on each dispatcher thread; OnQueueState runs on the dispatcher
// thread. Implementations must be thread-safe and must not call back into the scheduler.
#ifndef GPUPRIO_SCHEDULER_OP_OBSERVER_H_
#define GPUPRIO_SCHEDULER_OP_OBSERVER_H_

#include <cuda.h>

#include <cstdint>

namespace gpuprio::scheduler {

struct Op;

// What an observer keeps in an op between submit and issue (the op owns the storage, so the hot
// path allocates nothing).
struct OpTraceContext {
  uint64_t op_id = 0;  // 0: the op is not traced
  // External correlation ids another CUPTI client (Kineto: CUSTOM0/CUSTOM1) had pushed on the
  // client thread when the op was submitted; re-pushed around the real call on the dispatcher.
  static constexpr int kCarriedKinds = 2;
  uint64_t carried_ids[kCarriedKinds] = {0, 0};
  uint8_t carried_mask = 0;  // bit k: carried_ids[k] is set
  // NVTX fallback: the process range (nvtxRangeStartEx) open from submit to issue.
  uint64_t nvtx_range = 0;
};

class OpObserver {
 public:
  virtual ~OpObserver() = default;

  // Whether OnCallerIssue and OnQueueState matter to this observer. Read once when the scheduler is
  // built: when false they are never called, so their arguments (two clock reads per inline op,
  // the budget sum per queued op) cost nothing.
  virtual bool WantsTimings() const { return true; }

  // The op is about to be queued; `op.name`, `op.priority`, `op.stream`, `op.submit_ns` are set.
  // Fills `op.trace`.
  virtual void OnSubmit(Op& op) = 0;
  // A stream call ran on its caller (per-thread stream, capture, pageable copy, fast path).
  // `stream` is the application's handle, `begin_ns`/`end_ns` bracket the real call.
  virtual void OnCallerIssue(const char* api, int priority, CUstream stream, int64_t begin_ns,
                             int64_t end_ns) = 0;
  virtual void OnDispatcherStart(int device) = 0;
  virtual void OnIssueBegin(const Op& op) = 0;
  virtual void OnIssueEnd(const Op& op, CUresult result) = 0;
  // The dispatcher's view changed: ops pending at `priority`, and estimated GPU time in flight
  // below the ceiling (the budget in use).
  virtual void OnQueueState(int device, int priority, int64_t pending,
                            uint64_t budget_in_use_ns) = 0;
};

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_OP_OBSERVER_H_
