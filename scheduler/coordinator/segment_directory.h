// The directory that holds one user's (or one share group's) segments inside GPUPRIO_SHM_DIR.
// Its owner creates it with no access for anyone else, so no other user can create, replace or
// pre-create a segment in it. A name another user took first is passed over: the owner's
// processes meet in a randomly named directory instead, which each of them finds by ownership.
#ifndef GPUPRIO_SCHEDULER_COORDINATOR_SEGMENT_DIRECTORY_H_
#define GPUPRIO_SCHEDULER_COORDINATOR_SEGMENT_DIRECTORY_H_

#include <sys/stat.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "scheduler/coordinator/segment_options.h"

namespace gpuprio::coordinator {

class SegmentDirectory {
 public:
  // Opens (creating it if needed) the directory for `options` (shm_dir, share_gid).
  static absl::StatusOr<SegmentDirectory> Open(const SegmentOptions& options);

  SegmentDirectory(SegmentDirectory&& other) noexcept;
  SegmentDirectory& operator=(SegmentDirectory&& other) noexcept;
  ~SegmentDirectory();

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

 private:
  SegmentDirectory(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}

  int fd_ = -1;
  std::string path_;
};

// "gpuprio-v<layout>-u<uid>" or, shared by a group, "gpuprio-v<layout>-g<gid>": the directory's
// preferred name; another user's entry by that name makes its owner's processes use
// "<that name>.<16 hex digits>".
std::string SegmentDirectoryName(uint32_t uid, int64_t share_gid);

// Whether a directory's stat makes it the one for `share_gid` (-1: this user's): a directory
// (not a link), this user's with no access for others, or the group's with no access for others.
absl::Status CheckSegmentDirectory(const std::string& path, const struct stat& st,
                                   int64_t share_gid);

}  // namespace gpuprio::coordinator

#endif  // GPUPRIO_SCHEDULER_COORDINATOR_SEGMENT_DIRECTORY_H_
