#include "scheduler/coordinator/segment_directory.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "scheduler/base/logging.h"
#include "scheduler/coordinator/segment_layout.h"

namespace gpuprio::coordinator {
namespace {

// Owner rwx; shared: group rwx and setgid, so the segments created in it get the group too.
mode_t DirectoryMode(int64_t share_gid) { return share_gid >= 0 ? 02770 : 0700; }

// Opens `name` in `parent` as a directory, never through a symbolic link; -1 with errno set.
int OpenDirectoryAt(int parent, const std::string& name) {
  return openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

// `name` in `parent`, opened if it is the right directory for `share_gid`: its fd, or -1 with
// `why` saying what it is instead (empty if it does not exist).
int OpenIfValid(int parent, const std::string& shm_dir, const std::string& name,
                int64_t share_gid, std::string* why) {
  why->clear();
  const int fd = OpenDirectoryAt(parent, name);
  if (fd < 0) {
    if (errno != ENOENT) {
      *why = absl::StrFormat("%s/%s is not a directory this process can open (%s)", shm_dir, name,
                             std::strerror(errno));
    }
    return -1;
  }
  struct stat st;
  absl::Status s = fstat(fd, &st) == 0
                       ? CheckSegmentDirectory(absl::StrCat(shm_dir, "/", name), st, share_gid)
                       : absl::InternalError(std::strerror(errno));
  if (!s.ok()) {
    close(fd);
    *why = std::string(s.message());
    return -1;
  }
  return fd;
}

// Creates `name` in `parent` for `share_gid`, its mode set whatever the umask. EEXIST is no
// error (another process of the same owner may have won the race).
absl::Status Create(int parent, const std::string& shm_dir, const std::string& name,
                    int64_t share_gid) {
  if (mkdirat(parent, name.c_str(), 0700) != 0) {
    if (errno == EEXIST) return absl::OkStatus();
    return absl::InternalError(absl::StrFormat("cannot create %s/%s: %s", shm_dir, name,
                                               std::strerror(errno)));
  }
  const int fd = OpenDirectoryAt(parent, name);
  if (fd < 0) return absl::InternalError(std::strerror(errno));
  // The group first: until it is set, the directory is this user's alone (mode 0700).
  const bool ok =
      (share_gid < 0 || fchown(fd, static_cast<uid_t>(-1), static_cast<gid_t>(share_gid)) == 0) &&
      fchmod(fd, DirectoryMode(share_gid)) == 0;
  const int err = errno;
  close(fd);
  if (!ok) {
    unlinkat(parent, name.c_str(), AT_REMOVEDIR);
    return absl::InternalError(absl::StrFormat("cannot set up %s/%s: %s", shm_dir, name,
                                               std::strerror(err)));
  }
  return absl::OkStatus();
}

// The first (by name) valid "<preferred>.<hex>" directory in `parent`; -1 if none.
int FindAlternate(int parent, const std::string& shm_dir, const std::string& preferred,
                  int64_t share_gid, std::string* found) {
  const int scan_fd = dup(parent);
  if (scan_fd < 0) return -1;
  DIR* dir = fdopendir(scan_fd);
  if (dir == nullptr) {
    close(scan_fd);
    return -1;
  }
  rewinddir(dir);  // the duplicate shares `parent`'s offset, at the end after an earlier scan
  const std::string prefix = preferred + ".";
  std::vector<std::string> names;
  while (const dirent* entry = readdir(dir)) {
    if (absl::StartsWith(entry->d_name, prefix)) names.emplace_back(entry->d_name);
  }
  closedir(dir);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    std::string why;
    const int fd = OpenIfValid(parent, shm_dir, name, share_gid, &why);
    if (fd >= 0) {
      *found = name;
      return fd;
    }
  }
  return -1;
}

}  // namespace

std::string SegmentDirectoryName(uint32_t uid, int64_t share_gid) {
  return share_gid >= 0 ? absl::StrCat("gpuprio-v", kLayoutVersion, "-g", share_gid)
                        : absl::StrCat("gpuprio-v", kLayoutVersion, "-u", uid);
}

absl::Status CheckSegmentDirectory(const std::string& path, const struct stat& st,
                                   int64_t share_gid) {
  if (!S_ISDIR(st.st_mode)) return absl::FailedPreconditionError(path + " is not a directory");
  const mode_t mode = st.st_mode & 07777;
  if (share_gid >= 0) {
    if (static_cast<int64_t>(st.st_gid) != share_gid) {
      return absl::FailedPreconditionError(
          absl::StrFormat("%s belongs to group %u, not %d", path, st.st_gid, share_gid));
    }
    if ((mode & 0007) != 0 || (mode & 0070) != 0070) {
      return absl::FailedPreconditionError(
          absl::StrFormat("%s has mode %04o, not 2770", path, mode));
    }
    return absl::OkStatus();
  }
  if (st.st_uid != geteuid()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s belongs to user %u, not to this user (%u)", path, st.st_uid, geteuid()));
  }
  if ((mode & 0077) != 0) {
    return absl::FailedPreconditionError(absl::StrFormat("%s has mode %04o, not 0700", path, mode));
  }
  return absl::OkStatus();
}

absl::StatusOr<SegmentDirectory> SegmentDirectory::Open(const SegmentOptions& options) {
  const std::string& shm_dir = options.shm_dir;
  const int parent = open(shm_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (parent < 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "cannot open GPUPRIO_SHM_DIR %s: %s", shm_dir, std::strerror(errno)));
  }
  const std::string preferred = SegmentDirectoryName(geteuid(), options.share_gid);
  std::string why;
  int fd = OpenIfValid(parent, shm_dir, preferred, options.share_gid, &why);
  if (fd < 0 && why.empty()) {
    if (absl::Status s = Create(parent, shm_dir, preferred, options.share_gid); !s.ok()) {
      close(parent);
      return s;
    }
    fd = OpenIfValid(parent, shm_dir, preferred, options.share_gid, &why);
  }
  if (fd >= 0) {
    close(parent);
    return SegmentDirectory(fd, absl::StrCat(shm_dir, "/", preferred));
  }
  // The preferred name is someone else's (or not a directory): it must not decide whether this
  // user coordinates. Every process of this owner settles on the first valid alternate by name;
  // one that finds none creates one and looks again, so two creating at once still meet.
  std::string name;
  fd = FindAlternate(parent, shm_dir, preferred, options.share_gid, &name);
  if (fd < 0) {
    uint64_t random = 0;
    if (getrandom(&random, sizeof(random), 0) != sizeof(random)) random = getpid();
    const std::string mine = absl::StrFormat("%s.%016x", preferred, random);
    if (absl::Status s = Create(parent, shm_dir, mine, options.share_gid); !s.ok()) {
      close(parent);
      return s;
    }
    fd = FindAlternate(parent, shm_dir, preferred, options.share_gid, &name);
    if (name != mine) unlinkat(parent, mine.c_str(), AT_REMOVEDIR);  // empty: another won
  }
  close(parent);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s; no directory for this user's segments could be set up in %s", why,
                        shm_dir));
  }
  Logf(LogLevel::kWarning, "%s; this %s's segments are in %s/%s instead", why.c_str(),
       options.share_gid >= 0 ? "group" : "user", shm_dir.c_str(), name.c_str());
  return SegmentDirectory(fd, absl::StrCat(shm_dir, "/", name));
}

SegmentDirectory::SegmentDirectory(SegmentDirectory&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

SegmentDirectory& SegmentDirectory::operator=(SegmentDirectory&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

SegmentDirectory::~SegmentDirectory() {
  if (fd_ >= 0) close(fd_);
}

}  // namespace gpuprio::coordinator
