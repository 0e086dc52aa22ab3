// scheduler/log_throttle: a burst, then one line per interval with the count suppressed, the rest
// counted for exit; exact under many threads; nothing formatted or allocated when suppressed.
#include "scheduler/base/log_throttle.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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
  CHECK(CountLines(text, "gpuprio: error: cuLaunchKernel on stream") == 5);
  CHECK(CountLines(text, "further messages like this one: at most one line per 3600 s") == 1);
  // The count names the message as it read, not by its format string.
  CHECK(CountLines(text, absl::StrFormat("1995 more messages like \"cuLaunchKernel on stream %p "
                                         "failed with CUDA error 700\" were suppressed",
                                         static_cast<void*>(nullptr))) == 1);
  CHECK_FALSE(absl::StrContains(text, "%s"));
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

TEST_CASE("The exit count quotes the first message written, escaped and cut short",
          "[logging]") {
  SECTION("a long first message is cut at a character, never inside one") {
    static LogThrottle throttle("long %s", /*burst=*/1, kHour);
    std::string argument;
    for (int i = 0; i < 200; ++i) absl::StrAppend(&argument, "\xe6\x97\xa5");  // 3 bytes each
    gpuprio_test::StderrCapture capture;
    for (int i = 0; i < 3; ++i) throttle.Logf(LogLevel::kError, "long %s", argument);
    LogSuppressedCounts();
    const std::string text = capture.Text();
    INFO(text);
    const size_t at = text.find("2 more messages like \"long \xe6\x97\xa5");
    REQUIRE(at != std::string::npos);
    const std::string line = text.substr(at, text.find('\n', at) - at);
    CHECK(absl::EndsWith(line, "\xe6\x97\xa5...\" were suppressed"));
    CHECK(line.size() < 300);
  }
  SECTION("what the message carried is escaped like any value") {
    static LogThrottle throttle("value %s", /*burst=*/1, kHour);
    gpuprio_test::StderrCapture capture;
    for (int i = 0; i < 2; ++i) throttle.Logf(LogLevel::kError, "value %s", "\"\xe2\x80\xae\n");
    LogSuppressedCounts();
    CHECK(CountLines(capture.Text(),
                     "1 more message like \"value \\\"\\u{202e}\\n\" was suppressed") == 1);
  }
  SECTION("none written yet: the format, its conversions shown as ...") {
    static LogThrottle throttle("%s on stream %p failed %5.2f%% (%lld)", /*burst=*/0, kHour);
    gpuprio_test::StderrCapture capture;
    for (int i = 0; i < 4; ++i) {
      throttle.Logf(LogLevel::kError, "%s on stream %p failed %5.2f%% (%lld)", "x",
                    static_cast<void*>(nullptr), 1.5, 7LL);
    }
    LogSuppressedCounts();
    CHECK(CountLines(capture.Text(), "4 more messages like \"... on stream ... failed ...% (...)\" "
                                     "were suppressed") == 1);
  }
}

TEST_CASE("A throttled message that is written costs no heap either", "[logging]") {
  static LogThrottle throttle("written %s %d", /*burst=*/2, kHour);
  const std::string argument(5000, 'w');
  gpuprio_test::StderrCapture capture;
  gpuprio_test::AllocationCounter allocations;
  throttle.Logf(LogLevel::kError, "written %s %d", argument, 1);  // the first: also kept
  throttle.Logf(LogLevel::kError, "written %s %d", argument, 2);
  CHECK(allocations.count() == 0);
  CHECK(CountLines(capture.Text(), "written www") == 2);
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
  CHECK(CountLines(text, "2 more messages like \"site one failed 0\" were suppressed") == 1);
  CHECK(CountLines(text, "2 more messages like \"site two failed\" were suppressed") == 1);
}

}  // namespace
}  // namespace gpuprio
