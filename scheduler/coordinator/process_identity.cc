#include "scheduler/coordinator/process_identity.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace gpuprio::coordinator {
namespace {

// /proc/<pid>/stat into `buffer` (NUL-terminated); false if it cannot be read. Plain syscalls:
// this runs on the dispatcher thread, which must not allocate in steady state.
bool ReadStat(uint32_t pid, char* buffer, size_t size) {
  char path[48];
  if (pid == 0) {
    std::snprintf(path, sizeof(path), "/proc/self/stat");
  } else {
    std::snprintf(path, sizeof(path), "/proc/%u/stat", pid);
  }
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  size_t total = 0;
  while (total + 1 < size) {
    const ssize_t n = read(fd, buffer + total, size - 1 - total);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    total += static_cast<size_t>(n);
  }
  close(fd);
  buffer[total] = '\0';
  return total > 0;
}

// Parses the state (field 3) and start time (field 22). The command (field 2) may hold spaces
// and parentheses, so fields are counted from the last ')'.
bool ParseStat(const char* stat, char* state, uint64_t* start_time) {
  const char* p = std::strrchr(stat, ')');
  if (p == nullptr) return false;
  ++p;
  int field = 2;
  while (*p != '\0') {
    while (*p == ' ') ++p;
    if (*p == '\0') break;
    ++field;
    if (field == 3) *state = *p;
    if (field == 22) {
      char* end = nullptr;
      *start_time = std::strtoull(p, &end, 10);
      return end != p;
    }
    while (*p != ' ' && *p != '\0') ++p;
  }
  return false;
}

uint64_t PidNamespaceInode() {
  struct stat st;
  if (stat("/proc/self/ns/pid", &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_ino);
}

}  // namespace

ProcessIdentity OwnIdentity() {
  ProcessIdentity id;
  id.pid = static_cast<uint32_t>(getpid());
  char stat[1024];
  char state = 0;
  uint64_t start = 0;
  if (ReadStat(0, stat, sizeof(stat)) && ParseStat(stat, &state, &start)) {
    id.start_time_ticks = start;
  }
  id.pid_namespace = PidNamespaceInode();
  return id;
}

}  // namespace gpuprio::coordinator
