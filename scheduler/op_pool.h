// Recycles ops without locks: a client thread takes ops from its own pool; the dispatcher gives
// each op back to the pool it came from by pushing onto that pool's return stack (one atomic
// exchange loop), and the owner takes the whole stack back in one exchange when its list runs dry.
// Pools outlive their threads: a pool whose thread exited is adopted by the next new thread.
#ifndef GPUPRIO_SCHEDULER_OP_POOL_H_
#define GPUPRIO_SCHEDULER_OP_POOL_H_

#include <atomic>

#include "scheduler/base/thread_registry.h"
#include "scheduler/op.h"

namespace gpuprio::scheduler {

class OpPool : public base::ThreadRegistryEntry<OpPool> {
 public:
  // The calling thread's pool. Thread-safe; the first call on a thread may allocate.
  static OpPool& ForThisThread();

  // Owner thread only. Returns a reset op whose `data` keeps its old capacity.
  Op* Take();

  // Any thread (the dispatcher). The op must have come from this pool.
  void Give(Op* op);

  // Total ops ever allocated by all pools (a steady state allocates none).
  static uint64_t AllocatedOps();

 private:
  OpPool() = default;
  friend class base::ThreadRegistry<OpPool>;

  Op* free_ = nullptr;                      // owner thread only
  std::atomic<Op*> returned_{nullptr};      // pushed by any thread
};

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_OP_POOL_H_
