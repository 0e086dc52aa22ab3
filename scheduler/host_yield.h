// Host-side priority: a thread whose op was just queued behind a more important thread of this
// process that is launching right now steps aside until that thread goes quiet (bounded), so the
// important thread does not share the interpreter lock of a Python process with it.
#ifndef GPUPRIO_SCHEDULER_HOST_YIELD_H_
#define GPUPRIO_SCHEDULER_HOST_YIELD_H_

#include <cstdint>

#include "scheduler/priority_levels.h"

namespace gpuprio::scheduler {

class HostYield {
 public:
  // `max_wait_ns`: the longest one op's caller waits (0: never); `quiet_ns`: how long the more
  // important levels must launch nothing for the wait to end.
  HostYield(PriorityLevels* levels, uint64_t max_wait_ns, uint64_t quiet_ns);

  // After the calling thread queued an op of `priority` at `now_ns` (its submit time). Waits
  // while a more important level of this process launched within `quiet_ns` (seen as the
  // levels' op counters changing; the fast path reads no precise clock), as long as this level
  // has at least `max_wait_ns` of estimated GPU work in flight, so the wait idles no SM.
  // Returns how long it waited (ns).
  uint64_t AfterQueued(int priority, int64_t now_ns);

  // The ops submitted or issued on their callers at every level above `priority`: it changes
  // whenever a more important thread launches.
  uint64_t LaunchesAbove(int priority) const;

 private:
  PriorityLevels* const levels_;
  const uint64_t max_wait_ns_;
  const uint64_t quiet_ns_;
  const uint64_t id_;  // tells this instance's thread-local sightings from another's
};

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_HOST_YIELD_H_
