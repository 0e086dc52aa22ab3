// Scheduler settings (hook/config.cc reads them from GPUPRIO_* variables), and the switches the
// library sets for itself (unit tests build schedulers with other values).
#ifndef GPUPRIO_SCHEDULER_OPTIONS_H_
#define GPUPRIO_SCHEDULER_OPTIONS_H_

#include <cstdint>

#include "scheduler/coordinator/device_segment.h"
#include "scheduler/scheduler_tuning.h"

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
  // budget too, on each GPU where it had work within the window.
  uint64_t ceiling_window_ns = 500'000'000;
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
  // Across processes (GPUPRIO_COORDINATE): each dispatcher takes a slot in its GPU's shared
  // segment, so processes sharing the GPU see each other's levels. Off here (unit tests build
  // schedulers freely); the library turns it on.
  bool coordinate = false;
  // Spatial isolation. Off here (unit tests opt in); the library defaults to kActive.
  Isolation isolation = Isolation::kOff;
  int reserved_sms = 16;  // GPUPRIO_RESERVED_SMS: SMs kept free of confined work
  // Host-side priority (HostYield). A thread whose op is queued while a more important thread of
  // this process launches (or has work running) waits up to this long, until that thread has
  // launched nothing and had nothing running for tuning.host_yield_quiet_ns, and only while its
  // own level has at least this much GPU work in flight or
  // tuning.host_yield_held_backlog_ops ops held in the queue.
  // A batch thread runs far ahead of its GPU work (its ops wait in the queue anyway), so the wait
  // costs it no GPU time, and the important thread does not share the interpreter lock of a
  // Python process with it. 0 (here; unit tests opt in): off. The library defaults to 2 ms
  // (GPUPRIO_HOST_YIELD_US).
  uint64_t host_yield_ns = 0;
  // GPUPRIO_MAX_HOLD_MS: no op is held back for more important work (rule 1) longer than this
  // after the policy first held it; then the budget alone admits it. Lower work always
  // progresses, whatever keeps the higher levels busy: a collective kernel that another rank's
  // kernel spins on (NCCL) delays that rank by at most this much, never for good; and no other
  // process can hold this one's work for longer, whatever it publishes. 0: no bound.
  uint64_t max_hold_ns = 100'000'000;
  // GPUPRIO_REQUEST_GAP_US: rule 1 counts a more important level as busy until its work (queued
  // or in flight) ended this long ago, here or in another process on the GPU, not only while it
  // has work queued or in flight. A server's request is a run of launches with host-side gaps
  // between them (a launch call, a result copied to the host, the next step prepared): lower work
  // issued into such a gap is in flight when the request's next kernel comes, and across processes
  // without MPS the GPU time-slices, so the server waits for it in full. Confined work is not held
  // by it (rule 4). 0 (here; unit tests opt in): only queued or in-flight work holds. The library
  // defaults to 1 ms.
  uint64_t request_gap_ns = 0;
  coordinator::SegmentOptions segment;  // GPUPRIO_SHM_DIR, GPUPRIO_DOMAIN, GPUPRIO_SHARE_GROUP
  // Internal constants, not settings (scheduler_tuning.h).
  SchedulerTuning tuning;
};

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_OPTIONS_H_
