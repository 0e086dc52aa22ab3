// scheduler/logging: one line per message whatever its length or content, and no heap.
#include "scheduler/base/logging.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "catch2/catch.hpp"
#include "tests/allocation_counter.h"
#include "tests/stderr_capture.h"

namespace gpuprio {
namespace {

constexpr absl::string_view kPrefix = "gpuprio: ";

std::string Logged(absl::string_view message) {
  gpuprio_test::StderrCapture capture;
  Log(LogLevel::kError, message);
  return capture.Text();
}

// A message of `size` bytes whose every position can be recognised: "<offset>," repeated.
std::string Numbered(size_t size) {
  std::string text;
  while (text.size() < size) absl::StrAppend(&text, text.size(), ",");
  text.resize(size);
  return text;
}

TEST_CASE("A 5000-byte message keeps its beginning and its end in one line", "[logging]") {
  const std::string message = "GPUPRIO_MODE=\"" + std::string(5000, 'x') + "\" is not valid; " +
                              "running unscheduled (passthrough)";
  const std::string line = Logged(message);
  INFO(line);
  CHECK(absl::StartsWith(line, "gpuprio: GPUPRIO_MODE=\"xxx"));
  CHECK(absl::EndsWith(line, "running unscheduled (passthrough)\n"));
  CHECK(absl::StrContains(line, " bytes cut]... "));
  CHECK(line.size() <= kMaxLogLine);
  CHECK(line.find('\n') == line.size() - 1);
}

TEST_CASE("A line is the message whole, or its two ends and the exact count cut between",
          "[logging]") {
  for (size_t size : {size_t{0}, size_t{1}, size_t{2000}, size_t{4020}, size_t{4029},
                      size_t{4030}, size_t{4031}, size_t{4100}, size_t{100000}}) {
    INFO("message size " << size);
    const std::string message = Numbered(size);
    const std::string line = Logged(message);
    REQUIRE(line.size() <= kMaxLogLine);
    REQUIRE(absl::StartsWith(line, kPrefix));
    REQUIRE(absl::EndsWith(line, "\n"));
    const absl::string_view body = absl::string_view(line).substr(
        kPrefix.size(), line.size() - kPrefix.size() - 1);
    const size_t marker = body.find(" ...[");
    if (marker == absl::string_view::npos) {
      CHECK(body == message);
      continue;
    }
    const size_t marker_end = body.find(" bytes cut]... ", marker);
    REQUIRE(marker_end != absl::string_view::npos);
    size_t cut = 0;
    REQUIRE(absl::SimpleAtoi(body.substr(marker + 5, marker_end - marker - 5), &cut));
    const absl::string_view head = body.substr(0, marker);
    const absl::string_view tail = body.substr(marker_end + 15);
    CHECK(head.size() + cut + tail.size() == message.size());
    CHECK(absl::StartsWith(message, head));
    CHECK(absl::EndsWith(message, tail));
    CHECK(head.size() > 1000);
    CHECK(tail.size() > 1000);
  }
}

TEST_CASE("Control characters in a message are escaped, so a message stays one line",
          "[logging]") {
  CHECK(Logged("a\nb\tc\rd\x01\x1b[31m\x7f") == "gpuprio: a\\nb\\tc\\rd\\x01\\x1b[31m\\x7f\n");
  // Bytes of UTF-8 text are not control characters.
  CHECK(Logged("caf\xc3\xa9") == "gpuprio: caf\xc3\xa9\n");
}

TEST_CASE("Escaped quotes a value someone else supplied", "[logging]") {
  CHECK(absl::StrFormat("\"%s\"", Escaped("plain value")) == "\"plain value\"");
  CHECK(absl::StrFormat("\"%s\"", Escaped("a\"b\\c\nd\x02")) == "\"a\\\"b\\\\c\\nd\\x02\"");
  CHECK(absl::StrFormat("%s", Escaped(absl::string_view("nul\0byte", 8))) == "nul\\x00byte");
}

TEST_CASE("Logf formats as StrFormat does, and only when the level lets the message through",
          "[logging]") {
  int object = 0;
  {
    gpuprio_test::StderrCapture capture;
    Logf(LogLevel::kError, "%s on stream %p failed with CUDA error %d", "cuLaunchKernel",
         static_cast<void*>(&object), 700);
    CHECK(capture.Text() ==
          absl::StrFormat("gpuprio: %s on stream %p failed with CUDA error %d\n",
                          "cuLaunchKernel", static_cast<void*>(&object), 700));
  }
  {
    gpuprio_test::StderrCapture capture;
    Logf(LogLevel::kDebug, "%d", 1);  // the default level is warning
    Log(LogLevel::kInfo, "not shown");
    CHECK(capture.Text().empty());
  }
}

TEST_CASE("Log and Logf never allocate, however long the message", "[logging]") {
  const std::string long_message(5000, 'y');
  int object = 0;
  gpuprio_test::StderrCapture capture;
  gpuprio_test::AllocationCounter allocations;
  Log(LogLevel::kError, long_message);
  Logf(LogLevel::kError, "%s on stream %p failed with CUDA error %d, value \"%s\"",
       "cuLaunchKernel", static_cast<void*>(&object), 700, Escaped(long_message));
  CHECK(allocations.count() == 0);
  CHECK(absl::StrContains(capture.Text(), "cuLaunchKernel on stream"));
}

TEST_CASE("The allocation counter counts", "[logging]") {
  gpuprio_test::AllocationCounter allocations;
  std::string heap(1000, 'z');  // longer than any small-string buffer
  CHECK(allocations.count() >= 1);
}

}  // namespace
}  // namespace gpuprio
