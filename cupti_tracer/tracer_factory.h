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
//   the other settings: tracer_config.h.
//
// Call once, lazily, when the scheduler is created (never from a library constructor: loading
// CUPTI there is too early). Call FinishTracerAtExit from the exit path after the dispatchers
// stopped and before the CUDA runtime tears down (hook/scheduler_bridge.cc StopDispatchersAtExit).
#ifndef GPUPRIO_CUPTI_TRACER_TRACER_FACTORY_H_
#define GPUPRIO_CUPTI_TRACER_TRACER_FACTORY_H_

#include <memory>

#include "cupti_tracer/tracer_config.h"
#include "scheduler/op_observer.h"

namespace gpuprio::tracer {

// The observer for `config` (see the file comment); null when nothing is wanted. The
// placeholders of config.path (trace_path_pattern.h) are expanded first, for this process.
std::unique_ptr<scheduler::OpObserver> MakeTracer(const TracerConfig& config);

// MakeTracer(ReadTracerConfig(GpuprioGetenv)).
std::unique_ptr<scheduler::OpObserver> MakeTracerFromEnvironment();

// Writes the trace if a CuptiTracer runs (once; a call while another is writing waits for it,
// later ones do nothing; nothing in a forked child). Never fails the program.
void FinishTracerAtExit();

}  // namespace gpuprio::tracer

#endif  // GPUPRIO_CUPTI_TRACER_TRACER_FACTORY_H_
