// One-line diagnostics on stderr, prefixed "gpuprio: ", filtered by a process-wide level.
// Safe before constructors run and from any thread; never allocates when the level filters the
// message out, so callers may log on cold paths without checking first.
#ifndef GPUPRIO_SCHEDULER_LOGGING_H_
#define GPUPRIO_SCHEDULER_LOGGING_H_

#include "absl/strings/string_view.h"

namespace gpuprio {

enum class LogLevel : int { kError = 0, kWarning = 1, kInfo = 2, kDebug = 3 };

// Messages above this level are dropped. Default: kWarning.
void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
bool LogEnabled(LogLevel level);

// Writes "gpuprio: <message>\n" with a single write(2), so lines from threads never interleave.
void Log(LogLevel level, absl::string_view message);

}  // namespace gpuprio

#endif  // GPUPRIO_SCHEDULER_LOGGING_H_
