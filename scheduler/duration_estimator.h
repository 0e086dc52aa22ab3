// Estimated GPU time of an op, learned from measured completions: an exponentially weighted
// running average per cost key (a kernel's CUfunction), with a hint for keys never seen (a copy's
// size over a nominal bandwidth). Dispatcher-private: not thread-safe by design.
#ifndef GPUPRIO_SCHEDULER_DURATION_ESTIMATOR_H_
#define GPUPRIO_SCHEDULER_DURATION_ESTIMATOR_H_

#include <cstdint>

#include "absl/container/flat_hash_map.h"

namespace gpuprio::scheduler {

class DurationEstimator {
 public:
  // `default_ns`: the estimate for a key with no history and no hint.
  explicit DurationEstimator(uint64_t default_ns) : default_ns_(default_ns) {}

  uint64_t Estimate(const void* key, uint64_t hint_ns) const;

  // Folds one measured duration into the key's average (weight 1/4 for the new sample, so a
  // change of kernel size shows within a few launches). A sample counts as at most the one before
  // it: a lone long one -- a kernel that another process's time slice or a context switch
  // stretched -- moves nothing, a lasting change shows from its second sample. Null keys are not
  // learned.
  void Observe(const void* key, uint64_t measured_ns);

  bool Knows(const void* key) const { return key != nullptr && average_ns_.contains(key); }
  size_t KnownKeys() const { return average_ns_.size(); }

 private:
  struct History {
    double average_ns;
    uint64_t last_sample_ns;
  };
  uint64_t default_ns_;
  absl::flat_hash_map<const void*, History> average_ns_;
};

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_DURATION_ESTIMATOR_H_
