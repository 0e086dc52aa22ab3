// How a dispatcher thread sleeps and who wakes it, and how client threads wait until it has issued
// their work: every sequentially consistent handshake between them, so that no wake-up is lost
// while the clients' hot paths pay one or two loads.
//
// The handshakes (docs/architecture.md, "Threads and waiting"):
// - Park: the dispatcher sets `parked_`, then checks its work under the mutex; a client pushes
//   its work, then reads `parked_` and signals under the mutex. One side sees the other.
// - The floor (ParkHeld): the dispatcher stores the held op's priority before it parks; a client
//   reads it after `parked_`, so work above the floor is seen or wakes the dispatcher, and work at
//   or below it does not wake it.
// - The peers' word (ParkHeldOnPeers): the dispatcher sets `on_peer_word_`, then reads the wake
//   request; Wake sets the request, then reads the flag and wakes the word's sleepers.
// - The long park: the dispatcher sets `long_park_` before `parked_`, then checks for direct
//   work; a client lists direct work, then reads `parked_` and `long_park_`.
// - Waiting for issues: a client counts itself a waiter, then checks under the mutex; the
//   dispatcher raises an issue count, then reads the waiter count and signals under the mutex.
#ifndef GPUPRIO_SCHEDULER_DISPATCHER_PARKING_H_
#define GPUPRIO_SCHEDULER_DISPATCHER_PARKING_H_

#include <atomic>
#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "scheduler/issue_policy.h"

namespace gpuprio::scheduler {

inline void CpuRelax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

class DispatcherParking {
 public:
  // Wakes a dispatcher asleep on the shared segment's level-drop word (ParkHeldOnPeers).
  using PeerWordWaker = void (*)(void* arg);
  DispatcherParking(PeerWordWaker wake_peer_word, void* arg)
      : wake_peer_word_(wake_peer_word), wake_arg_(arg) {}
  DispatcherParking(const DispatcherParking&) = delete;
  DispatcherParking& operator=(const DispatcherParking&) = delete;

  // --- Any thread. ---
  // Ends the dispatcher's current or next park, even with nothing new to do.
  void Wake();
  // Ends a park only where the dispatcher finds something to do (a released stream), and wakes
  // every client waiting for issues: the dispatcher is stopping.
  void WakeForStop();
  // Ends a park whose condition may have changed (a released stream); no wake request.
  void Signal();

  // --- Client threads. ---
  // After a client pushed work of `priority`: wakes a parked dispatcher unless the work cannot
  // go before the op it holds (the floor).
  void WakeForWork(int priority) {
    if (parked_.load(std::memory_order_seq_cst) &&
        priority > floor_.load(std::memory_order_seq_cst)) {
      Wake();
    }
  }
  bool Parked() const { return parked_.load(std::memory_order_seq_cst); }
  bool InLongPark() const { return long_park_.load(std::memory_order_seq_cst); }
  bool OnPeerWord() const { return on_peer_word_.load(std::memory_order_seq_cst); }
  // Blocks until `done` (which reads with seq_cst what the dispatcher writes before
  // NotifyIssued): a short spin, then a wait on the condition.
  void WaitUntil(absl::FunctionRef<bool()> done);

  // --- Dispatcher thread. ---
  // Sleeps until `ready` (checked under the mutex), a wake-up is asked for (Wake), or `timeout`
  // passes; true in the second case. `long_park`: a client's direct work should wake it too
  // (the client reads InLongPark; `ready` should see that work).
  bool Park(absl::Duration timeout, absl::FunctionRef<bool()> ready, bool long_park = false);
  // While held: work at or below `priority` does not wake the dispatcher.
  void SetFloor(int priority) { floor_.store(priority, std::memory_order_seq_cst); }
  void ClearFloor() { floor_.store(kNoPriority, std::memory_order_seq_cst); }
  // Around a sleep on the peers' word, held at `floor`: parked, and Wake wakes the word. The
  // sleep itself is the caller's; it checks WakeRequested after Enter. Leave returns whether a
  // wake-up was asked for.
  void EnterPeerWordPark(int floor);
  bool LeavePeerWordPark();
  bool WakeRequested() const { return wake_requested_.load(std::memory_order_seq_cst); }
  // After an issue count was raised: wakes the clients waiting in WaitUntil.
  void NotifyIssued();

  // How often the dispatcher went to sleep (each is a wake-up later). Read at exit.
  uint64_t sleeps() const { return sleeps_.load(std::memory_order_relaxed); }

 private:
  void CountSleep() {
    sleeps_.store(sleeps_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  const PeerWordWaker wake_peer_word_;
  void* const wake_arg_;
  std::atomic<bool> parked_{false};
  // While held (ParkHeld, ParkHeldOnPeers): the held op's priority; otherwise kNoPriority.
  std::atomic<int> floor_{kNoPriority};
  std::atomic<bool> on_peer_word_{false};
  std::atomic<bool> long_park_{false};
  // Set by Wake: ends a park although nothing new is ready.
  std::atomic<bool> wake_requested_{false};
  std::atomic<int> waiters_{0};
  std::atomic<uint64_t> sleeps_{0};  // one writer: the dispatcher thread
  // The conditions' mutex. It guards no member: what the waits look at is atomic (above).
  absl::Mutex mu_;
  absl::CondVar wake_cv_;    // the dispatcher parks here
  absl::CondVar issued_cv_;  // clients in WaitUntil wait here
};

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_DISPATCHER_PARKING_H_
