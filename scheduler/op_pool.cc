#include "scheduler/op_pool.h"

#include "absl/base/attributes.h"

namespace gpuprio::scheduler {

struct OpPoolRegistry {
  static OpPool* Acquire();
  static void Release(OpPool* pool) { pool->in_use_.store(false, std::memory_order_release); }
};

// External linkage on purpose: see the note on TLS in scheduler.cc.
namespace internal_op_pool {
__attribute__((visibility("hidden"), tls_model("initial-exec"))) __thread OpPool* t_pool =
    nullptr;
struct PoolReleaser {
  ~PoolReleaser() {
    if (t_pool != nullptr) OpPoolRegistry::Release(t_pool);
    t_pool = nullptr;
  }
};
__attribute__((visibility("hidden"))) thread_local PoolReleaser t_releaser;
}  // namespace internal_op_pool

namespace {

using internal_op_pool::t_pool;
using internal_op_pool::t_releaser;

ABSL_CONST_INIT std::atomic<OpPool*> g_pools{nullptr};
ABSL_CONST_INIT std::atomic<uint64_t> g_allocated{0};

}  // namespace

OpPool* OpPoolRegistry::Acquire() {
  for (OpPool* p = g_pools.load(std::memory_order_acquire); p != nullptr; p = p->next_) {
    bool expected = false;
    if (p->in_use_.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) return p;
  }
  auto* pool = new OpPool();
  pool->in_use_.store(true, std::memory_order_relaxed);
  OpPool* head = g_pools.load(std::memory_order_relaxed);
  do {
    pool->next_ = head;
  } while (!g_pools.compare_exchange_weak(head, pool, std::memory_order_release,
                                          std::memory_order_relaxed));
  return pool;
}

OpPool& OpPool::ForThisThread() {
  if (t_pool == nullptr) {
    (void)&t_releaser;
    t_pool = OpPoolRegistry::Acquire();
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
  op->depends_on_count = 0;
  op->issued_counter = nullptr;
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
