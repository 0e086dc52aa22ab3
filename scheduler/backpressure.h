// Backpressure arithmetic: how far a submitting thread must wait for its stream's issue count.
// Kept pure so the wrap-around cases (the dispatcher already issued past the op) are unit-tested.
#ifndef GPUPRIO_SCHEDULER_BACKPRESSURE_H_
#define GPUPRIO_SCHEDULER_BACKPRESSURE_H_

#include <cstdint>

namespace gpuprio::scheduler {

// `submitted`: the stream's submit count including the op just queued; `issued`: its issue count
// read after the op was queued (other threads' ops may have been issued since, so it can exceed
// `submitted`). Returns the issue count to wait for, or 0 when the stream holds at most `limit`
// unissued ops. The target (half the limit still queued) is never below 1 and never above
// `submitted`, so a waiter cannot wait for ops that were never submitted.
constexpr uint64_t BackpressureWaitTarget(uint64_t submitted, uint64_t issued, uint64_t limit) {
  if (issued >= submitted) return 0;
  if (submitted - issued <= limit) return 0;
  return submitted - limit / 2;  // submitted > issued + limit >= limit / 2
}

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_BACKPRESSURE_H_
