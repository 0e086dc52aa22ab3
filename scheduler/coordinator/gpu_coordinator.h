// This process's presence in one GPU's shared segment: its slot (what it publishes: the levels
// it has active, submit times, queue statistics, a heartbeat) and its view of the other processes
// (the highest level they have active, the highest that submitted recently). The dispatcher adds
// that view to its own when it decides what to admit; client threads publish before they issue.
//
// Threading: the Note*/Raise*/PeersAllowDirect/CountDirect calls are made by client threads and
// are lock-free and allocation-free; everything else by the device's dispatcher thread alone.
#ifndef GPUPRIO_SCHEDULER_COORDINATOR_GPU_COORDINATOR_H_
#define GPUPRIO_SCHEDULER_COORDINATOR_GPU_COORDINATOR_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "scheduler/coordinator/device_segment.h"
#include "scheduler/coordinator/process_identity.h"
#include "scheduler/coordinator/segment_layout.h"

namespace gpuprio::coordinator {

struct PeerState {
  int highest_active = kNoPriority;  // highest level another process has queued or in flight
  int ceiling = kNoPriority;         // highest level another process submitted within the window
  bool any_held = false;             // another process's dispatcher is holding work back
  // The highest level another process has queued or in flight, or had until less than the busy
  // window ago (ProcessSlot::last_drop; kNoPriority: none; highest_active without a window).
  int busy = kNoPriority;
  // The highest level another process launched work needing the whole GPU at within the window
  // (ProcessSlot::last_whole_device).
  int whole_device = kNoPriority;
};

class GpuCoordinator {
 public:
  // A slot in the GPU's segment, claimed for this process. Fails (with a message fit for the
  // user) when the segment cannot be used or has no free slot.
  static absl::StatusOr<std::unique_ptr<GpuCoordinator>> Attach(const SegmentOptions& options,
                                                                const uint8_t (&uuid)[16],
                                                                int default_priority);
  ~GpuCoordinator();  // releases the slot
  GpuCoordinator(const GpuCoordinator&) = delete;
  GpuCoordinator& operator=(const GpuCoordinator&) = delete;

  // --- Client threads (hot path: a few loads; writes only when a value changes). ---
  // Before a client issues work of `priority` itself: the level is published as active. True
  // when this process had no active work before (a burst begins).
  bool RaiseActive(int priority);
  // Work of `priority` is about to be queued or issued at `now_ns`: the level becomes active and
  // its submit time is refreshed (at 1 ms granularity). Returns true when this process had no
  // active work before.
  bool NoteSubmit(int priority, int64_t now_ns);
  // May a client issue work of `priority` itself? Not while another process has a more
  // important level active or submitting within the window (floor: the unbudgeted level). The
  // clock is read only when some process published a level above `priority`.
  bool PeersAllowDirect(int priority, uint64_t window_ns, int floor) const;
  void CountDirect(int priority);
  // Whether any other process is attached (refreshed by Maintain).
  bool PeersPresent() const { return peer_mask_.load(std::memory_order_relaxed) != 0; }
  // Whether another process's dispatcher holds work back (a load per attached process; a slot
  // whose heartbeat went stale still counts).
  bool AnyPeerHeld() const;

  // --- Dispatcher thread. ---
  // The other processes' levels, `now_ns` on CLOCK_MONOTONIC (this process's own clock). A slot
  // whose heartbeat has not changed for kStaleHeartbeatNs of that clock is skipped: a stopped or
  // wedged process must not hold the GPU for ever. `window_ns`: the ceiling's, on the shared
  // coarse clock; `busy_window_ns`: PeerState::busy's (0: busy is highest_active).
  PeerState Peers(int64_t now_ns, uint64_t window_ns, int floor, uint64_t busy_window_ns = 0) const;
  // The highest level this process has active, as the dispatcher counts it. Lowering it wakes
  // the processes sleeping in WaitForPeerDrop.
  // Returns the level it replaced. Lowering it stamps the level dropped from (ProcessSlot::
  // last_drop), keeping a higher level's stamp that is younger than `keep_drop_ns` (the request
  // gap).
  int SetActive(int priority, uint64_t keep_drop_ns = 0);
  // Any thread, lock-free: a level of this process launches work that needs the whole GPU (a CUDA
  // graph). The slot keeps the highest level noted within `window_ns`; a level's own stamp is
  // refreshed at most once a millisecond.
  void NoteWholeDevice(int priority, uint64_t window_ns);
  int Active() const { return slot_->active_priority.load(std::memory_order_seq_cst); }
  void PublishQueue(int64_t ops, int64_t estimated_ns);
  void PublishInFlight(int64_t ops, int64_t estimated_ns);
  void SetHeld(bool held, int64_t now_ns);
  // An op of `priority` issued after `delay_ns` in the queue (`confined`: onto a twin stream).
  void CountDispatched(int priority, uint64_t delay_ns, bool confined);
  // Spatial isolation: the reserve and the device's SMs (0, 0: no partition), confined work in
  // flight.
  void PublishIsolation(int reserved_sms, int device_sms, int64_t confined_ops,
                        int64_t confined_estimated_ns);
  // Heartbeat, every `interval_ns` at most; every kLivenessCheckNs also frees the slots of
  // processes that are gone (their slot lock is free) and refreshes the peer list. Checks that
  // the segment is still there and the slot still this process's; if not, coordination ends
  // with one message.
  void Maintain(int64_t now_ns, int64_t interval_ns);
  // At exit: nothing active, the slot free.
  void Release();

