// A test client's background activity: a thread of its own runs a round of work
// every period until the object is destroyed. The scheduler tests use it to
// keep a more important level active (within the 0.5 s activity window) however
// slowly a loaded machine runs the rest of the client.
#ifndef GPUPRIO_TESTS_SCHEDULER_REPEATING_ACTIVITY_H_
#define GPUPRIO_TESTS_SCHEDULER_REPEATING_ACTIVITY_H_

#include <functional>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace sched_client {

class RepeatingActivity {
public:
  struct Steps {
    std::function<void()> setup; // once, on the thread, before the first round
    std::function<void()> round; // every `period`
    std::function<void()>
        after_first;              // once, after the first round (may be empty)
    std::function<void()> finish; // once, after the last round (may be empty)
  };

  // Returns once the first round (and after_first) has run, so its effects
  // exist.
  RepeatingActivity(Steps steps, absl::Duration period)
      : steps_(std::move(steps)), period_(period), thread_([this] { Run(); }) {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&started_));
  }
  RepeatingActivity(const RepeatingActivity &) = delete;
  RepeatingActivity &operator=(const RepeatingActivity &) = delete;
  ~RepeatingActivity() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    thread_.join();
  }

private:
  void Run() {
    steps_.setup();
    absl::MutexLock lock(&mu_);
    do {
      steps_.round();
      if (!started_) {
        if (steps_.after_first)
          steps_.after_first();
        started_ = true;
      }
    } while (!mu_.AwaitWithTimeout(absl::Condition(&stop_), period_));
    if (steps_.finish)
      steps_.finish();
  }

  const Steps steps_;
  const absl::Duration period_;
  absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_; // last: it starts once the members it uses exist
};

} // namespace sched_client

#endif // GPUPRIO_TESTS_SCHEDULER_REPEATING_ACTIVITY_H_
