// The ordering invariants as a choice among a dispatcher's queued streams: the most important head
// (ties: the older), and what must be issued before it whatever its priority -- an event wait's
// record, the legacy stream's implicit order against blocking streams (priority inheritance).
// Reads queues and counters only: no driver, no clock.
#ifndef GPUPRIO_SCHEDULER_ISSUE_ORDER_H_
#define GPUPRIO_SCHEDULER_ISSUE_ORDER_H_

#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "scheduler/stream_queue.h"

namespace gpuprio::scheduler {

class IssueOrder {
 public:
  // More links than queues can exist only in a loop: a bound, and a report if it is reached.
  static constexpr int kMaxChainHops = 1024;

  // `active`: the queues with pending ops; `queue_of`: a stream's queue, or null. Both must
  // outlive this object.
  IssueOrder(absl::Span<StreamQueue* const> active,
             absl::FunctionRef<StreamQueue*(const StreamState*)> queue_of)
      : active_(active), queue_of_(queue_of) {}

  // The priority `q`'s head is chosen at: its own, or that of another device's op that waits for
  // it (StreamState::awaited_priority), whichever is higher.
  static int HeadPriority(const StreamQueue& q);

  // The most important head not in `skipped`, and its `priority`; null if none.
  StreamQueue* MostImportantHead(absl::Span<const StreamQueue* const> skipped, int* priority) const;

  // The queue whose head must be issued before `q`'s, or null: every link goes to an older head
  // (a smaller sequence number), so following them cannot loop.
  StreamQueue* Blocker(const StreamQueue& q) const;

  // Blocker followed to its end: the queue to issue from (`q` itself if nothing must go first;
  // `inherited` set otherwise). `looped`: kMaxChainHops links were followed (cannot happen).
  StreamQueue* FirstToIssue(StreamQueue* q, bool* inherited, bool* looped) const;

 private:
  const absl::Span<StreamQueue* const> active_;
  const absl::FunctionRef<StreamQueue*(const StreamState*)> queue_of_;
};

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_ISSUE_ORDER_H_
