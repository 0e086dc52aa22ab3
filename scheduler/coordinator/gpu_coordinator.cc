#include "scheduler/coordinator/gpu_coordinator.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "scheduler/base/atomic_max.h"
#include "scheduler/base/clock.h"
#include "scheduler/base/futex.h"
#include "scheduler/base/logging.h"

namespace gpuprio::coordinator {
namespace {


// A value read from another process's slot is trusted only inside the priority range.
bool ValidPriority(int p) { return p >= kLowestPriority && p <= kHighestPriority; }

constexpr int64_t kSubmitGranularityNs = 1'000'000;

void ReadCommand(char (&out)[32]) {
  std::memset(out, 0, sizeof(out));
  const int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t n = read(fd, out, sizeof(out) - 1);
  close(fd);
  if (n <= 0) return;
  for (ssize_t i = 0; i < n; ++i) {
    if (out[i] == '\n') out[i] = '\0';
  }
}

// Slot fields that readers poll are written only when they change: a store would dirty a cache
// line that every other process on the GPU reads.
template <typename T, typename V>
void StoreIfChanged(std::atomic<T>& field, V value) {
  const T v = static_cast<T>(value);
  if (field.load(std::memory_order_relaxed) != v) field.store(v, std::memory_order_relaxed);
}

void ResetRow(LevelRow& row) {
  row.level_key.store(0, std::memory_order_relaxed);
  row.ops_dispatched.store(0, std::memory_order_relaxed);
  row.ops_direct.store(0, std::memory_order_relaxed);
  row.ops_confined.store(0, std::memory_order_relaxed);
  for (auto& b : row.delay_histogram) b.store(0, std::memory_order_relaxed);
}

}  // namespace

absl::StatusOr<std::unique_ptr<GpuCoordinator>> GpuCoordinator::Attach(
    const SegmentOptions& options, const uint8_t (&uuid)[16], int default_priority) {
  absl::StatusOr<std::unique_ptr<DeviceSegment>> segment =
      DeviceSegment::OpenOrCreate(options, uuid);
  if (!segment.ok()) return segment.status();
  auto coordinator = std::unique_ptr<GpuCoordinator>(
      new GpuCoordinator(*std::move(segment), OwnIdentity(), default_priority));
  // Slots of processes that died (or exec'd: this very process's image before an exec, say)
  // without releasing theirs are freed first: they must neither hold this one back nor take the
  // slot it needs.
  coordinator->RefreshPeers(/*reclaim_dead=*/true);
  if (!coordinator->Claim()) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "shared segment %s has no free slot (%d processes attached)",
        coordinator->segment().path(), kSlotCount));
  }
  return coordinator;
}

GpuCoordinator::GpuCoordinator(std::unique_ptr<DeviceSegment> segment, ProcessIdentity self,
                               int default_priority)
    : segment_(std::move(segment)), self_(self), default_priority_(default_priority) {}

GpuCoordinator::~GpuCoordinator() { Release(); }

