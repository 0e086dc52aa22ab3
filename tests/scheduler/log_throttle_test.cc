// scheduler/log_throttle: a burst, then one line per interval with the count suppressed, the rest
// counted for exit; exact under many threads; nothing formatted or allocated when suppressed.
#include "scheduler/base/log_throttle.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "catch2/catch.hpp"
#include "tests/allocation_counter.h"
#include "tests/stderr_capture.h"

namespace gpuprio {
namespace {

constexpr int64_t kHour = int64_t{3600} * 1'000'000'000;

int CountLines(const std::string& text, absl::string_view needle) {
  int count = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) count += absl::StrContains(line, needle);
  return count;
}

TEST_CASE("The first messages pass, then one per interval carrying the count between",
          "[logging]") {
  LogThrottle throttle("site", /*burst=*/3, /*interval_ns=*/100);
  for (int i = 0; i < 3; ++i) {
    const LogThrottle::Decision d = throttle.Admit(i);
    CHECK(d.write);
    CHECK(d.suppressed_before == 0);
    CHECK(d.last_of_burst == (i == 2));
  }
  // The first suppressed message (t=10) opens an interval that ends at t=110.
  for (int64_t t : {10, 20, 109}) CHECK_FALSE(throttle.Admit(t).write);
  CHECK(throttle.unreported() == 3);
  const LogThrottle::Decision summary = throttle.Admit(110);
  CHECK(summary.write);
  CHECK(summary.suppressed_before == 3);
  CHECK(throttle.unreported() == 0);
  // The next interval starts at the summary line.
  CHECK_FALSE(throttle.Admit(150).write);
  CHECK_FALSE(throttle.Admit(209).write);
  const LogThrottle::Decision next = throttle.Admit(210);
  CHECK(next.write);
  CHECK(next.suppressed_before == 2);
}

TEST_CASE("Under many threads exactly the burst is written and every other message counted",
          "[logging]") {
  LogThrottle throttle("threads", /*burst=*/10, kHour);
  constexpr int kThreads = 8;
  constexpr int kPerThread = 5000;
  std::atomic<int> written{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) written += throttle.Admit(1000).write ? 1 : 0;
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(written.load() == 10);
  CHECK(throttle.unreported() == kThreads * kPerThread - 10);
}

TEST_CASE("2000 failures make the burst's lines and one count at exit", "[logging]") {
  static LogThrottle throttle("%s on stream %p failed with CUDA error %d", /*burst=*/5, kHour);
  gpuprio_test::StderrCapture capture;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([] {
      for (int i = 0; i < 500; ++i) {
        throttle.Logf(LogLevel::kError, "%s on stream %p failed with CUDA error %d",
                      "cuLaunchKernel", static_cast<void*>(nullptr), 700);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  LogSuppressedCounts();
  const std::string text = capture.Text();
  INFO(text);
  CHECK(CountLines(text, "cuLaunchKernel on stream") == 5);
  CHECK(CountLines(text, "further messages like this one: at most one line per 3600 s") == 1);
  CHECK(CountLines(text,
                   "1995 more messages like \"%s on stream %p failed with CUDA error %d\" "
                   "were suppressed") == 1);
  CHECK(throttle.unreported() == 0);
  // Reported once: a second call has nothing left to say about this site.
  gpuprio_test::StderrCapture again;
  LogSuppressedCounts();
  CHECK_FALSE(absl::StrContains(again.Text(), "on stream %p"));
}

TEST_CASE("A suppressed message is neither formatted nor allocated", "[logging]") {
  static LogThrottle throttle("quiet", /*burst=*/1, kHour);
  const std::string argument(5000, 'q');
  gpuprio_test::StderrCapture capture;
  throttle.Logf(LogLevel::kError, "quiet %s", argument);  // the burst
  gpuprio_test::AllocationCounter allocations;
  for (int i = 0; i < 1000; ++i) throttle.Logf(LogLevel::kError, "quiet %s", argument);
  CHECK(allocations.count() == 0);
  CHECK(CountLines(capture.Text(), "quiet") == 1);
  CHECK(throttle.unreported() == 1000);
}

TEST_CASE("GPUPRIO_LOG_THROTTLED keeps one throttle per call site", "[logging]") {
  gpuprio_test::StderrCapture capture;
  for (int i = 0; i < 12; ++i) {
    GPUPRIO_LOG_THROTTLED(LogLevel::kError, "site one failed %d", i);
    GPUPRIO_LOG_THROTTLED(LogLevel::kError, "site two failed");
  }
  LogSuppressedCounts();
  const std::string text = capture.Text();
  INFO(text);
  CHECK(CountLines(text, "site one failed") == LogThrottle::kDefaultBurst + 1);  // + the count
  CHECK(CountLines(text, "site two failed") == LogThrottle::kDefaultBurst + 1);
  CHECK(CountLines(text, "2 more messages like \"site one failed %d\" were suppressed") == 1);
  CHECK(CountLines(text, "2 more messages like \"site two failed\" were suppressed") == 1);
}

}  // namespace
}  // namespace gpuprio
