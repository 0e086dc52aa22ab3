#include "scheduler/stream_recycler.h"

namespace gpuprio::scheduler {

void StreamRecycler::Release(StreamState* stream) {
  absl::MutexLock lock(&mu_);
  released_.push_back(stream);
  has_released_.store(true, std::memory_order_release);
}

StreamState* StreamRecycler::TakeRecycled() {
  absl::MutexLock lock(&mu_);
  if (recycled_.empty()) return nullptr;
  StreamState* s = recycled_.back();
  recycled_.pop_back();
  return s;
}

std::vector<StreamState*> StreamRecycler::TakeReleased() {
  std::vector<StreamState*> released;
  absl::MutexLock lock(&mu_);
  released.swap(released_);
  has_released_.store(false, std::memory_order_release);
  return released;
}

void StreamRecycler::Return(const std::vector<StreamState*>& keep,
                            const std::vector<StreamState*>& done) {
  absl::MutexLock lock(&mu_);
  for (StreamState* s : keep) released_.push_back(s);
  if (!keep.empty()) has_released_.store(true, std::memory_order_release);
  for (StreamState* s : done) recycled_.push_back(s);
}

void StreamRecycler::Return(const std::vector<StreamState*>& released,
                            absl::FunctionRef<bool(StreamState*)> let_go) {
  std::vector<StreamState*> keep;
  std::vector<StreamState*> done;
  for (StreamState* s : released) (let_go(s) ? done : keep).push_back(s);
  Return(keep, done);
}

std::vector<CUevent> StreamRecycler::TakeEvents(StreamQueue* q) {
  std::vector<CUevent> events = std::move(q->free_events);
  q->free_events.clear();
  for (const CompletionMark& m : q->marks) events.push_back(m.event);
  q->marks.clear();
  if (q->last_completed != nullptr) events.push_back(q->last_completed);
  q->last_completed = nullptr;
  // The watcher may still wait on it: the driver frees an event being waited on once the wait
  // ends.
  if (q->watch_event != nullptr) events.push_back(q->watch_event);
  q->watch_event = nullptr;
  return events;
}

}  // namespace gpuprio::scheduler
