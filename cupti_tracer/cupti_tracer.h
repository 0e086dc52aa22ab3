// CuptiTracer: the OpObserver that records a CUPTI activity trace of the whole process plus
// gpuprio's own view (which client thread submitted each op, when the dispatcher issued it, queue
// depths), and writes it at exit as Chrome trace JSON (docs/trace_format.md).
//
// Lifecycle: Start() subscribes to CUPTI and enables activity kinds (or, with a capture window,
// leaves them off until the window opens: capture_window.h); Finish() (once: at exit, after the
// dispatchers stopped and before the CUDA runtime tears down, when the capture window closes, or
// on SIGTERM/SIGINT, trace_on_signal.h) flushes CUPTI, assembles a TraceInput and writes it. At
// most one
// CuptiTracer runs per process (CUPTI's callbacks are process-wide). The state CUPTI calls back
// into is a leaked singleton: CUPTI may deliver buffers from its own thread until the process is
// gone, so destroying a CuptiTracer frees nothing.
//
// Join keys it records (docs/trace_format.md): op id = CUSTOM2 external correlation id pushed around the
// real call on the dispatcher; the client's runtime correlation id stored from a runtime-API
// callback at submit.
//
// Clock: every gpuprio timestamp is on CUPTI's clock. Fresh values come from cuptiGetTimestamp()
// (a function call, tens of ns; a timestamp callback would instead move *CUPTI's* clock onto ours
// for every record it takes, and must be registered before any activity is enabled, which an
// already-initialised CUPTI may refuse). Times the scheduler measured on steady_clock (submit,
// on-caller issue begin/end) are converted with a pair of readings taken at that moment, so the two
// clocks' drift never accumulates.
#ifndef GPUPRIO_CUPTI_TRACER_CUPTI_TRACER_H_
#define GPUPRIO_CUPTI_TRACER_CUPTI_TRACER_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cupti_tracer/capture_window.h"
#include "cupti_tracer/cupti_library.h"
#include "scheduler/op.h"
#include "scheduler/op_observer.h"

namespace gpuprio::tracer {

struct CuptiTracerOptions {
  std::string path;                       // GPUPRIO_TRACE
  size_t max_bytes = size_t{512} << 20;   // GPUPRIO_TRACE_MAX_MB
  bool all_apis = false;  // GPUPRIO_TRACE_ALL_APIS=1: API records for every call, not only
                          // stream work and synchronisation (traced_apis.h)
  CaptureWindowOptions window;  // when to record (capture_window.h); default: the whole run
};

// cuProfilerStart / cuProfilerStop, called by the hook before the real call: with
// GPUPRIO_TRACE_RANGE=profiler_api the first start opens the recording and the next stop closes
// it and writes the trace (on the window's thread: these never wait for the write). Otherwise,
// and without a tracer, they do nothing (a start before the tracer starts is remembered).
// Async-signal-unsafe; any thread.
void OnProfilerStart();
void OnProfilerStop();

namespace internal {
class TracerCore;
}  // namespace internal

class CuptiTracer : public scheduler::OpObserver {
 public:
  // Subscribes and enables tracing. Errors:
  //   AlreadyExists: CUPTI has another subscriber (nsys, ncu, torch.profiler): fall back to NVTX.
  //   FailedPrecondition: a CuptiTracer already runs in this process.
  //   Unavailable / Internal: CUPTI refused (message names the call and CUPTI's error).
  // Nothing is left subscribed on error.
  static absl::StatusOr<std::unique_ptr<CuptiTracer>> Start(const CuptiApi& api,
                                                            CuptiTracerOptions options);

  // Flushes CUPTI and writes the trace (trace_file.h). Runs once; a later or concurrent call
  // waits until that one has written the trace, then returns OkStatus. In a forked child it
  // writes nothing (the events are the parent's) and says so at info level. Logs one line with
  // the path, op and record counts, and everything dropped, by cause (as the file's otherData).
  absl::Status Finish();
  // Finish() of the tracer started in this process, whoever holds it (the hook calls this from
  // its exit path); OkStatus when none was started.
  static absl::Status FinishActive();

  void OnSubmit(scheduler::Op& op) override;
  void OnCallerIssue(const char* api, int priority, CUstream stream, int64_t begin_ns,
                     int64_t end_ns) override;
  void OnDispatcherStart(int device) override;
  void OnIssueBegin(const scheduler::Op& op) override;
  void OnIssueEnd(const scheduler::Op& op, CUresult result) override;
  void OnQueueState(int device, int priority, int64_t pending,
                    uint64_t budget_in_use_ns) override;

 private:
  explicit CuptiTracer(internal::TracerCore* core) : core_(core) {}
  internal::TracerCore* const core_;  // leaked, see the file comment
};

}  // namespace gpuprio::tracer

#endif  // GPUPRIO_CUPTI_TRACER_CUPTI_TRACER_H_
