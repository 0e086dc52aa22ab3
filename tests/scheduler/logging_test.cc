// scheduler/logging: one line per message whatever its length or content, and no heap.
#include "scheduler/base/logging.h"

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "catch2/catch.hpp"
#include "tests/allocation_counter.h"
#include "tests/stderr_capture.h"

namespace gpuprio {
namespace {

// Logged() and the tests below write at the error level; every line names its level.
constexpr absl::string_view kPrefix = "gpuprio: error: ";

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
  CHECK(absl::StartsWith(line, "gpuprio: error: GPUPRIO_MODE=\"xxx"));
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
  CHECK(Logged("a\nb\tc\rd\x01\x1b[31m\x7f") == "gpuprio: error: a\\nb\\tc\\rd\\x01\\x1b[31m\\x7f\n");
  // Bytes of UTF-8 text are not control characters.
  CHECK(Logged("caf\xc3\xa9") == "gpuprio: error: caf\xc3\xa9\n");
}

// Checks UTF-8 validity independently of the code under test: every byte >= 0x80 must belong to a
// well-formed sequence (no overlong forms, no surrogates, nothing above U+10FFFF).
bool IsValidUtf8(absl::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    size_t length = 1;
    uint32_t code_point = b;
    if (b >= 0x80) {
      if ((b & 0xe0) == 0xc0) {
        length = 2;
        code_point = b & 0x1f;
      } else if ((b & 0xf0) == 0xe0) {
        length = 3;
        code_point = b & 0x0f;
      } else if ((b & 0xf8) == 0xf0) {
        length = 4;
        code_point = b & 0x07;
      } else {
        return false;
      }
      if (i + length > text.size()) return false;
      for (size_t k = 1; k < length; ++k) {
        const auto c = static_cast<unsigned char>(text[i + k]);
        if ((c & 0xc0) != 0x80) return false;
        code_point = (code_point << 6) | (c & 0x3f);
      }
      const uint32_t smallest[] = {0, 0, 0x80, 0x800, 0x10000};
      if (code_point < smallest[length] || code_point > 0x10ffff ||
          (code_point >= 0xd800 && code_point <= 0xdfff)) {
        return false;
      }
    }
    i += length;
  }
  return true;
}

// What a terminal must never receive raw from a log line: C0 controls, DEL, C1 controls and the
// bidi overrides and isolates, whether as bytes or as UTF-8.
bool HasTerminalControls(absl::string_view line) {
  const auto at = [&](size_t k) {
    return k < line.size() ? static_cast<unsigned char>(line[k]) : 0;
  };
  for (size_t i = 0; i < line.size(); ++i) {
    const unsigned char b = at(i);
    if (b < 0x20 || b == 0x7f) return true;
    if (b == 0xc2 && at(i + 1) >= 0x80 && at(i + 1) <= 0x9f) return true;  // U+0080..U+009F
    if (b == 0xe2 && at(i + 1) == 0x80 && at(i + 2) >= 0xaa && at(i + 2) <= 0xae) return true;
    if (b == 0xe2 && at(i + 1) == 0x81 && at(i + 2) >= 0xa6 && at(i + 2) <= 0xa9) return true;
  }
  return false;
}

// TerminalEscaper's output for `pieces` fed one after the other.
std::string EscapedPieces(std::initializer_list<absl::string_view> pieces,
                          bool escape_quotes = false) {
  std::string out;
  log_internal::TerminalEscaper escaper(escape_quotes);
  const auto write = [&out](absl::string_view text) { out.append(text.data(), text.size()); };
  for (absl::string_view piece : pieces) escaper.Append(piece, write);
  escaper.Finish(write);
  return out;
}

std::string EscapedText(absl::string_view text, bool escape_quotes = false) {
  return EscapedPieces({text}, escape_quotes);
}

