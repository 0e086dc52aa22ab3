// AtomicMax: raise an atomic to at least a value, lock-free, for the high-water marks that many
// threads update at once (delay maxima, a stream's direct priority, the coordinator's levels).
#ifndef GPUPRIO_SCHEDULER_BASE_ATOMIC_MAX_H_
#define GPUPRIO_SCHEDULER_BASE_ATOMIC_MAX_H_

#include <atomic>

namespace gpuprio::base {

// Stores `value` into `target` unless `target` already holds as much; a concurrent larger store
// always wins. `order` is that of the store: relaxed where only the value matters, release where
// the store publishes what the thread wrote before it (the read is then relaxed), seq_cst where
// the store is part of a handshake (the coordinator's active level; the read is seq_cst too).
// `value`'s type is not deduced, so an int may raise an atomic<int32_t>.
template <typename T>
void AtomicMax(std::atomic<T>& target, typename std::atomic<T>::value_type value,
               std::memory_order order = std::memory_order_relaxed) {
  const std::memory_order read_order =
      order == std::memory_order_release ? std::memory_order_relaxed : order;
  T seen = target.load(read_order);
  while (value > seen && !target.compare_exchange_weak(seen, value, order, read_order)) {
  }
}

}  // namespace gpuprio::base

#endif  // GPUPRIO_SCHEDULER_BASE_ATOMIC_MAX_H_
