// One GPU's shared-memory segment, created or opened and checked: the file's owner, mode and size,
// then the header (magic, layout version, sizes, GPU). Anything else is refused with a status that
// says what was found and what to do, and the caller schedules locally.
#ifndef GPUPRIO_SCHEDULER_COORDINATOR_DEVICE_SEGMENT_H_
#define GPUPRIO_SCHEDULER_COORDINATOR_DEVICE_SEGMENT_H_

#include <sys/stat.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "scheduler/coordinator/segment_layout.h"

namespace gpuprio::coordinator {

struct SegmentOptions {
  std::string domain = "default";  // GPUPRIO_DOMAIN
  int64_t share_gid = -1;          // GPUPRIO_SHARE_GROUP's gid; -1: per user, mode 0600
  // How long an opener waits for a segment's creator to finish setting it up.
  absl::Duration ready_timeout = absl::Seconds(2);
};

// The checks of an existing segment file's stat: a regular file, this user's with mode 0600 (or,
// shared, the group's with no access for others). OK, or why it is refused.
absl::Status CheckSegmentFile(const std::string& name, const struct stat& st,
                              const SegmentOptions& options);

class DeviceSegment {
 public:
  static absl::StatusOr<std::unique_ptr<DeviceSegment>> OpenOrCreate(
      const SegmentOptions& options, const uint8_t (&uuid)[16]);
  ~DeviceSegment();  // unmaps (the segment itself stays for the other processes)
  DeviceSegment(const DeviceSegment&) = delete;
  DeviceSegment& operator=(const DeviceSegment&) = delete;

  SegmentHeader& header() const { return *header_; }
  ProcessSlot& slot(uint32_t i) const { return slots_[i]; }
  const std::string& name() const { return name_; }
  bool created() const { return created_; }

 private:
  DeviceSegment(std::string name, void* base, bool created);

  std::string name_;
  void* base_;
  SegmentHeader* header_;
  ProcessSlot* slots_;
  bool created_;
};

}  // namespace gpuprio::coordinator

#endif  // GPUPRIO_SCHEDULER_COORDINATOR_DEVICE_SEGMENT_H_
