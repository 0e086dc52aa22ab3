// The process's dispatchers by device ordinal, readable without a lock, so that a dispatcher
// whose op waits for another device's stream (an event recorded there) can wake that device's
// dispatcher, and be woken by it once the work it waits for is issued.
//
// Contract: Add is called under the Scheduler's mutex, once per device; Find and AllOf may be
// called from any thread at any time and see a dispatcher once Add has returned (release/acquire).
// Entries are never removed: a dispatcher lives as long as its Scheduler. Devices from kMaxDevices
// on are not listed (their dispatchers are found by polling instead: see
// Dispatcher::WaitWhileHeld).
#ifndef GPUPRIO_SCHEDULER_DISPATCHER_DIRECTORY_H_
#define GPUPRIO_SCHEDULER_DISPATCHER_DIRECTORY_H_

#include <atomic>
#include <cstdint>

namespace gpuprio::scheduler {

class Dispatcher;

class DispatcherDirectory {
 public:
  // A device ordinal's bit in a mask of devices, or 0 when it is not listed.
  static uint64_t Bit(int device) {
    return device >= 0 && device < kMaxDevices ? uint64_t{1} << device : 0;
  }

  void Add(int device, Dispatcher* dispatcher) {
    if (Bit(device) == 0) {
      unlisted_.store(true, std::memory_order_release);
      return;
    }
    slots_[device].store(dispatcher, std::memory_order_release);
    listed_.fetch_or(Bit(device), std::memory_order_release);
  }
  Dispatcher* Find(int device) const {
    return Bit(device) != 0 ? slots_[device].load(std::memory_order_acquire) : nullptr;
  }

  // Whether `pred` holds for every dispatcher added so far; false if one could not be listed.
  template <typename Pred>
  bool AllOf(Pred pred) const {
    if (unlisted_.load(std::memory_order_acquire)) return false;
    for (uint64_t mask = listed_.load(std::memory_order_acquire); mask != 0; mask &= mask - 1) {
      if (!pred(*slots_[__builtin_ctzll(mask)].load(std::memory_order_acquire))) return false;
    }
    return true;
  }

  static constexpr int kMaxDevices = 64;

 private:
  std::atomic<Dispatcher*> slots_[kMaxDevices] = {};
  std::atomic<uint64_t> listed_{0};    // the devices whose slot is set
  std::atomic<bool> unlisted_{false};  // a dispatcher of a device from kMaxDevices on exists
};

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_DISPATCHER_DIRECTORY_H_
