#include "scheduler/op_pool.h"

#include "absl/base/attributes.h"
#include "scheduler/base/tls.h"

namespace gpuprio::scheduler {

namespace {
ABSL_CONST_INIT base::ThreadRegistry<OpPool> g_pools;
ABSL_CONST_INIT std::atomic<uint64_t> g_allocated{0};
}  // namespace

namespace internal_op_pool {
GPUPRIO_THREAD_LOCAL OpPool* t_pool = nullptr;
struct PoolReleaser {
  ~PoolReleaser() {
    if (t_pool != nullptr) base::ThreadRegistry<OpPool>::Release(t_pool);
    t_pool = nullptr;
  }
};
GPUPRIO_THREAD_LOCAL_WITH_DESTRUCTOR PoolReleaser t_releaser;
}  // namespace internal_op_pool

using internal_op_pool::t_pool;
using internal_op_pool::t_releaser;

OpPool& OpPool::ForThisThread() {
  if (t_pool == nullptr) {
    (void)&t_releaser;
    t_pool = g_pools.Acquire();
  }
  return *t_pool;
}

Op* OpPool::Take() {
  if (free_ == nullptr) free_ = returned_.exchange(nullptr, std::memory_order_acquire);
  Op* op = free_;
  if (op != nullptr) {
    free_ = op->pool_next;
  } else {
    op = new Op();
    op->home = this;
    g_allocated.fetch_add(1, std::memory_order_relaxed);
  }
  op->pool_next = nullptr;
  op->issue = nullptr;
  op->name = nullptr;
  op->stream = nullptr;
  op->priority = 0;
  op->cost_key = nullptr;
  op->cost_hint_ns = 0;
  op->depends_on = nullptr;
  op->home_only = false;
  op->confined_stream = nullptr;
  op->depends_on_count = 0;
  op->held_since_ns = 0;
  op->issued_counter = nullptr;
  op->launch_counter = nullptr;
  op->seq = 0;
  op->stream_index = 0;
  op->data.clear();
  op->inbox_next.store(nullptr, std::memory_order_relaxed);
  return op;
}

void OpPool::Give(Op* op) {
  Op* head = returned_.load(std::memory_order_relaxed);
  do {
    op->pool_next = head;
  } while (!returned_.compare_exchange_weak(head, op, std::memory_order_release,
                                            std::memory_order_relaxed));
}

uint64_t OpPool::AllocatedOps() { return g_allocated.load(std::memory_order_relaxed); }

}  // namespace gpuprio::scheduler
