#include "scheduler/base/logging.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/base/attributes.h"

namespace gpuprio {
namespace {

ABSL_CONST_INIT std::atomic<int> g_level{static_cast<int>(LogLevel::kWarning)};

constexpr absl::string_view kPrefix = "gpuprio: ";

constexpr char kHex[] = "0123456789abcdef";

// The escape sequence for byte `c` in `out` (at least 4 bytes): \n, \t, \r, else \xNN.
absl::string_view EscapeByte(unsigned char c, char* out) {
  out[0] = '\\';
  switch (c) {
    case '\n':
      out[1] = 'n';
      return {out, 2};
    case '\t':
      out[1] = 't';
      return {out, 2};
    case '\r':
      out[1] = 'r';
      return {out, 2};
    default:
      break;
  }
  out[1] = 'x';
  out[2] = kHex[c >> 4];
  out[3] = kHex[c & 0xf];
  return {out, 4};
}

// "\u{NNNN}", in `out` (8 bytes), for a code point below U+10000 (all IsEscapedCodePoint names).
absl::string_view EscapeCodePoint(char32_t code_point, char* out) {
  out[0] = '\\';
  out[1] = 'u';
  out[2] = '{';
  for (int i = 0; i < 4; ++i) out[3 + i] = kHex[(code_point >> (12 - 4 * i)) & 0xf];
  out[7] = '}';
  return {out, 8};
}

bool IsUtf8Continuation(unsigned char c) { return (c & 0xc0) == 0x80; }

// Code points that are valid UTF-8 yet must not reach a terminal (logging.h says why).
bool IsEscapedCodePoint(char32_t c) {
  return (c >= 0x80 && c <= 0x9f) || (c >= 0x2028 && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069);
}

// The UTF-8 character at the start of `text`, whose first byte is >= 0x80.
struct Utf8Char {
  enum Status { kValid, kInvalid, kIncomplete } status;
  // kValid: the character's size. kInvalid: the bytes that are not part of any character (the
  // lead byte and the continuation bytes that fit it, at least 1); decoding resumes after them.
  // kIncomplete: `text` ended inside a character that is well-formed so far.
  size_t size;
  char32_t code_point;  // kValid only
};

Utf8Char DecodeUtf8(absl::string_view text) {
  const auto lead = static_cast<unsigned char>(text[0]);
  size_t size = 0;
  char32_t code_point = 0;
  // The second byte's range excludes overlong forms (E0, F0), surrogates (ED) and code points
  // above U+10FFFF (F4); later bytes are any continuation byte.
  unsigned char low = 0x80;
  unsigned char high = 0xbf;
  if (lead >= 0xc2 && lead <= 0xdf) {
    size = 2;
    code_point = lead & 0x1f;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    size = 3;
    code_point = lead & 0x0f;
    if (lead == 0xe0) low = 0xa0;
    if (lead == 0xed) high = 0x9f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    size = 4;
    code_point = lead & 0x07;
    if (lead == 0xf0) low = 0x90;
    if (lead == 0xf4) high = 0x8f;
  } else {
    return {Utf8Char::kInvalid, 1, 0};  // a continuation byte, 0xc0, 0xc1 (overlong) or 0xf5..0xff
  }
  for (size_t i = 1; i < size; ++i) {
    if (i == text.size()) return {Utf8Char::kIncomplete, i, 0};
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < low || c > high) return {Utf8Char::kInvalid, i, 0};
    low = 0x80;
    high = 0xbf;
    code_point = (code_point << 6) | (c & 0x3f);
  }
  return {Utf8Char::kValid, size, code_point};
}

// Writes the character `text` starts with (decoded as `c`, not kIncomplete): as it is, or
// escaped.
void WriteChar(absl::string_view text, const Utf8Char& c,
               log_internal::TerminalEscaper::Output write) {
  char escaped[8];
  if (c.status == Utf8Char::kValid) {
    write(IsEscapedCodePoint(c.code_point) ? EscapeCodePoint(c.code_point, escaped)
                                           : text.substr(0, c.size));
    return;
  }
  for (size_t i = 0; i < c.size; ++i) {
    write(EscapeByte(static_cast<unsigned char>(text[i]), escaped));
  }
}

// One log line on the stack: the first kHead bytes in place, the last kTail bytes in a ring, so a
// message of any length costs no heap and keeps its beginning and its end.
class LineSink {
 public:
  explicit LineSink(LogLevel level) {
    AppendRaw(kPrefix);
    AppendRaw(LogLevelName(level));
    AppendRaw(": ");
  }

