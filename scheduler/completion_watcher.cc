#include "scheduler/completion_watcher.h"

#include <unistd.h>

#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace gpuprio::scheduler {

struct CompletionWatcher::State {
  State(void (*w)(void*), void* a) : wake(w), arg(a) {}
  absl::Mutex mu;
  absl::CondVar requested;
  bool busy ABSL_GUARDED_BY(mu) = false;  // a watch handed over and not yet ended
  bool stop ABSL_GUARDED_BY(mu) = false;
  CUcontext context ABSL_GUARDED_BY(mu) = nullptr;
  CUevent events[kMaxEvents] ABSL_GUARDED_BY(mu) = {};
  int count ABSL_GUARDED_BY(mu) = 0;
  // Cleared when the owner goes away: a thread that comes back from the driver later wakes no one.
  void (*wake)(void*) ABSL_GUARDED_BY(mu);
  void* arg ABSL_GUARDED_BY(mu);
};

CompletionWatcher::CompletionWatcher(CUresult (*ctx_set_current)(CUcontext),
                                     CUresult (*event_synchronize)(CUevent),
                                     void (*on_thread_start)(), void (*wake)(void*), void* arg)
    : ctx_set_current_(ctx_set_current),
      event_synchronize_(event_synchronize),
      on_thread_start_(on_thread_start),
      wake_(wake),
      arg_(arg),
      state_(std::make_shared<State>(wake, arg)) {}

CompletionWatcher::~CompletionWatcher() {
  if (owner_pid_ != getpid()) return;  // no thread of this process
  absl::MutexLock lock(&state_->mu);
  state_->stop = true;
  state_->wake = nullptr;
  state_->requested.Signal();
}

void CompletionWatcher::StartThread() {
  if (owner_pid_ != 0) {
    // A forked child: the parent's thread is not here, and its state may have been caught
    // mid-watch, its mutex held. Left as it is (never touched, never freed); a fresh one takes
    // over.
    new std::shared_ptr<State>(std::move(state_));  // leaked on purpose
    state_ = std::make_shared<State>(wake_, arg_);
  }
  owner_pid_ = getpid();
  std::thread([state = state_, set_current = ctx_set_current_, sync = event_synchronize_,
               on_start = on_thread_start_] {
    if (on_start != nullptr) on_start();
    CUcontext current = nullptr;
    for (;;) {
      CUcontext context;
      CUevent events[kMaxEvents];
      int count;
      {
        absl::MutexLock lock(&state->mu);
        auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state->mu) {
          return state->stop || (state->busy && state->count > 0);
        };
        state->mu.Await(absl::Condition(&ready));
        if (state->stop) return;
        context = state->context;
        count = state->count;
        for (int i = 0; i < count; ++i) events[i] = state->events[i];
        state->count = 0;
      }
      if (context != current && set_current(context) == CUDA_SUCCESS) current = context;
      // Failures (a context or event destroyed meanwhile) end the wait as well as success: the
      // dispatcher looks at its work again either way.
      for (int i = 0; i < count; ++i) sync(events[i]);
      absl::MutexLock lock(&state->mu);
      state->busy = false;
      if (state->wake != nullptr) state->wake(state->arg);
    }
  }).detach();
}

bool CompletionWatcher::Watch(CUcontext context, absl::Span<const CUevent> events) {
  if (events.empty() || events.size() > kMaxEvents) return false;
  if (owner_pid_ != getpid()) StartThread();
  absl::MutexLock lock(&state_->mu);
  if (state_->busy) return false;
  state_->busy = true;
  state_->context = context;
  state_->count = static_cast<int>(events.size());
  for (size_t i = 0; i < events.size(); ++i) state_->events[i] = events[i];
  return true;
}

bool CompletionWatcher::Idle() const {
  if (owner_pid_ != getpid()) return true;  // no thread yet (or a forked child's inherited state)
  absl::MutexLock lock(&state_->mu);
  return !state_->busy;
}

}  // namespace gpuprio::scheduler
