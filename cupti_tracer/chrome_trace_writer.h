// Serialises a TraceInput as Chrome trace-event JSON (docs/trace_format.md) to `path`.
#ifndef GPUPRIO_CUPTI_TRACER_CHROME_TRACE_WRITER_H_
#define GPUPRIO_CUPTI_TRACER_CHROME_TRACE_WRITER_H_

#include <string>

#include "absl/status/status.h"
#include "cupti_tracer/trace_events.h"

namespace gpuprio::tracer {

absl::Status WriteChromeTrace(const TraceInput& input, const std::string& path);

}  // namespace gpuprio::tracer

#endif  // GPUPRIO_CUPTI_TRACER_CHROME_TRACE_WRITER_H_
