// Host-side priority: a thread whose op was just queued behind a more important thread of this
// process that is launching, or whose work is running, steps aside until that thread goes quiet
// (bounded), so the important thread does not share the interpreter lock of a Python process
// with it.
#ifndef GPUPRIO_SCHEDULER_HOST_YIELD_H_
#define GPUPRIO_SCHEDULER_HOST_YIELD_H_

#include <cstdint>

#include "scheduler/base/tls.h"
#include "scheduler/priority_levels.h"

namespace gpuprio::scheduler {
namespace internal_host_yield {

// What the calling thread saw at its last queued op: the counter of launches above that op's
// level, when, and how many of the launches since were its own (a thread that launches at two
// levels, through streams of two CUDA priorities, must not wait for itself).
struct ThreadState {
  uint64_t owner;  // the HostYield's id (one per scheduler)
  int priority;
  uint64_t launches_above;
  int64_t at_ns;
  uint64_t own_above;
  // It ever launched above the level of its queued op: the work in flight above may be its own,
  // so only other threads' launches make it wait.
  bool launched_above;
};
extern GPUPRIO_THREAD_LOCAL ThreadState t_host_yield;

}  // namespace internal_host_yield

class HostYield {
 public:
  // `max_wait_ns`: the longest one op's caller waits (0: never); `quiet_ns`: how long the more
  // important levels must launch nothing for the wait to end.
  HostYield(PriorityLevels* levels, uint64_t max_wait_ns, uint64_t quiet_ns,
            int64_t held_backlog_ops);

  // After the calling thread queued a kernel launch of `priority` at `now_ns` (its submit time).
  // Waits while a more important level of this process launched within `quiet_ns` (seen as the
  // levels' op counters changing; the fast path reads no precise clock) or, for a thread that
  // never launched above this level itself, has work on the GPU; and only while this level has
  // work to spare, checked at every step: at least `max_wait_ns` of estimated GPU work in
  // flight, or `held_backlog_ops` ops queued and not issued (most often held by the policy, so
  // running ahead of them gains nothing). Both counts are the process's, over all devices.
  // Returns how long it waited (ns).
  uint64_t AfterQueued(int priority, int64_t now_ns);

  // The calling thread launched an op of `priority` (queued, on the fast path, or inline).
  static void NoteOwnLaunch(int priority) {
    internal_host_yield::ThreadState& t = internal_host_yield::t_host_yield;
    if (priority > t.priority) {
      ++t.own_above;
      t.launched_above = true;
    }
  }

  // The ops submitted or issued on their callers at every level above `priority`: it changes
  // whenever a more important thread launches.
  uint64_t LaunchesAbove(int priority) const;
  // Whether a level above `priority` has work in flight on the GPU (any device).
  bool BusyAbove(int priority) const;

 private:
  // Whether `level` has enough work queued or in flight that its thread's wait idles no SM.
  bool WorkToSpare(const PriorityLevelStats& level) const {
    return level.in_flight_estimated_ns.load(std::memory_order_relaxed) >= max_wait_ns_ ||
           level.ops_unissued.load(std::memory_order_relaxed) >= held_backlog_ops_;
  }

  PriorityLevels* const levels_;
  const uint64_t max_wait_ns_;
  const uint64_t quiet_ns_;
  const int64_t held_backlog_ops_;
  const uint64_t id_;  // tells this instance's thread-local sightings from another's
};

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_HOST_YIELD_H_
