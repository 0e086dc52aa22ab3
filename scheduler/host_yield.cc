#include "scheduler/host_yield.h"

#include <time.h>

#include <algorithm>
#include <atomic>

#include "scheduler/base/clock.h"

namespace gpuprio::scheduler {
namespace internal_host_yield {

GPUPRIO_THREAD_LOCAL ThreadState t_host_yield = {0, kMinPriority - 1, 0, 0, 0, false};

}  // namespace internal_host_yield
namespace {

using internal_host_yield::t_host_yield;
using internal_host_yield::ThreadState;

using base::SteadyNowNs;

std::atomic<uint64_t> g_next_id{1};

void SleepNs(int64_t ns) {
  timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  nanosleep(&ts, nullptr);
}

}  // namespace

HostYield::HostYield(PriorityLevels* levels, uint64_t max_wait_ns, uint64_t quiet_ns,
                     int64_t held_backlog_ops)
    : levels_(levels),
      max_wait_ns_(max_wait_ns),
      quiet_ns_(quiet_ns),
      held_backlog_ops_(held_backlog_ops),
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

bool HostYield::BusyAbove(int priority) const {
  for (int p = levels_->MaxSeen(); p > priority; --p) {
    if (levels_->At(p).in_flight_ops.load(std::memory_order_relaxed) > 0) return true;
  }
  return false;
}

uint64_t HostYield::AfterQueued(int priority, int64_t now_ns) {
  if (max_wait_ns_ == 0 || levels_->MaxSeen() <= priority) return 0;
  ThreadState& last = t_host_yield;
  uint64_t launches = LaunchesAbove(priority);
  // Another thread launched above this level since this thread's last queued op (the launches
  // counted are more than this thread's own), and lately, or its work is still running: a
  // thread that launched and now waits for its result (a token copied to the host) launches
  // again as soon as it has it, and needs the interpreter lock at that moment.
  // A thread that launches above this level itself may be waiting for its own work there, so
  // for it only launches count.
  const bool same_owner = last.owner == id_;
  const bool launched_above = same_owner && last.launched_above;
  const bool watch_work = !launched_above;
  const bool launched_lately = same_owner && last.priority == priority &&
                               launches - last.launches_above > last.own_above &&
                               (now_ns - last.at_ns <= static_cast<int64_t>(quiet_ns_) ||
                                (watch_work && BusyAbove(priority)));
  last = {id_, priority, launches, now_ns, 0, launched_above};
  if (!launched_lately) return 0;
  PriorityLevelStats& level = levels_->At(priority);
  if (!WorkToSpare(level)) return 0;
  // Sleeps of half the quiet time: the wait ends at most that long after the important thread's
  // last launch or its work's end, and each sleep is long enough for the thread it makes way
  // for to run.
  const int64_t step_ns = std::max<int64_t>(static_cast<int64_t>(quiet_ns_ / 2), 1000);
  const int64_t deadline = now_ns + static_cast<int64_t>(max_wait_ns_);
  int64_t t = now_ns;
  while (t < deadline) {
    SleepNs(std::min(step_ns, deadline - t));
    t = SteadyNowNs();
    const uint64_t seen = LaunchesAbove(priority);
    if (seen == launches && !(watch_work && BusyAbove(priority))) break;  // quiet for a step
    launches = seen;
    if (!WorkToSpare(level)) break;  // its backlog drained: the GPU may need its next ops
  }
  last = {id_, priority, launches, t, 0, launched_above};
  const uint64_t waited = static_cast<uint64_t>(t - now_ns);
  level.host_yields.fetch_add(1, std::memory_order_relaxed);
  level.host_yield_ns_sum.fetch_add(waited, std::memory_order_relaxed);
  return waited;
}

}  // namespace gpuprio::scheduler
