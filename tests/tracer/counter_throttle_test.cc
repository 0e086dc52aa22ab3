#include "cupti_tracer/counter_throttle.h"

#include <vector>

#include "catch2/catch.hpp"

namespace gpuprio::tracer {
namespace {

using Sample = CounterThrottle::Sample;

TEST_CASE("CounterThrottle keeps at most one sample per interval and never loses the last",
          "[tracer]") {
  CounterThrottle throttle(50'000);
  std::vector<Sample> out;
  throttle.Offer(1, 1'000, 1, &out);  // first: kept
  REQUIRE(out.size() == 1);
  throttle.Offer(1, 2'000, 2, &out);   // inside the window: held back
  throttle.Offer(1, 30'000, 3, &out);  // replaces the held-back value
  CHECK(out.size() == 1);

  SECTION("a later sample first releases the held-back value at the window's end") {
    throttle.Offer(1, 200'000, 4, &out);
    REQUIRE(out.size() == 3);
    CHECK(out[1].ts_ns == 51'000);
    CHECK(out[1].value == 3);
    CHECK(out[2].ts_ns == 200'000);
    CHECK(out[2].value == 4);
  }
  SECTION("Flush releases the held-back value") {
    throttle.Flush(&out);
    REQUIRE(out.size() == 2);
    CHECK(out[1].ts_ns == 51'000);
    CHECK(out[1].value == 3);
    out.clear();
    throttle.Flush(&out);
    CHECK(out.empty());
  }
}

TEST_CASE("CounterThrottle limits each counter on its own", "[tracer]") {
  CounterThrottle throttle(50'000);
  std::vector<Sample> out;
  for (int i = 0; i < 1000; ++i) {
    throttle.Offer(i % 2, i * 1'000, i, &out);  // 1 us apart, two counters
  }
  throttle.Flush(&out);
  int64_t last[2] = {-1'000'000, -1'000'000};
  int kept[2] = {0, 0};
  double final_value[2] = {0, 0};
  for (const Sample& s : out) {
    const int k = static_cast<int>(s.key);
    CHECK(s.ts_ns - last[k] >= 50'000);
    last[k] = s.ts_ns;
    ++kept[k];
    final_value[k] = s.value;
  }
  // ~1 ms of samples: about 20 per counter, far fewer than 500.
  CHECK(kept[0] <= 21);
  CHECK(kept[1] <= 21);
  CHECK(final_value[0] == 998);  // the last value of each counter survives
  CHECK(final_value[1] == 999);
}

}  // namespace
}  // namespace gpuprio::tracer
