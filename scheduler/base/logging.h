// One-line diagnostics on stderr, "gpuprio: <level>: <message>", filtered by a process-wide level.
// Every line names its level (error, warning, info, debug), so a reader can tell a problem from a
// report and filter a log without knowing each message.
// Safe before constructors run and from any thread. Log and Logf never touch the heap (Logf formats
// into a stack buffer); a caller that builds its message with absl::StrFormat allocates itself.
//
// What a line may contain: every line is escaped in one place, the sink that assembles it, so no
// caller can forget. A message carries text from outside (paths, environment values, kernel names,
// driver messages); written raw, that text could end the line early, forge another, or drive the
// terminal that shows it. So a line's bytes are printable ASCII and valid UTF-8 only, with these
// escaped instead of written:
//   - C0 controls and DEL: \n, \t, \r, else \xNN (the line's own final newline excepted);
//   - bytes >= 0x80 that are not part of well-formed UTF-8 (stray continuation bytes, overlong
//     forms, surrogates, code points above U+10FFFF, a sequence cut short): \xNN, one per byte;
//     0x9b alone is CSI to a terminal in 8-bit mode;
//   - C1 controls U+0080..U+009F written as UTF-8 (CSI again, to a UTF-8 terminal): \u{NNNN};
//   - the bidi embeddings, overrides and isolates U+202A..U+202E and U+2066..U+2069, which reorder
//     what is displayed after them, and the line and paragraph separators U+2028, U+2029, which
//     some viewers break lines at: \u{NNNN}.
// Other text, in any script, is written as it is. A line cut for length (kMaxLogLine) is cut
// between characters, so it stays valid UTF-8.
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

// "error", "warning", "info" or "debug": the word a line carries (and GPUPRIO_LOG accepts).
absl::string_view LogLevelName(LogLevel level);

// Writes "gpuprio: <level>: <message>\n" with a single write(2), `message` escaped as the top of
// this file says, so a message is always one line and never a terminal command.
void Log(LogLevel level, absl::string_view message);

// Log without the level filter: for a line the user asked for by other means than GPUPRIO_LOG
// (GPUPRIO_ANNOUNCE's start line), or one that must be seen at every level. It still carries
// `level`, so it reads as what it is.
void LogUnfiltered(LogLevel level, absl::string_view message);

namespace log_internal {

// Runs `format` on a stack buffer, appends `suffix` and writes the line, labelled `level`, as Log
// does (the caller has applied the filter).
void WriteLine(LogLevel level, absl::FunctionRef<void(absl::FormatRawSink)> format,
               absl::string_view suffix);

// The escaping every log line goes through (the rules at the top of this file), for text that
// arrives in pieces: a UTF-8 character split between two Append calls is judged whole, as the
// pieces absl::Format hands a sink may split one anywhere. Never allocates; holds at most the
// three bytes of an unfinished character between calls.
//
//   TerminalEscaper escaper;
//   escaper.Append(piece, write);  // any number of pieces
//   escaper.Finish(write);         // a character left unfinished is escaped byte by byte
//
// `write` receives the escaped text in pieces; their concatenation does not depend on how the
// input was split.
class TerminalEscaper {
 public:
  using Output = absl::FunctionRef<void(absl::string_view)>;

  // With `escape_quotes`, '"' and '\\' are escaped too (\" and \\), for a value in quotes.
  constexpr explicit TerminalEscaper(bool escape_quotes = false) : escape_quotes_(escape_quotes) {}

  void Append(absl::string_view text, Output write);
  void Finish(Output write);

 private:
  const bool escape_quotes_;
  char pending_[3] = {};  // the start of a character the last piece ended inside
  size_t pending_size_ = 0;
};

}  // namespace log_internal

// Log(level, absl::StrFormat(format, args...)) without the heap. Nothing is formatted when the
// level filters the message out.
template <typename... Args>
void Logf(LogLevel level, const absl::FormatSpec<Args...>& format, const Args&... args) {
  if (!LogEnabled(level)) return;
  log_internal::WriteLine(
      level, [&](absl::FormatRawSink sink) { absl::Format(sink, format, args...); }, {});
}

// A value someone else supplied (an environment variable, a path), for a message: formatted with
// %s it is written with '"' and '\\' escaped (\", \\) and everything else escaped as a log line
// is (the top of this file), wherever the result goes, so it can be quoted and cannot break or
// forge a line or reach a terminal as a command. Does not own `text`.
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
