// Work client threads issued themselves (the fast path), on its way to their dispatcher, which
// counts it in flight until a completion mark behind it passes: a lock-free list of the streams
// with such work not yet behind a mark, and the issues not yet listed.
#ifndef GPUPRIO_SCHEDULER_DIRECT_WORK_H_
#define GPUPRIO_SCHEDULER_DIRECT_WORK_H_

#include <atomic>
#include <cstdint>

#include "absl/functional/function_ref.h"
#include "scheduler/stream_state.h"

namespace gpuprio::scheduler {

// Lock-free, no allocation: the list links through StreamState::direct_next.
class DirectWorkList {
 public:
  // Client, before it issues an op itself where other processes watch its levels: the issue is
  // in progress until EndIssue, after it was listed.
  void BeginIssue() { in_progress_.fetch_add(1, std::memory_order_seq_cst); }
  void EndIssue() { in_progress_.fetch_sub(1, std::memory_order_seq_cst); }
  // Client, after it issued work of `priority` on `stream` itself: lists the stream unless it is
  // listed already; true when this call listed it.
  bool List(StreamState* stream, int priority);

  // Any thread (all seq_cst): whether a stream is listed, or an issue in progress.
  bool Listed() const { return head_.load(std::memory_order_seq_cst) != nullptr; }
  bool IssuesInProgress() const { return in_progress_.load(std::memory_order_seq_cst) > 0; }

  // Dispatcher: takes every listed stream off the list, then passes it to `adopt` with the
  // highest priority that ever issued on it directly. A stream is unlisted before `adopt` sees
  // it, so work issued after lists it again; `adopt`'s mark covers the work issued before.
  void Adopt(absl::FunctionRef<void(StreamState* stream, int priority)> adopt);

 private:
  std::atomic<StreamState*> head_{nullptr};
  std::atomic<int64_t> in_progress_{0};
};

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_DIRECT_WORK_H_
