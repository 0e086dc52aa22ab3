// Turning what the tracer collected into a TraceInput at the end of a run: gpuprio's own events
// from the per-thread logs, counter samples with their names, thread names, the time base.
// Pure except ThreadNameFromProc (reads /proc); no CUPTI calls.
#ifndef GPUPRIO_CUPTI_TRACER_TRACE_ASSEMBLY_H_
#define GPUPRIO_CUPTI_TRACER_TRACE_ASSEMBLY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include <string>
#include <utility>

#include "cupti_tracer/counter_throttle.h"
#include "cupti_tracer/thread_event_log.h"
#include "cupti_tracer/trace_events.h"

namespace gpuprio::tracer {

// Counter ids for CounterThrottle, and the Chrome counter and series each stands for
// (docs/trace_format.md):
//   queue depth:   counter "queue depth GPU <d>", series "p=<priority>" (value: pending ops)
//   budget in use: counter "budget in use GPU <d>", series "us" (value: microseconds)
int64_t QueueDepthCounterKey(int device, int priority);
int64_t BudgetCounterKey(int device);
std::pair<std::string, std::string> CounterNameAndSeries(int64_t key);

// Appends every SubmitRecord / IssueRecord of every thread log.
void AppendThreadEvents(const EventRegistry& events, TraceInput* out);
void AppendCounters(const std::vector<CounterThrottle::Sample>& samples, TraceInput* out);

// /proc/self/task/<tid>/comm without its newline; empty if the thread is gone.
std::string ThreadNameFromProc(uint32_t tid);

// Names every thread that appears in `input`: `fixed` first (dispatchers), else what `lookup`
// returns (ThreadNameFromProc in production), else nothing (the writer says "thread <tid>").
void AddThreadNames(const absl::flat_hash_map<uint32_t, std::string>& fixed,
                    std::string (*lookup)(uint32_t), TraceInput* out);

}  // namespace gpuprio::tracer

#endif  // GPUPRIO_CUPTI_TRACER_TRACE_ASSEMBLY_H_
