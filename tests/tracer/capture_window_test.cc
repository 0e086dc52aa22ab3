// Tests of cupti_tracer/capture_window: when recording opens and closes for each window setting,
// with the open/close actions recorded instead of CUPTI.
#include "cupti_tracer/capture_window.h"

#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "catch2/catch.hpp"

namespace gpuprio::tracer {
namespace {

using State = CaptureWindow::State;

// What the window did, and when (relative to Start()).
struct Recorder {
  absl::Mutex mu;
  std::vector<std::string> calls;
  std::vector<absl::Duration> at;
  absl::Time started = absl::Now();

  // `takes`: how long the action runs before it is recorded (CUPTI's enabling can take a while).
  std::function<void()> Action(const std::string& name,
                               absl::Duration takes = absl::ZeroDuration()) {
    return [this, name, takes] {
      absl::SleepFor(takes);
      absl::MutexLock lock(&mu);
      calls.push_back(name);
      at.push_back(absl::Now() - started);
    };
  }
  std::vector<std::string> Calls() {
    absl::MutexLock lock(&mu);
    return calls;
  }
  absl::Duration At(size_t i) {
    absl::MutexLock lock(&mu);
    return at.at(i);
  }
};

TEST_CASE("The whole run opens at Start and stays open without a thread", "[tracer]") {
  Recorder r;
  CaptureWindow window({}, r.Action("open"), r.Action("close"));
  CHECK(window.state() == State::kNotStarted);
  REQUIRE(window.Start());
  CHECK(r.Calls() == std::vector<std::string>{"open"});  // synchronously
  CHECK(window.state() == State::kOpen);
  CHECK(window.WaitUntilIdle(absl::ZeroDuration()));
}

TEST_CASE("A delay opens the window after it; without a duration it stays open", "[tracer]") {
  Recorder r;
  CaptureWindowOptions options;
  options.delay = absl::Milliseconds(300);
  CaptureWindow window(options, r.Action("open"), r.Action("close"));
  REQUIRE(window.Start());
  absl::SleepFor(absl::Milliseconds(100));
  CHECK(r.Calls().empty());
  CHECK(window.state() == State::kWaiting);
  REQUIRE(window.WaitUntilIdle(absl::Seconds(30)));
  CHECK(r.Calls() == std::vector<std::string>{"open"});
  CHECK(r.At(0) >= absl::Milliseconds(300));
  CHECK(window.state() == State::kOpen);
}

TEST_CASE("A duration closes the window that long after it opened", "[tracer]") {
  Recorder r;
  CaptureWindowOptions options;
  options.delay = absl::Milliseconds(100);
  options.duration = absl::Milliseconds(200);
  CaptureWindow window(options, r.Action("open"), r.Action("close"));
  REQUIRE(window.Start());
  REQUIRE(window.WaitUntilIdle(absl::Seconds(30)));
  REQUIRE(r.Calls() == std::vector<std::string>{"open", "close"});
  CHECK(r.At(0) >= absl::Milliseconds(100));
  CHECK(r.At(1) - r.At(0) >= absl::Milliseconds(200));
  CHECK(window.state() == State::kClosed);
}

TEST_CASE("A duration without a delay opens at Start itself, then closes on the thread",
          "[tracer]") {
  Recorder r;
  CaptureWindowOptions options;
  options.duration = absl::Milliseconds(150);
  CaptureWindow window(options, r.Action("open"), r.Action("close"));
  REQUIRE(window.Start());
  // Synchronously: the work right after Start() is recorded.
  CHECK(r.Calls() == std::vector<std::string>{"open"});
  CHECK(window.state() == State::kOpen);
  REQUIRE(window.WaitUntilIdle(absl::Seconds(30)));
  REQUIRE(r.Calls() == std::vector<std::string>{"open", "close"});
  CHECK(r.At(1) - r.At(0) >= absl::Milliseconds(150));
}

TEST_CASE("The profiler range opens at cuProfilerStart and closes at cuProfilerStop",
          "[tracer]") {
  CaptureWindow::ResetEarlyProfilerStartForTest();
  Recorder r;
  CaptureWindowOptions options;
  options.range = CaptureRange::kProfilerApi;
  CaptureWindow window(options, r.Action("open", absl::Milliseconds(200)), r.Action("close"));
  REQUIRE(window.Start());
  window.OnProfilerStop();  // a stop before any start is ignored
  absl::SleepFor(absl::Milliseconds(100));
  CHECK(r.Calls().empty());
  CHECK(window.state() == State::kWaiting);

  // Open when the start returns: the work submitted right after it is recorded.
  window.OnProfilerStart();
  CHECK(window.state() == State::kOpen);
  CHECK(r.Calls() == std::vector<std::string>{"open"});
  window.OnProfilerStart();  // a second start changes nothing
  absl::SleepFor(absl::Milliseconds(50));
  CHECK(r.Calls() == std::vector<std::string>{"open"});

  window.OnProfilerStop();
  REQUIRE(window.WaitUntilIdle(absl::Seconds(30)));
  CHECK(r.Calls() == std::vector<std::string>{"open", "close"});
  CHECK(window.state() == State::kClosed);
  window.OnProfilerStart();  // later ranges are not recorded
  window.OnProfilerStop();
  absl::SleepFor(absl::Milliseconds(50));
  CHECK(r.Calls() == std::vector<std::string>{"open", "close"});
}

TEST_CASE("A duration also ends a profiler range that is never stopped", "[tracer]") {
  CaptureWindow::ResetEarlyProfilerStartForTest();
  Recorder r;
  CaptureWindowOptions options;
  options.range = CaptureRange::kProfilerApi;
  options.duration = absl::Milliseconds(150);
  CaptureWindow window(options, r.Action("open"), r.Action("close"));
  REQUIRE(window.Start());
  window.OnProfilerStart();
  REQUIRE(window.WaitUntilIdle(absl::Seconds(30)));
  REQUIRE(r.Calls() == std::vector<std::string>{"open", "close"});
  CHECK(r.At(1) - r.At(0) >= absl::Milliseconds(150));
}

TEST_CASE("A cuProfilerStart before the window started opens it at Start", "[tracer]") {
  CaptureWindow::ResetEarlyProfilerStartForTest();
  CaptureWindow::NoteEarlyProfilerStart();
  Recorder r;
  CaptureWindowOptions options;
  options.range = CaptureRange::kProfilerApi;
  CaptureWindow window(options, r.Action("open"), r.Action("close"));
  REQUIRE(window.Start());
  for (int i = 0; i < 3000 && window.state() != State::kOpen; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  CHECK(r.Calls() == std::vector<std::string>{"open"});
  window.OnProfilerStop();
  REQUIRE(window.WaitUntilIdle(absl::Seconds(30)));
  CHECK(r.Calls() == std::vector<std::string>{"open", "close"});
  CaptureWindow::ResetEarlyProfilerStartForTest();
}

TEST_CASE("Profiler calls do nothing outside the profiler range", "[tracer]") {
  CaptureWindowOptions options;
  options.delay = absl::Seconds(3600);
  // Leaked, as the tracer leaks its window: the thread still waits on it when the test ends.
  static Recorder* r_kept = new Recorder;
  auto* window = new CaptureWindow(options, r_kept->Action("open"), r_kept->Action("close"));
  REQUIRE(window->Start());
  window->OnProfilerStart();
  window->OnProfilerStop();
  absl::SleepFor(absl::Milliseconds(100));
  CHECK(r_kept->Calls().empty());
  CHECK(window->state() == State::kWaiting);
}

}  // namespace
}  // namespace gpuprio::tracer
