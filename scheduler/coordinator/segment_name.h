// The name of a GPU's shared-memory segment: which processes meet in it (the same user, or the
// members of one group, in one domain) and which GPU it is for.
#ifndef GPUPRIO_SCHEDULER_COORDINATOR_SEGMENT_NAME_H_
#define GPUPRIO_SCHEDULER_COORDINATOR_SEGMENT_NAME_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace gpuprio::coordinator {

inline constexpr absl::string_view kDefaultDomain = "default";

// A domain is 1-64 characters of [A-Za-z0-9_.-] (it becomes part of a file name).
bool ValidDomain(absl::string_view domain);

// The shm_open name, "/gpuprio-v<layout>-u<uid>-<domain>-<uuid hex>" for a per-user segment, or
// "...-g<gid>-..." for one shared by a group (share_gid >= 0). `domain` must be valid.
std::string SegmentName(absl::string_view domain, uint32_t uid, int64_t share_gid,
                        const uint8_t (&uuid)[16]);

// The GPU's UUID as nvidia-smi prints it: "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
std::string UuidString(const uint8_t (&uuid)[16]);

}  // namespace gpuprio::coordinator

#endif  // GPUPRIO_SCHEDULER_COORDINATOR_SEGMENT_NAME_H_
