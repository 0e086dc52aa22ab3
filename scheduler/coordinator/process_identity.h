// Telling whether the process that owns a slot still exists: pid, start time (a reused pid has a
// different one) and pid namespace (pids of another namespace mean nothing here).
#ifndef GPUPRIO_SCHEDULER_COORDINATOR_PROCESS_IDENTITY_H_
#define GPUPRIO_SCHEDULER_COORDINATOR_PROCESS_IDENTITY_H_

#include <cstdint>
#include <optional>

namespace gpuprio::coordinator {

struct ProcessIdentity {
  uint32_t pid = 0;
  uint64_t start_time_ticks = 0;
  uint64_t pid_namespace = 0;
};

// This process's identity (start time from /proc/self/stat; 0 where /proc cannot be read).
ProcessIdentity OwnIdentity();

// Field 22 of /proc/<pid>/stat, or nullopt if the process does not exist or is a zombie.
std::optional<uint64_t> StartTimeTicks(uint32_t pid);

enum class Liveness {
  kAlive,
  kGone,     // no such process, a zombie, or a different process with the same pid
  kUnknown,  // another pid namespace: only the heartbeat can tell
};

// Whether `owner` is still running, seen from a process whose pid namespace is `own_namespace`.
Liveness CheckLiveness(const ProcessIdentity& owner, uint64_t own_namespace);

}  // namespace gpuprio::coordinator

#endif  // GPUPRIO_SCHEDULER_COORDINATOR_PROCESS_IDENTITY_H_
