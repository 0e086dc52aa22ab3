// When a stream's issued work gets a completion mark (a pooled event recorded behind it), and what
// a passed mark teaches the duration estimates. Pure: the dispatcher records and queries the
// events and reads the clock.
#ifndef GPUPRIO_SCHEDULER_COMPLETION_MARKS_H_
#define GPUPRIO_SCHEDULER_COMPLETION_MARKS_H_

#include <cstdint>
#include <optional>

#include "scheduler/options.h"

namespace gpuprio::scheduler {

// Whether the op just issued gets a mark behind it. `ops_since_mark` counts it; `measured`: a
// start event was recorded before it (its mark must cover it alone); `budget_ns`: the budget it
// was admitted under (0: none; for confined work, the twin's queue bound).
bool MarkAfterIssue(int ops_since_mark, bool measured, uint64_t budget_ns, uint64_t estimate_ns,
                    const SchedulerOptions& o);

// While work is held back: whether a stream's work not yet behind a mark gets one now. Only work a
// client issued itself (`direct_uncovered`) waits, while a mark is pending on its stream, for
// held_mark_interval_ns since the last: its mark goes on the stream the client launches on. Not
// while another process waits on this one (`peers_held`): a late notice idles the GPU for both.
bool MarkDueWhileHeld(bool direct_uncovered, bool peers_held, bool mark_pending,
                      int64_t since_last_mark_ns, const SchedulerOptions& o);

// What a passed mark over one op teaches: the GPU time measured between events (`exact_ns`,
// negative if there was no measurement), else, for an op that was alone in flight (it started at
// once), the host time from its issue to now as an upper bound that may only lower the estimate
// -- an over-estimate would otherwise last for good: it keeps the op alone in flight, and an op
// alone is never measured back to back. Nothing otherwise.
std::optional<uint64_t> DurationSample(int64_t exact_ns, bool alone, int64_t host_ns,
                                       uint64_t estimate_ns);

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_COMPLETION_MARKS_H_
