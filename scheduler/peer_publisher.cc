#include "scheduler/peer_publisher.h"

#include <algorithm>

namespace gpuprio::scheduler {
namespace {

// The heartbeat's beat (and the liveness checks that come with it), at most.
constexpr int64_t kMaintainIntervalNs = 10'000'000;

}  // namespace

int PeerPublisher::HighestActive(absl::Span<const LevelLoad> levels) {
  int highest = kNoPriority;
  for (const LevelLoad& l : levels) {
    if (l.pending > 0 || l.in_flight_ops > 0) highest = std::max(highest, l.priority);
  }
  return highest;
}

void PeerPublisher::Publish(int64_t now_ns, bool held, absl::Span<const LevelLoad> levels,
                            absl::FunctionRef<bool(int64_t pending_ops)> uncounted,
                            const IsolationReport& isolation) {
  coordinator_->Maintain(now_ns, kMaintainIntervalNs);
  int64_t pending_ops = 0, pending_ns = 0, in_flight_ops = 0, in_flight_ns = 0;
  for (const LevelLoad& l : levels) {
    pending_ops += l.pending;
    pending_ns += l.pending_ns;
    in_flight_ops += l.in_flight_ops;
    in_flight_ns += l.in_flight_ns;
  }
  const int local = HighestActive(levels);
  const int published = coordinator_->Active();
  if (local < published) {
    // A client may have raised the level since it was read: back up to what was replaced.
    const int replaced = coordinator_->SetActive(local, keep_drop_ns_);
    if (uncounted(pending_ops)) coordinator_->RaiseActive(std::max(published, replaced));
  } else if (local > published) {
    coordinator_->RaiseActive(local);
  }
  coordinator_->PublishQueue(pending_ops, pending_ns);
  coordinator_->PublishInFlight(in_flight_ops, in_flight_ns);
  coordinator_->SetHeld(held, now_ns);
  coordinator_->PublishIsolation(isolation.reserved_sms, isolation.device_sms,
                                 isolation.confined_ops, isolation.confined_ns);
}

}  // namespace gpuprio::scheduler