TEST_CASE("TerminalEscaper escapes controls, broken UTF-8, C1 and bidi controls, nothing else",
          "[logging]") {
  const std::pair<absl::string_view, absl::string_view> cases[] = {
      {"plain text 0-9 ~!@#$%^&*()", "plain text 0-9 ~!@#$%^&*()"},
      // C0 controls and DEL.
      {"a\nb\tc\rd", "a\\nb\\tc\\rd"},
      {absl::string_view("\0\x01\x1b[31m\x1f\x7f", 9), "\\x00\\x01\\x1b[31m\\x1f\\x7f"},
      // Bytes that are no part of well-formed UTF-8.
      {"\x9b" "31mX", "\\x9b31mX"},                         // a lone C1 byte (8-bit CSI)
      {"\x80\xbf", "\\x80\\xbf"},                           // stray continuation bytes
      {"\xc0\xaf\xc1\xbf", "\\xc0\\xaf\\xc1\\xbf"},         // overlong 2-byte forms
      {"\xe0\x80\xaf", "\\xe0\\x80\\xaf"},                  // overlong 3-byte form
      {"\xf0\x80\x80\xaf", "\\xf0\\x80\\x80\\xaf"},         // overlong 4-byte form
      {"\xed\xa0\x80", "\\xed\\xa0\\x80"},                  // a UTF-16 surrogate
      {"\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80"},         // above U+10FFFF
      {"\xf5\xff\xfe", "\\xf5\\xff\\xfe"},                  // never in UTF-8
      {"\xe2\x80", "\\xe2\\x80"},                           // cut short at the end
      {"\xe2\x80x", "\\xe2\\x80x"},                         // cut short by ASCII
      {"\xe2\xe2\x80\xae", "\\xe2\\u{202e}"},               // a new lead byte restarts
      {"\xf0\x9f\x98\xe2\x80\xae", "\\xf0\\x9f\\x98\\u{202e}"},
      // C1 controls as UTF-8; U+00A0 just after them is text.
      {"\xc2\x80 \xc2\x9b \xc2\x9f \xc2\xa0", "\\u{0080} \\u{009b} \\u{009f} \xc2\xa0"},
      // Bidi embeddings, overrides and isolates; line and paragraph separators.
      {"\xe2\x80\xaa\xe2\x80\xab\xe2\x80\xac\xe2\x80\xad\xe2\x80\xae",
       "\\u{202a}\\u{202b}\\u{202c}\\u{202d}\\u{202e}"},
      {"\xe2\x81\xa6\xe2\x81\xa7\xe2\x81\xa8\xe2\x81\xa9", "\\u{2066}\\u{2067}\\u{2068}\\u{2069}"},
      {"\xe2\x80\xa8\xe2\x80\xa9", "\\u{2028}\\u{2029}"},
      // Their neighbours, and text in any script, are written as they are.
      {"\xe2\x80\xa7\xe2\x80\xaf\xe2\x81\xa5\xe2\x81\xaa",
       "\xe2\x80\xa7\xe2\x80\xaf\xe2\x81\xa5\xe2\x81\xaa"},
      {"caf\xc3\xa9 \xd0\xb6 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf",
       "caf\xc3\xa9 \xd0\xb6 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf"},
      // Quotes and backslashes are text unless asked for.
      {"say \"\\x41\"", "say \"\\x41\""},
  };
  for (const auto& [input, expected] : cases) {
    INFO("input " << absl::CHexEscape(input));
    CHECK(EscapedText(input) == expected);
  }
  CHECK(EscapedText("say \"a\\b\"\xc2\x9b", /*escape_quotes=*/true) ==
        "say \\\"a\\\\b\\\"\\u{009b}");
}

TEST_CASE("TerminalEscaper gives the same text however its input is split", "[logging]") {
  const std::string input =
      "a\xe2\x80\xae" "b\xc3\xa9\xf0\x9f\x98\x80\xc2\x9b\xe2\x80x\xed\xa0\x80\xf4\x90\n\x9b"
      "\xe6\x97\xa5\xe2\x81\xa9\xe2";
  const std::string whole = EscapedText(input);
  for (size_t cut = 0; cut <= input.size(); ++cut) {
    for (size_t second = cut; second <= input.size(); ++second) {
      INFO("cut at " << cut << " and " << second);
      const absl::string_view text(input);
      CHECK(EscapedPieces({text.substr(0, cut), text.substr(cut, second - cut), {},
                           text.substr(second)}) == whole);
    }
  }
  std::string byte_by_byte;
  log_internal::TerminalEscaper escaper;
  const auto write = [&](absl::string_view text) { byte_by_byte.append(text.data(), text.size()); };
  for (char c : input) escaper.Append(absl::string_view(&c, 1), write);
  escaper.Finish(write);
  CHECK(byte_by_byte == whole);
  CHECK(IsValidUtf8(whole));
}

TEST_CASE("A log line never carries 8-bit or C1 controls or bidi overrides raw", "[logging]") {
  // GPUPRIO_LOG=$'\x9b31mX': an invalid value the warning quotes back. 0x9b alone is CSI to an
  // 8-bit terminal; U+009B in UTF-8 is the same to a UTF-8 one; U+202E reverses what follows.
  {
    gpuprio_test::StderrCapture capture;
    Logf(LogLevel::kWarning, "GPUPRIO_LOG=\"%s\" is not valid; using warning",
         Escaped("\x9b" "31mX"));
    CHECK(capture.Text() == "gpuprio: warning: GPUPRIO_LOG=\"\\x9b31mX\" is not valid; using warning\n");
  }
  CHECK(Logged("a\xc2\x9b" "31mb") == "gpuprio: error: a\\u{009b}31mb\n");
  CHECK(Logged("file\xe2\x80\xae" "txt.exe") == "gpuprio: error: file\\u{202e}txt.exe\n");
  CHECK(Logged("\xe2\x81\xa6x\xe2\x81\xa9") == "gpuprio: error: \\u{2066}x\\u{2069}\n");
  CHECK(Logged("bad \xff\xc0\xaf \xed\xa0\x80 end \xe2\x80") ==
        "gpuprio: error: bad \\xff\\xc0\\xaf \\xed\\xa0\\x80 end \\xe2\\x80\n");
  // Text in any script stays readable.
  CHECK(Logged("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80") ==
        "gpuprio: error: caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80\n");
}

