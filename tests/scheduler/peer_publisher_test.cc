// PeerPublisher (scheduler/peer_publisher.h): the level this process shows the others on its GPU
// follows its counted work, and is withdrawn only where no client may be raising it meanwhile.
#include "scheduler/peer_publisher.h"

#include <memory>
#include <vector>

#include "catch2/catch.hpp"
#include "scheduler/base/clock.h"
#include "scheduler/coordinator/gpu_coordinator.h"
#include "tests/test_directory.h"

namespace gpuprio::scheduler {
namespace {

constexpr uint8_t kUuid[16] = {'p', 'u', 'b', 'l', 'i', 's', 'h'};

LevelLoad Pending(int priority) { return {priority, 1, 0, 0, 100, 0}; }
LevelLoad Running(int priority) { return {priority, 0, 1, 500, 0, 0}; }

TEST_CASE("The highest level with work queued or in flight", "[publisher]") {
  CHECK(PeerPublisher::HighestActive({}) == kNoPriority);
  const std::vector<LevelLoad> levels = {Pending(-2), Running(3), {7, 0, 0, 0, 0, 0}};
  CHECK(PeerPublisher::HighestActive(levels) == 3);
}

TEST_CASE("The published level follows the counted work; uncounted work keeps it up",
          "[publisher][coordinator]") {
  const gpuprio_test::ScopedDirectory shm("publisher");
  coordinator::SegmentOptions segment;
  segment.shm_dir = shm.path();
  auto attached = coordinator::GpuCoordinator::Attach(segment, kUuid, /*default_priority=*/0);
  REQUIRE(attached.ok());
  std::unique_ptr<coordinator::GpuCoordinator> c = *std::move(attached);
  PeerPublisher publisher(c.get());
  int asked = 0;
  bool uncounted = false;
  auto ask = [&](int64_t) {
    ++asked;
    return uncounted;
  };
  const int64_t now = base::SteadyNowNs();
  const std::vector<LevelLoad> busy = {Pending(-1), Running(2)};
  publisher.Publish(now, /*held=*/false, busy, ask, IsolationReport{});
  CHECK(c->Active() == 2);
  CHECK(asked == 0);  // raised, not withdrawn
  SECTION("nothing left: withdrawn") {
    publisher.Publish(now, false, {}, ask, IsolationReport{});
    CHECK(c->Active() == kNoPriority);
    CHECK(asked == 1);
  }
  SECTION("nothing counted, but a client's work is not counted yet: kept up") {
    uncounted = true;
    publisher.Publish(now, false, {}, ask, IsolationReport{});
    CHECK(c->Active() == 2);
    CHECK(asked == 1);
  }
  SECTION("a lower level left: lowered to it") {
    const std::vector<LevelLoad> low = {Pending(-1)};
    publisher.Publish(now, false, low, ask, IsolationReport{});
    CHECK(c->Active() == -1);
  }
}

}  // namespace
}  // namespace gpuprio::scheduler
