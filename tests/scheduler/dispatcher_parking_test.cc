// DispatcherParking's handshakes under stress (scheduler/dispatcher_parking.h): no wake-up is lost
// between a parking thread and the threads that wake it, or between the thread that issues and
// the threads waiting for issues. A normal test; under ThreadSanitizer it also checks the
// handshakes for races. A lost wake-up shows as a park that ends only at its (long) timeout.
#include "scheduler/dispatcher_parking.h"

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "catch2/catch.hpp"

namespace gpuprio::scheduler {
namespace {

// Far longer than any wake-up takes, even on a loaded machine under TSan: reaching it means a
// wake-up was lost.
const absl::Duration kLostWakeUp = absl::Seconds(20);

std::atomic<int> g_peer_word_wakes{0};
void CountPeerWordWake(void*) { ++g_peer_word_wakes; }

TEST_CASE("Work pushed by many threads always wakes the parked thread", "[parking]") {
  DispatcherParking parking(&CountPeerWordWake, nullptr);
  constexpr int kThreads = 4;
  constexpr int kPushes = 2000;
  std::atomic<int> pushed{0};
  std::vector<std::thread> producers;
  for (int t = 0; t < kThreads; ++t) {
    producers.emplace_back([&] {
      for (int i = 0; i < kPushes; ++i) {
        pushed.fetch_add(1, std::memory_order_seq_cst);
        parking.WakeForWork(/*priority=*/0);
      }
    });
  }
  int seen = 0;
  int lost = 0;
  while (seen < kThreads * kPushes) {
    const bool woken =
        parking.Park(kLostWakeUp, [&] { return pushed.load(std::memory_order_seq_cst) != seen; });
    const int now = pushed.load(std::memory_order_seq_cst);
    if (now == seen && !woken) ++lost;  // ended by the timeout with nothing new
    seen = now;
  }
  for (std::thread& t : producers) t.join();
  CHECK(lost == 0);
  CHECK(g_peer_word_wakes.load() == 0);
}

TEST_CASE("A wake-up asked for ends the next park even with nothing ready", "[parking]") {
  DispatcherParking parking(&CountPeerWordWake, nullptr);
  constexpr int kRounds = 2000;
  std::atomic<int> round{0};
  std::thread waker([&] {
    for (int r = 1; r <= kRounds; ++r) {
      while (round.load(std::memory_order_seq_cst) < r) CpuRelax();
      parking.Wake();
    }
  });
  int timed_out = 0;
  for (int r = 1; r <= kRounds; ++r) {
    round.store(r, std::memory_order_seq_cst);
    if (!parking.Park(kLostWakeUp, [] { return false; })) ++timed_out;
  }
  waker.join();
  CHECK(timed_out == 0);
}

TEST_CASE("Work at or below the floor does not wake a held thread; work above does", "[parking]") {
  DispatcherParking parking(&CountPeerWordWake, nullptr);
  parking.SetFloor(5);
  std::atomic<bool> parked_seen{false};
  std::thread client([&] {
    while (!parking.Parked()) CpuRelax();
    parked_seen = true;
    parking.WakeForWork(5);  // could not go first: no wake-up asked for
    CHECK_FALSE(parking.WakeRequested());
    parking.WakeForWork(6);
  });
  const bool woken = parking.Park(kLostWakeUp, [] { return false; });
  client.join();
  parking.ClearFloor();
  CHECK(parked_seen.load());
  CHECK(woken);
}

TEST_CASE("A wake-up reaches a thread asleep on the peers' word", "[parking]") {
  g_peer_word_wakes = 0;
  DispatcherParking parking(&CountPeerWordWake, nullptr);
  parking.EnterPeerWordPark(/*floor=*/3);
  CHECK(parking.Parked());
  CHECK(parking.OnPeerWord());
  parking.WakeForWork(3);  // at the floor: nothing
  CHECK(g_peer_word_wakes.load() == 0);
  parking.WakeForWork(4);
  CHECK(g_peer_word_wakes.load() == 1);
  CHECK(parking.LeavePeerWordPark());
  CHECK_FALSE(parking.Parked());
  CHECK_FALSE(parking.OnPeerWord());
  parking.Wake();  // no longer on the word: the request waits for the next park
  CHECK(g_peer_word_wakes.load() == 1);
  CHECK(parking.Park(kLostWakeUp, [] { return false; }));
  CHECK(parking.sleeps() == 1);  // the word's sleep; the last park found its request at once
}

TEST_CASE("Threads waiting for issues are all woken as the count passes them", "[parking]") {
  DispatcherParking parking(&CountPeerWordWake, nullptr);
  constexpr int kWaiters = 6;
  constexpr uint64_t kIssues = 20000;
  std::atomic<uint64_t> issued{0};
  std::vector<std::thread> waiters;
  std::atomic<int> done{0};
  for (int w = 0; w < kWaiters; ++w) {
    waiters.emplace_back([&, w] {
      // Each waits for a series of counts, some already passed, some far ahead.
      for (uint64_t target = w + 1; target <= kIssues; target += 997 + w) {
        parking.WaitUntil([&] { return issued.load(std::memory_order_seq_cst) >= target; });
      }
      ++done;
    });
  }
  for (uint64_t i = 0; i < kIssues; ++i) {
    issued.fetch_add(1, std::memory_order_seq_cst);
    parking.NotifyIssued();
  }
  for (std::thread& t : waiters) t.join();
  CHECK(done.load() == kWaiters);
}

TEST_CASE("A stop wakes the waits that end when the dispatcher stops", "[parking]") {
  DispatcherParking parking(&CountPeerWordWake, nullptr);
  std::atomic<bool> stop{false};
  std::thread waiter(
      [&] { parking.WaitUntil([&] { return stop.load(std::memory_order_seq_cst); }); });
  stop.store(true, std::memory_order_seq_cst);
  parking.WakeForStop();
  waiter.join();
  CHECK(stop.load());
}

}  // namespace
}  // namespace gpuprio::scheduler