bool GpuCoordinator::Claim() {
  SegmentHeader& header = segment_->header();
  for (uint32_t i = 0; i < kSlotCount; ++i) {
    ProcessSlot& slot = segment_->slot(i);
    uint64_t word = slot.state_word.load(std::memory_order_acquire);
    if (SlotWordState(word) != kSlotFree) continue;
    // The lock first: from the moment the slot is claimed, its lock says its owner is alive.
    if (!segment_->LockSlot(i)) continue;
    const uint64_t claimed = SlotWord(SlotWordGeneration(word) + 1, kSlotClaimed);
    if (!slot.state_word.compare_exchange_strong(word, claimed, std::memory_order_acq_rel)) {
      segment_->UnlockSlot(i);
      continue;
    }
    // Everything but the state word is reset: a dead owner's values mean nothing.
    slot.heartbeat.store(0, std::memory_order_relaxed);
    slot.pid = self_.pid;
    slot.start_time_ticks = self_.start_time_ticks;
    slot.pid_namespace = self_.pid_namespace;
    slot.default_priority.store(default_priority_, std::memory_order_relaxed);
    slot.active_priority.store(kNoPriority, std::memory_order_relaxed);
    slot.max_seen_priority.store(kNoPriority, std::memory_order_relaxed);
    slot.held.store(0, std::memory_order_relaxed);
    ReadCommand(slot.command);
    slot.ops_dispatched.store(0, std::memory_order_relaxed);
    slot.ops_direct.store(0, std::memory_order_relaxed);
    slot.queued_ops.store(0, std::memory_order_relaxed);
    slot.queued_estimated_ns.store(0, std::memory_order_relaxed);
    slot.in_flight_ops.store(0, std::memory_order_relaxed);
    slot.in_flight_estimated_ns.store(0, std::memory_order_relaxed);
    slot.held_ns_total.store(0, std::memory_order_relaxed);
    for (auto& b : slot.delay_histogram) b.store(0, std::memory_order_relaxed);
    for (auto& t : slot.level_last_submit_unix_ns) t.store(0, std::memory_order_relaxed);
    slot.isolation_reserved_sms.store(0, std::memory_order_relaxed);
    slot.isolation_device_sms.store(0, std::memory_order_relaxed);
    slot.confined_in_flight_ops.store(0, std::memory_order_relaxed);
    slot.confined_in_flight_estimated_ns.store(0, std::memory_order_relaxed);
    slot.last_drop.store(0, std::memory_order_relaxed);
    slot.last_whole_device.store(0, std::memory_order_relaxed);
    for (LevelRow& row : slot.level_rows) ResetRow(row);
    ResetRow(slot.other_levels);
    slot_word_ = SlotWord(SlotWordGeneration(claimed), kSlotLive);
    slot.state_word.store(slot_word_, std::memory_order_release);
    slot_ = &slot;
    slot_index_ = i;
    header.claims.fetch_add(1, std::memory_order_acq_rel);
    RefreshPeers();
    return true;
  }
  return false;
}

bool GpuCoordinator::RaiseActive(int priority) {
  if (released_.load(std::memory_order_relaxed)) return false;
  const int32_t seen = slot_->active_priority.load(std::memory_order_seq_cst);
  if (priority <= seen) return false;
  base::AtomicMax(slot_->active_priority, priority, std::memory_order_seq_cst);
  return seen == kNoPriority;
}

bool GpuCoordinator::NoteSubmit(int priority, int64_t /*now_ns*/) {
  if (released_.load(std::memory_order_relaxed)) return false;
  ProcessSlot& slot = *slot_;
  const bool burst_begins = RaiseActive(priority);
  std::atomic<int64_t>& last = slot.level_last_submit_unix_ns[priority - kLowestPriority];
  const int64_t shared_now = base::SharedCoarseNowNs();
  if (shared_now - last.load(std::memory_order_relaxed) > kSubmitGranularityNs) {
    last.store(shared_now, std::memory_order_relaxed);
  }
  if (priority > slot.max_seen_priority.load(std::memory_order_relaxed)) {
    base::AtomicMax(slot.max_seen_priority, priority, std::memory_order_seq_cst);
  }
  SegmentHeader& header = segment_->header();
  if (priority > header.priority_high_water.load(std::memory_order_relaxed)) {
    base::AtomicMax(header.priority_high_water, priority, std::memory_order_seq_cst);
  }
  return burst_begins;
}

void GpuCoordinator::RefreshPeers(bool reclaim_dead) const {
  const uint32_t claims = segment_->header().claims.load(std::memory_order_acquire);
  const int64_t now = base::SteadyNowNs();
  uint64_t mask = 0;
  for (uint32_t i = 0; i < kSlotCount; ++i) {
    if (slot_ != nullptr && i == slot_index_) continue;
    ProcessSlot& slot = segment_->slot(i);
    uint64_t word = slot.state_word.load(std::memory_order_acquire);
    const SlotState state = SlotWordState(word);
    if (state == kSlotFree || (state != kSlotLive && !reclaim_dead)) continue;
    // Claimed or live (or garbage) with nobody holding its lock: its owner is gone, or there
    // never was one. A claimer takes the lock before it claims, so one being filled in is kept.
    if (!segment_->SlotLockedByOther(i)) {
      // Freed only if nobody re-claimed it since it was read (the generation is in the word).
      // (The header's high-water mark is never lowered: another process may be raising it right
      // now, and an upper bound is all the fast path needs.)
      if (reclaim_dead) {
        slot.state_word.compare_exchange_strong(
            word, SlotWord(SlotWordGeneration(word), kSlotFree), std::memory_order_acq_rel);
      }
      continue;
    }
    if (state != kSlotLive) continue;
    mask |= uint64_t{1} << i;
    if (seen_word_[i].exchange(word, std::memory_order_relaxed) != word) {
      // A new owner: its heartbeat counts as fresh from now.
      seen_heartbeat_[i].store(slot.heartbeat.load(std::memory_order_relaxed),
                               std::memory_order_relaxed);
      heartbeat_changed_ns_[i].store(now, std::memory_order_relaxed);
    }
  }
  peer_mask_.store(mask, std::memory_order_relaxed);
  claims_seen_.store(claims, std::memory_order_release);
}

