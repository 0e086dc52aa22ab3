#include "cupti_tracer/thread_event_log.h"

#include <sys/syscall.h>
#include <unistd.h>

#include "absl/base/attributes.h"
#include "scheduler/base/tls.h"

namespace gpuprio::tracer {
namespace {

ABSL_CONST_INIT std::atomic<uint64_t> g_next_generation{1};

}  // namespace

// Thread-locals: external linkage (hidden), initial-exec, as everywhere in gpuprio (see
// scheduler/base/tls.h for the linker bug that rules out internal linkage).
namespace internal_thread_event_log {
// The last registry this thread recorded into. A stale entry (another registry, or one since
// destroyed) is recognised by its generation and never dereferenced.
struct CachedLog {
  uint64_t generation;
  ThreadEventLog* log;
};
GPUPRIO_THREAD_LOCAL CachedLog t_cached = {0, nullptr};
GPUPRIO_THREAD_LOCAL uint32_t t_tid = 0;
}  // namespace internal_thread_event_log

using internal_thread_event_log::t_cached;
using internal_thread_event_log::t_tid;

uint32_t CurrentTid() {
  if (t_tid == 0) t_tid = static_cast<uint32_t>(syscall(SYS_gettid));
  return t_tid;
}

EventRegistry::EventRegistry(MemoryBudget* budget)
    : generation_(g_next_generation.fetch_add(1, std::memory_order_relaxed)), budget_(budget) {}

ThreadEventLog& EventRegistry::Log() {
  if (t_cached.generation == generation_) return *t_cached.log;
  return Register();
}

ThreadEventLog& EventRegistry::Register() {
  const uint32_t tid = CurrentTid();
  ThreadEventLog* log = nullptr;
  {
    absl::MutexLock lock(&mu_);
    // A thread that alternated between registries finds its own log again; a dead thread's log
    // may be adopted by a new thread that got its tid (still one producer at a time).
    for (const auto& existing : logs_) {
      if (existing->tid() == tid) log = existing.get();
    }
    if (log == nullptr) {
      logs_.push_back(std::make_unique<ThreadEventLog>(tid));
      log = logs_.back().get();
    }
  }
  t_cached = internal_thread_event_log::CachedLog{generation_, log};
  return *log;
}

void EventRegistry::RecordSubmit(const SubmitRecord& record) {
  if (!Log().submits().Append(record, *budget_)) dropped_.fetch_add(1, std::memory_order_relaxed);
}

void EventRegistry::RecordIssue(const IssueRecord& record) {
  if (!Log().issues().Append(record, *budget_)) dropped_.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace gpuprio::tracer
