// The scheduler's lines of the exit summary (GPUPRIO_LOG=info): for each level that did work, its
// ops, the share run on the caller's thread, the queueing delay of the rest, the time the policy
// held them back and the time the application's threads spent in its calls; and what each
// dispatcher thread cost.
#ifndef GPUPRIO_SCHEDULER_PRIORITY_SUMMARY_H_
#define GPUPRIO_SCHEDULER_PRIORITY_SUMMARY_H_

#include <string>
#include <vector>

#include "scheduler/dispatcher.h"
#include "scheduler/priority_levels.h"

namespace gpuprio::scheduler {

// One line per level that submitted or ran an op, highest priority first, e.g.
//   priority=1 (high) ops=120 on_caller=75.0% queued=30 queue_delay_us mean=12.5 p99<=40.9 max=38.2
//   priority=-1 (low) ops=900 ... held_back ops=85 total_ms=310.2 max_ms=9.8
// p99 is the upper bound of its histogram bucket (at most 25% above the true value). held_back
// counts the ops the policy refused at least once and the time from that refusal to their issue
// (more important work was active). Empty when no level did anything.
// With SchedulerOptions::time_calls the line goes on with
//   calls=150 in_call_us mean=3.10 (driver 2.40) max=51.0
// the stream calls made at the level, the mean wall time one took on the application's thread
// (whichever way it went: fast path, queued, inline; backpressure included), the part of that
// mean spent in real driver calls on the thread, and the longest call.
std::vector<std::string> FormatPrioritySummary(const PriorityLevels& levels);

// One line per dispatcher, e.g.
//   dispatcher device=0 cpu_ms=812.41 sleeps=40211 marks=9120 direct_marks=4800 mark_queries=30551
// the CPU time of its thread over the runs that have ended (call after
// Scheduler::StopDispatchers), how many times it went to sleep, and its completion marks (those
// behind work clients issued themselves) and queries of them (Dispatcher::Activity).
std::vector<std::string> FormatDispatcherSummary(
    const std::vector<Dispatcher::Activity>& dispatchers);

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_PRIORITY_SUMMARY_H_
