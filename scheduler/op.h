// An op: one stream-ordered driver call recorded by a client thread, carried to the dispatcher,
// and issued there. The scheduler never interprets the arguments: the hook that built the op
// supplies `issue`, which rebuilds the call from the op's own copy of its arguments.
#ifndef GPUPRIO_SCHEDULER_OP_H_
#define GPUPRIO_SCHEDULER_OP_H_

#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "scheduler/op_observer.h"

namespace gpuprio::scheduler {

class OpPool;
struct StreamState;

struct Op {
  using IssueFn = CUresult (*)(Op& op);

  // Set by the client.
  IssueFn issue = nullptr;
  const char* name = nullptr;   // driver API, for logs ("cuLaunchKernel")
  StreamState* stream = nullptr;
  int priority = 0;
  const void* cost_key = nullptr;  // CUfunction of a kernel: duration estimates are per key
  uint64_t cost_hint_ns = 0;       // estimate when there is no history (copies: from size)
  // A wait on an event: not issued before `depends_on` has issued `depends_on_count` ops.
  StreamState* depends_on = nullptr;
  uint64_t depends_on_count = 0;
  // Decremented once the op is issued (an event's count of queued waits).
  std::atomic<int>* issued_counter = nullptr;
  // Decremented once the op is issued: a kernel launch's count in QueuedLaunches (set by
  // Scheduler::Submit).
  std::atomic<int32_t>* launch_counter = nullptr;
  int64_t submit_ns = 0;
  // When the policy first refused to issue it (0: never held back), for the exit summary.
  int64_t held_since_ns = 0;
  OpTraceContext trace;  // filled by an OpObserver, if one is installed

  // Issue nothing: only bring the stream's work back from its twin to the application's stream
  // (Scheduler::WaitStream, before work that runs on the caller's thread). Not admitted by the
  // policy: it costs no GPU time.
  bool home_only = false;

  // Set by the scheduler.
  // The twin stream (spatial isolation) the op is issued on instead of its own, or null. `issue`
  // passes it in place of the call's CUstream argument.
  CUstream confined_stream = nullptr;
  uint64_t seq = 0;        // process-wide submission order
  uint64_t stream_index = 0;  // 1-based position in its stream (StreamState::submitted after it)
  uint64_t queued_estimate_ns = 0;  // its estimate when the dispatcher queued it (statistics)

  // The stream to issue on: the twin while the op is confined, else the call's own.
  CUstream IssueStream(CUstream own) const {
    return confined_stream != nullptr ? confined_stream : own;
  }

  // Argument storage. `args` holds the call's by-value arguments (a std::tuple placed there by
  // the hook); `data` holds deep copies of what they point to (kernel parameters, configs).
  // `data` keeps its capacity when the op is recycled, so steady state allocates nothing.
  static constexpr size_t kArgBytes = 160;
  alignas(16) std::byte args[kArgBytes];
  std::vector<std::byte> data;

  // Intrusive links: the dispatcher inbox, and the pool the op returns to.
  std::atomic<Op*> inbox_next{nullptr};
  Op* pool_next = nullptr;
  OpPool* home = nullptr;
};

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_OP_H_
