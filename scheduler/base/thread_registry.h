// ThreadRegistry<T>: per-thread objects that are never freed. A thread takes a free one (or adds
// a new one) the first time it needs one and hands it back when it exits, so memory is bounded by
// the peak number of threads, and any thread may walk all of them without a lock.
#ifndef GPUPRIO_SCHEDULER_BASE_THREAD_REGISTRY_H_
#define GPUPRIO_SCHEDULER_BASE_THREAD_REGISTRY_H_

#include <atomic>

namespace gpuprio::base {

template <typename T>
class ThreadRegistry;

// What T inherits to be kept in a ThreadRegistry<T>.
template <typename T>
class ThreadRegistryEntry {
 public:
  // The next entry of the registry (immutable once the entry is published), or null.
  T* next_in_registry() const { return next_; }

 private:
  friend class ThreadRegistry<T>;
  std::atomic<bool> in_use_{false};
  T* next_ = nullptr;
};

template <typename T>
class ThreadRegistry {
 public:
  constexpr ThreadRegistry() = default;
  ThreadRegistry(const ThreadRegistry&) = delete;
  ThreadRegistry& operator=(const ThreadRegistry&) = delete;

  // An entry no live thread holds (its state is what its last holder left), else a new
  // value-initialised T. Lock-free; allocates only when every entry is in use.
  T* Acquire() {
    for (T* e = First(); e != nullptr; e = e->next_in_registry()) {
      bool expected = false;
      if (e->ThreadRegistryEntry<T>::in_use_.compare_exchange_strong(expected, true,
                                                                     std::memory_order_acq_rel)) {
        return e;
      }
    }
    T* entry = new T();
    entry->ThreadRegistryEntry<T>::in_use_.store(true, std::memory_order_relaxed);
    T* head = head_.load(std::memory_order_relaxed);
    do {
      entry->ThreadRegistryEntry<T>::next_ = head;
    } while (!head_.compare_exchange_weak(head, entry, std::memory_order_release,
                                          std::memory_order_relaxed));
    return entry;
  }

  // From the thread that acquired `entry`, when it is done with it (normally as it exits).
  static void Release(T* entry) {
    entry->ThreadRegistryEntry<T>::in_use_.store(false, std::memory_order_release);
  }

  // Every entry ever acquired, most recent first; follow next_in_registry().
  T* First() const { return head_.load(std::memory_order_acquire); }

 private:
  std::atomic<T*> head_{nullptr};
};

}  // namespace gpuprio::base

#endif  // GPUPRIO_SCHEDULER_BASE_THREAD_REGISTRY_H_
