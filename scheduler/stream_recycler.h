// Streams the application destroyed, on their way from a client thread to their dispatcher (which
// lets go of what it kept for them) and back, as states ready for reuse by another stream of the
// device.
#ifndef GPUPRIO_SCHEDULER_STREAM_RECYCLER_H_
#define GPUPRIO_SCHEDULER_STREAM_RECYCLER_H_

#include <cuda.h>

#include <atomic>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "scheduler/stream_queue.h"
#include "scheduler/stream_state.h"

namespace gpuprio::scheduler {

// Stream creation and destruction only (never an op's path): a lock, and the dispatcher's check
// for released streams is one load.
class StreamRecycler {
 public:
  // Client: `stream` waits for its dispatcher to let go of it.
  void Release(StreamState* stream);
  // Client: a state its dispatcher let go of, or null.
  StreamState* TakeRecycled();

  // Dispatcher: whether any stream waits to be collected.
  bool HasReleased() const { return has_released_.load(std::memory_order_acquire); }
  // Dispatcher: the streams waiting, taken off the list.
  std::vector<StreamState*> TakeReleased();
  // Dispatcher, after TakeReleased: `keep` wait again (still referenced: collected on a later
  // round), `done` are ready for reuse.
  void Return(const std::vector<StreamState*>& keep, const std::vector<StreamState*>& done);
  // Dispatcher, after TakeReleased: `let_go` lets go of each of `released` it no longer refers to
  // (true: ready for reuse); the others wait for a later round.
  void Return(const std::vector<StreamState*>& released,
              absl::FunctionRef<bool(StreamState*)> let_go);

  // Dispatcher: the events it kept for a released stream's queue (its pool, its completion marks,
  // the last completed one, the watch event), taken out of the queue to be destroyed.
  static std::vector<CUevent> TakeEvents(StreamQueue* q);

 private:
  absl::Mutex mu_;
  std::vector<StreamState*> released_ ABSL_GUARDED_BY(mu_);
  std::vector<StreamState*> recycled_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> has_released_{false};
};

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_STREAM_RECYCLER_H_
