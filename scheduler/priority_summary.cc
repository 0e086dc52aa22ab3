#include "scheduler/priority_summary.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gpuprio::scheduler {
namespace {

const char* PriorityName(int priority) {
  switch (priority) {
    case -1:
      return " (low)";
    case 0:
      return " (normal)";
    case 1:
      return " (high)";
    default:
      return "";
  }
}

double Micros(uint64_t ns) { return static_cast<double>(ns) / 1000.0; }

}  // namespace

std::vector<std::string> FormatPrioritySummary(const PriorityLevels& levels) {
  std::vector<std::string> lines;
  for (int p = kMaxPriority; p >= kMinPriority; --p) {
    const PriorityLevelStats& level = levels.At(p);
    const uint64_t queued = level.ops_submitted.load(std::memory_order_relaxed);
    const uint64_t on_caller = level.ops_on_caller.load(std::memory_order_relaxed);
    const uint64_t ops = queued + on_caller;
    if (ops == 0) continue;
    std::string line = absl::StrFormat("priority=%d%s ops=%d on_caller=%.1f%% queued=%d", p,
                                       PriorityName(p), ops,
                                       100.0 * static_cast<double>(on_caller) / ops, queued);
    // Issued on a twin stream in the SM partition (spatial isolation).
    if (const uint64_t confined = level.ops_confined.load(std::memory_order_relaxed)) {
      absl::StrAppendFormat(&line, " confined=%d", confined);
    }
    const uint64_t issued = level.ops_issued.load(std::memory_order_relaxed);
    if (issued > 0) {
      const uint64_t sum = level.queue_delay_ns_sum.load(std::memory_order_relaxed);
      const uint64_t max = level.queue_delay_ns_max.load(std::memory_order_relaxed);
      // The bucket bound can exceed the largest delay seen; the max is exact.
      uint64_t p99 = level.queue_delay_histogram.Percentile(99.0);
      if (p99 > max) p99 = max;
      absl::StrAppendFormat(&line, " queue_delay_us mean=%.1f p99<=%.1f max=%.1f",
                            Micros(sum) / static_cast<double>(issued), Micros(p99), Micros(max));
    }
    // Held back by the policy (more important work active): part of the delay above.
    if (const uint64_t held = level.ops_held.load(std::memory_order_relaxed)) {
      absl::StrAppendFormat(&line, " held_back ops=%d total_ms=%.1f max_ms=%.1f", held,
                            Micros(level.held_ns_sum.load(std::memory_order_relaxed)) / 1000.0,
                            Micros(level.held_ns_max.load(std::memory_order_relaxed)) / 1000.0);
      // Issued at the hold's bound (GPUPRIO_MAX_HOLD_MS) although more important work was active.
      if (const uint64_t bound = level.ops_hold_bound.load(std::memory_order_relaxed)) {
        absl::StrAppendFormat(&line, " at_hold_bound=%d", bound);
      }
    }
    // Callers that stepped aside for a more important thread of this process (HostYield).
    if (const uint64_t yields = level.host_yields.load(std::memory_order_relaxed)) {
      absl::StrAppendFormat(&line, " host_yields=%d total_ms=%.1f", yields,
                            Micros(level.host_yield_ns_sum.load(std::memory_order_relaxed)) /
                                1000.0);
    }
    if (const uint64_t calls = level.calls_timed.load(std::memory_order_relaxed)) {
      const double n = static_cast<double>(calls);
      absl::StrAppendFormat(
          &line, " calls=%d in_call_us mean=%.2f (driver %.2f) max=%.1f", calls,
          Micros(level.call_ns_sum.load(std::memory_order_relaxed)) / n,
          Micros(level.caller_driver_ns_sum.load(std::memory_order_relaxed)) / n,
          Micros(level.call_ns_max.load(std::memory_order_relaxed)));
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

std::vector<std::string> FormatDispatcherSummary(
    const std::vector<Dispatcher::Activity>& dispatchers) {
  std::vector<std::string> lines;
  for (const Dispatcher::Activity& d : dispatchers) {
    lines.push_back(absl::StrFormat(
        "dispatcher device=%d cpu_ms=%.2f sleeps=%d marks=%d direct_marks=%d mark_queries=%d",
        d.device, Micros(d.cpu_ns) / 1000.0, d.sleeps, d.marks, d.direct_marks, d.mark_queries));
  }
  return lines;
}

}  // namespace gpuprio::scheduler
