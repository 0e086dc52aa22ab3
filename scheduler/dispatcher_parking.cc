#include "scheduler/dispatcher_parking.h"

#include "absl/time/clock.h"

namespace gpuprio::scheduler {
namespace {

// Spins before a client blocks in WaitUntil: an issue usually follows within microseconds.
constexpr int kWaitSpins = 2000;

}  // namespace

void DispatcherParking::Wake() {
  wake_requested_.store(true, std::memory_order_seq_cst);
  // Read after the request is set; EnterPeerWordPark sets the flag before the sleeper reads the
  // request (all seq_cst): either it sees the request and does not sleep, or it is woken here.
  // The word is the segment's, so the other processes sleeping on it wake too, look, and sleep
  // again.
  if (on_peer_word_.load(std::memory_order_seq_cst)) wake_peer_word_(wake_arg_);
  absl::MutexLock lock(&mu_);
  wake_cv_.Signal();
}

void DispatcherParking::WakeForStop() {
  if (on_peer_word_.load(std::memory_order_seq_cst)) wake_peer_word_(wake_arg_);
  absl::MutexLock lock(&mu_);
  wake_cv_.Signal();
  issued_cv_.SignalAll();  // waits that end when the dispatcher stops
}

void DispatcherParking::Signal() {
  absl::MutexLock lock(&mu_);
  wake_cv_.Signal();
}

void DispatcherParking::WaitUntil(absl::FunctionRef<bool()> done) {
  for (int i = 0; i < kWaitSpins; ++i) {
    if (done()) return;
    CpuRelax();
  }
  waiters_.fetch_add(1, std::memory_order_seq_cst);
  {
    absl::MutexLock lock(&mu_);
    // No lost wake-up: the dispatcher raises what `done` reads before it reads waiters_ (both
    // seq_cst), and signals under mu_, which this thread holds from its last check of done()
    // until it waits.
    while (!done()) issued_cv_.Wait(&mu_);
  }
  waiters_.fetch_sub(1, std::memory_order_seq_cst);
}

void DispatcherParking::NotifyIssued() {
  if (waiters_.load(std::memory_order_seq_cst) > 0) {
    absl::MutexLock lock(&mu_);
    issued_cv_.SignalAll();
  }
}

bool DispatcherParking::Park(absl::Duration timeout, absl::FunctionRef<bool()> ready,
                             bool long_park) {
  if (long_park) long_park_.store(true, std::memory_order_seq_cst);
  parked_.store(true, std::memory_order_seq_cst);
  {
    absl::MutexLock lock(&mu_);
    // A client signals under mu_ after it saw parked_, and this thread checks `ready` under mu_
    // after it set parked_ (all seq_cst), so a wake-up cannot be lost.
    const absl::Time deadline = absl::Now() + timeout;
    bool slept = false;
    while (!ready() && !wake_requested_.load(std::memory_order_seq_cst)) {
      if (!slept) {
        CountSleep();
        slept = true;
      }
      if (wake_cv_.WaitWithDeadline(&mu_, deadline)) break;  // timed out
    }
  }
  const bool woken = wake_requested_.exchange(false, std::memory_order_seq_cst);
  parked_.store(false, std::memory_order_seq_cst);
  if (long_park) long_park_.store(false, std::memory_order_seq_cst);
  return woken;
}

void DispatcherParking::EnterPeerWordPark(int floor) {
  floor_.store(floor, std::memory_order_seq_cst);
  parked_.store(true, std::memory_order_seq_cst);
  on_peer_word_.store(true, std::memory_order_seq_cst);
  CountSleep();
}

bool DispatcherParking::LeavePeerWordPark() {
  on_peer_word_.store(false, std::memory_order_seq_cst);
  parked_.store(false, std::memory_order_seq_cst);
  floor_.store(kNoPriority, std::memory_order_seq_cst);
  return wake_requested_.exchange(false, std::memory_order_seq_cst);
}

}  // namespace gpuprio::scheduler
