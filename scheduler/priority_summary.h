// The per-priority lines of the exit summary (GPUPRIO_LOG=info): for each level that did work,
// its ops, the share run on the caller's thread, the queueing delay of the rest and the time the
// policy held them back.
#ifndef GPUPRIO_SCHEDULER_PRIORITY_SUMMARY_H_
#define GPUPRIO_SCHEDULER_PRIORITY_SUMMARY_H_

#include <string>
#include <vector>

#include "scheduler/priority_levels.h"

namespace gpuprio::scheduler {

// One line per level that submitted or ran an op, highest priority first, e.g.
//   priority=1 (high) ops=120 on_caller=75.0% queued=30 queue_delay_us mean=12.5 p99<=40.9 max=38.2
//   priority=-1 (low) ops=900 ... held_back ops=85 total_ms=310.2 max_ms=9.8
// p99 is the upper bound of its histogram bucket (at most 25% above the true value). held_back
// counts the ops the policy refused at least once and the time from that refusal to their issue
// (more important work was active). Empty when no level did anything.
std::vector<std::string> FormatPrioritySummary(const PriorityLevels& levels);

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_PRIORITY_SUMMARY_H_
