// TEMPORARY stand-in for the real writer (cupti_tracer/chrome_trace_writer.cc, written in
// parallel): just enough JSON for the tracer to link and produce a loadable file. The integrator
// replaces the :chrome_trace_writer_stub target with the real :chrome_trace_writer.
#include <cstdio>

#include "absl/strings/str_format.h"
#include "cupti_tracer/chrome_trace_writer.h"

namespace gpuprio::tracer {

absl::Status WriteChromeTrace(const TraceInput& input, const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return absl::UnavailableError(absl::StrFormat("cannot open %s", path));
  std::fputs(absl::StrFormat(
                 "{\"traceEvents\": [], \"displayTimeUnit\": \"ns\", \"baseTimeNanoseconds\": %d, "
                 "\"otherData\": {\"gpuprio\": {\"version\": 0, \"stub\": true, \"pid\": %d, "
                 "\"dropped_records\": %d, \"ops\": %d, \"gpu_records\": %d}}}\n",
                 input.base_ns, input.pid, input.dropped_records, input.ops_submitted.size(),
                 input.gpu_activities.size())
                 .c_str(),
             f);
  if (std::fclose(f) != 0) return absl::UnavailableError(absl::StrFormat("cannot write %s", path));
  return absl::OkStatus();
}

}  // namespace gpuprio::tracer
