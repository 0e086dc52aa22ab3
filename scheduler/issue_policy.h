// The scheduling policy, pure (no threads, no driver, no clock reads): given a view of one op and
// a snapshot of its device, issue it, issue it confined to the SM partition, or hold it -- with
// the reason and when to look again. The dispatcher and the client fast path both ask it.
//
// The rules, in the order they are applied:
//   1. Nothing is issued while work of a higher priority is pending (at a stream head) or in
//      flight, here or in another process on the GPU, or ended less than request_gap_ns ago with
//      nothing of its level queued (a gap inside one of its requests) -- for at most max_hold_ns
//      after the op was first held; then the budget alone decides (Admit).
//   2. Work below the ceiling (the highest level that submitted work within the window and had
//      work on this device within it, or a peer's level on the GPU; at least the unbudgeted level)
//      keeps its in-flight estimated GPU time within the budget (the peer budget, if smaller, below
//      a peer's ceiling). One op is always admitted when nothing of its level or below is in
//      flight. While nothing more important is about, the op each stream runs now does not count
//      (idle_budget_excludes_running).
//   3. The long-op rule: an op longer than its budget also waits until more important work has
//      been idle for long_op_idle_ns (at most long_op_max_hold_ns after it was first held),
//      unless more important work is queued behind it on its own stream.
//   4. Spatial isolation: work below a more important level (Isolation) is confined to the SM
//      partition where one exists; rules 1-3 do not apply to it, but a stream keeps at most
//      confined_queue_ns of estimated work on its twin (always at least one op). Not below a
//      level that launched work needing the whole GPU (a CUDA graph) within the window, here or
//      in another process: a reserve would not hold that work, so rules 1-3 hold it instead.
//   5. An op another op waits for (priority inheritance) and a home-only marker are never held.
#ifndef GPUPRIO_SCHEDULER_ISSUE_POLICY_H_
#define GPUPRIO_SCHEDULER_ISSUE_POLICY_H_

#include <cstdint>

#include "absl/types/span.h"
#include "scheduler/coordinator/segment_layout.h"
#include "scheduler/options.h"

