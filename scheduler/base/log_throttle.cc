#include "scheduler/base/log_throttle.h"

#include <time.h>

#include <algorithm>

namespace gpuprio {
namespace {

// Every throttle that ever suppressed a message; nodes are static objects, never removed.
ABSL_CONST_INIT std::atomic<LogThrottle*> g_throttles{nullptr};

}  // namespace

int64_t LogThrottle::NowNs() {
  // Read only once a site is past its burst; the coarse clock's tick is plenty for seconds.
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

LogThrottle::Decision LogThrottle::Admit(int64_t now_ns) {
  const uint64_t before = seen_.fetch_add(1, std::memory_order_relaxed);
  if (before < burst_) return {true, before + 1 == burst_, 0};
  int64_t next = next_line_ns_.load(std::memory_order_relaxed);
  if (next == 0) {
    // The first suppressed message opens the first interval.
    const int64_t opened = now_ns + interval_ns_;
    if (next_line_ns_.compare_exchange_strong(next, opened, std::memory_order_relaxed)) {
      next = opened;
    }
  }
  if (now_ns >= next && next_line_ns_.compare_exchange_strong(next, now_ns + interval_ns_,
                                                              std::memory_order_relaxed)) {
    return {true, false, suppressed_.exchange(0, std::memory_order_relaxed)};
  }
  suppressed_.fetch_add(1, std::memory_order_relaxed);
  return {false, false, 0};
}

absl::string_view LogThrottle::Suffix(const Decision& decision, char* buffer, size_t size) const {
  int n = 0;
  if (decision.suppressed_before > 0) {
    n = absl::SNPrintF(buffer, size, " [%d similar messages suppressed since the previous one]",
                       decision.suppressed_before);
  } else if (decision.last_of_burst) {
    n = absl::SNPrintF(buffer, size,
                       " [further messages like this one: at most one line per %d s]",
                       interval_ns_ / 1'000'000'000);
  }
  if (n <= 0) return {};
  return {buffer, std::min(static_cast<size_t>(n), size - 1)};
}

void LogThrottle::Register() {
  if (registered_.load(std::memory_order_relaxed) ||
      registered_.exchange(true, std::memory_order_acq_rel)) {
    return;
  }
  LogThrottle* head = g_throttles.load(std::memory_order_relaxed);
  do {
    next_registered_ = head;
  } while (!g_throttles.compare_exchange_weak(head, this, std::memory_order_release,
                                              std::memory_order_relaxed));
}

void LogSuppressedCounts() {
  for (LogThrottle* t = g_throttles.load(std::memory_order_acquire); t != nullptr;
       t = t->next_registered_) {
    const uint64_t count = t->suppressed_.exchange(0, std::memory_order_relaxed);
    if (count == 0) continue;
    Logf(static_cast<LogLevel>(t->last_level_.load(std::memory_order_relaxed)),
         "%d more messages like \"%s\" were suppressed", count, Escaped(t->site_));
  }
}

}  // namespace gpuprio
