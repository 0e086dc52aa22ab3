#include "scheduler/logging.h"

#include <unistd.h>

#include <atomic>
#include <cstring>

#include "absl/base/attributes.h"

namespace gpuprio {
namespace {

ABSL_CONST_INIT std::atomic<int> g_level{static_cast<int>(LogLevel::kWarning)};

}  // namespace

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level), std::memory_order_relaxed); }

LogLevel GetLogLevel() { return static_cast<LogLevel>(g_level.load(std::memory_order_relaxed)); }

bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) <= g_level.load(std::memory_order_relaxed);
}

void Log(LogLevel level, absl::string_view message) {
  if (!LogEnabled(level)) return;
  // A fixed buffer: logging must work where the heap is off limits (fork child, exit handlers).
  char line[1024];
  constexpr absl::string_view kPrefix = "gpuprio: ";
  size_t n = kPrefix.size();
  std::memcpy(line, kPrefix.data(), n);
  const size_t room = sizeof(line) - n - 1;
  const size_t take = message.size() < room ? message.size() : room;
  std::memcpy(line + n, message.data(), take);
  n += take;
  line[n++] = '\n';
  const char* p = line;
  while (n > 0) {
    ssize_t w = ::write(STDERR_FILENO, p, n);
    if (w <= 0) break;
    p += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace gpuprio
