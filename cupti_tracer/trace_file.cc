#include "cupti_tracer/trace_file.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "absl/base/attributes.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace gpuprio::tracer {
namespace {

// Bytes of the target's name kept in the temporary's name, so that the temporary's name stays
// within NAME_MAX however long the target's is.
constexpr size_t kNameBytesInTemporary = 96;
// O_EXCL collisions tolerated before giving up (each name carries 64 random bits).
constexpr int kCreateAttempts = 16;

// The temporary of the write in progress, for RemovePendingTemporary (which may run in a signal
// handler: plain memory and one lock-free atomic, no allocation). Named by its directory's
// descriptor and its name there, as the write itself names it.
enum PendingState : int { kFree = 0, kClaimed = 1, kSet = 2 };
ABSL_CONST_INIT std::atomic<int> g_pending_state{kFree};
// Written only by the claimer, while the state is kClaimed.
int g_pending_directory = -1;
char g_pending_name[NAME_MAX + 1];

// Opens a directory for lookups only (O_PATH: search permission is enough, as for a path) and
// never through a link: O_NOFOLLOW makes a link fail with ENOTDIR together with O_DIRECTORY.
constexpr int kDirectoryFlags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

// A descriptor closed with its owner.
class Descriptor {
 public:
  explicit Descriptor(int fd = -1) : fd_(fd) {}
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() { Reset(-1); }
  void Reset(int fd) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string ErrnoText(int error) { return std::strerror(error); }

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string BaseNameOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

const char* FileKind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

uint64_t RandomBits() {
  uint64_t bits = 0;
  if (getrandom(&bits, sizeof(bits), GRND_NONBLOCK) == sizeof(bits)) return bits;
  // No entropy yet (early boot): O_EXCL keeps this safe; only the name is easier to guess.
  static std::atomic<uint64_t> counter{0};
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (static_cast<uint64_t>(now.tv_nsec) << 20) ^ static_cast<uint64_t>(now.tv_sec) ^
         (static_cast<uint64_t>(getpid()) << 40) ^ counter.fetch_add(0x9e3779b97f4a7c15);
}

// True if `name` in `directory` is now the tracked temporary (false when another write holds the
// slot).
bool RegisterPending(int directory, const std::string& name) {
  int expected = kFree;
  if (name.size() >= sizeof(g_pending_name) ||
      !g_pending_state.compare_exchange_strong(expected, kClaimed, std::memory_order_acquire)) {
    return false;
  }
  g_pending_directory = directory;
  std::memcpy(g_pending_name, name.c_str(), name.size() + 1);
  g_pending_state.store(kSet, std::memory_order_release);
  return true;
}

// Opens the directory `path` names its file in, one component at a time from "/" (or from the
// working directory), refusing a symbolic link at any of them: the directory that is checked is
// then the one written, whatever its path leads to by the time of the write. "." and ".." are
// followed as the kernel does (they are not links).
absl::Status OpenDirectoryOf(const std::string& path, Descriptor* directory) {
  const std::string dir = DirectoryOf(path);
  directory->Reset(open(dir[0] == '/' ? "/" : ".", kDirectoryFlags));
  if (directory->get() < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot open ", dir[0] == '/' ? "/" : "the working directory", ": ", ErrnoText(errno)));
  }
  for (absl::string_view name : absl::StrSplit(dir, '/', absl::SkipEmpty())) {
    if (name == ".") continue;
    const std::string component(name);
    const int next = openat(directory->get(), component.c_str(), kDirectoryFlags);
    if (next >= 0) {
      directory->Reset(next);
      continue;
    }
    const int error = errno;
    // The path as given, up to and including this component.
    const std::string prefix = dir.substr(0, name.data() + name.size() - dir.data());
    struct stat st;
    const bool is_link =
        fstatat(directory->get(), component.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISLNK(st.st_mode);
    if (is_link) {
      char target[PATH_MAX];
      const ssize_t n = readlinkat(directory->get(), component.c_str(), target, sizeof(target));
      const std::string to = n > 0 ? absl::StrCat(" to ", absl::string_view(target, n)) : "";
      return absl::FailedPreconditionError(absl::StrCat(
          prefix, " is a symbolic link", to, " (in ", path,
          "); gpuprio does not write a trace through a link in any part of its path (give the "
          "path without links)"));
    }
    if (error == ENOTDIR) {
      return absl::FailedPreconditionError(
          absl::StrCat(prefix, " (in ", path, ") is not a directory"));
    }
    return absl::FailedPreconditionError(
        absl::StrCat("directory ", prefix, " of ", path, ": ", ErrnoText(error)));
  }
  return absl::OkStatus();
}

// CheckTraceFileTarget for `base`, the last component of `path`, in `directory` (opened by
// OpenDirectoryOf).
absl::Status CheckTargetIn(int directory, const std::string& path, const std::string& base) {
  struct stat st;
  // An empty name ("dir/") names the directory itself.
  if (fstatat(directory, base.empty() ? "." : base.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISLNK(st.st_mode)) {
      return absl::FailedPreconditionError(absl::StrCat(
          path,
          " is a symbolic link; gpuprio does not write a trace through a link (give its "
          "target)"));
    }
    if (!S_ISREG(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, " is ", FileKind(st.st_mode),
                       "; gpuprio writes a trace only to a regular file or a new name"));
    }
  } else if (errno != ENOENT) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot stat ", path, ": ", ErrnoText(errno)));
  }
  // The trace is written beside `path` and renamed onto it: the directory must take new files.
  if (faccessat(directory, ".", W_OK | X_OK, 0) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create files in ", DirectoryOf(path), ": ", ErrnoText(errno)));
  }
  return absl::OkStatus();
}

// The temporary: opened in the target's directory, unlinked on every error path unless Commit()
// renamed it.
class Temporary {
 public:
  // `directory` (the target's, from OpenDirectoryOf) must outlive the Temporary.
  Temporary(int directory, const std::string& path)
      : directory_(directory), path_(path), base_(BaseNameOf(path)) {}
  Temporary(const Temporary&) = delete;
  Temporary& operator=(const Temporary&) = delete;
  ~Temporary() {
    if (file_ != nullptr) std::fclose(file_);
    if (!name_.empty()) unlinkat(directory_, name_.c_str(), 0);
    Unregister();
  }

