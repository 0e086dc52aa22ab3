#include "scheduler/direct_work.h"

#include "scheduler/base/atomic_max.h"

namespace gpuprio::scheduler {

bool DirectWorkList::List(StreamState* stream, int priority) {
  base::AtomicMax(stream->direct_priority, priority);
  // The flag is cleared by the dispatcher before it records its mark, so work issued after the
  // mark sets it again and is listed again; work issued before is covered by the mark.
  if (stream->direct_unmarked.load(std::memory_order_seq_cst) ||
      stream->direct_unmarked.exchange(true, std::memory_order_seq_cst)) {
    return false;
  }
  StreamState* head = head_.load(std::memory_order_relaxed);
  do {
    stream->direct_next = head;
  } while (!head_.compare_exchange_weak(head, stream, std::memory_order_seq_cst,
                                        std::memory_order_relaxed));
  return true;
}

void DirectWorkList::Adopt(absl::FunctionRef<void(StreamState* stream, int priority)> adopt) {
  StreamState* s = head_.exchange(nullptr, std::memory_order_acquire);
  while (s != nullptr) {
    StreamState* next = s->direct_next;  // read first: once the flag is clear, s may be relisted
    s->direct_unmarked.store(false, std::memory_order_seq_cst);
    adopt(s, s->direct_priority.load(std::memory_order_relaxed));
    s = next;
  }
}

}  // namespace gpuprio::scheduler