namespace gpuprio::scheduler {

// No priority: below every level (no held op, no level active). The shared
// segment's value, so that levels read from other processes and this process's
// own compare alike.
inline constexpr int kNoPriority = coordinator::kNoPriority;

// --- The core of rules 1 and 2. ---

struct AdmissionSnapshot {
  int highest_pending_or_in_flight;     // over all other ops of the device
  int ceiling;                          // highest priority that submitted work here recently
  uint64_t below_ceiling_in_flight_ns;  // estimated GPU time in flight below the
                                        // ceiling
  uint64_t budget_ns;
};

enum class Admission {
  kIssue,
  kHoldForHigherPriority,  // rule 1
  kHoldForBudget,          // rule 2
};

Admission Admit(int priority, uint64_t estimate_ns, const AdmissionSnapshot& s);

// --- The dispatcher's question. ---

// The op at the front of a stream's queue (or at the end of the chain that must
// go first).
struct OpView {
  int priority = 0;
  uint64_t estimate_ns = 0;  // its estimated GPU time now
  // How long since the policy first held it; 0 if it never was.
  int64_t held_ns = 0;
  // Another op waits for it (priority inheritance): no rule holds it.
  bool inherited = false;
  // A marker that only brings its stream home from its twin: no GPU time, never
  // held.
  bool home_only = false;
  // Whether its kernel may run in the partition at all (the partition refused
  // it once).
  bool confinable = true;
  // Whether its stream queues an op more important than it behind it (the
  // long-op rule).
  bool more_important_behind = false;
};

// One priority level's work on the device as the dispatcher counts it.
struct LevelLoad {
  int priority;
  int64_t pending;
  int64_t in_flight_ops;
  int64_t in_flight_ns;
  int64_t pending_ns;
  int64_t last_busy_ns = 0;  // when it last had work queued or in flight
};

// What the other processes sharing the GPU have published (absent without a
// coordinator).
struct PeerView {
  int highest_active = kNoPriority;
  int ceiling = kNoPriority;  // within the window, floor: the unbudgeted level
  // highest_active, or a level whose work ended less than options.request_gap_ns ago.
  int busy = kNoPriority;
  // The highest level that launched work needing the whole GPU within the window.
  int whole_device = kNoPriority;
};

// The parts of a device's state that cost more than a load to read (a walk over
// a queue, a driver query, a read of the shared segment): the policy asks for
// them only where a rule needs them.
class DeviceQueries {
 public:
  virtual ~DeviceQueries() = default;
  // The estimated time of the op each stream runs now (its oldest in flight)
  // below `ceiling`.
  virtual uint64_t RunningBelowNs(int ceiling) const = 0;
  // Whether the op's own stream queues an op more important than `priority`
  // behind it.
  virtual bool MoreImportantBehind(int priority) const = 0;
  // Whether this process shares SMs with the other processes on the GPU (MPS):
  // only then do their levels confine its work.
  virtual bool SharesSmsWithPeers() const = 0;
  // The highest level any other process ever submitted, at least `floor`
  // (Isolation::kAlways).
  virtual int PeersEverCeiling(int floor) const = 0;
};

struct DeviceSnapshot {
  int64_t now_ns = 0;
  // Rule 2 looks at this device only: a level busy on another GPU puts no work here on a budget.
  // This process's ceiling on this device (floor: the unbudgeted level), and the highest level
  // above the op's that submitted work within the window and had work on this device within it
  // (the op's own priority if none), both by LevelAccounting::Ceiling.
  int local_ceiling = kNoPriority;
  int local_above_op = kNoPriority;
  // Rule 4 looks at this device only: a level busy on another GPU leaves this one's SMs alone.
  // The highest level above the op's that submitted work within the window and had work queued
  // on this device, or counted here within the window (the op's own priority if none), and the
  // highest level that has had work here.
  int local_above_op_here = kNoPriority;
  int local_max_seen_here = kNoPriority;
  // The highest level of this process that launched work needing the whole GPU on this device
  // (a CUDA graph) within the window (WholeDeviceWork).
  int local_whole_device = kNoPriority;
  // The highest priority among the other streams' heads (kNoPriority: none).
  int highest_other_head = kNoPriority;
  absl::Span<const LevelLoad> levels;
  bool coordinated = false;  // other processes' levels take part
  PeerView peers;
  // What costs more than a load to know, asked only where a rule needs it
  // (never null).
  const DeviceQueries* queries = nullptr;
  // Rule 4's queue bound on the op's stream: its confined ops in flight, their
  // estimated time, and the oldest one's issue time and estimate.
  int confined_in_flight_ops = 0;
  int64_t confined_in_flight_ns = 0;
  int64_t oldest_confined_issue_ns = 0;
  uint64_t oldest_confined_estimate_ns = 0;
};

enum class Verdict {
  kIssue,
  kIssueConfined,  // on the stream's twin, in the SM partition
  kHold,
};

enum class Reason {
  kHomeOnly,        // no GPU time
  kInherited,       // another op waits for it
  kConfined,        // below a more important level, on the partition
  kUnbudgeted,      // at or above the ceiling
  kWithinBudget,    // below the ceiling, within its budget
  kHoldBound,       // held for more important work up to max_hold_ns; now the budget
                    // decides
  kHigherPriority,  // rule 1
  kBudget,          // rule 2
  kLongOp,          // rule 3
  kTwinFull,        // rule 4's queue bound
};

struct Decision {
  Verdict verdict;
  Reason reason;
  // Issued: the budget the op was admitted under (0: unbudgeted). Its
  // completion marks follow it.
  uint64_t budget_ns = 0;
  // Held: when the verdict may change by time alone (room due on the twin, the
  // hold bound reached); 0: only a completion or new work changes it.
  int64_t look_again_ns = 0;
  // Rule 1 no longer held it (max_hold_ns) and the budget admitted it: counted
  // as at_hold_bound (the long-op rule may still hold it).
  bool passed_hold_bound = false;
};

// The longest sleep on an estimated end of confined work (the twin's room due):
// an estimate can be far off, and a completion noticed late idles the partition
// when one op fills the queue bound. It is also the sleep of a twin with twice
// that much work queued behind its running op, which no late notice can idle.
inline constexpr int64_t kMaxConfinedSleepNs = 1'000'000;

// Rule 4's first half: does the op belong in the partition (if one can be had)? Below a more
// important level active on this device (or, under MPS, in another process), by the isolation
// mode; but not below a level that launched work needing the whole GPU within the window (here,
// or under MPS in another process). The dispatcher asks for the partition only when the answer is
// yes, and passes it to Decide. `held_below` (may be null): where the op would be confined but for
// such a level, that level, else kNoPriority (left as it was where the mode does not confine).
bool WantsConfinement(const OpView& op, const DeviceSnapshot& d, const SchedulerOptions& o,
                      int* held_below = nullptr);

// The verdict on `op` now. `confine`: WantsConfinement held and the partition
// exists.
Decision Decide(const OpView& op, const DeviceSnapshot& d, bool confine, const SchedulerOptions& o);

// --- The client fast path's question. ---

// Would the dispatcher issue an op of this priority at once, unbudgeted, on its own stream? The
// client asks through a view whose getters read the shared state on demand, in the order below,
// so the common case costs a few loads and no clock read. The view provides:
//   int priority() const;
//   bool NothingMoreImportantQueued() const;  // dispatcher idle, or only less important work
//                                             // queued that CUDA does not order this op after
//   bool AwayWorkOrders() const;    // work CUDA orders this op after is on a twin
//   int MaxSeen() const;            // the highest level that ever had work on this device
//   int LocalCeiling() const;       // this device's, asked only below MaxSeen (reads the clock)
//   bool PeersAllowDirect() const;  // no peer level above it, active or within the window
template <typename ClientView>
bool DirectIssueAllowed(const ClientView& v, const SchedulerOptions& o) {
  const int p = v.priority();
  // Below the unbudgeted level an op is always on a budget (rule 2).
  if (!o.direct_issue || p < o.unbudgeted_priority) return false;
  // Rule 1 and the ordering invariants: everything queued before it is issued,
  // or less important and unordered with it, so the dispatcher would issue this
  // op first.
  if (!v.NothingMoreImportantQueued()) return false;
  // Rule 4: the dispatcher would confine it (or must link it after work on a
  // twin).
  if (o.isolation != Isolation::kOff) {
    if (v.AwayWorkOrders()) return false;
    if (o.isolation == Isolation::kForce) return false;
    if (o.isolation == Isolation::kAlways && p < v.MaxSeen()) return false;
  }
  // Rule 2: below this device's ceiling it is budgeted. Nothing above it ever seen here: no
  // clock read. The dispatcher's ceiling also counts a level with work queued here; the test
  // above already refused an op below one.
  if (p < v.MaxSeen() && p < v.LocalCeiling()) return false;
  // Rules 1 and 2 across processes.
  return v.PeersAllowDirect();
}

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_ISSUE_POLICY_H_
