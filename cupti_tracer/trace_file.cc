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

namespace gpuprio::tracer {
namespace {

// Bytes of the target's name kept in the temporary's name, so that the temporary's name stays
// within NAME_MAX however long the target's is.
constexpr size_t kNameBytesInTemporary = 96;
// O_EXCL collisions tolerated before giving up (each name carries 64 random bits).
constexpr int kCreateAttempts = 16;

// The temporary of the write in progress, for RemovePendingTemporary (which may run in a signal
// handler: plain memory and one lock-free atomic, no allocation).
enum PendingState : int { kFree = 0, kClaimed = 1, kSet = 2 };
ABSL_CONST_INIT std::atomic<int> g_pending_state{kFree};
char g_pending_name[PATH_MAX];  // written only by the claimer, while the state is kClaimed

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

// True if `name` is now the tracked temporary (false when another write holds the slot).
bool RegisterPending(const std::string& name) {
  int expected = kFree;
  if (name.size() >= sizeof(g_pending_name) ||
      !g_pending_state.compare_exchange_strong(expected, kClaimed, std::memory_order_acquire)) {
    return false;
  }
  std::memcpy(g_pending_name, name.c_str(), name.size() + 1);
  g_pending_state.store(kSet, std::memory_order_release);
  return true;
}

// The temporary: opened, unlinked on every error path unless Commit() renamed it.
class Temporary {
 public:
  Temporary() = default;
  Temporary(const Temporary&) = delete;
  Temporary& operator=(const Temporary&) = delete;
  ~Temporary() {
    if (file_ != nullptr) std::fclose(file_);
    if (!name_.empty()) unlink(name_.c_str());
    Unregister();
  }

  absl::Status Create(const std::string& path, mode_t mode) {
    const std::string prefix =
        absl::StrCat(DirectoryOf(path), "/.", BaseNameOf(path).substr(0, kNameBytesInTemporary),
                     ".gpuprio-");
    int fd = -1;
    int error = 0;
    std::string name;
    for (int attempt = 0; attempt < kCreateAttempts && fd < 0; ++attempt) {
      name = absl::StrFormat("%s%016x", prefix, RandomBits());
      fd = open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
      error = errno;
      if (fd < 0 && error != EEXIST) break;
    }
    if (fd < 0) {
      return absl::UnavailableError(absl::StrCat("cannot create a temporary file in ",
                                                 DirectoryOf(path), ": ", ErrnoText(error)));
    }
    name_ = name;
    registered_ = RegisterPending(name_);
    file_ = fdopen(fd, "w");
    if (file_ == nullptr) {
      error = errno;
      close(fd);
      return absl::UnavailableError(absl::StrCat("fdopen ", name_, ": ", ErrnoText(error)));
    }
    return absl::OkStatus();
  }

  std::FILE* file() const { return file_; }
  const std::string& name() const { return name_; }

  // Flushes, closes and renames onto `path`. The temporary is gone afterwards either way.
  absl::Status Commit(const std::string& path, bool set_mode, mode_t mode) {
    absl::Status status;
    if (set_mode && fchmod(fileno(file_), mode) != 0) {
      status = absl::UnavailableError(absl::StrCat("fchmod ", name_, ": ", ErrnoText(errno)));
    }
    if (std::fflush(file_) != 0 || std::ferror(file_)) {
      if (status.ok()) {
        status = absl::DataLossError(absl::StrCat("writing ", name_, ": ", ErrnoText(errno)));
      }
    }
    const int closed = std::fclose(file_);
    const int close_error = errno;
    file_ = nullptr;
    if (closed != 0 && status.ok()) {
      status = absl::DataLossError(absl::StrCat("writing ", name_, ": ", ErrnoText(close_error)));
    }
    if (!status.ok()) return status;
    // Something other than a regular file may have been put at `path` while the trace was
    // written: refuse it now too. (rename() itself never writes through a link or device: it
    // replaces the name.)
    if (absl::Status s = CheckTraceFileTarget(path); !s.ok()) return s;
    if (std::rename(name_.c_str(), path.c_str()) != 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot rename ", name_, " to ", path, ": ", ErrnoText(errno)));
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

  std::string name_;  // empty once renamed
  std::FILE* file_ = nullptr;
  bool registered_ = false;  // name_ is the one RemovePendingTemporary removes
};

}  // namespace

absl::Status CheckTraceFileTarget(const std::string& path) {
  if (path.empty()) return absl::FailedPreconditionError("the trace file name is empty");
  struct stat st;
  if (lstat(path.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode)) {
      return absl::FailedPreconditionError(absl::StrCat(
          path, " is a symbolic link; gpuprio does not write a trace through a link (give its "
          "target)"));
    }
    if (!S_ISREG(st.st_mode)) {
      return absl::FailedPreconditionError(absl::StrCat(
          path, " is ", FileKind(st.st_mode),
          "; gpuprio writes a trace only to a regular file or a new name"));
    }
  } else if (errno != ENOENT) {
    return absl::FailedPreconditionError(absl::StrCat("cannot stat ", path, ": ", ErrnoText(errno)));
  }
  const std::string dir = DirectoryOf(path);
  if (stat(dir.c_str(), &st) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("directory ", dir, " of ", path, ": ", ErrnoText(errno)));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(dir, " (in ", path, ") is not a directory"));
  }
  // The trace is written beside `path` and renamed onto it: the directory must take new files.
  if (access(dir.c_str(), W_OK | X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create files in ", dir, ": ", ErrnoText(errno)));
  }
  return absl::OkStatus();
}

absl::Status WriteFileReplacing(const std::string& path,
                                absl::FunctionRef<absl::Status(std::FILE*)> write) {
  if (absl::Status s = CheckTraceFileTarget(path); !s.ok()) return s;
  // An existing file keeps its permission bits: the temporary stays 0600 until it gets them.
  // A new file: 0644 minus the umask, applied by open() itself.
  struct stat existing;
  const bool keep_mode = lstat(path.c_str(), &existing) == 0 && S_ISREG(existing.st_mode);
  const mode_t kept_mode = keep_mode ? existing.st_mode & 0777 : 0;
  Temporary temporary;
  if (absl::Status s = temporary.Create(path, keep_mode ? 0600 : 0644); !s.ok()) return s;
  absl::Status written = write(temporary.file());
  if (!written.ok()) {
    return absl::Status(written.code(),
                        absl::StrCat("writing ", temporary.name(), ": ", written.message()));
  }
  return temporary.Commit(path, keep_mode, kept_mode);
}

void RemovePendingTemporary() {
  if (g_pending_state.load(std::memory_order_acquire) == kSet) unlink(g_pending_name);
}

}  // namespace gpuprio::tracer
