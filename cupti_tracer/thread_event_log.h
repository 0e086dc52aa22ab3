// gpuprio's own trace events (op submitted, op issued), recorded on the hot path without a lock.
//
// Contents:
//   SubmitRecord, IssueRecord  plain records (no strings: `api` points at the op's static name).
//   ChunkList<T>               single-producer, append-only list of fixed-size chunks; a reader on
//                              another thread may walk it at any time and sees every published item.
//   ThreadEventLog             one thread's lists.
//   EventRegistry              owns every thread's log. Preferred entry: Log() from the recording
//                              thread (takes the registry lock only the first time a thread records).
//
// Memory: a chunk holds kChunkItems records and is reserved from the MemoryBudget; steady state
// allocates once per kChunkItems events, never per event. When the budget refuses a chunk the event
// is dropped and counted (dropped()).
#ifndef GPUPRIO_CUPTI_TRACER_THREAD_EVENT_LOG_H_
#define GPUPRIO_CUPTI_TRACER_THREAD_EVENT_LOG_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "cupti_tracer/memory_budget.h"

namespace gpuprio::tracer {

struct SubmitRecord {
  uint64_t op_id = 0;
  const char* api = nullptr;  // static string (Op::name)
  int priority = 0;
  uint64_t stream = 0;
  int64_t submit_ns = 0;
  int64_t return_ns = 0;
  uint32_t client_correlation_id = 0;
  bool on_caller = false;
};

struct IssueRecord {
  uint64_t op_id = 0;
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  int result = 0;
};

inline constexpr size_t kChunkItems = 1024;

template <typename T>
class ChunkList {
 public:
  ChunkList() = default;
  ChunkList(const ChunkList&) = delete;
  ChunkList& operator=(const ChunkList&) = delete;
  ~ChunkList() {
    Chunk* c = head_.load(std::memory_order_acquire);
    while (c != nullptr) {
      Chunk* next = c->next.load(std::memory_order_acquire);
      delete c;
      c = next;
    }
  }

  static constexpr size_t ChunkBytes() { return sizeof(Chunk); }

  // Producer thread only. False when a new chunk was needed and `budget` refused it.
  bool Append(const T& item, MemoryBudget& budget) {
    if (tail_ == nullptr || tail_size_ == kChunkItems) {
      if (!budget.TryReserve(sizeof(Chunk))) return false;
      Chunk* fresh = new Chunk;
      if (tail_ == nullptr) {
        head_.store(fresh, std::memory_order_release);
      } else {
        tail_->next.store(fresh, std::memory_order_release);
      }
      tail_ = fresh;
      tail_size_ = 0;
    }
    tail_->items[tail_size_] = item;
    ++tail_size_;
    tail_->size.store(tail_size_, std::memory_order_release);  // publishes the item
    return true;
  }

  // Any thread, any time: calls fn(item) for every item published so far.
  template <typename Fn>
  void ForEach(Fn fn) const {
    for (const Chunk* c = head_.load(std::memory_order_acquire); c != nullptr;
         c = c->next.load(std::memory_order_acquire)) {
      const size_t n = c->size.load(std::memory_order_acquire);
      for (size_t i = 0; i < n; ++i) fn(c->items[i]);
    }
  }

 private:
  struct Chunk {
    std::atomic<size_t> size{0};
    std::atomic<Chunk*> next{nullptr};
    T items[kChunkItems];
  };
  std::atomic<Chunk*> head_{nullptr};
  Chunk* tail_ = nullptr;   // producer only
  size_t tail_size_ = 0;    // producer only
};

class ThreadEventLog {
 public:
  explicit ThreadEventLog(uint32_t tid) : tid_(tid) {}
  uint32_t tid() const { return tid_; }
  ChunkList<SubmitRecord>& submits() { return submits_; }
  ChunkList<IssueRecord>& issues() { return issues_; }
  const ChunkList<SubmitRecord>& submits() const { return submits_; }
  const ChunkList<IssueRecord>& issues() const { return issues_; }

 private:
  const uint32_t tid_;
  ChunkList<SubmitRecord> submits_;  // written by the thread `tid_` only
  ChunkList<IssueRecord> issues_;    // written by the thread `tid_` only
};

// The calling thread's system thread id (gettid), cached per thread.
uint32_t CurrentTid();

class EventRegistry {
 public:
  explicit EventRegistry(MemoryBudget* budget);
  EventRegistry(const EventRegistry&) = delete;
  EventRegistry& operator=(const EventRegistry&) = delete;
  // Frees every log: no thread may record concurrently (a registry CUPTI can reach is leaked).
  ~EventRegistry() = default;

  // The calling thread's log. Lock-free after the thread's first call on this registry. Two
  // live threads never share a tid, so a log found by tid is single-producer.
  ThreadEventLog& Log();

  void RecordSubmit(const SubmitRecord& record);
  void RecordIssue(const IssueRecord& record);

  // Walks every log; safe while threads still record (sees what they published).
  template <typename Fn>
  void ForEachLog(Fn fn) const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    for (const auto& log : logs_) fn(static_cast<const ThreadEventLog&>(*log));
  }

  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  ThreadEventLog& Register() ABSL_LOCKS_EXCLUDED(mu_);

  const uint64_t generation_;  // unique per registry: tells a thread's cached log apart
  MemoryBudget* const budget_;
  std::atomic<uint64_t> dropped_{0};
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<ThreadEventLog>> logs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpuprio::tracer

#endif  // GPUPRIO_CUPTI_TRACER_THREAD_EVENT_LOG_H_
