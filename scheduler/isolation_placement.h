// Spatial isolation's placement for one device's dispatcher: where a stream's next op runs (its
// own stream, or its twin in the SM partition), and the events that keep the order CUDA would
// have given across a switch (the stream's own earlier work, the legacy NULL stream's order).
#ifndef GPUPRIO_SCHEDULER_ISOLATION_PLACEMENT_H_
#define GPUPRIO_SCHEDULER_ISOLATION_PLACEMENT_H_

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "scheduler/driver_functions.h"
#include "scheduler/peer_publisher.h"
#include "scheduler/sm_partition.h"
#include "scheduler/stream_queue.h"
#include "scheduler/stream_state.h"

namespace gpuprio::scheduler {

// Dispatcher thread only, except AwayWorkOrders (client threads, lock-free).
class IsolationPlacement {
 public:
  // `record_mu` (must outlive this) is held wherever an event is recorded on an application's
  // stream, so nothing is recorded on one being destroyed (StreamState::destroyed).
  IsolationPlacement(int device, const DriverFunctions& driver, int reserved_sms,
                     absl::Mutex* record_mu)
      : device_(device), driver_(driver), reserved_sms_(reserved_sms), record_mu_(record_mu) {}
  IsolationPlacement(const IsolationPlacement&) = delete;
  IsolationPlacement& operator=(const IsolationPlacement&) = delete;

  // Client: whether an op issued on `stream` by its own thread would miss an ordering CUDA gives
  // it, because that work is on a twin: the stream's own earlier work, or (legacy NULL stream
  // and blocking streams order against each other) the other side's.
  bool AwayWorkOrders(const StreamState* stream) const {
    if (stream->away.load(std::memory_order_acquire)) return true;
    if (stream->legacy) return blocking_away_.load(std::memory_order_acquire) > 0;
    return stream->blocking && legacy_away_.load(std::memory_order_acquire) > 0;
  }

  // Client: how many of this device's streams have their work on a twin now (any thread).
  int StreamsAway() const { return streams_away_.load(std::memory_order_seq_cst); }

  // Whether this process shares SMs with the others on the GPU (MPS), read once from the driver.
  bool SharesSmsWithPeers();
  // The partition, created the first time it is asked for (tried once; a failure is logged and
  // isolation stays off on the device).
  bool EnsurePartition();

  // Work was not confined below `level` (kNoPriority: nothing to say), which launched work that
  // needs the whole GPU: said once per device at info, since the batch job then loses the
  // partition's share of the GPU while that level works.
  void NoteNotConfinedBelow(int level);

  // Functions whose launch the partition refused run on their own streams from then on.
  bool Confinable(const void* cost_key) const {
    return cost_key == nullptr || !unconfinable_.contains(cost_key);
  }
  void NoteUnconfinable(const void* cost_key) { unconfinable_.insert(cost_key); }

  // Moves `q`'s work to its twin (created on first confinement) or back home, linking the
  // stream's earlier work across the switch and the legacy stream's order; the stream to issue
  // on. `q`'s context must be current.
  CUstream Place(StreamQueue* q, bool confine);
  static CUstream Location(const StreamQueue& q) { return q.away ? q.twin : q.state->stream; }
  // Before a capture: `q`'s work returns to its own stream (its context current).
  void BringHome(StreamQueue* q) {
    if (q->away) SwitchLocation(q, /*to_twin=*/false);
  }
  // A released stream's queue: out of its context's links, its twin destroyed.
  void Forget(StreamQueue* q);

  // A confined op of `estimate_ns` enters or leaves `q`'s twin (the twin's queue bound and the
  // device's totals, published for the exporter).
  void AddConfined(StreamQueue* q, uint64_t estimate_ns);
  void RemoveConfined(StreamQueue* q, uint64_t estimate_ns);
  IsolationReport Report() const;

 private:
  void SwitchLocation(StreamQueue* q, bool to_twin);
  void LinkLegacyOrder(StreamQueue* q);
  // `to` waits for the work issued on `from` so far; false when the driver refused.
  bool Link(ContextLinks* links, CUstream from, CUstream to);
  bool Destroyed(const StreamState* s) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(record_mu_) {
    return s->destroyed.load(std::memory_order_acquire);
  }

  const int device_;
  const DriverFunctions driver_;
  const int reserved_sms_;
  absl::Mutex* const record_mu_;
  // Streams whose work is on a twin now: legacy streams, and blocking streams (AwayWorkOrders).
  std::atomic<int> legacy_away_{0};
  std::atomic<int> blocking_away_{0};
  // Every stream whose work is on a twin now; raised before the stream's `away` flag, and before
  // the op that moved it is counted issued.
  std::atomic<int> streams_away_{0};
  std::unique_ptr<SmPartition> partition_;  // once created
  bool partition_tried_ = false;
  bool said_whole_device_ = false;  // NoteNotConfinedBelow's message
  absl::flat_hash_set<const void*> unconfinable_;
  // Confined ops in flight on every twin of the device and their estimated GPU time.
  int64_t confined_in_flight_ops_ = 0;
  int64_t confined_in_flight_ns_ = 0;
  // Whether the GPU is shared under MPS (only then do other processes' levels confine this
  // one's work: without MPS processes time-slice, and a partition would only idle SMs).
  bool mps_known_ = false;
  bool mps_ = false;
};

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_ISOLATION_PLACEMENT_H_
