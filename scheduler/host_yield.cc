#include "scheduler/host_yield.h"

#include <time.h>

#include <algorithm>
#include <atomic>

#include "scheduler/base/clock.h"
#include "scheduler/base/tls.h"

namespace gpuprio::scheduler {
namespace {

using base::SteadyNowNs;

// What the calling thread saw at its last queued op: the counter of launches above its level,
// and when. A change seen within quiet_ns is a launch within quiet_ns.
struct LastSeen {
  uint64_t owner;  // the HostYield's id (one per scheduler)
  int priority;
  uint64_t launches_above;
  int64_t at_ns;
};
GPUPRIO_THREAD_LOCAL LastSeen t_last_seen = {0, kMinPriority - 1, 0, 0};

std::atomic<uint64_t> g_next_id{1};

void SleepNs(int64_t ns) {
  timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  nanosleep(&ts, nullptr);
}

}  // namespace

HostYield::HostYield(PriorityLevels* levels, uint64_t max_wait_ns, uint64_t quiet_ns)
    : levels_(levels),
      max_wait_ns_(max_wait_ns),
      quiet_ns_(quiet_ns),
      id_(g_next_id.fetch_add(1, std::memory_order_relaxed)) {}

uint64_t HostYield::LaunchesAbove(int priority) const {
  uint64_t sum = 0;
  for (int p = levels_->MaxSeen(); p > priority; --p) {
    const PriorityLevelStats& level = levels_->At(p);
    sum += level.ops_submitted.load(std::memory_order_relaxed) +
           level.ops_on_caller.load(std::memory_order_relaxed);
  }
  return sum;
}

uint64_t HostYield::AfterQueued(int priority, int64_t now_ns) {
  if (max_wait_ns_ == 0 || levels_->MaxSeen() <= priority) return 0;
  LastSeen& last = t_last_seen;
  uint64_t launches = LaunchesAbove(priority);
  const bool launched_lately = last.owner == id_ && last.priority == priority &&
                               launches != last.launches_above &&
                               now_ns - last.at_ns <= static_cast<int64_t>(quiet_ns_);
  last = {id_, priority, launches, now_ns};
  if (!launched_lately) return 0;
  PriorityLevelStats& level = levels_->At(priority);
  if (level.in_flight_estimated_ns.load(std::memory_order_relaxed) < max_wait_ns_) return 0;
  // Sleeps of half the quiet time: the wait ends at most that long after the important thread's
  // last launch, and each sleep is long enough for the thread it makes way for to run.
  const int64_t step_ns = std::max<int64_t>(static_cast<int64_t>(quiet_ns_ / 2), 1000);
  const int64_t deadline = now_ns + static_cast<int64_t>(max_wait_ns_);
  int64_t t = now_ns;
  while (t < deadline) {
    SleepNs(std::min(step_ns, deadline - t));
    t = SteadyNowNs();
    const uint64_t seen = LaunchesAbove(priority);
    if (seen == launches) break;  // quiet for a step
    launches = seen;
  }
  last = {id_, priority, launches, t};
  const uint64_t waited = static_cast<uint64_t>(t - now_ns);
  level.host_yields.fetch_add(1, std::memory_order_relaxed);
  level.host_yield_ns_sum.fetch_add(waited, std::memory_order_relaxed);
  return waited;
}

}  // namespace gpuprio::scheduler