  // Appends `text`, escaped (logging.h).
  void Append(absl::string_view text) {
    escaper_.Append(text, [this](absl::string_view escaped) { AppendRaw(escaped); });
  }

  friend void AbslFormatFlush(LineSink* sink, absl::string_view text) { sink->Append(text); }

  // Ends the line and writes it with one write(2) (retried only for what a short write left).
  void Write() {
    escaper_.Finish([this](absl::string_view escaped) { AppendRaw(escaped); });
    size_t n = head_len_;
    if (tail_total_ <= kTail) {
      std::memcpy(line_ + n, tail_, tail_total_);
      n += tail_total_;
    } else {
      // The oldest byte kept may be inside a UTF-8 character whose start was overwritten: the
      // rest of that character (at most 3 bytes, as what the ring holds is valid UTF-8) is cut
      // too, and counted, so that the line stays valid UTF-8.
      const size_t oldest = tail_total_ % kTail;
      size_t skip = 0;
      while (skip < 3 &&
             IsUtf8Continuation(static_cast<unsigned char>(tail_[(oldest + skip) % kTail]))) {
        ++skip;
      }
      n += FormatMarker(tail_total_ - kTail + skip, line_ + n);
      const size_t from = (oldest + skip) % kTail;
      const size_t kept = kTail - skip;
      const size_t first = std::min(kept, kTail - from);
      std::memcpy(line_ + n, tail_ + from, first);
      std::memcpy(line_ + n + first, tail_, kept - first);
      n += kept;
    }
    line_[n++] = '\n';
    const char* p = line_;
    while (n > 0) {
      const ssize_t w = ::write(STDERR_FILENO, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) break;
      p += w;
      n -= static_cast<size_t>(w);
    }
  }

 private:
  static constexpr size_t kHead = 2048;       // bytes kept from the start, prefix included
  static constexpr size_t kMarkerMax = 64;    // " ...[N bytes cut]... "
  static constexpr size_t kTail = kMaxLogLine - kHead - kMarkerMax - 1;  // 1: the newline

  // Appends `text` (escaped already) to the head while it has room, then to the tail's ring.
  void AppendRaw(absl::string_view text) {
    if (text.empty()) return;  // its data() may be null, which memcpy must not get
    if (!head_closed_) {
      size_t to_head = std::min(text.size(), kHead - head_len_);
      if (to_head < text.size()) {
        // The head ends here, and never inside a UTF-8 character (half of one is invalid
        // UTF-8); what follows goes to the tail, even a piece that would fit.
        while (to_head > 0 && IsUtf8Continuation(static_cast<unsigned char>(text[to_head]))) {
          --to_head;
        }
        head_closed_ = true;
      }
      std::memcpy(line_ + head_len_, text.data(), to_head);
      head_len_ += to_head;
      text.remove_prefix(to_head);
    }
    if (text.size() > kTail) {  // only its last kTail bytes can survive
      tail_total_ += text.size() - kTail;
      text.remove_prefix(text.size() - kTail);
    }
    while (!text.empty()) {
      const size_t at = tail_total_ % kTail;
      const size_t take = std::min(text.size(), kTail - at);
      std::memcpy(tail_ + at, text.data(), take);
      tail_total_ += take;
      text.remove_prefix(take);
    }
  }

  static size_t FormatMarker(size_t cut, char* out) {
    char digits[24];
    size_t d = 0;
    do {
      digits[d++] = static_cast<char>('0' + cut % 10);
      cut /= 10;
    } while (cut != 0);
    size_t n = 0;
    for (char c : absl::string_view(" ...[")) out[n++] = c;
    while (d > 0) out[n++] = digits[--d];
    for (char c : absl::string_view(" bytes cut]... ")) out[n++] = c;
    return n;
  }