TEST_CASE("A character split between the pieces a format writes is judged whole", "[logging]") {
  // absl::Format hands a message to the line in pieces (each argument, and at its buffer's size):
  // a character can start in one piece and end in the next.
  SECTION("split between two arguments") {
    gpuprio_test::StderrCapture capture;
    Logf(LogLevel::kError, "%s%s|%s%s", "\xe2\x80", "\xae", "\xc3", "\xa9");
    CHECK(capture.Text() == "gpuprio: error: \\u{202e}|\xc3\xa9\n");
  }
  SECTION("at every offset around the format's buffer") {
    for (size_t before = 1000; before < 1040; ++before) {
      INFO("bytes before the character: " << before);
      const std::string padding(before, 'p');
      gpuprio_test::StderrCapture capture;
      Logf(LogLevel::kError, "%s%s%s", padding, "\xe2\x80\xae", "\xc3\xa9");
      CHECK(capture.Text() == absl::StrCat(kPrefix, padding, "\\u{202e}\xc3\xa9\n"));
    }
  }
}

TEST_CASE("A cut line stays valid UTF-8: the cut never splits a character", "[logging]") {
  // 2-, 3- and 4-byte characters behind 0..3 bytes of ASCII put the head's end and the tail's
  // start at every position inside a character.
  for (absl::string_view character : {"\xc3\xa9", "\xe6\x97\xa5", "\xf0\x9f\x98\x80"}) {
    for (size_t shift = 0; shift < 4; ++shift) {
      for (size_t extra = 0; extra < 4; ++extra) {
        std::string message(shift, 's');
        for (int i = 0; i < 3000; ++i) absl::StrAppend(&message, character);
        message.append(extra, 'e');
        const std::string line = Logged(message);
        INFO("character size " << character.size() << ", shift " << shift << ", extra "
                               << extra);
        REQUIRE(line.size() <= kMaxLogLine);
        CHECK(absl::StrContains(line, " bytes cut]... "));
        CHECK(IsValidUtf8(line));
        CHECK_FALSE(absl::StrContains(line, "\\x"));  // nothing escaped: the text was valid
        CHECK(absl::EndsWith(line, absl::StrCat(character, std::string(extra, 'e'), "\n")));
      }
    }
  }
}

TEST_CASE("Hostile bytes in any position give a line that is safe for a terminal", "[logging]") {
  // Random bytes biased toward the dangerous ones, through Log and through Escaped in Logf.
  const std::string alphabet =
      "a\n\x1b\x7f\x80\x9b\xbf\xc2\xc3\xe2\x80\x81\xaa\xae\xa6\xa9\xed\xf0\xf4\xff\"\\";
  uint64_t state = 0x9e3779b97f4a7c15;
  for (int round = 0; round < 2000; ++round) {
    std::string message;
    const size_t size = state % 40;
    for (size_t i = 0; i < size; ++i) {
      state = state * 6364136223846793005 + 1442695040888963407;
      message.push_back(alphabet[(state >> 33) % alphabet.size()]);
    }
    state = state * 6364136223846793005 + 1442695040888963407;
    INFO("round " << round);
    std::string line = Logged(message);
    CHECK(IsValidUtf8(line));
    CHECK_FALSE(HasTerminalControls(line.substr(0, line.size() - 1)));
    gpuprio_test::StderrCapture capture;
    Logf(LogLevel::kError, "value \"%s\"", Escaped(message));
    line = capture.Text();
    CHECK(IsValidUtf8(line));
    CHECK_FALSE(HasTerminalControls(line.substr(0, line.size() - 1)));
  }
}

TEST_CASE("Escaped quotes a value someone else supplied", "[logging]") {
  CHECK(absl::StrFormat("\"%s\"", Escaped("plain value")) == "\"plain value\"");
  CHECK(absl::StrFormat("\"%s\"", Escaped("a\"b\\c\nd\x02")) == "\"a\\\"b\\\\c\\nd\\x02\"");
  CHECK(absl::StrFormat("%s", Escaped(absl::string_view("nul\0byte", 8))) == "nul\\x00byte");
  // Not only in a log line: a value formatted anywhere carries no terminal controls.
  CHECK(absl::StrFormat("%s", Escaped("\x9b" "31m\xc2\x9b\xe2\x80\xae\xc3\xa9")) ==
        "\\x9b31m\\u{009b}\\u{202e}\xc3\xa9");
}

TEST_CASE("Logf formats as StrFormat does, and only when the level lets the message through",
          "[logging]") {
  int object = 0;
  {
    gpuprio_test::StderrCapture capture;
    Logf(LogLevel::kError, "%s on stream %p failed with CUDA error %d", "cuLaunchKernel",
         static_cast<void*>(&object), 700);
    CHECK(capture.Text() ==
          absl::StrFormat("gpuprio: error: %s on stream %p failed with CUDA error %d\n",
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
  Log(LogLevel::kError, "\x9b \xc2\x9b \xe2\x80\xae \xc3\xa9 \xe2\x80");
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
