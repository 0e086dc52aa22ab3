// One GPU's shared-memory segment, created or opened and checked: the directory it lives in, the
// file's owner, mode and size, then the header (magic, layout version, sizes, GPU). Anything else
// is refused with a status that says what was found and what to do, and the caller schedules
// locally. The segment also carries the slot locks that tell live processes from dead ones.
#ifndef GPUPRIO_SCHEDULER_COORDINATOR_DEVICE_SEGMENT_H_
#define GPUPRIO_SCHEDULER_COORDINATOR_DEVICE_SEGMENT_H_

#include <sys/stat.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "scheduler/coordinator/segment_layout.h"
#include "scheduler/coordinator/segment_options.h"

namespace gpuprio::coordinator {

// The checks of an existing segment file's stat: a regular file, this user's with mode 0600 (or,
// shared, the group's with no access for others). OK, or why it is refused.
absl::Status CheckSegmentFile(const std::string& path, const struct stat& st,
                              const SegmentOptions& options);

// The segment file's name in its directory: "<domain>-<GPU uuid, 32 hex digits>".
std::string SegmentFileName(const std::string& domain, const uint8_t (&uuid)[16]);

class DeviceSegment {
 public:
  static absl::StatusOr<std::unique_ptr<DeviceSegment>> OpenOrCreate(
      const SegmentOptions& options, const uint8_t (&uuid)[16]);
  // Closes the file (releasing this process's slot lock) and retires the mapping; the segment
  // itself stays for the other processes.
  ~DeviceSegment();
  DeviceSegment(const DeviceSegment&) = delete;
  DeviceSegment& operator=(const DeviceSegment&) = delete;

  SegmentHeader& header() const { return *header_; }
  ProcessSlot& slot(uint32_t i) const { return slots_[i]; }
  const std::string& path() const { return path_; }
  bool created() const { return created_; }

  // Slot ownership (segment_layout.h): the lock on the slot's byte, taken without waiting (false:
  // another process holds it), released, and whether another process holds it now.
  bool LockSlot(uint32_t i) const;
  void UnlockSlot(uint32_t i) const;
  bool SlotLockedByOther(uint32_t i) const;

  // Whether the file shrank under the mapping (SIGBUS, survived): from then on its memory is
  // private zeros, and nothing in it is shared any more.
  bool lost() const;

 private:
  DeviceSegment(std::string path, int fd, void* base, bool created);

  std::string path_;
  int fd_;
  int registry_entry_;
  SegmentHeader* header_;
  ProcessSlot* slots_;
  bool created_;
};

}  // namespace gpuprio::coordinator

#endif  // GPUPRIO_SCHEDULER_COORDINATOR_DEVICE_SEGMENT_H_
