#include "cupti_tracer/capture_window.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <utility>

#include "absl/base/attributes.h"

namespace gpuprio::tracer {
namespace {

ABSL_CONST_INIT std::atomic<bool> g_early_profiler_start{false};

}  // namespace

CaptureWindow::CaptureWindow(CaptureWindowOptions options, std::function<void()> open,
                             std::function<void()> close)
    : options_(std::move(options)), open_(std::move(open)), close_(std::move(close)) {}

void CaptureWindow::NoteEarlyProfilerStart() {
  g_early_profiler_start.store(true, std::memory_order_relaxed);
}

void CaptureWindow::ResetEarlyProfilerStartForTest() {
  g_early_profiler_start.store(false, std::memory_order_relaxed);
}

bool CaptureWindow::Start() {
  {
    absl::MutexLock lock(&mu_);
    if (state_ != State::kNotStarted) return true;
    state_ = State::kWaiting;
    if (options_.range == CaptureRange::kProfilerApi &&
        g_early_profiler_start.load(std::memory_order_relaxed)) {
      start_requested_ = true;
    }
  }
  // No delay: open here, before Start() returns, so the work right after it is recorded (the
  // window's thread would open it a moment later).
  if (options_.range == CaptureRange::kWholeRun && options_.delay == absl::ZeroDuration()) {
    open_();
    absl::MutexLock lock(&mu_);
    state_ = State::kOpen;
    if (!options_.duration.has_value()) {
      thread_done_ = true;  // nothing for a thread to do: exit closes the window
      return true;
    }
  }
  // The program's signals go to the program's threads: the new thread starts with all blocked.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  pthread_t thread;
  const bool started = pthread_create(&thread, nullptr, &CaptureWindow::RunThread, this) == 0;
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (!started) {
    absl::MutexLock lock(&mu_);
    if (state_ != State::kOpen) state_ = State::kClosed;  // open stays open until exit
    thread_done_ = true;
    return false;
  }
  pthread_setname_np(thread, "gpuprio window");
  pthread_detach(thread);
  return true;
}

void* CaptureWindow::RunThread(void* self) {
  static_cast<CaptureWindow*>(self)->Run();
  return nullptr;
}

void CaptureWindow::Run() {
  const bool by_profiler = options_.range == CaptureRange::kProfilerApi;
  bool opened_by_start;
  {
    absl::MutexLock lock(&mu_);
    opened_by_start = state_ == State::kOpen;
    if (opened_by_start) {
      // Start() opened it.
    } else if (by_profiler) {
      mu_.Await(absl::Condition(&start_requested_));
    } else {
      // Nothing sets stop_requested_ outside kProfilerApi: only the deadline ends this wait.
      const absl::Time open_at = absl::Now() + options_.delay;
      while (absl::Now() < open_at) {
        mu_.AwaitWithDeadline(absl::Condition(&stop_requested_), open_at);
      }
    }
  }
  if (!opened_by_start) open_();
  {
    absl::MutexLock lock(&mu_);
    state_ = State::kOpen;
    if (!by_profiler && !options_.duration.has_value()) {
      thread_done_ = true;  // open until exit, whose path writes the trace
      return;
    }
    if (options_.duration.has_value()) {
      const absl::Time close_at = absl::Now() + *options_.duration;
      while (!stop_requested_ && absl::Now() < close_at) {
        mu_.AwaitWithDeadline(absl::Condition(&stop_requested_), close_at);
      }
    } else {
      mu_.Await(absl::Condition(&stop_requested_));
    }
    state_ = State::kClosed;
  }
  close_();
  absl::MutexLock lock(&mu_);
  thread_done_ = true;
}

void CaptureWindow::OnProfilerStart() {
  if (options_.range != CaptureRange::kProfilerApi) return;
  absl::MutexLock lock(&mu_);
  start_requested_ = true;
  // The range begins with the call: the work the program submits right after it must be recorded,
  // so wait for the window's thread to open the recording. Bounded: never hold the program.
  if (state_ == State::kWaiting) {
    mu_.AwaitWithTimeout(absl::Condition(this, &CaptureWindow::Decided), kOpenWait);
  }
}

bool CaptureWindow::Decided() const { return state_ != State::kWaiting; }

void CaptureWindow::OnProfilerStop() {
  if (options_.range != CaptureRange::kProfilerApi) return;
  absl::MutexLock lock(&mu_);
  // A stop before any start closes nothing (nsys ignores it too).
  if (start_requested_) stop_requested_ = true;
}

CaptureWindow::State CaptureWindow::state() const {
  absl::MutexLock lock(&mu_);
  return state_;
}

bool CaptureWindow::WaitUntilIdle(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&thread_done_), timeout);
}

}  // namespace gpuprio::tracer
