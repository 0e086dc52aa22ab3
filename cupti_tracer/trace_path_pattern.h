// The GPUPRIO_TRACE name as a pattern, like nsys's -o: one file per process of a multi-process
// job (torchrun ranks, server workers) from one setting.
//
//   %p        the process id
//   %h        the host name
//   %q{VAR}   the value of environment variable VAR
//   %%        a literal %
//
// Anything else after a % (and %q without a well-formed {VAR}) is kept literally, with a
// warning. An unset or empty VAR is kept as the literal "%q{VAR}", with a warning: an empty
// expansion would silently give every process the same name (nsys leaves this undocumented; a
// name that shows the unexpanded variable says what went wrong).
#ifndef GPUPRIO_CUPTI_TRACER_TRACE_PATH_PATTERN_H_
#define GPUPRIO_CUPTI_TRACER_TRACE_PATH_PATTERN_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "scheduler/base/env_vars.h"

namespace gpuprio::tracer {

// What the placeholders stand for.
struct TracePathContext {
  long pid = 0;
  std::string hostname;
};

struct ExpandedTracePath {
  std::string path;
  std::vector<std::string> warnings;  // one line each; empty when every placeholder expanded
};

// Pure: `getenv` answers %q{VAR}.
ExpandedTracePath ExpandTracePath(absl::string_view pattern, const TracePathContext& context,
                                  GetenvFunction getenv);

// The context of this process: getpid() and gethostname() ("localhost" if that fails).
TracePathContext CurrentTracePathContext();

}  // namespace gpuprio::tracer

#endif  // GPUPRIO_CUPTI_TRACER_TRACE_PATH_PATTERN_H_
