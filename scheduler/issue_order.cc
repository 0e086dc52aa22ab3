#include "scheduler/issue_order.h"

#include <algorithm>

#include "absl/algorithm/container.h"

namespace gpuprio::scheduler {

int IssueOrder::HeadPriority(const StreamQueue& q) {
  const Op* head = q.pending.front();
  const StreamState* s = q.state;
  // Count first, then priority: the asking dispatcher writes them in the other order.
  if (s->awaited_count.load(std::memory_order_seq_cst) >= head->stream_index) {
    return std::max(head->priority, s->awaited_priority.load(std::memory_order_seq_cst));
  }
  return head->priority;
}

StreamQueue* IssueOrder::MostImportantHead(absl::Span<const StreamQueue* const> skipped,
                                           int* priority) const {
  StreamQueue* best = nullptr;
  for (StreamQueue* c : active_) {
    if (absl::c_linear_search(skipped, c)) continue;
    const int p = HeadPriority(*c);
    if (best == nullptr || p > *priority ||
        (p == *priority && c->pending.front()->seq < best->pending.front()->seq)) {
      best = c;
      *priority = p;
    }
  }
  return best;
}

StreamQueue* IssueOrder::Blocker(const StreamQueue& q) const {
  const Op* head = q.pending.front();
  // An event wait issues only after the ops that were submitted to the recording stream before
  // the wait (conservative: the record is among them). Only ops queued before the wait count:
  // the record was, and the stream's queue is in queueing order, so an unissued record is at or
  // behind an older head. A newer head means the record is issued, and the ops still counted
  // were queued by other threads after the wait (counted first, queued later): following them
  // would add no order the program asked for, and could make the chain loop.
  if (head->depends_on != nullptr &&
      head->depends_on->issued.load(std::memory_order_acquire) < head->depends_on_count) {
    StreamQueue* recording = queue_of_(head->depends_on);
    if (recording != nullptr && !recording->pending.empty() &&
        recording->pending.front()->seq < head->seq) {
      return recording;
    }
  }
  // Legacy NULL-stream semantics are kept by issue order: legacy-stream work and blocking-stream
  // work of one context are issued in submission order relative to each other.
  const StreamState* s = q.state;
  StreamQueue* blocker = nullptr;
  uint64_t blocker_seq = head->seq;
  for (StreamQueue* other : active_) {
    if (other == &q) continue;
    const StreamState* o = other->state;
    if (o->context != s->context) continue;
    const bool ordered = s->legacy ? (o->blocking && !o->legacy) : (s->blocking && o->legacy);
    if (!ordered) continue;
    const uint64_t seq = other->pending.front()->seq;
    if (seq < blocker_seq) {
      blocker = other;
      blocker_seq = seq;
    }
  }
  return blocker;
}

StreamQueue* IssueOrder::FirstToIssue(StreamQueue* q, bool* inherited, bool* looped) const {
  *looped = false;
  for (int hops = 0; hops < kMaxChainHops; ++hops) {
    StreamQueue* blocker = Blocker(*q);
    if (blocker == nullptr) return q;
    q = blocker;
    *inherited = true;
  }
  *looped = true;
  return q;
}

}  // namespace gpuprio::scheduler
