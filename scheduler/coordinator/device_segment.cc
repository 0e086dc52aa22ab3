#include "scheduler/coordinator/device_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "scheduler/coordinator/segment_directory.h"
#include "scheduler/coordinator/segment_name.h"
#include "scheduler/coordinator/segment_registry.h"

namespace gpuprio::coordinator {
namespace {

absl::Status Refuse(const std::string& path, absl::string_view why) {
  return absl::FailedPreconditionError(absl::StrFormat(
      "shared segment %s %s; remove it if no gpuprio process uses it (rm %s), or choose another "
      "GPUPRIO_DOMAIN",
      path, why, path));
}

mode_t SegmentMode(const SegmentOptions& options) { return options.share_gid >= 0 ? 0660 : 0600; }

absl::Status CheckHeader(const std::string& path, const SegmentHeader& h,
                         const uint8_t (&uuid)[16]) {
  if (std::memcmp(h.magic, kSegmentMagic, sizeof(kSegmentMagic)) != 0) {
    return Refuse(path, "is not a gpuprio segment (bad magic)");
  }
  if (h.layout_version != kLayoutVersion) {
    return Refuse(path, absl::StrFormat("has layout version %u, this gpuprio uses %u",
                                        h.layout_version, kLayoutVersion));
  }
  if (h.header_bytes != kHeaderBytes || h.slot_bytes != kSlotBytes || h.slot_count != kSlotCount) {
    return Refuse(path, "has a header of another shape");
  }
  if (std::memcmp(h.device_uuid, uuid, sizeof(uuid)) != 0) {
    return Refuse(path, "is for another GPU");
  }
  if (h.ready.load(std::memory_order_acquire) != kReadyWord) {
    return Refuse(path, "was never finished by its creator (no ready mark)");
  }
  return absl::OkStatus();
}

void* Map(int fd) {
  void* base = mmap(nullptr, kSegmentBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return base == MAP_FAILED ? nullptr : base;
}

struct flock SlotRange(uint32_t i, short type) {
  struct flock range {};
  range.l_type = type;
  range.l_whence = SEEK_SET;
  range.l_start = SlotLockOffset(i);
  range.l_len = 1;
  return range;
}

}  // namespace

std::string SegmentFileName(const std::string& domain, const uint8_t (&uuid)[16]) {
  std::string hex;
  for (uint8_t b : uuid) absl::StrAppendFormat(&hex, "%02x", b);
  return absl::StrCat(domain, "-", hex);
}

absl::Status CheckSegmentFile(const std::string& path, const struct stat& st,
                              const SegmentOptions& options) {
  if (!S_ISREG(st.st_mode)) return Refuse(path, "is not a regular file");
  const mode_t mode = st.st_mode & 07777;
  if (options.share_gid >= 0) {
    if (static_cast<int64_t>(st.st_gid) != options.share_gid) {
      return Refuse(path, absl::StrFormat("belongs to group %u, not %d", st.st_gid,
                                          options.share_gid));
    }
    if ((mode & 0007) != 0 || (mode & 0060) != 0060) {
      return Refuse(path, absl::StrFormat("has mode %04o, not 0660", mode));
    }
    return absl::OkStatus();
  }
  if (st.st_uid != geteuid()) {
    return Refuse(path, absl::StrFormat("belongs to user %u, not to this user (%u)", st.st_uid,
                                        geteuid()));
  }
  if ((mode & 0077) != 0) return Refuse(path, absl::StrFormat("has mode %04o, not 0600", mode));
  return absl::OkStatus();
}

DeviceSegment::DeviceSegment(std::string path, int fd, void* base, bool created)
    : path_(std::move(path)),
      fd_(fd),
      registry_entry_(RegisterSegment(base, kSegmentBytes, fd)),
      header_(static_cast<SegmentHeader*>(base)),
      slots_(reinterpret_cast<ProcessSlot*>(static_cast<char*>(base) + kHeaderBytes)),
      created_(created) {}

DeviceSegment::~DeviceSegment() {
  if (registry_entry_ >= 0) {
    ReleaseSegment(registry_entry_);  // closes fd_
  } else {
    munmap(header_, kSegmentBytes);
    close(fd_);
  }
}

bool DeviceSegment::LockSlot(uint32_t i) const {
  struct flock range = SlotRange(i, F_WRLCK);
  return fcntl(fd_, F_OFD_SETLK, &range) == 0;
}

void DeviceSegment::UnlockSlot(uint32_t i) const {
  struct flock range = SlotRange(i, F_UNLCK);
  fcntl(fd_, F_OFD_SETLK, &range);
}

bool DeviceSegment::SlotLockedByOther(uint32_t i) const {
  struct flock range = SlotRange(i, F_WRLCK);
  // A failed query says nothing: the slot is taken as live (a live process is never reclaimed;
  // a dead one's slot waits for the next check).
  if (fcntl(fd_, F_OFD_GETLK, &range) != 0) return true;
  return range.l_type != F_UNLCK;
}

bool DeviceSegment::lost() const { return SegmentLost(registry_entry_); }

absl::StatusOr<std::unique_ptr<DeviceSegment>> DeviceSegment::OpenOrCreate(
    const SegmentOptions& options, const uint8_t (&uuid)[16]) {
  if (!ValidDomain(options.domain)) {
    return absl::InvalidArgumentError(absl::StrCat("invalid domain \"", options.domain, "\""));
  }
  absl::StatusOr<SegmentDirectory> dir = SegmentDirectory::Open(options);
  if (!dir.ok()) return dir.status();
  const std::string name = SegmentFileName(options.domain, uuid);
  const std::string path = absl::StrCat(dir->path(), "/", name);
  const mode_t mode = SegmentMode(options);

  int fd = openat(dir->fd(), name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                  mode);
  if (fd >= 0) {
    // Created here: the mode regardless of the umask, the group if shared (checked: a group the
    // file cannot be given would leave every other member refusing it), then the size and the
    // header. The ready word is stored last; openers wait for it.
    struct stat st;
    bool ok = fchmod(fd, mode) == 0 &&
              (options.share_gid < 0 || fchown(fd, static_cast<uid_t>(-1),
                                                static_cast<gid_t>(options.share_gid)) == 0) &&
              fstat(fd, &st) == 0;
    int err = errno;
    if (ok && options.share_gid >= 0 && static_cast<int64_t>(st.st_gid) != options.share_gid) {
      ok = false;
      err = EPERM;
    }
    if (ok && ftruncate(fd, static_cast<off_t>(kSegmentBytes)) != 0) {
      ok = false;
      err = errno;
    }
    if (!ok) {
      close(fd);
      unlinkat(dir->fd(), name.c_str(), 0);
      return absl::InternalError(
          absl::StrFormat("cannot set up %s: %s", path, std::strerror(err)));
    }
    void* base = Map(fd);
    const int map_errno = errno;
    if (base == nullptr) {
      close(fd);
      unlinkat(dir->fd(), name.c_str(), 0);
      return absl::InternalError(
          absl::StrFormat("cannot map %s: %s", path, std::strerror(map_errno)));
    }
    auto segment =
        std::unique_ptr<DeviceSegment>(new DeviceSegment(path, fd, base, /*created=*/true));
    auto* h = new (base) SegmentHeader();  // ftruncate zero-filled it; this only starts lifetimes
    std::memcpy(h->magic, kSegmentMagic, sizeof(kSegmentMagic));
    h->layout_version = kLayoutVersion;
    h->header_bytes = kHeaderBytes;
    h->slot_bytes = kSlotBytes;
    h->slot_count = kSlotCount;
    std::memcpy(h->device_uuid, uuid, sizeof(uuid));
    h->creator_pid = static_cast<uint32_t>(getpid());
    h->priority_high_water.store(kNoPriority, std::memory_order_relaxed);
    h->ready.store(kReadyWord, std::memory_order_release);
    return segment;
  }
  if (errno != EEXIST) {
    return absl::InternalError(
        absl::StrFormat("cannot create %s: %s", path, std::strerror(errno)));
  }
  fd = openat(dir->fd(), name.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "cannot open %s: %s (another user's file, or permissions changed)", path,
        std::strerror(errno)));
  }
  // A creator that is still setting the file up has not sized it yet: wait for it, bounded.
  const absl::Time deadline = absl::Now() + options.ready_timeout;
  struct stat st;
  for (;;) {
    if (fstat(fd, &st) != 0) {
      const int err = errno;
      close(fd);
      return absl::InternalError(absl::StrFormat("cannot stat %s: %s", path, std::strerror(err)));
    }
    if (absl::Status s = CheckSegmentFile(path, st, options); !s.ok()) {
      close(fd);
      return s;
    }
    if (st.st_size != 0 || absl::Now() >= deadline) break;
    absl::SleepFor(absl::Milliseconds(5));
  }
  if (static_cast<size_t>(st.st_size) != kSegmentBytes) {
    close(fd);
    return Refuse(path, absl::StrFormat("is %d bytes long, not %d (truncated, or not gpuprio's)",
                                        static_cast<int64_t>(st.st_size),
                                        static_cast<int64_t>(kSegmentBytes)));
  }
  void* base = Map(fd);
  const int map_errno = errno;
  if (base == nullptr) {
    close(fd);
    return absl::InternalError(
        absl::StrFormat("cannot map %s: %s", path, std::strerror(map_errno)));
  }
  auto segment =
      std::unique_ptr<DeviceSegment>(new DeviceSegment(path, fd, base, /*created=*/false));
  const SegmentHeader& h = segment->header();
  // A creator still filling the header in has left the magic zero; anything else without the
  // ready mark is not a segment being set up, and is refused at once.
  static constexpr char kUnset[sizeof(kSegmentMagic)] = {};
  while (h.ready.load(std::memory_order_acquire) != kReadyWord) {
    if (std::memcmp(h.magic, kUnset, sizeof(kUnset)) != 0) break;  // CheckHeader says why
    if (absl::Now() >= deadline) {
      return Refuse(path, "was never finished by its creator (no ready mark)");
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  if (absl::Status s = CheckHeader(path, h, uuid); !s.ok()) return s;
  return segment;
}

}  // namespace gpuprio::coordinator
