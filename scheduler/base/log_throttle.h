// Logging for a call site that may fire many times in a row (a deferred launch error per op): the
// first lines as they come, then at most one line per interval saying how many like it were
// suppressed, and at exit the count not yet reported, quoting the first message written (as it
// read, not its format string). Lock-free from any number of threads; a suppressed message is
// counted, never formatted, and no message costs heap.
//
//   GPUPRIO_LOG_THROTTLED(LogLevel::kError, "%s on stream %p failed", name, stream);
#ifndef GPUPRIO_SCHEDULER_BASE_LOG_THROTTLE_H_
#define GPUPRIO_SCHEDULER_BASE_LOG_THROTTLE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "absl/base/attributes.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "scheduler/base/logging.h"

namespace gpuprio {

class LogThrottle {
 public:
  static constexpr uint32_t kDefaultBurst = 10;
  static constexpr int64_t kDefaultIntervalNs = 10'000'000'000;  // 10 s

  // `site` is the call site's format string: the exit count quotes it, each conversion shown as
  // "...", only when no message was written to quote. A throttle that Logf is called on must
  // outlive the process (a static, as GPUPRIO_LOG_THROTTLED makes it): once it suppressed a
  // message it is on the list LogSuppressedCounts walks at exit.
  constexpr explicit LogThrottle(const char* site, uint32_t burst = kDefaultBurst,
                                 int64_t interval_ns = kDefaultIntervalNs)
      : site_(site), burst_(burst), interval_ns_(interval_ns) {}

  LogThrottle(const LogThrottle&) = delete;
  LogThrottle& operator=(const LogThrottle&) = delete;

  struct Decision {
    bool write = false;
    bool last_of_burst = false;      // the messages after this one are suppressed: say so
    uint64_t suppressed_before = 0;  // suppressed since the previous line written
  };

  // Counts one message arriving at `now_ns` (CLOCK_MONOTONIC) and says whether to write it: the
  // first `burst` are written; after them one per `interval_ns`, carrying the count in between.
  // The decision alone: Logf's bookkeeping for the exit count is not done here.
  Decision Admit(int64_t now_ns);

  // Logf (logging.h) through Admit. A suppressed message is only counted.
  template <typename... Args>
  void Logf(LogLevel level, const absl::FormatSpec<Args...>& format, const Args&... args) {
    if (!LogEnabled(level)) return;
    const Decision decision = Admit(NowNs());
    if (!decision.write) {
      last_level_.store(static_cast<int>(level), std::memory_order_relaxed);
      Register();
      return;
    }
    if (sample_state_.load(std::memory_order_relaxed) == kNoSample) {
      KeepSample([&](char* buffer, size_t size) {
        return absl::SNPrintF(buffer, size, format, args...);
      });
    }
    char suffix[128];
    log_internal::WriteLine(
        level, [&](absl::FormatRawSink sink) { absl::Format(sink, format, args...); },
        Suffix(decision, suffix, sizeof(suffix)));
  }

  // Suppressed messages not yet reported in a line.
  uint64_t unreported() const { return suppressed_.load(std::memory_order_relaxed); }

 private:
  friend void LogSuppressedCounts();

  // The first message written, as the exit count quotes it: longer ones are cut to this many
  // bytes, "..." included (the dispatcher's messages fit whole).
  static constexpr size_t kSampleBytes = 200;
  enum SampleState : int { kNoSample = 0, kWritingSample = 1, kSampleKept = 2 };

  static int64_t NowNs();
  absl::string_view Suffix(const Decision& decision, char* buffer, size_t size) const;
  void Register();
  // Formats into sample_ with `format` (snprintf's contract), unless another message got there
  // first.
  void KeepSample(absl::FunctionRef<int(char*, size_t)> format);
  // The text the exit count quotes: the sample, or the site with its conversions shown as "...".
  absl::string_view Quoted(char* buffer, size_t size) const;

  const char* const site_;
  const uint32_t burst_;
  const int64_t interval_ns_;
  std::atomic<uint64_t> seen_{0};
  std::atomic<int64_t> next_line_ns_{0};  // 0: no message suppressed yet
  std::atomic<uint64_t> suppressed_{0};
  std::atomic<int> last_level_{static_cast<int>(LogLevel::kError)};
  std::atomic<bool> registered_{false};
  LogThrottle* next_registered_ = nullptr;  // the list LogSuppressedCounts walks
  // Written once, by the thread that moves sample_state_ from kNoSample to kWritingSample; read
  // only after an acquire load saw kSampleKept (the release store that publishes it).
  std::atomic<int> sample_state_{kNoSample};
  char sample_[kSampleBytes + 1] = {};  // + 1: snprintf's terminating NUL
  size_t sample_size_ = 0;
};

// For every throttle with unreported suppressed messages: "N more messages like \"<first message
// written>\" were suppressed", and the count is reset. For the exit path (hook/lifecycle.cc).
void LogSuppressedCounts();

}  // namespace gpuprio

// Logf(level, format, ...) through a LogThrottle of its own (one per call site, constant-
// initialised: no guard, no allocation).
#define GPUPRIO_LOG_THROTTLED(level, format, ...)                                        \
  do {                                                                                   \
    ABSL_CONST_INIT static ::gpuprio::LogThrottle gpuprio_log_throttle_site(format);    \
    gpuprio_log_throttle_site.Logf((level), format, ##__VA_ARGS__);                      \
  } while (false)

#endif  // GPUPRIO_SCHEDULER_BASE_LOG_THROTTLE_H_
