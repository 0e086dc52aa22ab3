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
#include "scheduler/coordinator/segment_name.h"

namespace gpuprio::coordinator {
namespace {

std::string Path(const std::string& name) { return absl::StrCat("/dev/shm", name); }

absl::Status Refuse(const std::string& name, absl::string_view why) {
  return absl::FailedPreconditionError(absl::StrFormat(
      "shared segment %s %s; remove it if no gpuprio process uses it (rm %s), or choose another "
      "GPUPRIO_DOMAIN",
      Path(name), why, Path(name)));
}

mode_t SegmentMode(const SegmentOptions& options) { return options.share_gid >= 0 ? 0660 : 0600; }

}  // namespace

absl::Status CheckSegmentFile(const std::string& name, const struct stat& st,
                              const SegmentOptions& options) {
  if (!S_ISREG(st.st_mode)) return Refuse(name, "is not a regular file");
  const mode_t mode = st.st_mode & 07777;
  if (options.share_gid >= 0) {
    if (static_cast<int64_t>(st.st_gid) != options.share_gid) {
      return Refuse(name, absl::StrFormat("belongs to group %u, not %d", st.st_gid,
                                          options.share_gid));
    }
    if ((mode & 0007) != 0 || (mode & 0060) != 0060) {
      return Refuse(name, absl::StrFormat("has mode %04o, not 0660", mode));
    }
    return absl::OkStatus();
  }
  if (st.st_uid != geteuid()) {
    return Refuse(name, absl::StrFormat("belongs to user %u, not to this user (%u)", st.st_uid,
                                        geteuid()));
  }
  if ((mode & 0077) != 0) return Refuse(name, absl::StrFormat("has mode %04o, not 0600", mode));
  return absl::OkStatus();
}

namespace {

absl::Status CheckHeader(const std::string& name, const SegmentHeader& h,
                         const uint8_t (&uuid)[16]) {
  if (std::memcmp(h.magic, kSegmentMagic, sizeof(kSegmentMagic)) != 0) {
    return Refuse(name, "is not a gpuprio segment (bad magic)");
  }
  if (h.layout_version != kLayoutVersion) {
    return Refuse(name, absl::StrFormat("has layout version %u, this gpuprio uses %u",
                                        h.layout_version, kLayoutVersion));
  }
  if (h.header_bytes != kHeaderBytes || h.slot_bytes != kSlotBytes || h.slot_count != kSlotCount) {
    return Refuse(name, "has a header of another shape");
  }
  if (std::memcmp(h.device_uuid, uuid, sizeof(uuid)) != 0) {
    return Refuse(name, "is for another GPU");
  }
  if (h.ready.load(std::memory_order_acquire) != kReadyWord) {
    return Refuse(name, "was never finished by its creator (no ready mark)");
  }
  return absl::OkStatus();
}

void* Map(int fd) {
  void* base = mmap(nullptr, kSegmentBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return base == MAP_FAILED ? nullptr : base;
}

}  // namespace

DeviceSegment::DeviceSegment(std::string name, void* base, bool created)
    : name_(std::move(name)),
      base_(base),
      header_(static_cast<SegmentHeader*>(base)),
      slots_(reinterpret_cast<ProcessSlot*>(static_cast<char*>(base) + kHeaderBytes)),
      created_(created) {}

DeviceSegment::~DeviceSegment() { munmap(base_, kSegmentBytes); }

absl::StatusOr<std::unique_ptr<DeviceSegment>> DeviceSegment::OpenOrCreate(
    const SegmentOptions& options, const uint8_t (&uuid)[16]) {
  if (!ValidDomain(options.domain)) {
    return absl::InvalidArgumentError(absl::StrCat("invalid domain \"", options.domain, "\""));
  }
  const std::string name = SegmentName(options.domain, geteuid(), options.share_gid, uuid);
  const mode_t mode = SegmentMode(options);

  int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, mode);
  if (fd >= 0) {
    // Created here: the mode regardless of the umask, the group if shared, then the header. The
    // ready word is stored last; openers wait for it.
    if (fchmod(fd, mode) != 0 ||
        (options.share_gid >= 0 && fchown(fd, static_cast<uid_t>(-1),
                                          static_cast<gid_t>(options.share_gid)) != 0) ||
        ftruncate(fd, static_cast<off_t>(kSegmentBytes)) != 0) {
      const int err = errno;
      close(fd);
      shm_unlink(name.c_str());
      return absl::InternalError(
          absl::StrFormat("cannot set up %s: %s", Path(name), std::strerror(err)));
    }
    void* base = Map(fd);
    const int map_errno = errno;
    close(fd);
    if (base == nullptr) {
      shm_unlink(name.c_str());
      return absl::InternalError(
          absl::StrFormat("cannot map %s: %s", Path(name), std::strerror(map_errno)));
    }
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
    return std::unique_ptr<DeviceSegment>(new DeviceSegment(name, base, /*created=*/true));
  }
  if (errno != EEXIST) {
    return absl::InternalError(
        absl::StrFormat("cannot create %s: %s", Path(name), std::strerror(errno)));
  }
  fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "cannot open %s: %s (another user's file, or permissions changed)", Path(name),
        std::strerror(errno)));
  }
  // A creator that is still setting the file up has not sized it yet: wait for it, bounded.
  const absl::Time deadline = absl::Now() + options.ready_timeout;
  struct stat st;
  for (;;) {
    if (fstat(fd, &st) != 0) {
      const int err = errno;
      close(fd);
      return absl::InternalError(
          absl::StrFormat("cannot stat %s: %s", Path(name), std::strerror(err)));
    }
    if (absl::Status s = CheckSegmentFile(name, st, options); !s.ok()) {
      close(fd);
      return s;
    }
    if (st.st_size != 0 || absl::Now() >= deadline) break;
    absl::SleepFor(absl::Milliseconds(5));
  }
  if (static_cast<size_t>(st.st_size) != kSegmentBytes) {
    close(fd);
    return Refuse(name, absl::StrFormat("is %d bytes long, not %d (truncated, or not gpuprio's)",
                                        static_cast<int64_t>(st.st_size),
                                        static_cast<int64_t>(kSegmentBytes)));
  }
  void* base = Map(fd);
  const int map_errno = errno;
  close(fd);
  if (base == nullptr) {
    return absl::InternalError(
        absl::StrFormat("cannot map %s: %s", Path(name), std::strerror(map_errno)));
  }
  auto segment = std::unique_ptr<DeviceSegment>(new DeviceSegment(name, base, /*created=*/false));
  const SegmentHeader& h = segment->header();
  // A creator still filling the header in has left the magic zero; anything else without the
  // ready mark is not a segment being set up, and is refused at once.
  static constexpr char kUnset[sizeof(kSegmentMagic)] = {};
  while (h.ready.load(std::memory_order_acquire) != kReadyWord) {
    if (std::memcmp(h.magic, kUnset, sizeof(kUnset)) != 0) break;  // CheckHeader says why
    if (absl::Now() >= deadline) {
      return Refuse(name, "was never finished by its creator (no ready mark)");
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  if (absl::Status s = CheckHeader(name, h, uuid); !s.ok()) return s;
  return segment;
}

}  // namespace gpuprio::coordinator
