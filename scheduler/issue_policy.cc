#include "scheduler/issue_policy.h"

#include <algorithm>

namespace gpuprio::scheduler {
namespace {

// Rule 1's view of this device: the most important other head, and every level
// in flight.
int HighestOtherActive(const DeviceSnapshot& d) {
  int highest = d.highest_other_head;
  for (const LevelLoad& l : d.levels) {
    if (l.in_flight_ops > 0) highest = std::max(highest, l.priority);
  }
  return highest;
}

// Rule 1's view with the request gap: also every level whose work ended within `gap_ns` (a
// level's last_busy_ns, another process's drop time). Only a level with nothing queued: queued
// work counts through the heads, where it can be issued next; ops queued behind the judged op on
// its own stream wait for it, and holding it would hold them.
int HighestRecentlyBusy(const DeviceSnapshot& d, uint64_t gap_ns) {
  int highest = HighestOtherActive(d);
  for (const LevelLoad& l : d.levels) {
    if (l.pending == 0 && d.now_ns - l.last_busy_ns < static_cast<int64_t>(gap_ns)) {
      highest = std::max(highest, l.priority);
    }
  }
  return d.coordinated ? std::max(highest, d.peers.busy) : highest;
}

uint64_t InFlightBelowNs(const DeviceSnapshot& d, int ceiling) {
  int64_t sum = 0;
  for (const LevelLoad& l : d.levels) {
    if (l.priority < ceiling) sum += l.in_flight_ns;
  }
  return sum > 0 ? static_cast<uint64_t>(sum) : 0;
}

// Whether more important work was busy (queued at a head, in flight, or within
// `window_ns`) on this device. Queued work counts only where it could be issued
// next: more important ops stuck behind less important ones wait for those, so
// counting them would hold the very work they wait for.
bool HigherBusyWithin(const DeviceSnapshot& d, int priority, uint64_t window_ns) {
  if (d.highest_other_head > priority) return true;
  for (const LevelLoad& l : d.levels) {
    if (l.priority <= priority) continue;
    if (l.in_flight_ops > 0) return true;
    if (d.now_ns - l.last_busy_ns < static_cast<int64_t>(window_ns)) return true;
  }
  return false;
}

// When a confined op's twin has room again: when its oldest confined op ends
// (by its estimate). With enough work queued behind that op to keep the twin
// busy through a full sleep twice over, not sooner than one sleep from now:
// polling faster (an estimated end already past, as for an op that waited in
// the queue) would only cost driver calls. Behind a long op alone, a late
// notice would idle the twin: there the dispatcher wakes at the estimate and
// polls from then on.
int64_t TwinRoomDueNs(const DeviceSnapshot& d) {
  int64_t until = d.oldest_confined_issue_ns + static_cast<int64_t>(d.oldest_confined_estimate_ns);
  if (d.confined_in_flight_ns - static_cast<int64_t>(d.oldest_confined_estimate_ns) >=
      2 * kMaxConfinedSleepNs) {
    until = std::max(until, d.now_ns + kMaxConfinedSleepNs);
  }
  return until;
}

Decision Hold(Reason reason, int64_t look_again_ns) {
  return {Verdict::kHold, reason, 0, look_again_ns};
}

// What an op is judged by once other processes' levels count as this process's own: a more
// important level active anywhere on the GPU holds it (rule 1); one submitting recently puts it
// on the budget, the smaller one across processes (rule 2; options.h says why).
struct Limits {
  int ceiling;
  int highest_peer_active;
  bool peers_above;
  uint64_t budget_ns;
};

Limits LimitsFor(int p, const DeviceSnapshot& d, const SchedulerOptions& o) {
  Limits l{d.local_ceiling, kNoPriority, false, o.budget_ns};
  if (!d.coordinated) return l;
  l.highest_peer_active = d.peers.highest_active;
  l.peers_above = d.peers.highest_active > p || d.peers.ceiling > p;
  if (p < d.peers.ceiling) l.budget_ns = std::min(l.budget_ns, o.peer_budget_ns);
  l.ceiling = std::max(l.ceiling, d.peers.ceiling);
  return l;
}

// Rule 2's count: the estimated GPU time in flight below the ceiling. On the budget only because
// of its level (unbudgeted_priority), with nothing more important anywhere within the window, the
// op each stream runs now does not count, so one op waits behind it and the GPU never idles
// between two ops while a completion is noticed (an op as long as the budget was admitted only
// after the one before it was seen done).
uint64_t BudgetedInFlightNs(int p, const DeviceSnapshot& d, const Limits& l,
                            const SchedulerOptions& o) {
  const uint64_t in_flight_ns = InFlightBelowNs(d, l.ceiling);
  if (!o.tuning.idle_budget_excludes_running || p >= l.ceiling || l.peers_above ||
      d.local_above_op > p) {
    return in_flight_ns;
  }
  const uint64_t running_ns = d.queries->RunningBelowNs(l.ceiling);
  return in_flight_ns > running_ns ? in_flight_ns - running_ns : 0;
}

struct Admitted {
  Admission admission;
  Reason reason;
  bool passed_hold_bound;
};

// Rules 1 and 2, with rule 1's bound: an op held for more important work as long as any op may be
// (options.h, max_hold_ns) is from then on judged by the budget alone, as if nothing more
// important were active.
Admitted AdmitWithHoldBound(const OpView& op, const AdmissionSnapshot& s,
                            const SchedulerOptions& o) {
  Admitted a{Admit(op.priority, op.estimate_ns, s),
             op.priority >= s.ceiling ? Reason::kUnbudgeted : Reason::kWithinBudget, false};
  if (a.admission == Admission::kHoldForHigherPriority && o.max_hold_ns != 0 &&
      op.held_ns >= static_cast<int64_t>(o.max_hold_ns)) {
    AdmissionSnapshot budget_only = s;
    budget_only.highest_pending_or_in_flight = kNoPriority;
    a.admission = Admit(op.priority, op.estimate_ns, budget_only);
    a.reason = Reason::kHoldBound;
    a.passed_hold_bound = a.admission == Admission::kIssue;
  }
  return a;
}

// Rule 3: an op longer than its budget holds every SM it fills for longer than the budget allows:
// it waits until the more important levels have paused for a while, not merely between two of
// their kernels (options.h) -- unless more important work is queued behind it on its own stream:
// that work cannot run before it, so holding it would hold that work too, for ever. The hold is
// bounded (long_op_max_hold_ns): lower work must always progress.
bool LongOpHolds(const OpView& op, const DeviceSnapshot& d, const Limits& l,
                 const SchedulerOptions& o) {
  const bool held_long = op.held_ns >= static_cast<int64_t>(o.tuning.long_op_max_hold_ns);
  return op.priority < l.ceiling && op.estimate_ns > l.budget_ns && !held_long &&
         HigherBusyWithin(d, op.priority, o.tuning.long_op_idle_ns) &&
         !d.queries->MoreImportantBehind(op.priority);
}

}  // namespace

Admission Admit(int priority, uint64_t estimate_ns, const AdmissionSnapshot& s) {
  if (priority < s.highest_pending_or_in_flight) return Admission::kHoldForHigherPriority;
  if (priority >= s.ceiling) return Admission::kIssue;
  if (s.below_ceiling_in_flight_ns == 0) return Admission::kIssue;
  if (s.below_ceiling_in_flight_ns + estimate_ns <= s.budget_ns) return Admission::kIssue;
  return Admission::kHoldForBudget;
}

namespace {

// Rule 4 by the isolation mode alone: below a more important level active on this device (or,
// under MPS, in another process).
bool BelowActiveLevels(const OpView& op, const DeviceSnapshot& d, const SchedulerOptions& o) {
  switch (o.isolation) {
    case Isolation::kOff:
      return false;
    case Isolation::kForce:
      return true;
    case Isolation::kActive:
      return d.local_above_op_here > op.priority ||
             (d.peers.ceiling > op.priority && d.queries->SharesSmsWithPeers());
    case Isolation::kAlways:
      if (d.local_max_seen_here > op.priority) return true;
      return d.coordinated && d.queries->SharesSmsWithPeers() &&
             d.queries->PeersEverCeiling(op.priority) > op.priority;
  }
  return false;
}

// The level above the op that launched work needing the whole GPU within the window, on this
// device in this process or (under MPS) in another process (kNoPriority: none, or a mode that
// does not look at it).
int WholeDeviceLevelAbove(const OpView& op, const DeviceSnapshot& d, const SchedulerOptions& o) {
  if (o.isolation != Isolation::kActive && o.isolation != Isolation::kAlways) return kNoPriority;
  int level = d.local_whole_device;
  // Another process's graphs share this process's SMs only under MPS.
  if (d.coordinated && d.peers.whole_device > std::max(level, op.priority) &&
      d.queries->SharesSmsWithPeers()) {
    level = d.peers.whole_device;
  }
  return level > op.priority ? level : kNoPriority;
}

}  // namespace

bool WantsConfinement(const OpView& op, const DeviceSnapshot& d, const SchedulerOptions& o,
                      int* held_below) {
  if (op.home_only || !op.confinable || !BelowActiveLevels(op, d, o)) return false;
  const int whole_device = WholeDeviceLevelAbove(op, d, o);
  if (held_below != nullptr) *held_below = whole_device;
  return whole_device == kNoPriority;
}

Decision Decide(const OpView& op, const DeviceSnapshot& d, bool confine,
                const SchedulerOptions& o) {
  if (op.home_only) return {Verdict::kIssue, Reason::kHomeOnly};
  const int p = op.priority;
  const Limits limits = LimitsFor(p, d, o);
  if (!op.inherited && confine && d.confined_in_flight_ops > 0 &&
      d.confined_in_flight_ns + static_cast<int64_t>(op.estimate_ns) >
          static_cast<int64_t>(o.tuning.confined_queue_ns)) {
    return Hold(Reason::kTwinFull, TwinRoomDueNs(d));
  }
  // Confined work cannot delay more important work (the reserved SMs are never its), so rules
  // 1-3 do not apply to it: it keeps its queue depth on its SMs.
  if (confine) {
    return {Verdict::kIssueConfined, op.inherited ? Reason::kInherited : Reason::kConfined};
  }
  const uint64_t budget_if_below = p < limits.ceiling ? limits.budget_ns : 0;
  if (op.inherited) return {Verdict::kIssue, Reason::kInherited, budget_if_below};

  const int highest_busy =
      o.request_gap_ns != 0 ? HighestRecentlyBusy(d, o.request_gap_ns) : HighestOtherActive(d);
  const AdmissionSnapshot snapshot{std::max(limits.highest_peer_active, highest_busy),
                                   limits.ceiling, BudgetedInFlightNs(p, d, limits, o),
                                   limits.budget_ns};
  const Admitted admitted = AdmitWithHoldBound(op, snapshot, o);
  const int64_t held_since_ns = d.now_ns - op.held_ns;  // now, for an op never held
  switch (admitted.admission) {
    case Admission::kIssue:
      break;
    case Admission::kHoldForHigherPriority:
      return Hold(Reason::kHigherPriority,
                  o.max_hold_ns != 0 ? held_since_ns + static_cast<int64_t>(o.max_hold_ns) : 0);
    case Admission::kHoldForBudget:
      return Hold(Reason::kBudget, 0);
  }
  if (LongOpHolds(op, d, limits, o)) {
    Decision held =
        Hold(Reason::kLongOp, held_since_ns + static_cast<int64_t>(o.tuning.long_op_max_hold_ns));
    held.passed_hold_bound = admitted.passed_hold_bound;
    return held;
  }
  return {Verdict::kIssue, admitted.reason, budget_if_below, 0, admitted.passed_hold_bound};
}

}  // namespace gpuprio::scheduler