  absl::Status Create(mode_t mode) {
    const std::string prefix =
        absl::StrCat(".", base_.substr(0, kNameBytesInTemporary), ".gpuprio-");
    int fd = -1;
    int error = 0;
    std::string name;
    for (int attempt = 0; attempt < kCreateAttempts && fd < 0; ++attempt) {
      name = absl::StrFormat("%s%016x", prefix, RandomBits());
      fd = openat(directory_, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                  mode);
      error = errno;
      if (fd < 0 && error != EEXIST) break;
    }
    if (fd < 0) {
      return absl::UnavailableError(absl::StrCat("cannot create a temporary file in ",
                                                 DirectoryOf(path_), ": ", ErrnoText(error)));
    }
    name_ = name;
    registered_ = RegisterPending(directory_, name_);
    file_ = fdopen(fd, "w");
    if (file_ == nullptr) {
      error = errno;
      close(fd);
      return absl::UnavailableError(absl::StrCat("fdopen ", DisplayName(), ": ", ErrnoText(error)));
    }
    return absl::OkStatus();
  }

  std::FILE* file() const { return file_; }
  // The temporary as a path, for messages.
  std::string DisplayName() const { return absl::StrCat(DirectoryOf(path_), "/", name_); }

  // Flushes, closes and renames onto the target. The temporary is gone afterwards either way.
  absl::Status Commit(bool set_mode, mode_t mode) {
    absl::Status status;
    if (set_mode && fchmod(fileno(file_), mode) != 0) {
      status =
          absl::UnavailableError(absl::StrCat("fchmod ", DisplayName(), ": ", ErrnoText(errno)));
    }
    if (std::fflush(file_) != 0 || std::ferror(file_)) {
      if (status.ok()) {
        status =
            absl::DataLossError(absl::StrCat("writing ", DisplayName(), ": ", ErrnoText(errno)));
      }
    }
    const int closed = std::fclose(file_);
    const int close_error = errno;
    file_ = nullptr;
    if (closed != 0 && status.ok()) {
      status = absl::DataLossError(
          absl::StrCat("writing ", DisplayName(), ": ", ErrnoText(close_error)));
    }
    if (!status.ok()) return status;
    // Something other than a regular file may have been put at the target while the trace was
    // written: refuse it now too. (renameat() itself never writes through a link or device: it
    // replaces the name.)
    if (absl::Status s = CheckTargetIn(directory_, path_, base_); !s.ok()) return s;
    if (renameat(directory_, name_.c_str(), directory_, base_.c_str()) != 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot rename ", DisplayName(), " to ", path_, ": ", ErrnoText(errno)));
    }
    name_.clear();
    Unregister();
    return absl::OkStatus();
  }

