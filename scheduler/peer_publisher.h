// What this process tells the other processes sharing its GPU after each dispatcher round: its
// highest active level (withdrawn only where no client may be raising it meanwhile), its queued
// and in-flight work, whether it holds work back, and its isolation state.
#ifndef GPUPRIO_SCHEDULER_PEER_PUBLISHER_H_
#define GPUPRIO_SCHEDULER_PEER_PUBLISHER_H_

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "scheduler/coordinator/gpu_coordinator.h"
#include "scheduler/issue_policy.h"

namespace gpuprio::scheduler {

// The SM partition as the other processes see it (all zero without one).
struct IsolationReport {
  int reserved_sms = 0;
  int device_sms = 0;
  int64_t confined_ops = 0;
  int64_t confined_ns = 0;
};

class PeerPublisher {
 public:
  // `coordinator` (not null) must outlive the publisher. `keep_drop_ns`: the request gap
  // (GpuCoordinator::SetActive).
  explicit PeerPublisher(coordinator::GpuCoordinator* coordinator, uint64_t keep_drop_ns = 0)
      : coordinator_(coordinator), keep_drop_ns_(keep_drop_ns) {}

  // The highest level with work queued or in flight (kNoPriority: none).
  static int HighestActive(absl::Span<const LevelLoad> levels);

  // Publishes this round's counts (`levels`, the dispatcher's). A level that is no longer active
  // is withdrawn, then `uncounted(pending_ops)` is asked whether a client has published work this
  // round has not counted (in the inbox, being issued directly, or issued and not adopted); if
  // so the level goes back up until the next round counts it. A client counts its work before it
  // raises the level; `uncounted` must read those counts after the withdrawal (seq_cst), so
  // either it sees the work or the client's raise comes after the withdrawal.
  void Publish(int64_t now_ns, bool held, absl::Span<const LevelLoad> levels,
               absl::FunctionRef<bool(int64_t pending_ops)> uncounted,
               const IsolationReport& isolation);

 private:
  coordinator::GpuCoordinator* const coordinator_;
  const uint64_t keep_drop_ns_;
};

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_PEER_PUBLISHER_H_
