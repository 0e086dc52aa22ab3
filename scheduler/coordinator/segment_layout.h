// The binary layout of the per-GPU shared-memory segment through which gpuprio processes that
// share a GPU see each other's priorities (docs/coordinator.md). Fixed sizes, little-endian,
// naturally aligned, lock-free atomics only (address-free, so valid across processes). Read by
// the library and by `gpuprio top`; its content is untrusted input to both.
#ifndef GPUPRIO_SCHEDULER_COORDINATOR_SEGMENT_LAYOUT_H_
#define GPUPRIO_SCHEDULER_COORDINATOR_SEGMENT_LAYOUT_H_

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>


namespace gpuprio::coordinator {

// Bumped whenever anything below changes meaning or place. It is also part of the segment's name
// (segment_name.h), so processes of two gpuprio versions never open each other's segment.
inline constexpr uint32_t kLayoutVersion = 2;
inline constexpr char kSegmentMagic[8] = {'g', 'p', 'u', 'p', 'r', 'i', 'o', 'S'};
inline constexpr uint32_t kReadyWord = 0x52454459;  // "READY": the creator filled the header
inline constexpr uint32_t kSlotCount = 64;          // processes per GPU
inline constexpr uint32_t kHeaderBytes = 4096;
inline constexpr uint32_t kSlotBytes = 4096;
inline constexpr size_t kSegmentBytes = size_t{kHeaderBytes} + size_t{kSlotCount} * kSlotBytes;

// gpuprio's priority range (the scheduler's kMinPriority..kMaxPriority; checked there).
inline constexpr int kLowestPriority = -100;
inline constexpr int kHighestPriority = 100;
inline constexpr int kLevels = kHighestPriority - kLowestPriority + 1;

// No work of any level (the value of ProcessSlot::active_priority when idle).
inline constexpr int32_t kNoPriority = kLowestPriority - 1;

// Queueing delay histogram: bucket 0 counts delays under 1 us; bucket b >= 1 counts delays in
// [2^((b-1)/2), 2^(b/2)) us (half-octave buckets); the last bucket counts everything above.
inline constexpr int kDelayBuckets = 48;

// Where the slot's isolation fields and level rows begin (after the per-level submit times).
inline constexpr size_t kIsolationOffset = 144 + 8 * kDelayBuckets + 8 * kLevels;
inline constexpr size_t kLevelStatsOffset = kIsolationOffset + 32;

// Per-level statistics rows in a slot: the first kLevelRows distinct levels a process submits at
// get a row each; the rest share `other_levels`.
inline constexpr int kLevelRows = 3;

// Slot state word: (generation << 8) | state. The generation changes on every claim, so a
// process that decided a slot's owner is dead frees it only if nobody claimed it meanwhile.
//
// Liveness is not in the segment at all: the owner of slot i holds an open-file-description
// write lock on byte SlotLockOffset(i) of the segment file, through a descriptor closed on exec.
// The kernel drops it when the process exits, dies or execs, whatever its pid or time namespace,
// so a slot whose byte is unlocked has no owner, and nothing a peer writes can make it look
// alive or dead.
enum SlotState : uint64_t {
  kSlotFree = 0,
  kSlotClaimed = 1,  // being filled in by its new owner: readers skip it
  kSlotLive = 2,
};
inline constexpr uint64_t SlotWord(uint64_t generation, SlotState state) {
  return (generation << 8) | state;
}
inline constexpr SlotState SlotWordState(uint64_t word) { return SlotState(word & 0xff); }
inline constexpr off_t SlotLockOffset(uint32_t slot) {
  return static_cast<off_t>(kHeaderBytes) + static_cast<off_t>(slot) * kSlotBytes;
}
inline constexpr uint64_t SlotWordGeneration(uint64_t word) { return word >> 8; }

struct SegmentHeader {
  char magic[8];
  uint32_t layout_version;
  uint32_t header_bytes;
  uint32_t slot_bytes;
  uint32_t slot_count;
  uint8_t device_uuid[16];
  std::atomic<uint32_t> ready;  // kReadyWord, stored last by the creator
  uint32_t creator_pid;
  // The highest priority any process ever published here: a process whose op is at or above it
  // needs to look at no slot to know that nothing more important is active.
  std::atomic<int32_t> priority_high_water;
  std::atomic<uint32_t> claims;  // bumped on every slot claim: peers' lists are stale
  // Bumped by a process each time it lowers or withdraws its active level (and when it releases
  // its slot): a dispatcher held back by another process sleeps on this word (a futex) until it
  // changes, instead of polling the slots. Any process may bump it; a bump only wakes sleepers.
  std::atomic<uint32_t> level_drops;
  // How many threads sleep on level_drops: a process lowering its level makes the wake-up call
  // only when some do. A hint (a sleeper killed in its sleep leaves it raised: one needless call
  // per drop, nothing worse).
  std::atomic<uint32_t> drop_sleepers;
  char reserved[kHeaderBytes - 64];
};

// One level's counters in a slot (the exporter's per-priority series). `level_key` is 0 while the
// row is unused, else priority - kLowestPriority + 1; it is claimed with a compare-and-swap by the
// first thread to count an op of that level, so client threads and the dispatcher may share it.
struct LevelRow {
  std::atomic<uint32_t> level_key;
  uint32_t reserved0;
  std::atomic<uint64_t> ops_dispatched;  // issued by the dispatcher after queueing
  std::atomic<uint64_t> ops_direct;      // issued by their own thread (fast path)
  std::atomic<uint64_t> ops_confined;    // of the dispatched ones, issued onto a twin stream
  std::atomic<uint64_t> delay_histogram[kDelayBuckets];  // dispatched ops' queueing delay
};
// A time and a level in one word (ProcessSlot::last_drop, last_whole_device): CLOCK_REALTIME in
// microseconds, and the level's LevelKey.
inline constexpr uint64_t LevelStampWord(int64_t unix_ns, int priority) {
  return (static_cast<uint64_t>(unix_ns / 1000) << 8) |
         static_cast<uint64_t>(priority - kLowestPriority + 1);
}
inline constexpr int LevelStampPriority(uint64_t word) {
  return static_cast<int>(word & 0xff) + kLowestPriority - 1;
}
// Below 2^56 whatever the word holds, so differences of two never overflow.
inline constexpr int64_t LevelStampUnixUs(uint64_t word) { return static_cast<int64_t>(word >> 8); }

// The level of a stamp made at most `window_ns` before `now_ns` and at most `future_ns` after it
// (a stamp further ahead is garbage, or another clock's), else kNoPriority; also for 0 and a key
// that is no level. In microseconds, so a garbage word cannot overflow the difference.
inline int LevelStampWithin(uint64_t word, int64_t now_ns, int64_t window_ns, int64_t future_ns) {
  const int priority = LevelStampPriority(word);
  const int64_t age_us = now_ns / 1000 - LevelStampUnixUs(word);
  if (word == 0 || priority < kLowestPriority || priority > kHighestPriority ||
      age_us > window_ns / 1000 || -age_us > future_ns / 1000) {
    return kNoPriority;
  }
  return priority;
}

// Stamps `priority` at `now_ns` into `word` (LevelStampWord's format; any clock, as long as the
// word's readers use the same one), so that the word keeps the highest level noted within the last
// `keep_ns`: a lower level does not replace a higher one stamped less than `keep_ns` before, and a
// level's own stamp is rewritten only once `refresh_ns` has passed; 0 for either keeps nothing,
// even a stamp of the same microsecond. Anything else in the word (0, a key that is no level, a
// time ahead of `now_ns`) is replaced. Lock-free; any thread or process.
inline void NoteLevelStamp(std::atomic<uint64_t>& word, int priority, int64_t now_ns,
                           int64_t keep_ns, int64_t refresh_ns) {
  const uint64_t stamp = LevelStampWord(now_ns, priority);
  uint64_t seen = word.load(std::memory_order_relaxed);
  while (true) {
    // How long the stamp there stands against this one: a higher level's for keep_ns, the same
    // level's for refresh_ns, a lower level's not at all.
    const int seen_priority = LevelStampPriority(seen);
    const int64_t stands_ns = seen_priority > priority    ? keep_ns
                              : seen_priority == priority ? refresh_ns
                                                          : -1;
    if (stands_ns > 0 &&
        LevelStampWithin(seen, now_ns, stands_ns, /*future_ns=*/0) != kNoPriority) {
      return;
    }
    if (word.compare_exchange_weak(seen, stamp, std::memory_order_seq_cst,
                                   std::memory_order_relaxed)) {
      return;
    }
  }
}

inline constexpr uint32_t LevelKey(int priority) {
  return static_cast<uint32_t>(priority - kLowestPriority + 1);
}

struct ProcessSlot {
  std::atomic<uint64_t> state_word;  // SlotWord(generation, SlotState)
  uint32_t pid;
  uint32_t reserved0;
  uint64_t start_time_ticks;  // field 22 of /proc/<pid>/stat (shown by `gpuprio top`)
  uint64_t pid_namespace;     // inode of /proc/self/ns/pid: pids mean something only within one
  // Bumped by the owner's dispatcher at least once a second while it runs (every 10 ms while it
  // has work). A counter, not a time: a reader judges it by whether it changes, on its own clock,
  // so processes in other time namespaces (or a garbage value) cannot make it look fresh.
  std::atomic<uint64_t> heartbeat;
  std::atomic<int32_t> default_priority;
  // The highest level with work queued or in flight on this GPU (kNoPriority if none). Raised by
  // a client thread before it issues or queues work, lowered by the dispatcher when that work's
  // completion has been observed.
  std::atomic<int32_t> active_priority;
  std::atomic<int32_t> max_seen_priority;  // highest level that ever submitted (kNoPriority: none)
  std::atomic<uint32_t> held;              // 1 while the dispatcher holds work back
  char command[32];                        // /proc/self/comm, NUL-padded
  std::atomic<uint64_t> ops_dispatched;    // issued by the dispatcher after queueing
  std::atomic<uint64_t> ops_direct;        // issued by their own thread (fast path)
  std::atomic<int64_t> queued_ops;
  std::atomic<int64_t> queued_estimated_ns;
  std::atomic<int64_t> in_flight_ops;
  std::atomic<int64_t> in_flight_estimated_ns;
  std::atomic<uint64_t> held_ns_total;     // time spent holding work back
  std::atomic<uint64_t> delay_histogram[kDelayBuckets];  // dispatched ops' queueing delay
  // CLOCK_REALTIME of the last submission per level (index priority - kLowestPriority), kept at
  // 1 ms granularity: a level that submitted within the ceiling window puts lower ones, in every
  // process, on the in-flight budget. The real-time clock, because it is the one clock that time
  // namespaces (containers) do not shift; a time more than a second ahead of the reader's is
  // garbage and ignored.
  std::atomic<int64_t> level_last_submit_unix_ns[kLevels];
  // Spatial isolation on this GPU: SMs kept free of confined work and the GPU's SMs (both 0 while
  // this process has no partition), and the confined ops in flight with their estimated GPU time.
  std::atomic<int32_t> isolation_reserved_sms;
  std::atomic<int32_t> isolation_device_sms;
  std::atomic<int64_t> confined_in_flight_ops;
  std::atomic<int64_t> confined_in_flight_estimated_ns;
  // When the dispatcher last lowered active_priority, and from which level: LevelStampWord (0:
  // never), the highest level dropped within the request gap (NoteLevelStamp). A level whose work
  // ended moments ago is most likely between two steps of one request
  // (SchedulerOptions::request_gap_ns). One word, so a reader never pairs a time with another
  // drop's level.
  std::atomic<uint64_t> last_drop;
  // Per-level counters (the process-wide ones above are their sums).
  LevelRow level_rows[kLevelRows];
  LevelRow other_levels;  // level_key unused
  // When a level of this process last launched work that needs the whole GPU (a CUDA graph), and
  // which level (the highest within the window: NoteLevelStamp): LevelStampWord on the coarse clock
  // (0: never). Less important work in every process is held below it rather than confined.
  std::atomic<uint64_t> last_whole_device;
  char reserved[kSlotBytes - kLevelStatsOffset - (kLevelRows + 1) * sizeof(LevelRow) - 8];
};

static_assert(sizeof(SegmentHeader) == kHeaderBytes);
static_assert(offsetof(SegmentHeader, level_drops) == 56);
static_assert(sizeof(ProcessSlot) == kSlotBytes);
static_assert(offsetof(ProcessSlot, delay_histogram) == 144);
static_assert(offsetof(ProcessSlot, isolation_reserved_sms) == kIsolationOffset);
static_assert(offsetof(ProcessSlot, level_rows) == kLevelStatsOffset);
static_assert(sizeof(LevelRow) == 32 + 8 * kDelayBuckets);
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<int32_t>::is_always_lock_free);

inline int DelayBucket(uint64_t delay_ns) {
  const uint64_t us = delay_ns / 1000;
  if (us == 0) return 0;
  // 2 * log2(us), rounded down, plus one: half-octave steps.
  const int octave = 63 - __builtin_clzll(us);
  const uint64_t half = uint64_t{1} << octave;
  // Upper half of the octave: us >= half * sqrt(2), tested as us^2 >= 2 * half^2 without overflow
  // for any delay under 2^31 us.
  const bool upper = octave < 31 && us * us >= 2 * half * half;
  const int bucket = 1 + 2 * octave + (upper ? 1 : 0);
  return bucket < kDelayBuckets ? bucket : kDelayBuckets - 1;
}

}  // namespace gpuprio::coordinator

#endif  // GPUPRIO_SCHEDULER_COORDINATOR_SEGMENT_LAYOUT_H_