  log_internal::TerminalEscaper escaper_;
  char line_[kMaxLogLine];
  size_t head_len_ = 0;
  bool head_closed_ = false;  // the head took its last byte: the rest goes to the tail
  char tail_[kTail];
  size_t tail_total_ = 0;  // bytes that went past the head; the ring holds the last kTail
};

}  // namespace

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level), std::memory_order_relaxed); }

LogLevel GetLogLevel() { return static_cast<LogLevel>(g_level.load(std::memory_order_relaxed)); }

bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) <= g_level.load(std::memory_order_relaxed);
}

absl::string_view LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kError:
      return "error";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kDebug:
      return "debug";
  }
  return "unknown";
}

void Log(LogLevel level, absl::string_view message) {
  if (!LogEnabled(level)) return;
  LogUnfiltered(level, message);
}

void LogUnfiltered(LogLevel level, absl::string_view message) {
  // On the stack: logging must work where the heap is off limits (fork child, exit handlers).
  LineSink line(level);
  line.Append(message);
  line.Write();
}

namespace log_internal {

void WriteLine(LogLevel level, absl::FunctionRef<void(absl::FormatRawSink)> format,
               absl::string_view suffix) {
  LineSink line(level);
  format(&line);
  line.Append(suffix);
  line.Write();
}

void TerminalEscaper::Append(absl::string_view text, Output write) {
  if (pending_size_ > 0) {
    // Judge the character the last piece ended inside with this piece's first bytes.
    char joined[4];
    const size_t taken = std::min(text.size(), sizeof(joined) - pending_size_);
    std::memcpy(joined, pending_, pending_size_);
    if (taken > 0) std::memcpy(joined + pending_size_, text.data(), taken);
    const absl::string_view character(joined, pending_size_ + taken);
    const Utf8Char c = DecodeUtf8(character);
    if (c.status == Utf8Char::kIncomplete) {  // `text` ended inside it too
      if (taken > 0) std::memcpy(pending_ + pending_size_, text.data(), taken);
      pending_size_ += taken;
      return;
    }
    WriteChar(character, c, write);
    // The pending bytes were a well-formed start, so the character (or the bytes that could not
    // finish it) covers all of them.
    text.remove_prefix(c.size - pending_size_);
    pending_size_ = 0;
  }
  size_t plain_from = 0;  // the start of a run written as it is
  size_t i = 0;
  while (i < text.size()) {
    const auto b = static_cast<unsigned char>(text[i]);
    const bool quote = escape_quotes_ && (b == '"' || b == '\\');
    if (b >= 0x20 && b < 0x7f && !quote) {
      ++i;
      continue;
    }
    Utf8Char c{Utf8Char::kInvalid, 1, 0};
    if (b >= 0x80) {
      c = DecodeUtf8(text.substr(i));
      if (c.status == Utf8Char::kValid && !IsEscapedCodePoint(c.code_point)) {
        i += c.size;
        continue;
      }
    }
    write(text.substr(plain_from, i - plain_from));
    if (c.status == Utf8Char::kIncomplete) {
      const absl::string_view rest = text.substr(i);  // at most 3 bytes: fits pending_
      std::memcpy(pending_, rest.data(), rest.size());
      pending_size_ = rest.size();
      return;
    }
    if (b >= 0x80) {
      WriteChar(text.substr(i), c, write);
    } else {
      char escaped[4] = {'\\', static_cast<char>(b)};
      write(quote ? absl::string_view(escaped, 2) : EscapeByte(b, escaped));
    }
    i += c.size;
    plain_from = i;
  }
  write(text.substr(plain_from));
}

void TerminalEscaper::Finish(Output write) {
  char escaped[4];
  for (size_t i = 0; i < pending_size_; ++i) {
    write(EscapeByte(static_cast<unsigned char>(pending_[i]), escaped));
  }
  pending_size_ = 0;
}

}  // namespace log_internal

absl::FormatConvertResult<absl::FormatConversionCharSet::kString> AbslFormatConvert(
    const Escaped& value, const absl::FormatConversionSpec& /*spec*/, absl::FormatSink* sink) {
  log_internal::TerminalEscaper escaper(/*escape_quotes=*/true);
  const auto write = [sink](absl::string_view escaped) { sink->Append(escaped); };
  escaper.Append(value.text_, write);
  escaper.Finish(write);
  return {true};
}

}  // namespace gpuprio
