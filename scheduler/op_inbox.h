// The dispatcher's inbox: a multi-producer, single-consumer intrusive FIFO (Vyukov's design).
// Push is one atomic exchange and never blocks; the consumer pops in push order. Push order is
// the process-wide submission order the scheduler keeps for legacy-stream semantics.
#ifndef GPUPRIO_SCHEDULER_OP_INBOX_H_
#define GPUPRIO_SCHEDULER_OP_INBOX_H_

#include <atomic>

#include "scheduler/op.h"

namespace gpuprio::scheduler {

class OpInbox {
 public:
  OpInbox() : head_(&stub_), tail_(&stub_) {}
  OpInbox(const OpInbox&) = delete;
  OpInbox& operator=(const OpInbox&) = delete;

  // Any thread.
  void Push(Op* op) {
    op->inbox_next.store(nullptr, std::memory_order_relaxed);
    Op* prev = head_.exchange(op, std::memory_order_seq_cst);
    prev->inbox_next.store(op, std::memory_order_release);
  }

  // Consumer only. Returns null when empty, or when a producer is between its two steps (the op
  // then appears on a later call).
  Op* Pop() {
    Op* tail = tail_;
    Op* next = tail->inbox_next.load(std::memory_order_acquire);
    if (tail == &stub_) {
      if (next == nullptr) return nullptr;
      tail_ = next;
      tail = next;
      next = next->inbox_next.load(std::memory_order_acquire);
    }
    if (next != nullptr) {
      tail_ = next;
      return tail;
    }
    if (tail != head_.load(std::memory_order_acquire)) return nullptr;
    Push(&stub_);
    next = tail->inbox_next.load(std::memory_order_acquire);
    if (next != nullptr) {
      tail_ = next;
      return tail;
    }
    return nullptr;
  }

  // Consumer only. False while a producer is mid-push, so a consumer that sees false must
  // still retry Pop (it does: it only parks after Empty() and a failed Pop agree).
  bool Empty() const {
    return head_.load(std::memory_order_seq_cst) == tail_ &&
           tail_->inbox_next.load(std::memory_order_acquire) == nullptr;
  }

 private:
  std::atomic<Op*> head_;  // last pushed
  Op* tail_;               // consumer only
  Op stub_;
};

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_OP_INBOX_H_
