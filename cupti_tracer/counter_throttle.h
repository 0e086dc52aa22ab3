// Rate limiting of counter samples: at most one sample per counter per interval (50 us by
// default), and the last value is never lost.
//
// Rule (a throttle with a trailing edge): the first sample of a counter is kept. A sample that
// comes less than `interval` after the last kept one is held back (a newer one replaces it). When a
// later sample arrives, a held-back value is kept first, stamped at last-kept + interval, so the
// chart shows every value that lasted, at most `interval` late; Flush() keeps the held-back values
// at the end. Kept samples of one counter are therefore at least `interval` apart.
//
// Not thread-safe: the caller serialises (CuptiTracer holds a mutex; dispatchers are few).
#ifndef GPUPRIO_CUPTI_TRACER_COUNTER_THROTTLE_H_
#define GPUPRIO_CUPTI_TRACER_COUNTER_THROTTLE_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace gpuprio::tracer {

class CounterThrottle {
 public:
  struct Sample {
    int64_t key = 0;  // the caller's counter id
    int64_t ts_ns = 0;
    double value = 0;
  };

  explicit CounterThrottle(int64_t interval_ns = 50'000) : interval_ns_(interval_ns) {}

  // Offers a sample; appends what is kept now (0, 1 or 2 samples) to `out`. Timestamps of one
  // key must not go backwards.
  void Offer(int64_t key, int64_t ts_ns, double value, std::vector<Sample>* out);
  // Appends every held-back value.
  void Flush(std::vector<Sample>* out);

 private:
  struct State {
    int64_t last_kept_ns = 0;
    bool has_pending = false;
    double pending = 0;
  };
  const int64_t interval_ns_;
  absl::flat_hash_map<int64_t, State> states_;
};

}  // namespace gpuprio::tracer

#endif  // GPUPRIO_CUPTI_TRACER_COUNTER_THROTTLE_H_
