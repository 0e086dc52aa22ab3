// How each API class meets the scheduler (definitions in docs/architecture.md):
//   kOrdered  the call becomes an op (its by-value arguments copied into the op) and returns
//             CUDA_SUCCESS at once; the dispatcher issues it. Runs inline instead on the
//             per-thread default stream and while a stream capture is active.
//   kInline   waits until its stream's queued work is issued, then runs on the calling thread.
//   kSync     waits until the work it depends on (its stream, its event's last record, or the
//             whole process) is issued, returns a deferred error if there is one, then runs.
// Each class's handler (ScheduledHandler, interceptor.h) is here. Rows whose arguments point at
// memory the op must own, or whose semantics need more (launches, event record and wait, copies
// from host memory, stream query, captures, destroy, unload) have full specialisations in
// scheduled_*_calls.h.
#ifndef GPUPRIO_HOOK_SCHEDULED_CALLS_H_
#define GPUPRIO_HOOK_SCHEDULED_CALLS_H_

#include <cuda.h>

#include <new>
#include <tuple>
#include <type_traits>

#include "absl/base/attributes.h"
#include "absl/base/optimization.h"
#include "hook/api_table.h"
#include "hook/interceptor.h"
#include "hook/op_cost_hint.h"
#include "hook/real_driver.h"
#include "hook/scheduler_bridge.h"
#include "hook/thread_state.h"
#include "scheduler/base/clock.h"
#include "scheduler/op.h"
#include "scheduler/op_pool.h"
#include "scheduler/scheduler.h"

namespace gpuprio::hook {

inline constexpr bool IsPerThreadEntry(ApiId id) {
  return Info(id).variant == ApiVariant::kPerThread;
}

// The scheduled stream a call's CUstream argument names (null: not deferrable, see Resolve).
template <ApiId kId, typename... Args>
scheduler::StreamState* StreamOfCall(scheduler::Scheduler* s, Args... args) {
  return s->Resolve(FirstArg<CUstream>(args...), IsPerThreadEntry(kId));
}

// True when stream work must run on its caller now instead of being queued.
inline bool MustRunInline(const scheduler::Scheduler* s, const scheduler::StreamState* stream) {
  return stream == nullptr || s->CaptureActive();
}

// A call's CUstream argument takes the op's twin stream (spatial isolation); others stay.
template <typename T>
void SetIfStream(T& arg, CUstream stream) {
  if constexpr (std::is_same_v<T, CUstream>) arg = stream;
}

// Issues an op whose arguments are a std::tuple stored in op.args.
template <ApiId kId, typename Real, typename Tuple>
CUresult IssueTupleOp(scheduler::Op& op) {
  static_assert(std::is_trivially_destructible_v<Tuple>);
  const auto real = reinterpret_cast<Real>(RealEntry(kId));
  Tuple* args = std::launder(reinterpret_cast<Tuple*>(op.args));
  if (op.confined_stream != nullptr) {
    std::apply([&](auto&... arg) { ((SetIfStream(arg, op.confined_stream)), ...); }, *args);
  }
  DriverCallScope in_driver;
  return std::apply(real, *args);
}

// After a timed call on its caller (Scheduler::times_caller_calls): the level's statistics and
// the timing observer hear of it. Out of line and free of the call's arguments, so that the
// untimed path keeps them in registers.
void NoteCallerCall(scheduler::Scheduler* s, ApiId id, const scheduler::StreamState* stream,
                    int priority, int64_t begin_ns, int64_t end_ns);

// With SchedulerOptions::time_calls: a stream call at `priority` that began at `begin_ns` ends.
void NoteCallTimeSince(scheduler::Scheduler* s, int priority, int64_t begin_ns);

// Times one stream call for SchedulerOptions::time_calls (what the application's thread pays,
// whichever way the call went: docs/user_guide.md, the exit summary). Untimed, it costs one test
// at each end; the bookkeeping is out of line.
class StreamCallTimer {
 public:
  explicit StreamCallTimer(const scheduler::Scheduler* s)
      : begin_ns_(ABSL_PREDICT_FALSE(s->options().time_calls) ? base::SteadyNowNs() : 0) {}
  void End(scheduler::Scheduler* s, int priority) const {
    if (ABSL_PREDICT_FALSE(begin_ns_ != 0)) NoteCallTimeSince(s, priority, begin_ns_);
  }

