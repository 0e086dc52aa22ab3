// HostYield: when a queued op's caller steps aside for a more important thread of its process,
// and that the wait ends when that thread goes quiet or at its bound.
#include "scheduler/host_yield.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "catch2/catch.hpp"
#include "scheduler/base/clock.h"
#include "scheduler/priority_levels.h"

namespace {

using gpuprio::base::SteadyNowNs;
using gpuprio::scheduler::HostYield;
using gpuprio::scheduler::PriorityLevels;

constexpr int kLow = -1;
constexpr int kHigh = 1;
constexpr uint64_t kMs = 1'000'000;
constexpr int64_t kBacklog = 16;  // ops held in the queue that stand in for work in flight

// Levels where the high level has been seen and the low one has `in_flight_ns` of GPU work.
void Prepare(PriorityLevels* levels, uint64_t in_flight_ns) {
  levels->NoteSubmit(kLow, SteadyNowNs());
  levels->NoteSubmit(kHigh, SteadyNowNs());
  levels->At(kLow).in_flight_estimated_ns.store(in_flight_ns);
}

void Launch(PriorityLevels* levels) { levels->At(kHigh).ops_on_caller.fetch_add(1); }

// An important thread that keeps launching, `pause` apart, until destroyed.
class KeepLaunching {
 public:
  KeepLaunching(PriorityLevels* levels, std::chrono::milliseconds pause)
      : levels_(levels), thread_([this, pause] {
          while (!stop_.load()) {
            Launch(levels_);
            if (pause.count() > 0) {
              std::this_thread::sleep_for(pause);
            } else {
              std::this_thread::yield();
            }
          }
        }) {}
  ~KeepLaunching() {
    stop_.store(true);
    thread_.join();
  }

  // Returns once it launched again after the call: a fixed sleep is not enough on a loaded
  // sanitizer machine, where it may not run at all for a while (then nothing was launched since
  // the caller's previous op, and the caller rightly does not wait).
  void AwaitLaunch() const {
    const uint64_t seen = levels_->At(kHigh).ops_on_caller.load();
    while (levels_->At(kHigh).ops_on_caller.load() == seen) std::this_thread::yield();
  }

