// A fixed-size histogram of latencies in nanoseconds for percentiles (the exit summary's queueing
// delay p99): log-bucketed with four buckets per power of two, one relaxed atomic add per sample,
// no lock and no allocation, so the dispatcher can record into it on every issue.
#ifndef GPUPRIO_SCHEDULER_LATENCY_HISTOGRAM_H_
#define GPUPRIO_SCHEDULER_LATENCY_HISTOGRAM_H_

#include <atomic>
#include <cstdint>

namespace gpuprio::scheduler {

class LatencyHistogram {
 public:
  // Buckets 0..3 hold 0..3 ns exactly; from there each power of two [2^e, 2^(e+1)) is split into
  // four equal buckets (an upper bound at most 25% above any value in it). Values from 2^kMaxLog2
  // ns (about 69 s) on share the last bucket.
  static constexpr int kSubBucketBits = 2;
  static constexpr int kSubBuckets = 1 << kSubBucketBits;
  static constexpr int kMaxLog2 = 36;
  static constexpr int kBuckets = kSubBuckets * (kMaxLog2 - kSubBucketBits + 1) + 1;

  static int BucketOf(uint64_t ns) {
    if (ns < kSubBuckets) return static_cast<int>(ns);
    if (ns >= (uint64_t{1} << kMaxLog2)) return kBuckets - 1;
    const int log2 = 63 - __builtin_clzll(ns);
    const int sub = static_cast<int>(ns >> (log2 - kSubBucketBits)) & (kSubBuckets - 1);
    return kSubBuckets * (log2 - kSubBucketBits + 1) + sub;
  }

  // The smallest value in `bucket`.
  static uint64_t BucketLower(int bucket) {
    if (bucket < kSubBuckets) return static_cast<uint64_t>(bucket);
    const int log2 = bucket / kSubBuckets + kSubBucketBits - 1;
    const uint64_t sub = static_cast<uint64_t>(bucket % kSubBuckets);
    return (uint64_t{1} << log2) + (sub << (log2 - kSubBucketBits));
  }

  // The largest value in `bucket` (UINT64_MAX for the last).
  static uint64_t BucketUpper(int bucket) {
    return bucket >= kBuckets - 1 ? UINT64_MAX : BucketLower(bucket + 1) - 1;
  }

  void Record(uint64_t ns) {
    counts_[BucketOf(ns)].fetch_add(1, std::memory_order_relaxed);
  }

  uint64_t Count() const {
    uint64_t total = 0;
    for (const std::atomic<uint64_t>& c : counts_) total += c.load(std::memory_order_relaxed);
    return total;
  }

  // The nearest-rank `percent`-th percentile as the upper bound of its bucket (never below the
  // true value; the last bucket reports its lower bound, since it has no upper one); 0 when
  // empty. Concurrent Records may or may not be counted.
  uint64_t Percentile(double percent) const {
    uint64_t snapshot[kBuckets];
    uint64_t total = 0;
    for (int b = 0; b < kBuckets; ++b) {
      snapshot[b] = counts_[b].load(std::memory_order_relaxed);
      total += snapshot[b];
    }
    if (total == 0) return 0;
    // ceil(percent% of total), at least 1: the smallest rank that covers `percent` of samples.
    double wanted = percent / 100.0 * static_cast<double>(total);
    uint64_t rank = static_cast<uint64_t>(wanted);
    if (static_cast<double>(rank) < wanted) ++rank;
    if (rank < 1) rank = 1;
    if (rank > total) rank = total;
    uint64_t seen = 0;
    for (int b = 0; b < kBuckets; ++b) {
      seen += snapshot[b];
      if (seen >= rank) return b == kBuckets - 1 ? BucketLower(b) : BucketUpper(b);
    }
    return BucketLower(kBuckets - 1);  // not reached: seen ends at total >= rank
  }

 private:
  std::atomic<uint64_t> counts_[kBuckets] = {};
};

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_LATENCY_HISTOGRAM_H_
