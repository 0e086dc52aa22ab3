// The backpressure arithmetic, including the cases where the dispatcher has already issued past
// the op just submitted (other threads' ops issued in between), which once wrapped around.
#include "scheduler/backpressure.h"

#include "catch2/catch.hpp"

namespace {

using gpuprio::scheduler::BackpressureWaitTarget;

TEST_CASE("No wait while the stream holds at most the limit", "[scheduler][backpressure]") {
  CHECK(BackpressureWaitTarget(1, 0, 1024) == 0);
  CHECK(BackpressureWaitTarget(1024, 0, 1024) == 0);
  CHECK(BackpressureWaitTarget(5000, 3976, 1024) == 0);
}

TEST_CASE("Over the limit, wait until half the limit is left", "[scheduler][backpressure]") {
  CHECK(BackpressureWaitTarget(1025, 0, 1024) == 513);
  CHECK(BackpressureWaitTarget(10000, 100, 1024) == 10000 - 512);
  CHECK(BackpressureWaitTarget(3, 0, 2) == 2);
}

TEST_CASE("An op already issued past never waits, early in a stream's life or late",
          "[scheduler][backpressure]") {
  // The op was the stream's 5th; before its thread looked, 10 ops were issued.
  CHECK(BackpressureWaitTarget(5, 10, 1024) == 0);
  CHECK(BackpressureWaitTarget(5, 5, 1024) == 0);
  CHECK(BackpressureWaitTarget(100000, 100007, 64) == 0);
}

TEST_CASE("A wait target never exceeds what was submitted", "[scheduler][backpressure]") {
  for (uint64_t limit : {2u, 3u, 64u, 1024u}) {
    for (uint64_t submitted = 1; submitted < 3000; submitted += 7) {
      for (uint64_t issued = 0; issued < submitted + 20; issued += 13) {
        const uint64_t target = BackpressureWaitTarget(submitted, issued, limit);
        if (target != 0) {
          CHECK(target <= submitted);
          CHECK(target > issued);
          CHECK(submitted - target <= limit);
        }
      }
    }
  }
}

}  // namespace
