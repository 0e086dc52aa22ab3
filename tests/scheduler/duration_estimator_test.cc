#include "scheduler/duration_estimator.h"

#include "catch2/catch.hpp"

namespace gpuprio::scheduler {
namespace {

TEST_CASE("DurationEstimator uses the hint, then the default, for unknown keys", "[scheduler]") {
  DurationEstimator e(/*default_ns=*/5000);
  int key = 0;
  CHECK(e.Estimate(&key, 700) == 700);
  CHECK(e.Estimate(&key, 0) == 5000);
  CHECK(e.Estimate(nullptr, 0) == 5000);
}

TEST_CASE("DurationEstimator follows measurements with a running average", "[scheduler]") {
  DurationEstimator e(5000);
  int key = 0;
  e.Observe(&key, 1000);
  CHECK(e.Estimate(&key, 0) == 1000);
  e.Observe(&key, 2000);  // counts as the sample before it: a lone long one
  CHECK(e.Estimate(&key, 0) == 1000);
  e.Observe(&key, 2000);  // a lasting change
  CHECK(e.Estimate(&key, 0) == 1250);
  e.Observe(&key, 500);  // shorter ones count at once
  CHECK(e.Estimate(&key, 0) == 1062);
  for (int i = 0; i < 40; ++i) e.Observe(&key, 2000);
  CHECK(e.Estimate(&key, 0) >= 1990);
  e.Observe(nullptr, 123);
  CHECK(e.KnownKeys() == 1);
}

TEST_CASE("DurationEstimator ignores a lone stretched sample", "[scheduler]") {
  // 200 us kernels, one of them stretched by another process's 1 ms time slice each period.
  DurationEstimator e(5000);
  int key = 0;
  for (int period = 0; period < 20; ++period) {
    e.Observe(&key, 1'200'000);
    for (int i = 0; i < 49; ++i) e.Observe(&key, 200'000);
  }
  CHECK(e.Estimate(&key, 0) == 200'000);
}

}  // namespace
}  // namespace gpuprio::scheduler
