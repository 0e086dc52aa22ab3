// One-line diagnostics on stderr, prefixed "gpuprio: ", filtered by a process-wide level.
// Safe before constructors run and from any thread. Log and Logf never touch the heap (Logf formats
// into a stack buffer); a caller that builds its message with absl::StrFormat allocates itself.
#ifndef GPUPRIO_SCHEDULER_BASE_LOGGING_H_
#define GPUPRIO_SCHEDULER_BASE_LOGGING_H_

#include <cstddef>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace gpuprio {

enum class LogLevel : int { kError = 0, kWarning = 1, kInfo = 2, kDebug = 3 };

// The longest line written, newline included: PIPE_BUF, so that one write(2) of a line is atomic
// on a pipe and lines from threads never interleave. A longer message keeps its first and its
// last part, joined by " ...[N bytes cut]... ": the end of a message (what gpuprio does about a
// problem) is never lost.
inline constexpr size_t kMaxLogLine = 4096;

// Messages above this level are dropped. Default: kWarning.
void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
bool LogEnabled(LogLevel level);

// Writes "gpuprio: <message>\n" with a single write(2). Control characters in `message` are
// written escaped (\n, \t, \r, \xNN), so a message is always one line.
void Log(LogLevel level, absl::string_view message);

namespace log_internal {
// Runs `format` on a stack buffer, appends `suffix` and writes the line as Log does.
void WriteLine(absl::FunctionRef<void(absl::FormatRawSink)> format, absl::string_view suffix);
}  // namespace log_internal

// Log(level, absl::StrFormat(format, args...)) without the heap. Nothing is formatted when the
// level filters the message out.
template <typename... Args>
void Logf(LogLevel level, const absl::FormatSpec<Args...>& format, const Args&... args) {
  if (!LogEnabled(level)) return;
  log_internal::WriteLine([&](absl::FormatRawSink sink) { absl::Format(sink, format, args...); },
                          {});
}

// A value someone else supplied (an environment variable, a path), for a message: formatted with
// %s it is written with '"', '\\' and control characters escaped (\", \\, \n, \t, \r, \xNN), so
// it can be quoted and cannot break or forge a line. Does not own `text`.
class Escaped {
 public:
  explicit Escaped(absl::string_view text) : text_(text) {}

  friend absl::FormatConvertResult<absl::FormatConversionCharSet::kString> AbslFormatConvert(
      const Escaped& value, const absl::FormatConversionSpec& spec, absl::FormatSink* sink);

 private:
  absl::string_view text_;
};

}  // namespace gpuprio

#endif  // GPUPRIO_SCHEDULER_BASE_LOGGING_H_
