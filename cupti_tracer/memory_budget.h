// A cap on the memory the tracer holds (GPUPRIO_TRACE_MAX_MB): raw CUPTI buffers, decoded records
// and gpuprio's own event chunks all reserve from one budget. Lock-free; thread-safe.
#ifndef GPUPRIO_CUPTI_TRACER_MEMORY_BUDGET_H_
#define GPUPRIO_CUPTI_TRACER_MEMORY_BUDGET_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace gpuprio::tracer {

class MemoryBudget {
 public:
  explicit MemoryBudget(size_t limit_bytes) : limit_(limit_bytes) {}

  // Reserves `bytes` if the total stays within the limit; false (and nothing reserved) otherwise.
  bool TryReserve(size_t bytes) {
    const size_t before = used_.fetch_add(bytes, std::memory_order_relaxed);
    if (before + bytes <= limit_) return true;
    used_.fetch_sub(bytes, std::memory_order_relaxed);
    return false;
  }
  void Release(size_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }
  size_t used() const { return used_.load(std::memory_order_relaxed); }
  size_t limit() const { return limit_; }

 private:
  const size_t limit_;
  std::atomic<size_t> used_{0};
};

}  // namespace gpuprio::tracer

#endif  // GPUPRIO_CUPTI_TRACER_MEMORY_BUDGET_H_