  // Sleeping while held back by other processes, instead of polling their slots. PeerDrops is
  // read before the peers' levels are looked at; WaitForPeerDrop then sleeps until some process
  // lowers a level after that read (or WakeDropSleepers is called), or `timeout_ns` passes.
  uint32_t PeerDrops() const {
    return segment_->header().level_drops.load(std::memory_order_seq_cst);
  }
  void WaitForPeerDrop(uint32_t seen, int64_t timeout_ns) const;
  // Wakes every process sleeping in WaitForPeerDrop on this GPU (a level was lowered, or this
  // process's own sleeping dispatcher has to wake up: the others look and sleep again).
  void WakeDropSleepers() const;

  const DeviceSegment& segment() const { return *segment_; }
  uint32_t slot_index() const { return slot_index_; }

  // A slot whose heartbeat did not change for this long (on the reader's clock) does not hold
  // others back.
  static constexpr int64_t kStaleHeartbeatNs = 2'000'000'000;
  // How often the slot locks are checked: how long a process that exited or exec'd without
  // releasing its slot may still count (its heartbeat stops at once, though).
  static constexpr int64_t kLivenessCheckNs = 100'000'000;
  // A submit time further ahead of the reader's clock than this is garbage, and ignored.
  static constexpr int64_t kFutureToleranceNs = 1'000'000'000;
  // The same for a drop time (microseconds of CLOCK_REALTIME, read at full resolution).
  static constexpr int64_t kDropFutureToleranceNs = 1'000'000;

 private:
  GpuCoordinator(std::unique_ptr<DeviceSegment> segment, ProcessIdentity self,
                 int default_priority);
  bool Claim();  // takes a free slot and its lock; false if none
  // Recomputes peer_mask_ (any thread; idempotent) if a slot was claimed since the last time.
  void RefreshPeersIfClaimed() const;
  // The live slots of other processes: state live, lock held. With `reclaim_dead` (the
  // dispatcher, and Attach), one pass also frees the slots whose lock no process holds
  // (exited, killed, exec'd, or never anyone's).
  void RefreshPeers(bool reclaim_dead = false) const;
  // Stops coordinating (the slot is no longer this process's to write), with one message.
  void Abandon(const char* why);
  // Whether slot i's heartbeat changed within kStaleHeartbeatNs before `now_ns`, as this process
  // saw it (a slot seen for the first time counts as fresh).
  bool HeartbeatFresh(uint32_t i, int64_t now_ns) const;
  // The slot's counters row for `priority` (claimed on first use; `other_levels` once every row
  // has a level). Any thread; lock-free.
  LevelRow& RowFor(int priority);

  std::unique_ptr<DeviceSegment> segment_;
  const ProcessIdentity self_;
  const int default_priority_;
  ProcessSlot* slot_ = nullptr;
  uint32_t slot_index_ = 0;
  uint64_t slot_word_ = 0;  // the state word this process wrote when it claimed the slot
  mutable std::atomic<uint64_t> peer_mask_{0};  // live slots of other processes
  mutable std::atomic<uint32_t> claims_seen_{0};  // header.claims when peer_mask_ was computed
  int64_t last_maintain_ns_ = 0;
  int64_t last_liveness_check_ns_ = 0;
  // Per slot, what this process last saw of its heartbeat and when (its own clock) it changed.
  mutable std::atomic<uint64_t> seen_heartbeat_[kSlotCount] = {};
  mutable std::atomic<int64_t> heartbeat_changed_ns_[kSlotCount] = {};
  mutable std::atomic<uint64_t> seen_word_[kSlotCount] = {};  // state word the two above are for
  int64_t held_since_ns_ = -1;
  // Per level, the index of its row in level_rows plus one (0: not looked up yet; kLevelRows + 1:
  // other_levels).
  std::atomic<uint8_t> row_of_level_[kLevels] = {};
  std::atomic<bool> released_{false};
};

}  // namespace gpuprio::coordinator

#endif  // GPUPRIO_SCHEDULER_COORDINATOR_GPU_COORDINATOR_H_
