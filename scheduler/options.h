// Scheduler settings (hook/config.cc reads them from GPUPRIO_* variables).
#ifndef GPUPRIO_SCHEDULER_OPTIONS_H_
#define GPUPRIO_SCHEDULER_OPTIONS_H_

#include <cstdint>

#include "scheduler/coordinator/device_segment.h"

namespace gpuprio::scheduler {

// Spatial isolation (GPUPRIO_ISOLATION): where the GPU supports green contexts, work below a more
// important level is issued onto twin streams in a green context that leaves some SMs free, so
// the more important work never waits for SMs that lower work holds (docs/isolation.md).
enum class Isolation {
  kOff,     // the in-flight budget alone
  kActive,  // confined while a more important level is active (submitted within the window)
  kAlways,  // confined while a more important level exists at all (ever submitted)
  kForce,   // every scheduled op goes through a twin stream (a debug switch: transparency checks)
};

struct SchedulerOptions {
  int default_priority = 0;             // GPUPRIO_PRIORITY
  uint64_t budget_ns = 2'000'000;       // GPUPRIO_BUDGET_US: lower priorities' in-flight GPU time
  // GPUPRIO_PEER_BUDGET_US: the budget of work below a level that another process has active or
  // submitting (the peers' ceiling). Smaller than the in-process one because processes do not
  // share SMs: without MPS the GPU time-slices between them, so the more important process waits
  // for the lower work in flight to drain (or for a ~2 ms time slice), in full.
  uint64_t peer_budget_ns = 500'000;
  uint64_t default_estimate_ns = 100'000;  // an op with no history and no hint
  // Work below this priority is always on a budget, even while nothing more important runs, so
  // that high-priority work arriving later (from this process or another) waits for at most one
  // budget. GPUPRIO_PRIORITY_NORMAL by default: explicitly low work (batch jobs) is always
  // budgeted; default-priority work runs unbudgeted while nothing more important is active.
  int unbudgeted_priority = 0;
  // A level above that which submitted work within this window puts the levels below it on a
  // budget too.
  uint64_t ceiling_window_ns = 500'000'000;
  // Work on the budget only because of its own level (nothing more important in this process or
  // another submitted within the window) keeps one op queued behind the op each of its streams
  // runs now: the budget counts what is queued behind those ops. Without it an op as long as the
  // budget is admitted only once the one before it is seen complete, and the GPU idles for the
  // dispatcher's reaction every time (5% of a batch job's throughput with 2 ms kernels, H100).
  // The price: the first important op after a quiet period may wait for that queued op too.
  bool idle_budget_excludes_running = true;
  // How long an idle dispatcher spins before it parks (no CPU use while idle).
  uint64_t spin_before_park_ns = 50'000;
  // Ops between completion events on a stream: unbudgeted, and budgeted work of known cost
  // (budgeted work of unknown cost is marked op by op, so its duration is learned at once).
  int ops_per_completion_event = 32;
  int budgeted_ops_per_completion_event = 8;
  // The fast path (GPUPRIO_DIRECT_ISSUE): a client thread issues its own op when the dispatcher
  // would issue it at once anyway (nothing queued on the device, the op's level at the ceiling).
  bool direct_issue = true;
  // The time the application's threads spend in stream calls, per level (PriorityLevelStats,
  // the exit summary): two clock reads per call, so only when asked (the library: GPUPRIO_LOG
  // at info or more, which prints the summary).
  bool time_calls = false;
  // Backpressure (GPUPRIO_MAX_QUEUED): a stream with more unissued ops than this makes the
  // submitting thread wait until half of them are issued, as CUDA's own launch queue blocks a
  // thread that runs ahead of the GPU; without it a held-back producer grows memory without bound.
  uint64_t max_queued_per_stream = 1024;
  // At exit (or a capture), queued work is issued before the dispatcher stops; if the GPU
  // completes nothing for this long meanwhile, the rest is abandoned with one message
  // (GPUPRIO_EXIT_TIMEOUT_MS).
  uint64_t stop_stall_timeout_ns = 30'000'000'000;
  // While the policy holds work back the dispatcher polls for completions with sleeps that grow
  // to this length: the most a completion is noticed late (the budget keeps more queued).
  uint64_t max_held_sleep_ns = 200'000;
  // While work is held back, work a client issued itself (the fast path) gets a completion mark
  // at most this often while one is pending on its stream (unless another process waits on this
  // one): a mark per dispatcher round behind a server's fast-path work is an event record on the
  // very stream the server launches on. Its end is noticed up to this plus one held sleep later.
  uint64_t held_mark_interval_ns = 200'000;
  // While another process waits on this one's work, or holds this one's work back, completions
  // and the other process's levels are polled at least this often: a late notice idles the GPU
  // for both processes.
  uint64_t peer_poll_ns = 50'000;
  // While other processes are attached but none holds work back, this process's own work in
  // flight is polled this often instead (its level is withdrawn that much later at most).
  uint64_t peer_idle_poll_ns = 1'000'000;
  // Across processes (GPUPRIO_COORDINATE): each dispatcher takes a slot in its GPU's shared
  // segment, so processes sharing the GPU see each other's levels. Off here (unit tests build
  // schedulers freely); the library turns it on.
  bool coordinate = false;
  // Spatial isolation. Off here (unit tests opt in); the library defaults to kActive.
  Isolation isolation = Isolation::kOff;
  int reserved_sms = 16;  // GPUPRIO_RESERVED_SMS: SMs kept free of confined work
  // Confined work needs no budget (it cannot delay the reserved SMs), but what is queued on a
  // twin stays there when the level above goes quiet: a stream keeps at most this much estimated
  // GPU time on its twin (and always at least one op), so its return to the whole GPU waits for
  // one long kernel at most, not for a deep queue of them.
  uint64_t confined_queue_ns = 10'000'000;
  // Host-side priority (HostYield). A thread whose op is queued while a more important thread of
  // this process launches waits up to this long, until that thread has launched nothing for
  // host_yield_quiet_ns, and only while its own level has at least this much GPU work in flight.
  // A batch thread runs far ahead of its GPU work (its ops wait in the queue anyway), so the wait
  // costs it no GPU time, and the important thread does not share the interpreter lock of a
  // Python process with it. 0 (here; unit tests opt in): off. The library defaults to 2 ms
  // (GPUPRIO_HOST_YIELD_US).
  uint64_t host_yield_ns = 0;
  uint64_t host_yield_quiet_ns = 200'000;
  // Without isolation, an op longer than the budget (it would hold every SM it fills for longer
  // than the budget allows) is admitted below a more important level only once that level has
  // been idle this long: a level that pauses for microseconds between kernels of one burst must
  // not let a long kernel in each time.
  uint64_t long_op_idle_ns = 5'000'000;
  // ...but never longer than this after the policy first held it: then the budget alone admits
  // it, so lower work always progresses (a thread synchronising on it is never stalled for good,
  // whatever keeps the higher levels busy).
  uint64_t long_op_max_hold_ns = 50'000'000;
  // GPUPRIO_MAX_HOLD_MS: no op is held back for more important work (rule 1) longer than this
  // after the policy first held it; then the budget alone admits it. Lower work always
  // progresses, whatever keeps the higher levels busy: a collective kernel that another rank's
  // kernel spins on (NCCL) delays that rank by at most this much, never for good; and no other
  // process can hold this one's work for longer, whatever it publishes. 0: no bound.
  uint64_t max_hold_ns = 100'000'000;
  coordinator::SegmentOptions segment;  // GPUPRIO_SHM_DIR, GPUPRIO_DOMAIN, GPUPRIO_SHARE_GROUP
};

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_OPTIONS_H_
