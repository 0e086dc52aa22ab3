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
  constexpr char kHex[] = "0123456789abcdef";
  out[1] = 'x';
  out[2] = kHex[c >> 4];
  out[3] = kHex[c & 0xf];
  return {out, 4};
}

bool IsControl(unsigned char c) { return c < 0x20 || c == 0x7f; }

// One log line on the stack: the first kHead bytes in place, the last kTail bytes in a ring, so a
// message of any length costs no heap and keeps its beginning and its end.
class LineSink {
 public:
  LineSink() { AppendRaw(kPrefix); }

  // Appends `text`, control characters escaped.
  void Append(absl::string_view text) {
    size_t plain_from = 0;
    for (size_t i = 0; i < text.size(); ++i) {
      const auto c = static_cast<unsigned char>(text[i]);
      if (!IsControl(c)) continue;
      AppendRaw(text.substr(plain_from, i - plain_from));
      char escaped[4];
      AppendRaw(EscapeByte(c, escaped));
      plain_from = i + 1;
    }
    AppendRaw(text.substr(plain_from));
  }

  friend void AbslFormatFlush(LineSink* sink, absl::string_view text) { sink->Append(text); }

  // Ends the line and writes it with one write(2) (retried only for what a short write left).
  void Write() {
    size_t n = head_len_;
    if (tail_total_ <= kTail) {
      std::memcpy(line_ + n, tail_, tail_total_);
      n += tail_total_;
    } else {
      n += FormatMarker(tail_total_ - kTail, line_ + n);
      const size_t oldest = tail_total_ % kTail;
      std::memcpy(line_ + n, tail_ + oldest, kTail - oldest);
      n += kTail - oldest;
      std::memcpy(line_ + n, tail_, oldest);
      n += oldest;
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

  void AppendRaw(absl::string_view text) {
    if (text.empty()) return;  // its data() may be null, which memcpy must not get
    const size_t to_head = std::min(text.size(), kHead - head_len_);
    std::memcpy(line_ + head_len_, text.data(), to_head);
    head_len_ += to_head;
    text.remove_prefix(to_head);
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

  char line_[kMaxLogLine];
  size_t head_len_ = 0;
  char tail_[kTail];
  size_t tail_total_ = 0;  // bytes that went past the head; the ring holds the last kTail
};

}  // namespace

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level), std::memory_order_relaxed); }

LogLevel GetLogLevel() { return static_cast<LogLevel>(g_level.load(std::memory_order_relaxed)); }

bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) <= g_level.load(std::memory_order_relaxed);
}

void Log(LogLevel level, absl::string_view message) {
  if (!LogEnabled(level)) return;
  // On the stack: logging must work where the heap is off limits (fork child, exit handlers).
  LineSink line;
  line.Append(message);
  line.Write();
}

namespace log_internal {

void WriteLine(absl::FunctionRef<void(absl::FormatRawSink)> format, absl::string_view suffix) {
  LineSink line;
  format(&line);
  line.Append(suffix);
  line.Write();
}

}  // namespace log_internal

absl::FormatConvertResult<absl::FormatConversionCharSet::kString> AbslFormatConvert(
    const Escaped& value, const absl::FormatConversionSpec& /*spec*/, absl::FormatSink* sink) {
  const absl::string_view text = value.text_;
  size_t plain_from = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (!IsControl(c) && c != '"' && c != '\\') continue;
    sink->Append(text.substr(plain_from, i - plain_from));
    char escaped[4] = {'\\', static_cast<char>(c)};
    sink->Append(IsControl(c) ? EscapeByte(c, escaped) : absl::string_view(escaped, 2));
    plain_from = i + 1;
  }
  sink->Append(text.substr(plain_from));
  return {true};
}

}  // namespace gpuprio
