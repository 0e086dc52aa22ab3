#include "cupti_tracer/counter_throttle.h"

namespace gpuprio::tracer {

void CounterThrottle::Offer(int64_t key, int64_t ts_ns, double value, std::vector<Sample>* out) {
  auto [it, inserted] = states_.try_emplace(key);
  State& s = it->second;
  if (inserted) {
    s.last_kept_ns = ts_ns;
    out->push_back(Sample{key, ts_ns, value});
    return;
  }
  if (s.has_pending && ts_ns >= s.last_kept_ns + interval_ns_) {
    s.last_kept_ns += interval_ns_;
    out->push_back(Sample{key, s.last_kept_ns, s.pending});
    s.has_pending = false;
  }
  if (ts_ns >= s.last_kept_ns + interval_ns_) {
    s.last_kept_ns = ts_ns;
    out->push_back(Sample{key, ts_ns, value});
  } else {
    s.has_pending = true;
    s.pending = value;
  }
}

void CounterThrottle::Flush(std::vector<Sample>* out) {
  for (auto& [key, s] : states_) {
    if (!s.has_pending) continue;
    s.last_kept_ns += interval_ns_;
    out->push_back(Sample{key, s.last_kept_ns, s.pending});
    s.has_pending = false;
  }
}

}  // namespace gpuprio::tracer
