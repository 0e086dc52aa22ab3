// base::AtomicMax, the one high-water-mark helper: it never lowers its target, its release form
// publishes the writer's earlier writes, and of many threads raising one target at once the
// largest value stays.
#include "scheduler/base/atomic_max.h"

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "catch2/catch.hpp"

namespace {

using gpuprio::base::AtomicMax;

TEST_CASE("AtomicMax raises its target and never lowers it", "[base]") {
  std::atomic<uint64_t> delay_max{0};
  AtomicMax(delay_max, uint64_t{500});
  CHECK(delay_max.load() == 500);
  AtomicMax(delay_max, uint64_t{200});
  CHECK(delay_max.load() == 500);
  AtomicMax(delay_max, uint64_t{501});
  CHECK(delay_max.load() == 501);

  // Negative priorities, an int into an atomic<int32_t>, and the seq_cst form.
  std::atomic<int32_t> level{-100};
  AtomicMax(level, -5, std::memory_order_seq_cst);
  CHECK(level.load() == -5);
  AtomicMax(level, -7, std::memory_order_seq_cst);
  CHECK(level.load() == -5);
}

TEST_CASE("The release form publishes what was written before it", "[base]") {
  // A reader that sees the raised value (acquire) sees the writer's earlier plain write: under
  // ThreadSanitizer a relaxed raise would be reported as a race on `payload`.
  int payload = 0;
  std::atomic<int> level{-1};
  std::thread writer([&] {
    payload = 42;
    AtomicMax(level, 3, std::memory_order_release);
  });
  while (level.load(std::memory_order_acquire) < 3) {
  }
  CHECK(payload == 42);
  writer.join();
  AtomicMax(level, 2, std::memory_order_release);
  CHECK(level.load() == 3);
}

TEST_CASE("Of threads raising one target at once, the largest value stays", "[base]") {
  constexpr int kThreads = 8;
  constexpr int kValues = 20000;
  for (int round = 0; round < 5; ++round) {
    std::atomic<int> target{-1};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        while (!go.load()) {
        }
        // Interleaved values: each thread's largest is near the top, so stores race to the end.
        for (int i = 0; i < kValues; ++i) AtomicMax(target, i * kThreads + t);
      });
    }
    go.store(true);
    for (auto& thread : threads) thread.join();
    CHECK(target.load() == kValues * kThreads - 1);
  }
}

}  // namespace