bool GpuCoordinator::HeartbeatFresh(uint32_t i, int64_t now_ns) const {
  const uint64_t beat = segment_->slot(i).heartbeat.load(std::memory_order_relaxed);
  if (seen_heartbeat_[i].load(std::memory_order_relaxed) != beat) {
    seen_heartbeat_[i].store(beat, std::memory_order_relaxed);
    heartbeat_changed_ns_[i].store(now_ns, std::memory_order_relaxed);
    return true;
  }
  return now_ns - heartbeat_changed_ns_[i].load(std::memory_order_relaxed) <= kStaleHeartbeatNs;
}

void GpuCoordinator::RefreshPeersIfClaimed() const {
  if (segment_->header().claims.load(std::memory_order_acquire) !=
      claims_seen_.load(std::memory_order_acquire)) {
    RefreshPeers();
  }
}

PeerState GpuCoordinator::Peers(int64_t now_ns, uint64_t window_ns, int floor,
                                uint64_t busy_window_ns) const {
  RefreshPeersIfClaimed();
  PeerState state;
  int64_t shared_now = 0;  // read once, and only if some slot's levels are looked at
  int64_t precise_now = 0;  // the same at full resolution, for the drop times
  for (uint64_t mask = peer_mask_.load(std::memory_order_relaxed); mask != 0; mask &= mask - 1) {
    const uint32_t i = static_cast<uint32_t>(__builtin_ctzll(mask));
    const ProcessSlot& slot = segment_->slot(i);
    if (SlotWordState(slot.state_word.load(std::memory_order_acquire)) != kSlotLive) continue;
    if (!HeartbeatFresh(i, now_ns)) continue;
    if (slot.held.load(std::memory_order_relaxed) != 0) state.any_held = true;
    const int active = slot.active_priority.load(std::memory_order_seq_cst);
    if (ValidPriority(active) && active > state.highest_active) state.highest_active = active;
    // The clocks are read only for a stamp that could raise what is already known.
    const uint64_t whole = slot.last_whole_device.load(std::memory_order_relaxed);
    if (LevelStampPriority(whole) > state.whole_device) {
      if (shared_now == 0) shared_now = base::SharedCoarseNowNs();
      state.whole_device = std::max(
          state.whole_device, LevelStampWithin(whole, shared_now, window_ns, kFutureToleranceNs));
    }
    const uint64_t drop = busy_window_ns != 0 ? slot.last_drop.load(std::memory_order_seq_cst) : 0;
    if (LevelStampPriority(drop) > state.busy) {
      if (precise_now == 0) precise_now = base::SharedNowNs();
      state.busy = std::max(
          state.busy, LevelStampWithin(drop, precise_now, busy_window_ns, kDropFutureToleranceNs));
    }
    // The ceiling: from the slot's highest level down to what is already known.
    int top = slot.max_seen_priority.load(std::memory_order_relaxed);
    if (!ValidPriority(top)) continue;
    const int stop = std::max(floor, state.ceiling);
    if (top > stop && shared_now == 0) shared_now = base::SharedCoarseNowNs();
    for (int p = top; p > stop; --p) {
      const int64_t t =
          slot.level_last_submit_unix_ns[p - kLowestPriority].load(std::memory_order_relaxed);
      // Ahead of this clock by up to a tick or two of the coarse clocks is normal; further ahead
      // is garbage (or a clock stepped back), which must not keep a ceiling up.
      if (t != 0 && shared_now - t <= static_cast<int64_t>(window_ns) &&
          t - shared_now <= kFutureToleranceNs) {
        state.ceiling = p;
        break;
      }
    }
  }
  state.busy = std::max(state.busy, state.highest_active);
  return state;
}

bool GpuCoordinator::AnyPeerHeld() const {
  for (uint64_t mask = peer_mask_.load(std::memory_order_relaxed); mask != 0; mask &= mask - 1) {
    const ProcessSlot& slot = segment_->slot(static_cast<uint32_t>(__builtin_ctzll(mask)));
    if (SlotWordState(slot.state_word.load(std::memory_order_acquire)) == kSlotLive &&
        slot.held.load(std::memory_order_relaxed) != 0) {
      return true;
    }
  }
  return false;
}

