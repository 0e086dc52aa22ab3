// The tracer's settings, read from the environment by the rule of scheduler/base/env_reader.h
// (ranges and defaults: scheduler/base/env_vars.def):
//   GPUPRIO_TRACE          the trace file; unset: no trace
//   GPUPRIO_TRACE_MAX_MB   memory cap of the trace (MiB)
//   GPUPRIO_CUPTI_LIBRARY  the libcupti to load (path or soname) instead of the search list
//   GPUPRIO_TRACE_ALL_APIS 1: API records for every CUDA call, not only stream work and syncs
//   GPUPRIO_TRACE_DELAY_S  record from this many seconds after tracing starts (default 0)
//   GPUPRIO_TRACE_DURATION_S  record for this many seconds, then write the trace (0, default: to exit)
//   GPUPRIO_TRACE_RANGE    whole (default) or profiler_api: record from cuProfilerStart to
//                          cuProfilerStop (capture_window.h)
// The process reads them through GpuprioGetenv, so a setuid program ignores the two paths.
#ifndef GPUPRIO_CUPTI_TRACER_TRACER_CONFIG_H_
#define GPUPRIO_CUPTI_TRACER_TRACER_CONFIG_H_

#include <cstddef>
#include <string>

#include "cupti_tracer/capture_window.h"
#include "scheduler/base/env_reader.h"
#include "scheduler/base/env_vars.h"

namespace gpuprio::tracer {

struct TracerConfig {
  std::string path;            // GPUPRIO_TRACE; empty: no trace
  size_t max_bytes = static_cast<size_t>(IntegerDefault(env_var::GPUPRIO_TRACE_MAX_MB)) << 20;
  std::string cupti_library;   // GPUPRIO_CUPTI_LIBRARY; empty: the default search
  bool all_apis = false;       // GPUPRIO_TRACE_ALL_APIS: 1 records every API call
  CaptureWindowOptions window;  // GPUPRIO_TRACE_DELAY_S, _DURATION_S, _RANGE
};

// Pure. A bad value of any variable but GPUPRIO_TRACE is a problem and keeps its default; tracing
// still happens. GPUPRIO_TRACE_DELAY_S with GPUPRIO_TRACE_RANGE=profiler_api is a problem too: the
// range decides when recording starts, the delay is ignored.
ParsedEnv<TracerConfig> ParseTracerConfig(GetenvFunction getenv);

// ParseTracerConfig on `getenv`, its problems logged.
TracerConfig ReadTracerConfig(GetenvFunction getenv);

}  // namespace gpuprio::tracer

#endif  // GPUPRIO_CUPTI_TRACER_TRACER_CONFIG_H_
