// When a trace records: the whole run (default), or a window of it, as nsys's --delay,
// --duration and --capture-range=cudaProfilerApi select one:
//   delay      recording opens `delay` after Start();
//   duration   recording closes `duration` after it opened;
//   profiler   recording opens at the first cuProfilerStart and closes at the next cuProfilerStop
//              (or after `duration`, whichever comes first); later ranges are not recorded (one
//              trace per process). A cuProfilerStart before Start() counts (the tracer starts
//              lazily, at the first CUDA call gpuprio schedules).
// `open` and `close` are each called at most once, in that order, on the window's own thread
// (none for the default whole-run window: `open` runs inside Start()). `close` is where the trace
// is written, while the program goes on. If the process exits while the window is open, the exit
// path writes what was recorded; if it never opened, nothing is written.
#ifndef GPUPRIO_CUPTI_TRACER_CAPTURE_WINDOW_H_
#define GPUPRIO_CUPTI_TRACER_CAPTURE_WINDOW_H_

#include <functional>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gpuprio::tracer {

enum class CaptureRange { kWholeRun, kProfilerApi };

struct CaptureWindowOptions {
  absl::Duration delay = absl::ZeroDuration();   // GPUPRIO_TRACE_DELAY_S (not with kProfilerApi)
  std::optional<absl::Duration> duration;        // GPUPRIO_TRACE_DURATION_S
  CaptureRange range = CaptureRange::kWholeRun;  // GPUPRIO_TRACE_RANGE

  // True when recording starts at Start() and ends at exit: no window thread.
  bool WholeRun() const {
    return range == CaptureRange::kWholeRun && delay == absl::ZeroDuration() &&
           !duration.has_value();
  }
};

class CaptureWindow {
 public:
  enum class State { kNotStarted, kWaiting, kOpen, kClosed };

  CaptureWindow(CaptureWindowOptions options, std::function<void()> open,
                std::function<void()> close);
  CaptureWindow(const CaptureWindow&) = delete;
  CaptureWindow& operator=(const CaptureWindow&) = delete;
  // The window thread is detached and owns nothing of this object's: the tracer leaks its
  // window, so a destructor runs only in tests, after the thread is gone (WaitUntilIdle).
  ~CaptureWindow() = default;

  // Opens now (whole run) or starts the window's thread. False if the thread could not be
  // started (then nothing will be recorded; the caller says so). Once.
  bool Start();

  // cuProfilerStart / cuProfilerStop (kProfilerApi only; ignored otherwise). A start returns once
  // the recording is open (at most kOpenWait), so what the program submits next is recorded.
  // Neither blocks on the trace being written: the window's thread does that.
  void OnProfilerStart();
  void OnProfilerStop();

  State state() const;
  // Tests: waits until the window thread has nothing left to do (closed, or the window ended
  // without opening) or `timeout` passed. True if it did.
  bool WaitUntilIdle(absl::Duration timeout);

  // A cuProfilerStart seen before any window was started (the process-wide note that Start()
  // reads for kProfilerApi).
  static void NoteEarlyProfilerStart();
  static void ResetEarlyProfilerStartForTest();

 private:
  static constexpr absl::Duration kOpenWait = absl::Seconds(5);

  void Run();
  static void* RunThread(void* self);
  // Whether the window's thread has opened the recording or given up (no longer kWaiting).
  bool Decided() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const CaptureWindowOptions options_;
  const std::function<void()> open_;
  const std::function<void()> close_;

  mutable absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kNotStarted;
  bool start_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool thread_done_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace gpuprio::tracer

#endif  // GPUPRIO_CUPTI_TRACER_CAPTURE_WINDOW_H_