 private:
  void Unregister() {
    if (registered_) g_pending_state.store(kFree, std::memory_order_release);
    registered_ = false;
  }

  const int directory_;
  const std::string path_;  // the target, as given
  const std::string base_;  // its name in directory_
  std::string name_;        // the temporary's name in directory_; empty once renamed
  std::FILE* file_ = nullptr;
  bool registered_ = false;  // name_ is the one RemovePendingTemporary removes
};

}  // namespace

absl::Status CheckTraceFileTarget(const std::string& path) {
  if (path.empty()) return absl::FailedPreconditionError("the trace file name is empty");
  Descriptor directory;
  if (absl::Status s = OpenDirectoryOf(path, &directory); !s.ok()) return s;
  return CheckTargetIn(directory.get(), path, BaseNameOf(path));
}

absl::Status WriteFileReplacing(const std::string& path,
                                absl::FunctionRef<absl::Status(std::FILE*)> write) {
  if (path.empty()) return absl::FailedPreconditionError("the trace file name is empty");
  // Opened once: the checks, the temporary and the rename all happen in this directory.
  Descriptor directory;
  if (absl::Status s = OpenDirectoryOf(path, &directory); !s.ok()) return s;
  const std::string base = BaseNameOf(path);
  if (absl::Status s = CheckTargetIn(directory.get(), path, base); !s.ok()) return s;
  // An existing file keeps its permission bits: the temporary stays 0600 until it gets them.
  // A new file: 0644 minus the umask, applied by open() itself.
  struct stat existing;
  const bool keep_mode =
      fstatat(directory.get(), base.c_str(), &existing, AT_SYMLINK_NOFOLLOW) == 0 &&
      S_ISREG(existing.st_mode);
  const mode_t kept_mode = keep_mode ? existing.st_mode & 0777 : 0;
  Temporary temporary(directory.get(), path);
  if (absl::Status s = temporary.Create(keep_mode ? 0600 : 0644); !s.ok()) return s;
  absl::Status written = write(temporary.file());
  if (!written.ok()) {
    return absl::Status(written.code(),
                        absl::StrCat("writing ", temporary.DisplayName(), ": ", written.message()));
  }
  return temporary.Commit(keep_mode, kept_mode);
}

void RemovePendingTemporary() {
  // unlinkat is async-signal-safe. Should the write finish and close its directory between the
  // load and the unlinkat, the descriptor may name another directory by then, where a name with
  // 64 random bits does not exist.
  if (g_pending_state.load(std::memory_order_acquire) == kSet) {
    unlinkat(g_pending_directory, g_pending_name, 0);
  }
}

}  // namespace gpuprio::tracer
