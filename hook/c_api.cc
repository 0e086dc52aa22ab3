// The public C API (include/gpuprio.h), exported from libgpuprio.so.
#include "include/gpuprio.h"

#include "hook/config.h"
#include "hook/process_start.h"
#include "hook/scheduler_bridge.h"
#include "scheduler/priority_levels.h"
#include "scheduler/base/version.h"
#include "scheduler/scheduler.h"

namespace {

using gpuprio::scheduler::kMaxPriority;
using gpuprio::scheduler::kMinPriority;

static_assert(GPUPRIO_PRIORITY_MIN == gpuprio::scheduler::kMinPriority);
static_assert(GPUPRIO_PRIORITY_MAX == gpuprio::scheduler::kMaxPriority);
static_assert(GPUPRIO_PRIORITY_UNSET == gpuprio::scheduler::kPriorityUnset);

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int gpuprio_set_thread_priority(int priority) {
  if (priority != GPUPRIO_PRIORITY_UNSET &&
      (priority < GPUPRIO_PRIORITY_MIN || priority > GPUPRIO_PRIORITY_MAX)) {
    return -1;
  }
  gpuprio::scheduler::Scheduler::SetThreadPriority(priority);
  return 0;
}

__attribute__((visibility("default"))) int gpuprio_get_thread_priority(void) {
  return gpuprio::scheduler::Scheduler::ThreadPriority();
}

// The configuration is read by the start (hook/process_start.h), which keeps it fork-safe; asking
// for it is no use of CUDA, so no start line is said.
__attribute__((visibility("default"))) int gpuprio_get_default_priority(void) {
  gpuprio::hook::StartGpuprio();
  return gpuprio::hook::GetConfig().default_priority;
}

__attribute__((visibility("default"))) const char* gpuprio_mode(void) {
  gpuprio::hook::StartGpuprio();
  // ModeName returns views of string literals, so data() is NUL-terminated.
  return gpuprio::hook::ModeName(gpuprio::hook::GetConfig().mode).data();
}

__attribute__((visibility("default"))) const char* gpuprio_version(void) {
  return gpuprio::base::kVersion;
}

__attribute__((visibility("default"))) int gpuprio_get_stats(gpuprio_priority_stats* out,
                                                             int capacity) {
  if (out == nullptr && capacity > 0) return -1;
  gpuprio::scheduler::Scheduler* s = gpuprio::hook::ActiveScheduler();
  if (s == nullptr) return 0;
  int levels = 0;
  for (int p = kMaxPriority; p >= kMinPriority; --p) {
    const gpuprio::scheduler::PriorityLevelStats& l = s->levels().At(p);
    if (!l.seen.load(std::memory_order_relaxed) &&
        l.ops_on_caller.load(std::memory_order_relaxed) == 0) {
      continue;
    }
    if (levels < capacity) {
      gpuprio_priority_stats& o = out[levels];
      o.priority = p;
      o.reserved = 0;
      o.ops_submitted = l.ops_submitted.load(std::memory_order_relaxed);
      o.ops_issued = l.ops_issued.load(std::memory_order_relaxed);
      o.ops_on_caller = l.ops_on_caller.load(std::memory_order_relaxed);
      o.queue_delay_ns_sum = l.queue_delay_ns_sum.load(std::memory_order_relaxed);
      o.queue_delay_ns_max = l.queue_delay_ns_max.load(std::memory_order_relaxed);
      o.in_flight_ops = l.in_flight_ops.load(std::memory_order_relaxed);
      o.in_flight_estimated_ns = l.in_flight_estimated_ns.load(std::memory_order_relaxed);
    }
    ++levels;
  }
  return levels;
}

}  // extern "C"
