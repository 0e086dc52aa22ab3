// Who a slot's owner is, as `gpuprio top` shows it: pid, start time (a reused pid has a different
// one) and pid namespace (pids of another namespace mean nothing here). Whether the owner is
// alive is told by its slot lock, not by these (segment_layout.h).
#ifndef GPUPRIO_SCHEDULER_COORDINATOR_PROCESS_IDENTITY_H_
#define GPUPRIO_SCHEDULER_COORDINATOR_PROCESS_IDENTITY_H_

#include <cstdint>

namespace gpuprio::coordinator {

struct ProcessIdentity {
  uint32_t pid = 0;
  uint64_t start_time_ticks = 0;
  uint64_t pid_namespace = 0;
};

// This process's identity (start time from /proc/self/stat; 0 where /proc cannot be read).
ProcessIdentity OwnIdentity();

}  // namespace gpuprio::coordinator

#endif  // GPUPRIO_SCHEDULER_COORDINATOR_PROCESS_IDENTITY_H_
