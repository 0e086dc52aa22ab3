#include "scheduler/base/log_throttle.h"

#include <time.h>

#include <algorithm>
#include <cstring>

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

void LogThrottle::KeepSample(absl::FunctionRef<int(char*, size_t)> format) {
  int expected = kNoSample;
  if (!sample_state_.compare_exchange_strong(expected, kWritingSample,
                                             std::memory_order_relaxed)) {
    return;
  }
  const int n = format(sample_, sizeof(sample_));
  size_t size = n > 0 ? std::min(static_cast<size_t>(n), kSampleBytes) : 0;
  if (n > 0 && static_cast<size_t>(n) > kSampleBytes) {
    // Cut: end with "...", and never inside a UTF-8 character (whose half would be escaped as
    // bytes): if the first byte cut continues a character, that character's first byte and the
    // rest of it go too.
    size = kSampleBytes - 3;
    while (size > 0 && (static_cast<unsigned char>(sample_[size]) & 0xc0) == 0x80) --size;
    std::memcpy(sample_ + size, "...", 3);
    size += 3;
  }
  sample_size_ = size;
  sample_state_.store(kSampleKept, std::memory_order_release);
}

absl::string_view LogThrottle::Quoted(char* buffer, size_t size) const {
  if (sample_state_.load(std::memory_order_acquire) == kSampleKept) {
    return {sample_, sample_size_};
  }
  // No message written yet (a throttle with no burst, or the first still being formatted): the
  // format, each conversion ("%-8.3lld") shown as "...", "%%" as "%".
  size_t n = 0;
  const auto put = [&](absl::string_view text) {
    const size_t take = std::min(text.size(), size - n);
    std::memcpy(buffer + n, text.data(), take);
    n += take;
  };
  for (const char* p = site_; *p != '\0';) {
    if (*p != '%') {
      put(absl::string_view(p++, 1));
    } else if (p[1] == '%') {
      put("%");
      p += 2;
    } else {
      ++p;
      while (*p != '\0' && std::strchr("-+ #0123456789.*hlLqjzt", *p) != nullptr) ++p;
      if (*p != '\0') ++p;  // the conversion's letter
      put("...");
    }
  }
  return {buffer, n};
}

void LogSuppressedCounts() {
  for (LogThrottle* t = g_throttles.load(std::memory_order_acquire); t != nullptr;
       t = t->next_registered_) {
    const uint64_t count = t->suppressed_.exchange(0, std::memory_order_relaxed);
    if (count == 0) continue;
    char buffer[LogThrottle::kSampleBytes];
    Logf(static_cast<LogLevel>(t->last_level_.load(std::memory_order_relaxed)),
         "%d more %s like \"%s\" %s suppressed", count, count == 1 ? "message" : "messages",
         Escaped(t->Quoted(buffer, sizeof(buffer))), count == 1 ? "was" : "were");
  }
}

}  // namespace gpuprio