 private:
  PriorityLevels* const levels_;
  std::atomic<bool> stop_{false};
  std::thread thread_;  // last: it starts once the members it reads exist
};

TEST_CASE("HostYield: no level above, or off, or no launch since the last op: no wait",
          "[scheduler][host_yield]") {
  PriorityLevels levels;
  levels.NoteSubmit(kLow, SteadyNowNs());
  levels.At(kLow).in_flight_estimated_ns.store(100 * kMs);
  HostYield yield(&levels, 50 * kMs, 20 * kMs, kBacklog);
  CHECK(yield.AfterQueued(kLow, SteadyNowNs()) == 0);  // nothing above was ever seen

  levels.NoteSubmit(kHigh, SteadyNowNs());
  Launch(&levels);
  CHECK(yield.AfterQueued(kLow, SteadyNowNs()) == 0);  // the first sighting proves no recency
  CHECK(yield.AfterQueued(kLow, SteadyNowNs()) == 0);  // nothing launched since
  CHECK(yield.AfterQueued(kHigh, SteadyNowNs()) == 0);  // nothing above the top level
  CHECK(levels.At(kLow).host_yields.load() == 0);

  HostYield off(&levels, 0, 20 * kMs, kBacklog);
  CHECK(off.AfterQueued(kLow, SteadyNowNs()) == 0);
  Launch(&levels);
  CHECK(off.AfterQueued(kLow, SteadyNowNs()) == 0);
}

TEST_CASE("HostYield: a launch since the last op, but too little work in flight: no wait",
          "[scheduler][host_yield]") {
  PriorityLevels levels;
  Prepare(&levels, 10 * kMs);
  // It would wait up to 50 ms; 10 ms are in flight.
  HostYield yield(&levels, 50 * kMs, 20 * kMs, kBacklog);
  CHECK(yield.AfterQueued(kLow, SteadyNowNs()) == 0);
  Launch(&levels);
  CHECK(yield.AfterQueued(kLow, SteadyNowNs()) == 0);
  CHECK(levels.At(kLow).host_yields.load() == 0);
}

TEST_CASE("HostYield: a launch within the quiet time: waits one quiet step, then goes on",
          "[scheduler][host_yield]") {
  PriorityLevels levels;
  Prepare(&levels, 10000 * kMs);
  // Quiet times of hundreds of milliseconds: a sanitizer build on a loaded machine may stall the
  // test thread for tens between two calls.
  HostYield yield(&levels, 5000 * kMs, 400 * kMs, kBacklog);
  CHECK(yield.AfterQueued(kLow, SteadyNowNs()) == 0);
  Launch(&levels);
  const uint64_t waited = yield.AfterQueued(kLow, SteadyNowNs());
  // One step (half the quiet time) with no launch ends it: far below the bound.
  CHECK(waited >= 200 * kMs);
  CHECK(waited < 4000 * kMs);
  CHECK(levels.At(kLow).host_yields.load() == 1);
  CHECK(levels.At(kLow).host_yield_ns_sum.load() == waited);
  // A launch longer ago than the quiet time is no reason to wait.
  Launch(&levels);
  CHECK(yield.AfterQueued(kLow, SteadyNowNs() + 800 * kMs) == 0);
}

TEST_CASE("HostYield: a thread never waits for its own launches at a higher level",
          "[scheduler][host_yield]") {
  PriorityLevels levels;
  Prepare(&levels, 10000 * kMs);
  HostYield yield(&levels, 5000 * kMs, 400 * kMs, kBacklog);
  CHECK(yield.AfterQueued(kLow, SteadyNowNs()) == 0);
  // This thread launches on a more important stream, then queues low work again.
  HostYield::NoteOwnLaunch(kHigh);
  Launch(&levels);
  HostYield::NoteOwnLaunch(kHigh);
  Launch(&levels);
  CHECK(yield.AfterQueued(kLow, SteadyNowNs()) == 0);
  // Its own launches and another thread's: it waits for the other's.
  HostYield::NoteOwnLaunch(kHigh);
  Launch(&levels);
  Launch(&levels);
  CHECK(yield.AfterQueued(kLow, SteadyNowNs()) > 0);
  CHECK(levels.At(kLow).host_yields.load() == 1);
}

TEST_CASE("HostYield: while the important thread keeps launching, the wait lasts to its bound",
          "[scheduler][host_yield]") {
  PriorityLevels levels;
  Prepare(&levels, 2000 * kMs);
  HostYield yield(&levels, 600 * kMs, 400 * kMs, kBacklog);
  uint64_t waited = 0;
  {
    const KeepLaunching launcher(&levels, std::chrono::milliseconds(0));
    CHECK(yield.AfterQueued(kLow, SteadyNowNs()) == 0);
    launcher.AwaitLaunch();
    waited = yield.AfterQueued(kLow, SteadyNowNs());
  }
  CHECK(waited >= 600 * kMs);
  CHECK(waited < 10000 * kMs);
  // A thread of the important level itself never waits.
  CHECK(yield.AfterQueued(kHigh, SteadyNowNs()) == 0);
}

TEST_CASE("HostYield: the important level's work still running keeps the wait going",
          "[scheduler][host_yield]") {
  PriorityLevels levels;
  Prepare(&levels, 10000 * kMs);
  HostYield yield(&levels, 5000 * kMs, 400 * kMs, kBacklog);
  // This thread's previous op was long before the important thread's launch: by launches alone
  // it would not wait (the launch test above). The launch's work is still on the GPU.
  CHECK(yield.AfterQueued(kLow, SteadyNowNs() - 2000 * kMs) == 0);
  Launch(&levels);
  levels.At(kHigh).in_flight_ops.store(1);
  std::atomic<bool> waiting{false};
  std::thread completer([&] {
    while (!waiting.load()) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    levels.At(kHigh).in_flight_ops.store(0);  // the important work ends
  });
  // The submit time is read before the completer's clock starts, so a stall in between only
  // lengthens the measured wait.
  const int64_t submitted = SteadyNowNs();
  waiting.store(true);
  const uint64_t waited = yield.AfterQueued(kLow, submitted);
  completer.join();
  // It waited for the work to end (1.2 s), not for one quiet step (0.2 s), and not to the bound.
  CHECK(waited >= 1100 * kMs);
  CHECK(waited < 4900 * kMs);
  CHECK(levels.At(kLow).host_yields.load() == 1);
}

TEST_CASE("HostYield: ops held in the queue stand in for work in flight",
          "[scheduler][host_yield]") {
  PriorityLevels levels;
  Prepare(&levels, 0);  // nothing of the low level on the GPU
  HostYield yield(&levels, 5000 * kMs, 400 * kMs, kBacklog);
  CHECK(yield.AfterQueued(kLow, SteadyNowNs()) == 0);
  // One op short of the backlog: waiting could idle SMs the low level might use.
  levels.At(kLow).ops_unissued.store(kBacklog - 1);
  Launch(&levels);
  CHECK(yield.AfterQueued(kLow, SteadyNowNs()) == 0);
  // The policy holds a backlog of the low level's ops: running ahead adds only more of them.
  levels.At(kLow).ops_unissued.store(kBacklog);
  Launch(&levels);
  const uint64_t waited = yield.AfterQueued(kLow, SteadyNowNs());
  CHECK(waited >= 200 * kMs);  // one quiet step
  CHECK(waited < 4000 * kMs);
  CHECK(levels.At(kLow).host_yields.load() == 1);
}

TEST_CASE("HostYield: work in flight above does not start a wait without a launch since",
          "[scheduler][host_yield]") {
  PriorityLevels levels;
  Prepare(&levels, 10000 * kMs);
  HostYield yield(&levels, 5000 * kMs, 400 * kMs, kBacklog);
  levels.At(kHigh).in_flight_ops.store(1);
  CHECK(yield.AfterQueued(kLow, SteadyNowNs()) == 0);
  // The important level's work is running, but it launched nothing since this thread's last op.
  CHECK(yield.AfterQueued(kLow, SteadyNowNs()) == 0);
  CHECK(levels.At(kLow).host_yields.load() == 0);
}

TEST_CASE("HostYield: a thread that launches above itself does not wait for work in flight there",
          "[scheduler][host_yield]") {
  PriorityLevels levels;
  Prepare(&levels, 10000 * kMs);
  HostYield yield(&levels, 5000 * kMs, 400 * kMs, kBacklog);
  // Its previous low op long ago; since then it launched at the high level itself (its work is
  // what is in flight there), and another thread launched there too.
  CHECK(yield.AfterQueued(kLow, SteadyNowNs() - 2000 * kMs) == 0);
  HostYield::NoteOwnLaunch(kHigh);
  Launch(&levels);
  Launch(&levels);
  levels.At(kHigh).in_flight_ops.store(1);
  // Only a launch within the quiet time would make it wait: the work in flight does not.
  CHECK(yield.AfterQueued(kLow, SteadyNowNs()) == 0);
  CHECK(levels.At(kLow).host_yields.load() == 0);
}

TEST_CASE("HostYield: the wait ends when the level's backlog drains", "[scheduler][host_yield]") {
  PriorityLevels levels;
  Prepare(&levels, 0);
  HostYield yield(&levels, 5000 * kMs, 400 * kMs, kBacklog);
  levels.At(kLow).ops_unissued.store(kBacklog);
  CHECK(yield.AfterQueued(kLow, SteadyNowNs()) == 0);
  uint64_t waited = 0;
  {
    // The important thread keeps launching: only the drain ends the wait.
    const KeepLaunching launcher(&levels, std::chrono::milliseconds(20));
    std::thread drainer([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(600));
      levels.At(kLow).ops_unissued.store(0);  // the hold lifted and its ops were issued
    });
    launcher.AwaitLaunch();
    waited = yield.AfterQueued(kLow, SteadyNowNs());
    drainer.join();
  }
  CHECK(waited > 0);
  CHECK(waited < 4500 * kMs);  // not to the 5 s bound
}

}  // namespace
