// Carries another CUPTI client's external correlation ids (Kineto / torch.profiler push their op
// ids as CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0 and CUSTOM1) from the client thread that submits
// an op to the dispatcher thread that issues it, so the profiler links each kernel to its aten op
// even though gpuprio, not the client, made the real launch.
//
// Contents:
//   ExternalIdCarrier  Capture() on the client thread; Push()/Pop() around the real call.
//                      Shared by CuptiTracer, NvtxAnnotator and KinetoCarrier.
//   KinetoCarrier      the OpObserver installed when tracing is off but libcupti is loaded.
//
// Reading ids: CUPTI has no "peek", so Capture pops each kind and immediately re-pushes what it
// popped, leaving the client's stack as it was (a pop on an empty stack fails and changes nothing).
//
// When to look for libcupti: only with dlopen(RTLD_NOLOAD) (never loads it). A thread looks at its
// first op and then every `recheck_every` ops (default 1024) until the library is found, after
// which every thread uses it; libraries are not unloaded in practice. Rationale: PyTorch wheels
// link libcupti into libtorch_cuda (found at the first op), but a program may dlopen it later, when
// profiling starts; a per-thread countdown costs one thread-local decrement per op when libcupti
// is absent, and a dlopen(RTLD_NOLOAD) (the loader lock, ~1 us) once per 1024 ops per thread.
// Ops submitted between the load and the next check are not linked; profilers warm up first.
//
// Cost when libcupti is loaded: two pops per op (plus two pushes when a profiler is active), and
// on the dispatcher one push and one pop per carried id.
#ifndef GPUPRIO_CUPTI_TRACER_EXTERNAL_ID_CARRIER_H_
#define GPUPRIO_CUPTI_TRACER_EXTERNAL_ID_CARRIER_H_

#include <atomic>
#include <cstdint>

#include "cupti_tracer/cupti_library.h"
#include "scheduler/op.h"
#include "scheduler/op_observer.h"

namespace gpuprio::tracer {

class ExternalIdCarrier {
 public:
  using Finder = ExternalIdFunctions (*)();

  // Looks for an already-loaded libcupti through `finder` (FindLoadedCupti in production).
  explicit ExternalIdCarrier(Finder finder = &FindLoadedCupti, uint32_t recheck_every = 1024);
  // Uses `fns` from the start (CuptiTracer passes its own table).
  explicit ExternalIdCarrier(const ExternalIdFunctions& fns);
  ExternalIdCarrier(const ExternalIdCarrier&) = delete;
  ExternalIdCarrier& operator=(const ExternalIdCarrier&) = delete;

  // Client thread. Sets ctx.carried_ids / carried_mask from the ids CUSTOM0 and CUSTOM1 have on
  // top of this thread's stacks (mask 0 when none, or when libcupti is not loaded).
  void Capture(scheduler::OpTraceContext& ctx);
  // Dispatcher thread: pushes the carried ids, CUSTOM0 then CUSTOM1. Nothing when mask is 0.
  void Push(const scheduler::OpTraceContext& ctx) const;
  // Dispatcher thread: pops what Push pushed, in reverse order.
  void Pop(const scheduler::OpTraceContext& ctx) const;

  // True once libcupti has been found.
  bool found() const { return fns_.load(std::memory_order_acquire) != nullptr; }

 private:
  const ExternalIdFunctions* Functions();

  const Finder finder_;
  const uint32_t recheck_every_;
  const uint64_t id_;  // tells this carrier's per-thread countdown apart from another's
  // &storage_ once found (never reset). storage_ is written once, by the thread that set
  // claimed_, before fns_ publishes it.
  std::atomic<const ExternalIdFunctions*> fns_{nullptr};
  std::atomic<bool> claimed_{false};
  ExternalIdFunctions storage_;
};

// OpObserver that only carries Kineto's ids (no trace of its own).
class KinetoCarrier : public scheduler::OpObserver {
 public:
  explicit KinetoCarrier(ExternalIdCarrier::Finder finder = &FindLoadedCupti)
      : carrier_(finder) {}

  void OnSubmit(scheduler::Op& op) override { carrier_.Capture(op.trace); }
  bool WantsTimings() const override { return false; }
  void OnCallerIssue(const char*, int, CUstream, int64_t, int64_t) override {}
  void OnDispatcherStart(int) override {}
  void OnIssueBegin(const scheduler::Op& op) override { carrier_.Push(op.trace); }
  void OnIssueEnd(const scheduler::Op& op, CUresult) override { carrier_.Pop(op.trace); }
  void OnQueueState(int, int, int64_t, uint64_t) override {}

 private:
  ExternalIdCarrier carrier_;
};

}  // namespace gpuprio::tracer

#endif  // GPUPRIO_CUPTI_TRACER_EXTERNAL_ID_CARRIER_H_
