// Waits, on a thread of its own, for a dispatcher's work to end on the GPU: a few events created
// with CU_EVENT_BLOCKING_SYNC, which put the waiting thread to sleep in the driver until the GPU
// reaches them, then wakes the dispatcher. Other processes that wait on this one's work learn of
// its end without the dispatcher polling the GPU thousands of times a second.
#ifndef GPUPRIO_SCHEDULER_COMPLETION_WATCHER_H_
#define GPUPRIO_SCHEDULER_COMPLETION_WATCHER_H_

#include <cuda.h>
#include <sys/types.h>

#include <memory>

#include "absl/types/span.h"

namespace gpuprio::scheduler {

class CompletionWatcher {
 public:
  static constexpr int kMaxEvents = 8;
  // `wake(arg)` runs on the watcher's thread once every event of a watch is reached (or failed).
  // `on_thread_start` (may be null) runs first on the thread (the hook marks it as the driver's).
  CompletionWatcher(CUresult (*ctx_set_current)(CUcontext),
                    CUresult (*event_synchronize)(CUevent), void (*on_thread_start)(),
                    void (*wake)(void*), void* arg);
  // Stops the thread. One still inside the driver, waiting for the GPU, is left to finish on its
  // own: it no longer wakes anyone.
  ~CompletionWatcher();
  CompletionWatcher(const CompletionWatcher&) = delete;
  CompletionWatcher& operator=(const CompletionWatcher&) = delete;

  // Hands over `events` (at most kMaxEvents, recorded in `context`'s streams) and returns true;
  // false, doing nothing, while an earlier watch is still waiting (its events are in use).
  // Starts the thread on first use, and again in a forked child.
  bool Watch(CUcontext context, absl::Span<const CUevent> events);
  // Whether no watch is waiting: the events of the last one may be recorded again.
  bool Idle() const;

 private:
  struct State;
  void StartThread();

  CUresult (*const ctx_set_current_)(CUcontext);
  CUresult (*const event_synchronize_)(CUevent);
  void (*const on_thread_start_)();
  void (*const wake_)(void*);
  void* const arg_;
  // Shared with the thread, which may outlive this object inside a driver call.
  std::shared_ptr<State> state_;
  pid_t owner_pid_ = 0;  // the process the thread runs in
};

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_COMPLETION_WATCHER_H_
