#include "scheduler/duration_estimator.h"

namespace gpuprio::scheduler {

uint64_t DurationEstimator::Estimate(const void* key, uint64_t hint_ns) const {
  if (key != nullptr) {
    auto it = average_ns_.find(key);
    if (it != average_ns_.end()) return static_cast<uint64_t>(it->second);
  }
  return hint_ns != 0 ? hint_ns : default_ns_;
}

void DurationEstimator::Observe(const void* key, uint64_t measured_ns) {
  if (key == nullptr) return;
  auto [it, inserted] = average_ns_.try_emplace(key, static_cast<double>(measured_ns));
  if (!inserted) it->second += 0.25 * (static_cast<double>(measured_ns) - it->second);
}

}  // namespace gpuprio::scheduler
