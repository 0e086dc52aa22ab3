// The Chrome trace-event JSON gpuprio writes at exit (GPUPRIO_TRACE): joins the records
// (trace_join.h) and serialises them exactly as docs/trace_format.md specifies.
#ifndef GPUPRIO_CUPTI_TRACER_CHROME_TRACE_WRITER_H_
#define GPUPRIO_CUPTI_TRACER_CHROME_TRACE_WRITER_H_

#include <string>

#include "absl/status/status.h"
#include "cupti_tracer/trace_events.h"

namespace gpuprio::tracer {

// Process id of GPU `d`'s track in the trace (one "process" per device).
inline constexpr uint32_t kGpuPidBase = 1000000;

// Writes the trace of `input` to `path` through WriteFileReplacing (trace_file.h): a new private
// temporary beside `path`, renamed onto it, so a reader never sees half a file; a link or
// anything but a regular file at `path` is refused. On error `path` is untouched. A `path` ending
// in ".gz" is written gzip-compressed, as it is serialised (gzip_output.h).
absl::Status WriteChromeTrace(const TraceInput& input, const std::string& path);

// The same JSON, as a string (for tests and small traces).
std::string ChromeTraceJson(const TraceInput& input);

}  // namespace gpuprio::tracer

#endif  // GPUPRIO_CUPTI_TRACER_CHROME_TRACE_WRITER_H_
