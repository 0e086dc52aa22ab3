// The one entry point the hook uses to get a tracer for this process.
//
//   GPUPRIO_TRACE=FILE   -> CuptiTracer writing FILE at exit, or on SIGTERM/SIGINT when they had
//                           their default action (trace_on_signal.h); if libcupti cannot be
//                           loaded or CUPTI has another subscriber: one message, then
//                           NvtxAnnotator (NVTX ranges plus Kineto id carrying). FILE must be a
//                           regular file or a new name (trace_file.h): otherwise one message and
//                           no trace, as if unset.
//   unset                -> KinetoCarrier if libcupti is already loaded (PyTorch), else null
//                           (no observer: the scheduler pays one pointer test per op).
//   GPUPRIO_TRACE_MAX_MB -> memory cap of the trace, 1..1048576 (default 512).
//   GPUPRIO_CUPTI_LIBRARY-> the libcupti to load (path or soname) instead of the search list.
//   GPUPRIO_TRACE_ALL_APIS=1 -> API records for every CUDA call, not only stream work and syncs.
//
// Call once, lazily, when the scheduler is created (never from a library constructor: loading
// CUPTI there is too early). Call FinishTracerAtExit from the exit path after the dispatchers
// stopped and before the CUDA runtime tears down (hook/scheduler_bridge.cc StopDispatchersAtExit).
#ifndef GPUPRIO_CUPTI_TRACER_TRACER_FACTORY_H_
#define GPUPRIO_CUPTI_TRACER_TRACER_FACTORY_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "scheduler/op_observer.h"

namespace gpuprio::tracer {

struct TracerConfig {
  std::string path;            // GPUPRIO_TRACE; empty: no trace
  size_t max_bytes = size_t{512} << 20;
  std::string cupti_library;   // GPUPRIO_CUPTI_LIBRARY; empty: the default search
  bool all_apis = false;       // GPUPRIO_TRACE_ALL_APIS: 1 records every API call
};

// Pure. InvalidArgument names the variable, the bad value and the accepted ones; the caller
// reports it and uses the defaults for what was bad (see ReadTracerConfig).
absl::StatusOr<TracerConfig> ParseTracerConfig(absl::FunctionRef<const char*(const char*)> getenv);

// ParseTracerConfig on `getenv`; on a bad GPUPRIO_TRACE_MAX_MB logs one message and keeps the
// default cap (tracing still happens).
TracerConfig ReadTracerConfig(absl::FunctionRef<const char*(const char*)> getenv);

// The observer for `config` (see the file comment); null when nothing is wanted.
std::unique_ptr<scheduler::OpObserver> MakeTracer(const TracerConfig& config);

// MakeTracer(ReadTracerConfig(std::getenv)).
std::unique_ptr<scheduler::OpObserver> MakeTracerFromEnvironment();

// Writes the trace if a CuptiTracer runs (once; a call while another is writing waits for it,
// later ones do nothing; nothing in a forked child). Never fails the program.
void FinishTracerAtExit();

}  // namespace gpuprio::tracer

#endif  // GPUPRIO_CUPTI_TRACER_TRACER_FACTORY_H_
