// AtomicMax: raise an atomic to at least a value, lock-free, for the high-water marks that many
// threads update at once (delay maxima, a stream's direct priority, the coordinator's levels).
#ifndef GPUPRIO_SCHEDULER_BASE_ATOMIC_MAX_H_
#define GPUPRIO_SCHEDULER_BASE_ATOMIC_MAX_H_

#include <atomic>

namespace gpuprio::base {

// Stores `value` into `target` unless `target` already holds as much; a concurrent larger store
// always wins. `order`, relaxed or seq_cst, is that of the read and of the store: relaxed where
// only the value matters, seq_cst where the store is part of a handshake (the coordinator's
// active level). `value`'s type is not deduced, so an int may raise an atomic<int32_t>.
template <typename T>
void AtomicMax(std::atomic<T>& target, typename std::atomic<T>::value_type value,
               std::memory_order order = std::memory_order_relaxed) {
  T seen = target.load(order);
  while (value > seen && !target.compare_exchange_weak(seen, value, order)) {
  }
}

}  // namespace gpuprio::base

#endif  // GPUPRIO_SCHEDULER_BASE_ATOMIC_MAX_H_
