// What the scheduler knows of one scheduled stream (a created stream, or a context's legacy NULL
// stream). Client threads and the dispatcher share it through atomics only; the dispatcher's
// private per-stream queue lives in the dispatcher.
#ifndef GPUPRIO_SCHEDULER_STREAM_STATE_H_
#define GPUPRIO_SCHEDULER_STREAM_STATE_H_

#include <cuda.h>

#include <atomic>
#include <cstdint>

namespace gpuprio::scheduler {

class Dispatcher;

inline constexpr int kPriorityUnset = -1000;  // == GPUPRIO_PRIORITY_UNSET

struct StreamState {
  CUcontext context = nullptr;
  CUstream stream = nullptr;  // the real handle to issue on; null for the legacy stream
  bool legacy = false;        // the context's legacy NULL stream
  bool blocking = true;       // synchronises with the legacy stream (not CU_STREAM_NON_BLOCKING)
  int priority = kPriorityUnset;  // from cuStreamCreateWithPriority, gpuprio's scale
  Dispatcher* dispatcher = nullptr;

  // Ops submitted (client side, under the dispatcher's submit order) and issued (dispatcher).
  // A sync waits until issued reaches the submitted count it saw. A state is reused after its
  // stream is destroyed (Dispatcher::TakeRecycledStream); both counts then go on from where they
  // were, so any count taken from the former stream is already reached.
  std::atomic<uint64_t> submitted{0};
  std::atomic<uint64_t> issued{0};
  // First asynchronous error of an issued op, returned by the stream's next sync or query.
  std::atomic<int> deferred_error{CUDA_SUCCESS};
  std::atomic<bool> destroyed{false};
  // Spatial isolation: the stream's latest work went to its twin in the SM partition and has not
  // been joined back (the dispatcher writes it; a client reads it before work it runs itself,
  // which must first bring the stream home: Scheduler::WaitStream).
  std::atomic<bool> away{false};

  // Fast path: ops their client threads issued themselves (Dispatcher::NoteDirect). The highest
  // priority that ever did so here, and whether such work was issued since the dispatcher last
  // put a completion mark behind it; `direct_next` links the stream into the dispatcher's list
  // of such streams while `direct_unmarked` is set.
  std::atomic<int> direct_priority{kPriorityUnset};
  std::atomic<bool> direct_unmarked{false};
  StreamState* direct_next = nullptr;

  // Across devices: ops of other devices' dispatchers wait until this stream has issued
  // `awaited_count` ops (event waits on a record queued here). The stream's own dispatcher
  // issues those ops first, as if they had `awaited_priority` (priority inheritance), and once
  // they are issued wakes the dispatchers in `awaited_by` (DispatcherDirectory bits). Raised by
  // the waiting dispatchers (AtomicMax, fetch_or), cleared by the stream's own.
  std::atomic<uint64_t> awaited_count{0};
  std::atomic<int> awaited_priority{kPriorityUnset};
  std::atomic<uint64_t> awaited_by{0};

  bool HasUnissued() const {
    return issued.load(std::memory_order_acquire) < submitted.load(std::memory_order_acquire);
  }
};

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_STREAM_STATE_H_