bool GpuCoordinator::PeersAllowDirect(int priority, uint64_t window_ns, int floor) const {
  // The common case for the most important process: nothing anywhere above it, one load.
  if (priority >= segment_->header().priority_high_water.load(std::memory_order_relaxed)) {
    return true;
  }
  if (peer_mask_.load(std::memory_order_relaxed) == 0 &&
      segment_->header().claims.load(std::memory_order_relaxed) ==
          claims_seen_.load(std::memory_order_relaxed)) {
    return true;
  }
  const PeerState peers = Peers(base::CoarseNowNs(), window_ns, floor);
  return priority >= peers.highest_active && priority >= peers.ceiling;
}

void GpuCoordinator::PublishQueue(int64_t ops, int64_t estimated_ns) {
  if (released_.load(std::memory_order_relaxed)) return;
  StoreIfChanged(slot_->queued_ops, ops);
  StoreIfChanged(slot_->queued_estimated_ns, estimated_ns);
}

void GpuCoordinator::PublishInFlight(int64_t ops, int64_t estimated_ns) {
  if (released_.load(std::memory_order_relaxed)) return;
  StoreIfChanged(slot_->in_flight_ops, ops);
  StoreIfChanged(slot_->in_flight_estimated_ns, estimated_ns);
}

void GpuCoordinator::SetHeld(bool held, int64_t now_ns) {
  if (released_.load(std::memory_order_relaxed) || held == (held_since_ns_ >= 0)) return;
  if (held) {
    held_since_ns_ = now_ns;
  } else {
    slot_->held_ns_total.fetch_add(static_cast<uint64_t>(now_ns - held_since_ns_),
                                   std::memory_order_relaxed);
    held_since_ns_ = -1;
  }
  slot_->held.store(held ? 1 : 0, std::memory_order_relaxed);
}

LevelRow& GpuCoordinator::RowFor(int priority) {
  std::atomic<uint8_t>& cached = row_of_level_[priority - kLowestPriority];
  const uint8_t known = cached.load(std::memory_order_relaxed);
  if (known != 0) {
    return known <= kLevelRows ? slot_->level_rows[known - 1] : slot_->other_levels;
  }
  const uint32_t key = LevelKey(priority);
  uint8_t found = kLevelRows + 1;
  for (int i = 0; i < kLevelRows; ++i) {
    uint32_t seen = slot_->level_rows[i].level_key.load(std::memory_order_acquire);
    if (seen == 0 && slot_->level_rows[i].level_key.compare_exchange_strong(
                         seen, key, std::memory_order_acq_rel)) {
      seen = key;
    }
    if (seen == key) {
      found = static_cast<uint8_t>(i + 1);
      break;
    }
  }
  cached.store(found, std::memory_order_relaxed);
  return found <= kLevelRows ? slot_->level_rows[found - 1] : slot_->other_levels;
}

void GpuCoordinator::CountDirect(int priority) {
  if (released_.load(std::memory_order_relaxed)) return;
  slot_->ops_direct.fetch_add(1, std::memory_order_relaxed);
  RowFor(priority).ops_direct.fetch_add(1, std::memory_order_relaxed);
}

void GpuCoordinator::CountDispatched(int priority, uint64_t delay_ns, bool confined) {
  if (released_.load(std::memory_order_relaxed)) return;
  const int bucket = DelayBucket(delay_ns);
  slot_->ops_dispatched.fetch_add(1, std::memory_order_relaxed);
  slot_->delay_histogram[bucket].fetch_add(1, std::memory_order_relaxed);
  LevelRow& row = RowFor(priority);
  row.ops_dispatched.fetch_add(1, std::memory_order_relaxed);
  if (confined) row.ops_confined.fetch_add(1, std::memory_order_relaxed);
  row.delay_histogram[bucket].fetch_add(1, std::memory_order_relaxed);
}

void GpuCoordinator::PublishIsolation(int reserved_sms, int device_sms, int64_t confined_ops,
                                      int64_t confined_estimated_ns) {
  if (released_.load(std::memory_order_relaxed)) return;
  StoreIfChanged(slot_->isolation_reserved_sms, reserved_sms);
  StoreIfChanged(slot_->isolation_device_sms, device_sms);
  StoreIfChanged(slot_->confined_in_flight_ops, confined_ops);
  StoreIfChanged(slot_->confined_in_flight_estimated_ns, confined_estimated_ns);
}

