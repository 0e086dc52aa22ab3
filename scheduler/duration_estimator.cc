#include "scheduler/duration_estimator.h"

#include <algorithm>

namespace gpuprio::scheduler {

uint64_t DurationEstimator::Estimate(const void* key, uint64_t hint_ns) const {
  if (key != nullptr) {
    auto it = average_ns_.find(key);
    if (it != average_ns_.end()) return static_cast<uint64_t>(it->second.average_ns);
  }
  return hint_ns != 0 ? hint_ns : default_ns_;
}

void DurationEstimator::Observe(const void* key, uint64_t measured_ns) {
  if (key == nullptr) return;
  auto [it, inserted] =
      average_ns_.try_emplace(key, History{static_cast<double>(measured_ns), measured_ns});
  if (inserted) return;
  History& h = it->second;
  const uint64_t sample = std::min(measured_ns, h.last_sample_ns);
  h.last_sample_ns = measured_ns;
  h.average_ns += 0.25 * (static_cast<double>(sample) - h.average_ns);
}

}  // namespace gpuprio::scheduler