 private:
  const int64_t begin_ns_;  // 0: not timed (the steady clock never reads 0)
};

// Makes a stream call's real driver call on the calling thread; an installed tracer hears of it,
// and with SchedulerOptions::time_calls its level counts the time.
template <ApiId kId, typename Call>
CUresult CallOnCaller(scheduler::Scheduler* s, const scheduler::StreamState* stream, int priority,
                      Call call) {
  if (ABSL_PREDICT_TRUE(!s->times_caller_calls())) {
    DriverCallScope in_driver;
    return call();
  }
  const int64_t begin_ns = base::SteadyNowNs();
  CUresult result;
  {
    DriverCallScope in_driver;
    result = call();
  }
  NoteCallerCall(s, kId, stream, priority, begin_ns, base::SteadyNowNs());
  return result;
}

// The fast path: the dispatcher would issue this op at once, so its own thread issues it
// (Scheduler::MayIssueDirect) and the dispatcher is told, for its in-flight accounting.
template <ApiId kId, typename Real, typename... Args>
CUresult IssueDirect(scheduler::Scheduler* s, scheduler::StreamState* stream, int priority,
                     Real real, Args... args) {
  const CUresult result = CallOnCaller<kId>(s, stream, priority, [&] { return real(args...); });
  s->NoteDirect(stream, priority);
  return result;
}

// Runs a stream call now on the calling thread, after the work it must follow: its own stream's
// queue, and for work outside the queues (per-thread stream) the legacy stream's.
template <ApiId kId, typename Real, typename... Args>
CUresult RunInline(scheduler::Scheduler* s, scheduler::StreamState* stream, int priority,
                   Real real, Args... args) {
  s->WaitBeforeInline(stream);
  s->CountOnCaller(priority);
  return CallOnCaller<kId>(s, stream, priority, [&] { return real(args...); });
}

// Completes an op of call `kId` (taken from this thread's OpPool, its arguments and cost already
// in place) with what every queued call's op carries: how to issue it, its name, stream and
// priority (the one ScheduleStreamCall resolved), and, last, the time it was ready to submit.
template <ApiId kId>
scheduler::Op* ReadyOp(scheduler::Op* op, scheduler::Op::IssueFn issue,
                       scheduler::StreamState* stream, int priority) {
  op->issue = issue;
  op->name = Info(kId).symbol;
  op->stream = stream;
  op->priority = priority;
  op->submit_ns = base::SteadyNowNs();
  return op;
}

// An op for a call whose arguments are all self-contained values, ready to submit.
template <ApiId kId, typename Real, typename... Args>
scheduler::Op* ByValueOp(scheduler::StreamState* stream, int priority, uint64_t cost_hint_ns,
                         Args... args) {
  using Tuple = std::tuple<Args...>;
  static_assert(sizeof(Tuple) <= scheduler::Op::kArgBytes, "op argument storage too small");
  scheduler::Op* op = scheduler::OpPool::ForThisThread().Take();
  new (op->args) Tuple(args...);
  op->cost_hint_ns = cost_hint_ns;
  return ReadyOp<kId>(op, &IssueTupleOp<kId, Real, Tuple>, stream, priority);
}

// What `make_op` of ScheduleStreamCall returns: the op to queue; or no op, when the call must
// run on its caller after all (pageable memory, a kernel whose parameters are unknown); or the
// error to return at once (what CUDA reports at launch time).
struct Deferral {
  scheduler::Op* op = nullptr;
  CUresult error = CUDA_SUCCESS;
};

// What a call adds to the pipeline; these defaults fit a call with nothing to add.
struct NoExtraSteps {
  // Whether the fast path may take the call (an event wait: only if its record is issued).
  bool MayIssueDirect() const { return true; }
  // Whether the fast path may pass less important work the dispatcher still holds
  // (Scheduler::MayIssueDirect; not an event record, which a queued wait may be bound before).
  bool MayPassQueuedWork() const { return true; }
  // The call is about to run on its caller's thread, inline after the work it follows, or by
  // the fast path (`inline_run` false).
  void BeforeCallerRun(scheduler::Scheduler*, bool /*inline_run*/) {}
  // The call's op is about to be queued, and was.
  void BeforeSubmit(scheduler::Scheduler*, scheduler::Op*) {}
  void AfterSubmit(scheduler::Scheduler*, scheduler::StreamState*) {}
};

// The pipeline of every deferrable stream call, written once: on a stream gpuprio does not queue
// (or while a capture is active) the call runs inline after the work it follows; when the
// dispatcher would issue it at once, its own thread does (the fast path); otherwise it becomes an
// op (`make_op(priority)`) and is queued. `call` makes the real driver call on this thread.
template <ApiId kId, typename Steps, typename MakeOp, typename Call>
ABSL_ATTRIBUTE_ALWAYS_INLINE inline CUresult ScheduleStreamCallAt(
    scheduler::Scheduler* s, scheduler::StreamState* stream, int priority, Steps& steps,
    MakeOp& make_op, Call& call) {
  if (!MustRunInline(s, stream)) {
    if (steps.MayIssueDirect() &&
        s->MayIssueDirect(stream, priority, steps.MayPassQueuedWork())) {
      steps.BeforeCallerRun(s, /*inline_run=*/false);
      return IssueDirect<kId>(s, stream, priority, call);
    }
    const Deferral deferral = make_op(priority);
    if (deferral.error != CUDA_SUCCESS) return deferral.error;
    if (deferral.op != nullptr) {
      steps.BeforeSubmit(s, deferral.op);
      s->Submit(deferral.op);
      steps.AfterSubmit(s, stream);
      return CUDA_SUCCESS;
    }
  }
  steps.BeforeCallerRun(s, /*inline_run=*/true);
  return RunInline<kId>(s, stream, priority, call);
}

template <ApiId kId, typename Steps, typename MakeOp, typename Call>
CUresult ScheduleStreamCall(scheduler::Scheduler* s, scheduler::StreamState* stream, Steps& steps,
                            MakeOp make_op, Call call) {
  const int priority = s->EffectivePriority(stream);
  // One copy of the pipeline, timed or not: a second, timed copy in the wrapper costs the untimed
  // path ~5 ns a launch (tools/bench/run_passthrough_overhead.sh).
  const StreamCallTimer timer(s);
  const CUresult result = ScheduleStreamCallAt<kId>(s, stream, priority, steps, make_op, call);
  timer.End(s, priority);
  return result;
}

// ScheduleStreamCall for a call whose arguments are all self-contained values, on `stream` (the
// call's, resolved).
template <ApiId kId, typename Steps, typename Real, typename... Args>
CUresult ScheduleByValueOn(scheduler::Scheduler* s, scheduler::StreamState* stream, Steps& steps,
                           uint64_t cost_hint_ns, Real real, Args... args) {
  static_assert(kHasArg<CUstream, Args...>, "an ordered call names its stream");
  return ScheduleStreamCall<kId>(
      s, stream, steps,
      [&](int priority) {
        return Deferral{ByValueOp<kId, Real>(stream, priority, cost_hint_ns, args...)};
      },
      [&] { return real(args...); });
}

template <ApiId kId, typename Steps, typename Real, typename... Args>
CUresult ScheduleByValue(scheduler::Scheduler* s, Steps& steps, uint64_t cost_hint_ns, Real real,
                         Args... args) {
  return ScheduleByValueOn<kId>(s, StreamOfCall<kId>(s, args...), steps, cost_hint_ns, real,
                                args...);
}

template <ApiId kId>
struct OrderedByValue {
  template <typename Real, typename... Args>
  static CUresult Call(scheduler::Scheduler* s, Real real, Args... args) {
    NoExtraSteps steps;
    scheduler::StreamState* stream = StreamOfCall<kId>(s, args...);
    if constexpr (SymbolStartsWith(Info(kId).symbol, "cuGraphLaunch")) {
      // A graph's kernels are not looked into: its work counts as needing the whole GPU. Not a
      // launch into a capture: nothing runs now.
      if (!s->CaptureActive()) s->NoteWholeDeviceWork(stream);
    }
    return ScheduleByValueOn<kId>(s, stream, steps, OrderedCostHintNs<kId>(args...), real, args...);
  }
};

template <ApiId kId>
struct InlineCall {
  template <typename Real, typename... Args>
  static CUresult Call(scheduler::Scheduler* s, Real real, Args... args) {
    scheduler::StreamState* stream = nullptr;
    if constexpr (kHasArg<CUstream, Args...>) {
      stream = StreamOfCall<kId>(s, args...);
    }
    const int priority = s->EffectivePriority(stream);
    // Timed like ScheduleStreamCall's calls, so that the level's call count covers every call
    // whose driver time it counts.
    const StreamCallTimer timer(s);
    const CUresult result = RunInline<kId>(s, stream, priority, real, args...);
    timer.End(s, priority);
    return result;
  }
};

// What a sync call waits for before it runs. Returns the scheduled stream it names (null if
// none), whose deferred error the call reports after the driver has answered.
template <ApiId kId, typename... Args>
scheduler::StreamState* WaitBeforeSync(scheduler::Scheduler* s, Args... args) {
  if constexpr (kHasArg<CUstream, Args...>) {
    scheduler::StreamState* stream = StreamOfCall<kId>(s, args...);
    s->WaitBeforeSync(stream);
    return stream;
  } else if constexpr (kHasArg<CUevent, Args...>) {
    s->WaitEvent(FirstArg<CUevent>(args...));
    return nullptr;
  } else if constexpr (kHasArg<CUfunction, Args...>) {
    // A function attribute (dynamic shared memory limit, cache configuration) applies to the
    // launches that reach the driver after it: queued launches of the function go first, with
    // the value they were launched under (a limit lowered under them fails them).
    s->WaitLaunchesOf(FirstArg<CUfunction>(args...));
    return nullptr;
  } else if constexpr (kHasArg<CUkernel, Args...>) {
    s->WaitLaunchesOf(FirstArg<CUkernel>(args...));
    return nullptr;
  } else {
    // Synchronous copies and sets, frees, unloads: they follow all earlier work.
    s->WaitAll();
    return nullptr;
  }
}

// As CUDA reports an asynchronous error: the call first does what it does (a synchronize waits
// for all of the stream's work, the failed op's successors included), then the deferred error,
// once, in place of the call's own success.
inline CUresult WithDeferredError(scheduler::Scheduler* s, scheduler::StreamState* stream,
                                  CUresult result) {
  if (stream == nullptr) return result;
  const CUresult deferred = s->TakeDeferredError(stream);
  return deferred != CUDA_SUCCESS ? deferred : result;
}

template <ApiId kId>
struct GenericSync {
  template <typename Real, typename... Args>
  static CUresult Call(scheduler::Scheduler* s, Real real, Args... args) {
    scheduler::StreamState* stream = WaitBeforeSync<kId>(s, args...);
    return WithDeferredError(s, stream, CallDriver(real, args...));
  }
};

template <ApiId kId>
struct ScheduledHandler<kId, ApiClass::kOrdered> : OrderedByValue<kId> {};
template <ApiId kId>
struct ScheduledHandler<kId, ApiClass::kInline> : InlineCall<kId> {};
template <ApiId kId>
struct ScheduledHandler<kId, ApiClass::kSync> : GenericSync<kId> {};

}  // namespace gpuprio::hook

#endif  // GPUPRIO_HOOK_SCHEDULED_CALLS_H_
