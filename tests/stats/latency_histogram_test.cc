// scheduler/latency_histogram.h (bucket bounds, percentiles, concurrent recording) and the
// scheduler's exit summary lines, per priority and per dispatcher (scheduler/priority_summary.h).
#include "scheduler/latency_histogram.h"

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "catch2/catch.hpp"
#include "scheduler/priority_levels.h"
#include "scheduler/priority_summary.h"

namespace {

using gpuprio::scheduler::LatencyHistogram;

TEST_CASE("Every value lies within its bucket, and buckets tile the range", "[histogram]") {
  for (int b = 0; b + 1 < LatencyHistogram::kBuckets; ++b) {
    INFO("bucket " << b);
    CHECK(LatencyHistogram::BucketUpper(b) + 1 == LatencyHistogram::BucketLower(b + 1));
    CHECK(LatencyHistogram::BucketOf(LatencyHistogram::BucketLower(b)) == b);
    CHECK(LatencyHistogram::BucketOf(LatencyHistogram::BucketUpper(b)) == b);
    // An upper bound at most 25% above the bucket's lowest value (from 4 ns on).
    if (LatencyHistogram::BucketLower(b) >= 4) {
      CHECK(LatencyHistogram::BucketUpper(b) <= LatencyHistogram::BucketLower(b) * 5 / 4);
    }
  }
  for (uint64_t v : {uint64_t{0}, uint64_t{1}, uint64_t{5}, uint64_t{1000}, uint64_t{123456789},
                     (uint64_t{1} << 36) - 1}) {
    const int b = LatencyHistogram::BucketOf(v);
    INFO("value " << v << " bucket " << b);
    CHECK(LatencyHistogram::BucketLower(b) <= v);
    CHECK(v <= LatencyHistogram::BucketUpper(b));
  }
  CHECK(LatencyHistogram::BucketOf(uint64_t{1} << 36) == LatencyHistogram::kBuckets - 1);
  CHECK(LatencyHistogram::BucketOf(UINT64_MAX) == LatencyHistogram::kBuckets - 1);
}

TEST_CASE("Percentiles are the nearest rank's bucket bound", "[histogram]") {
  LatencyHistogram h;
  CHECK(h.Percentile(99) == 0);
  CHECK(h.Count() == 0);
  // 99 values of 1000 ns and one of 1,000,000 ns: p99 is in 1000's bucket, p100 in the other's.
  for (int i = 0; i < 99; ++i) h.Record(1000);
  h.Record(1'000'000);
  CHECK(h.Count() == 100);
  const uint64_t p99 = h.Percentile(99);
  CHECK(p99 >= 1000);
  CHECK(p99 <= 1250);
  CHECK(h.Percentile(50) == p99);
  const uint64_t p100 = h.Percentile(100);
  CHECK(p100 >= 1'000'000);
  CHECK(p100 <= 1'250'000);
  // One more large value: now 2 of 101 are large, and the 99th percentile (rank 100) is one.
  h.Record(1'000'000);
  CHECK(h.Percentile(99) == p100);
}

TEST_CASE("Concurrent records are all counted", "[histogram]") {
  LatencyHistogram h;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&h, t] {
      for (int i = 0; i < 10000; ++i) h.Record(static_cast<uint64_t>(i * (t + 1)));
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(h.Count() == 40000);
}

TEST_CASE("The exit summary has one line per level that did work, highest first", "[summary]") {
  gpuprio::scheduler::PriorityLevels levels;
  CHECK(gpuprio::scheduler::FormatPrioritySummary(levels).empty());

  auto& high = levels.At(1);
  high.ops_on_caller = 3;
  high.ops_submitted = 1;
  high.ops_issued = 1;
  high.queue_delay_ns_sum = 5000;
  high.queue_delay_ns_max = 5000;
  high.queue_delay_histogram.Record(5000);

  auto& low = levels.At(-1);
  low.ops_submitted = 100;
  low.ops_issued = 100;
  for (int i = 0; i < 100; ++i) {
    const uint64_t delay = i < 98 ? 10'000 : 2'000'000;  // 2 of 100 held for 2 ms
    low.queue_delay_ns_sum += delay;
    low.queue_delay_histogram.Record(delay);
  }
  low.queue_delay_ns_max = 2'000'000;
  low.ops_held = 2;
  low.held_ns_sum = 3'500'000;
  low.held_ns_max = 1'900'000;

  high.calls_timed = 4;  // SchedulerOptions::time_calls
  high.call_ns_sum = 10'000;
  high.caller_driver_ns_sum = 6'000;
  high.call_ns_max = 4'500;

  auto& other = levels.At(7);
  other.ops_on_caller = 2;  // none queued: no delay figures

  const std::vector<std::string> lines = gpuprio::scheduler::FormatPrioritySummary(levels);
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] == "priority=7 ops=2 on_caller=100.0% queued=0");
  CHECK(lines[1] ==
        "priority=1 (high) ops=4 on_caller=75.0% queued=1 queue_delay_us mean=5.0 p99<=5.0 "
        "max=5.0 calls=4 in_call_us mean=2.50 (driver 1.50) max=4.5");
  // p99 is 2 ms's bucket bound, capped at the exact max.
  CHECK(lines[2] ==
        "priority=-1 (low) ops=100 on_caller=0.0% queued=100 queue_delay_us mean=49.8 "
        "p99<=2000.0 max=2000.0 held_back ops=2 total_ms=3.5 max_ms=1.9");
}

TEST_CASE("The exit summary has one line per dispatcher", "[summary]") {
  CHECK(gpuprio::scheduler::FormatDispatcherSummary({}).empty());
  const std::vector<std::string> lines =
      gpuprio::scheduler::FormatDispatcherSummary(
          {{0, 812'414'000, 40211, 9120, 4800, 30551}, {1, 0, 0, 0, 0, 0}});
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] ==
        "dispatcher device=0 cpu_ms=812.41 sleeps=40211 marks=9120 direct_marks=4800 "
        "mark_queries=30551");
  CHECK(lines[1] == "dispatcher device=1 cpu_ms=0.00 sleeps=0 marks=0 direct_marks=0 mark_queries=0");
}

}  // namespace
