// What names a GPU's shared-memory segment: the domain (which processes meet in it, with the
// directory that says whose it is: segment_directory.h) and the GPU's UUID.
#ifndef GPUPRIO_SCHEDULER_COORDINATOR_SEGMENT_NAME_H_
#define GPUPRIO_SCHEDULER_COORDINATOR_SEGMENT_NAME_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace gpuprio::coordinator {

inline constexpr absl::string_view kDefaultDomain = "default";

// A domain is 1-64 characters of [A-Za-z0-9_.-] (it becomes part of a file name).
bool ValidDomain(absl::string_view domain);

// The GPU's UUID as nvidia-smi prints it: "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
std::string UuidString(const uint8_t (&uuid)[16]);

}  // namespace gpuprio::coordinator

#endif  // GPUPRIO_SCHEDULER_COORDINATOR_SEGMENT_NAME_H_