void GpuCoordinator::Abandon(const char* why) {
  released_.store(true, std::memory_order_relaxed);
  Logf(LogLevel::kWarning,
       "%s %s; this process no longer coordinates with other processes on this GPU", why,
       segment_->path().c_str());
}

void GpuCoordinator::Maintain(int64_t now_ns, int64_t interval_ns) {
  if (released_.load(std::memory_order_relaxed) || now_ns - last_maintain_ns_ < interval_ns) return;
  last_maintain_ns_ = now_ns;
  if (segment_->lost()) {
    // Its memory is private zeros now (segment_registry.h): nothing written there is seen.
    Abandon("another process truncated the shared segment");
    return;
  }
  // Still ours? Only a peer that wrote garbage into the slot's state can have changed it (a live
  // owner's lock keeps everyone else from freeing it). This process stops publishing rather than
  // write into a slot another process may own (client threads hold no lock that would let it
  // move to a new slot safely).
  if (slot_->state_word.load(std::memory_order_acquire) != slot_word_) {
    Abandon("another process overwrote this process's slot in");
    return;
  }
  slot_->heartbeat.fetch_add(1, std::memory_order_relaxed);
  if (now_ns - last_liveness_check_ns_ >= kLivenessCheckNs) {
    last_liveness_check_ns_ = now_ns;
    RefreshPeers(/*reclaim_dead=*/true);
  } else {
    RefreshPeersIfClaimed();
  }
}

int GpuCoordinator::SetActive(int priority, uint64_t keep_drop_ns) {
  // Each drop's time is stored before the level falls, so a reader that sees the lower level also
  // sees when it fell (both seq_cst). A compare-and-swap, not an exchange: a client that raised
  // the level meanwhile has its level stamped, and replaced, in the next try.
  int seen = slot_->active_priority.load(std::memory_order_seq_cst);
  while (true) {
    if (priority < seen && ValidPriority(seen)) {
      NoteLevelStamp(slot_->last_drop, seen, base::SharedNowNs(),
                     static_cast<int64_t>(keep_drop_ns), /*refresh_ns=*/0);
    }
    if (slot_->active_priority.compare_exchange_weak(seen, priority, std::memory_order_seq_cst)) {
      break;
    }
  }
  if (priority < seen) WakeDropSleepers();
  return seen;
}

void GpuCoordinator::NoteWholeDevice(int priority, uint64_t window_ns) {
  if (released_.load(std::memory_order_relaxed)) return;
  NoteLevelStamp(slot_->last_whole_device, priority, base::SharedCoarseNowNs(),
                 static_cast<int64_t>(window_ns), kSubmitGranularityNs);
}

void GpuCoordinator::WakeDropSleepers() const {
  SegmentHeader& header = segment_->header();
  // Bumped before the sleepers are counted (both seq_cst), and a sleeper counts itself before
  // the kernel compares the word: either it sees the new value and does not sleep, or it is
  // counted here and woken.
  header.level_drops.fetch_add(1, std::memory_order_seq_cst);
  if (header.drop_sleepers.load(std::memory_order_seq_cst) != 0) {
    base::FutexWakeAll(&header.level_drops);
  }
}

void GpuCoordinator::WaitForPeerDrop(uint32_t seen, int64_t timeout_ns) const {
  // Also once this process no longer coordinates (the word may be private zeros by then): the
  // sleep still ends on this process's own wake-ups and at the timeout.
  SegmentHeader& header = segment_->header();
  header.drop_sleepers.fetch_add(1, std::memory_order_seq_cst);
  base::FutexWait(&header.level_drops, seen, timeout_ns);
  header.drop_sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

void GpuCoordinator::Release() {
  if (released_.load(std::memory_order_relaxed) || slot_ == nullptr) return;
  released_.store(true, std::memory_order_relaxed);
  const int before = slot_->active_priority.exchange(kNoPriority, std::memory_order_seq_cst);
  uint64_t word = slot_word_;
  slot_->state_word.compare_exchange_strong(
      word, SlotWord(SlotWordGeneration(slot_word_), kSlotFree), std::memory_order_acq_rel);
  segment_->UnlockSlot(slot_index_);
  if (before != kNoPriority) WakeDropSleepers();
}

}  // namespace gpuprio::coordinator
