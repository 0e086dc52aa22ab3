// Kernel launches queued and not yet issued, counted per function (hashed into a fixed table):
// a function attribute set by the application (cuFuncSetAttribute, cuKernelSetAttribute, cache
// configurations) must reach the driver after the launches queued before it, which were launched
// under the old value, and only those need to be waited for.
//
// Lock-free, no allocation. Two functions may share a slot: a count is then too high, never too
// low, which only makes a wait longer than it needs to be.
#ifndef GPUPRIO_SCHEDULER_QUEUED_LAUNCHES_H_
#define GPUPRIO_SCHEDULER_QUEUED_LAUNCHES_H_

#include <atomic>
#include <cstdint>

namespace gpuprio::scheduler {

class QueuedLaunches {
 public:
  // The counter of `function` (a CUfunction, or a CUkernel as cudart launches it): raised when a
  // launch of it is queued, lowered once the dispatcher has issued it.
  std::atomic<int32_t>* CounterFor(const void* function) {
    return &slots_[(reinterpret_cast<uintptr_t>(function) >> 4) % kSlots];
  }
  bool AnyQueued(const void* function) {
    return CounterFor(function)->load(std::memory_order_acquire) != 0;
  }

 private:
  static constexpr int kSlots = 1024;
  std::atomic<int32_t> slots_[kSlots] = {};
};

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_QUEUED_LAUNCHES_H_
