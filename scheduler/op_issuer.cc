#include "scheduler/op_issuer.h"

#include "scheduler/base/atomic_max.h"
#include "scheduler/base/clock.h"
#include "scheduler/base/log_throttle.h"
#include "scheduler/base/logging.h"
#include "scheduler/completion_marks.h"
#include "scheduler/dispatcher.h"
#include "scheduler/op_pool.h"

namespace gpuprio::scheduler {

using base::AtomicMax;
using base::SteadyNowNs;

void OpIssuer::Issue(StreamQueue* q, Op* op, CUresult in_context, uint64_t budget_ns,
                     bool confine) {
  StreamState* s = op->stream;
  // Where the op goes: the stream's twin while it is confined, else its own stream (its earlier
  // work linked back first if it was away).
  CUstream target = s->stream;
  if (in_context == CUDA_SUCCESS && (confine || q->away || q->links->away > 0)) {
    target = placement_->Place(q, confine);
  }
  op->confined_stream = target != s->stream ? target : nullptr;
  if (op->home_only) return;
  const int64_t now = SteadyNowNs();
  CountIssueStatistics(*op, now);
  // The estimate before this op could have taught it anything.
  const uint64_t estimate = estimates_->Estimate(op->cost_key, op->cost_hint_ns);
  CUevent start = in_context == CUDA_SUCCESS ? StartMeasurement(q, *op, target) : nullptr;
  if (observer_ != nullptr) observer_->OnIssueBegin(*op);
  CUresult result = in_context == CUDA_SUCCESS ? op->issue(*op) : in_context;
  if (result != CUDA_SUCCESS && op->confined_stream != nullptr) {
    result = IssueRefusedAtHome(q, op, result, &start);
  }
  if (observer_ != nullptr) observer_->OnIssueEnd(*op, result);
  if (s->legacy) {
    ++q->links->legacy_ops;
  } else if (s->blocking) {
    ++q->ops_issued;
  }
  if (result != CUDA_SUCCESS) {
    ReportFailure(*op, result);
    if (start != nullptr) q->free_events.push_back(start);
  } else {
    TrackIssued(q, *op, budget_ns, estimate, start, now);
  }
}

void OpIssuer::CountIssueStatistics(const Op& op, int64_t now_ns) {
  PriorityLevelStats& level = levels_->At(op.priority);
  if (op.confined_stream != nullptr) level.ops_confined.fetch_add(1, std::memory_order_relaxed);
  const uint64_t delay = now_ns > op.submit_ns ? static_cast<uint64_t>(now_ns - op.submit_ns) : 0;
  level.queue_delay_ns_sum.fetch_add(delay, std::memory_order_relaxed);
  AtomicMax(level.queue_delay_ns_max, delay);
  level.queue_delay_histogram.Record(delay);
  level.ops_issued.fetch_add(1, std::memory_order_relaxed);
  if (op.held_since_ns != 0) {
    const uint64_t held =
        now_ns > op.held_since_ns ? static_cast<uint64_t>(now_ns - op.held_since_ns) : 0;
    level.ops_held.fetch_add(1, std::memory_order_relaxed);
    level.held_ns_sum.fetch_add(held, std::memory_order_relaxed);
    AtomicMax(level.held_ns_max, held);
  }
  if (coordinator_ != nullptr) {
    coordinator_->CountDispatched(op.priority, delay, op.confined_stream != nullptr);
  }
}

CUevent OpIssuer::StartMeasurement(StreamQueue* q, const Op& op, CUstream target) {
  // An op whose cost is unknown is bracketed by events, so its GPU time is measured exactly
  // (host time from issue to observed completion would include the dispatcher's idle time).
  if (op.cost_key == nullptr || estimates_->Knows(op.cost_key)) return nullptr;
  tracker_->Mark(q);  // earlier ops get their own mark, so this op's mark covers it alone
  CUevent start = tracker_->TakeEvent(q);
  if (start != nullptr && driver_.event_record(start, target) != CUDA_SUCCESS) {
    q->free_events.push_back(start);
    start = nullptr;
  }
  return start;
}

CUresult OpIssuer::IssueRefusedAtHome(StreamQueue* q, Op* op, CUresult refused, CUevent* start) {
  // Confinement must change nothing a program sees. A call the partition refuses (on an H100
  // under MPS, cuBLAS kernels whose thread-block clusters do not fit the green context: CUDA
  // error 912) did nothing, so it runs on the stream's own after the twin's work, as it would
  // have natively; if it runs there, the partition was the cause, and its function is never
  // confined again.
  if (*start != nullptr) {
    q->free_events.push_back(*start);  // recorded on the twin: it would time the wrong span
    *start = nullptr;
  }
  const CUstream target = placement_->Place(q, /*confine=*/false);
  op->confined_stream = target != op->stream->stream ? target : nullptr;
  const CUresult result = op->issue(*op);
  if (result == CUDA_SUCCESS && op->cost_key != nullptr) {
    placement_->NoteUnconfinable(op->cost_key);
    GPUPRIO_LOG_THROTTLED(LogLevel::kInfo,
                          "isolation: %s refused on device %d's SM partition (CUDA error %d); "
                          "it and later launches of its function run on the whole GPU",
                          op->name != nullptr ? op->name : "op", device_,
                          static_cast<int>(refused));
  }
  return result;
}

void OpIssuer::ReportFailure(const Op& op, CUresult result) {
  StreamState* s = op.stream;
  int expected = CUDA_SUCCESS;
  s->deferred_error.compare_exchange_strong(expected, result, std::memory_order_acq_rel);
  reported_failure_.store(true, std::memory_order_seq_cst);
  // Throttled: a stream that fails every op must not flood the log (2000 failures were 2000
  // lines); the suppressed count is reported.
  GPUPRIO_LOG_THROTTLED(LogLevel::kError,
                        "%s on stream %p (device %d, context %p%s) failed with CUDA error %d; "
                        "the stream's next synchronize or query returns it",
                        op.name != nullptr ? op.name : "op", static_cast<void*>(s->stream), device_,
                        static_cast<void*>(s->context),
                        op.confined_stream != nullptr ? ", on its twin" : "",
                        static_cast<int>(result));
}

void OpIssuer::TrackIssued(StreamQueue* q, const Op& op, uint64_t budget_ns, uint64_t estimate,
                           CUevent start, int64_t now_ns) {
  // An op being measured is marked alone (its start event pairs with that mark).
  ++q->ops_since_mark;
  // Confined work is marked like budgeted work, against its queue bound: its completions free
  // room on the twin.
  const bool confined = op.confined_stream != nullptr;
  if (confined) budget_ns = options_.tuning.confined_queue_ns;
  const bool mark =
      MarkAfterIssue(q->ops_since_mark, start != nullptr, budget_ns, estimate, options_);
  // Marked alone without a start event, the op is measured from the mark before it, which is its
  // start only if the GPU was still busy with that mark's work when the op was issued: a mark
  // already complete means the GPU may have idled in between, and the gap would be learned as
  // the op's duration (larger estimates, fewer ops admitted, more gaps). The query comes after
  // the issue, so "not ready" is certain and "ready" merely loses a sample.
  const bool back_to_back = mark && start == nullptr && !q->in_flight.empty() &&
                            !q->marks.empty() && q->marks.back().covers == q->in_flight.size() &&
                            tracker_->QueryMark(q->marks.back().event) == CUDA_ERROR_NOT_READY;
  const bool alone = q->in_flight.empty();
  q->in_flight.push_back(
      {op.priority, estimate, op.cost_key, now_ns, back_to_back, start, confined, alone});
  accounting_->AdjustInFlight(op.priority, +1, static_cast<int64_t>(estimate));
  if (confined) placement_->AddConfined(q, estimate);
  tracker_->Track(q);
  if (mark) tracker_->Mark(q);
}

void OpIssuer::CountIssued(Op* op) {
  if (op->issued_counter != nullptr) {
    op->issued_counter->fetch_sub(1, std::memory_order_acq_rel);
  }
  if (op->launch_counter != nullptr) op->launch_counter->fetch_sub(1, std::memory_order_acq_rel);
  op->stream->issued.fetch_add(1, std::memory_order_seq_cst);
  queued_->fetch_sub(1, std::memory_order_seq_cst);
  levels_->At(op->priority).ops_unissued.fetch_sub(1, std::memory_order_seq_cst);
  WakeWaitingDevices(op->stream);
  op->home->Give(op);
}

void OpIssuer::WakeWaitingDevices(StreamState* s) {
  // No lost wake-up: a waiting dispatcher sets its bit, then reads `issued` (AskOtherDevice);
  // this thread raised `issued`, then reads the bits (all seq_cst), so one sees the other.
  if (s->awaited_by.load(std::memory_order_seq_cst) == 0) return;  // the common case: one load
  if (s->issued.load(std::memory_order_seq_cst) <
      s->awaited_count.load(std::memory_order_seq_cst)) {
    return;
  }
  uint64_t waiting = s->awaited_by.exchange(0, std::memory_order_seq_cst);
  s->awaited_priority.store(kPriorityUnset, std::memory_order_relaxed);
  while (waiting != 0) {
    const int device = __builtin_ctzll(waiting);
    waiting &= waiting - 1;
    if (Dispatcher* d = directory_ != nullptr ? directory_->Find(device) : nullptr) {
      d->WakeForOtherDevice();
    }
  }
}

bool OpIssuer::AskOtherDevice(const Op& op, int priority) {
  StreamState* other = op.depends_on;
  AtomicMax(other->awaited_priority, priority);
  AtomicMax(other->awaited_count, op.depends_on_count);
  other->awaited_by.fetch_or(DispatcherDirectory::Bit(device_), std::memory_order_seq_cst);
  if (other->issued.load(std::memory_order_seq_cst) >= op.depends_on_count) return false;
  // Asked again on every round this op is still waiting: the other dispatcher may have cleared
  // the request (met for an earlier wait) between this one's reads. A round comes at most every
  // few hundred microseconds while it waits (WaitWhileHeld), so this costs little.
  other->dispatcher->WakeForOtherDevice();
  return true;
}

}  // namespace gpuprio::scheduler
