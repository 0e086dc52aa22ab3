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

}  // namespace gpuprio::scheduler
