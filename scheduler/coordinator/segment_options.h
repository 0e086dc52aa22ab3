// Where a process looks for the shared segments of its GPUs, and whom it shares them with.
#ifndef GPUPRIO_SCHEDULER_COORDINATOR_SEGMENT_OPTIONS_H_
#define GPUPRIO_SCHEDULER_COORDINATOR_SEGMENT_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"

namespace gpuprio::coordinator {

struct SegmentOptions {
  std::string shm_dir = "/dev/shm";  // GPUPRIO_SHM_DIR: best a tmpfs every sharing process sees
  std::string domain = "default";    // GPUPRIO_DOMAIN
  int64_t share_gid = -1;            // GPUPRIO_SHARE_GROUP's gid; -1: per user, mode 0600
  // How long an opener waits for a segment's creator to finish setting it up.
  absl::Duration ready_timeout = absl::Seconds(2);
};

}  // namespace gpuprio::coordinator

#endif  // GPUPRIO_SCHEDULER_COORDINATOR_SEGMENT_OPTIONS_H_
