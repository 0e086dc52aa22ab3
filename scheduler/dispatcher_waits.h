// How a dispatcher thread waits between rounds that issued nothing: which wait a round takes
// (DecideHeldWait, DecideIdleWait: pure, no clock, no driver, no threads) and the waits themselves
// (DispatcherWaits: the parks, the sleep on the peers' word, the hand-off to the watcher).
#ifndef GPUPRIO_SCHEDULER_DISPATCHER_WAITS_H_
#define GPUPRIO_SCHEDULER_DISPATCHER_WAITS_H_

#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "scheduler/completion_tracker.h"
#include "scheduler/completion_watcher.h"
#include "scheduler/coordinator/gpu_coordinator.h"
#include "scheduler/direct_work.h"
#include "scheduler/dispatcher_parking.h"
#include "scheduler/issue_policy.h"
#include "scheduler/op_inbox.h"
#include "scheduler/options.h"
#include "scheduler/stream_queue.h"
#include "scheduler/stream_recycler.h"

namespace gpuprio::scheduler {

// The longest sleep on another process's level (ParkHeldOnPeers): what may end such a hold
// without a level being lowered -- the holder dying or stopping, a submit window closing -- is
// noticed this much later at most. A hundred wake-ups a second at most while held.
inline constexpr int64_t kHeldOnPeersParkNs = 10'000'000;
// The longest park while the watcher waits for this process's work that others wait on: the
// heartbeat's beat, and the bound on a wake-up lost in the driver.
inline constexpr int64_t kWatchedParkNs = 10'000'000;
// The watcher's wake-up comes 0.2-0.3 ms after the GPU reaches a blocking-sync event (H100,
// driver 580), where polling every 50 us notices within 50 us: a wait for this process's own
// work while other processes are involved is polled for its first kPollWindowNs, and handed to
// the watcher only after. Polling costs about 0.13 ms of CPU per millisecond, so polling windows
// may take at most 1/kPollShareDivisor of the time (a budget of up to kPollBudgetCapNs that
// refills at that rate): a process that waits on its work often, for short waits each, still
// costs under 10 ms of CPU a second.
inline constexpr int64_t kPollWindowNs = 1'000'000;
inline constexpr int64_t kPollShareDivisor = 20;
inline constexpr int64_t kPollBudgetCapNs = 5'000'000;
// The same for less important work of this process held back by more important work in flight
// (rules 1 and 3), but polled longer and without a budget: here the late wake-up is GPU time the
// held work loses, where polling costs one thread's CPU (one dispatcher per device, however many
// threads wait). On an H100 a 1 ms polling window cost a batch job beside a server of 1 ms chains
// every 10 ms 3.5% of its throughput (2 ms kernels, isolation off); a hold longer than this window
// is one the server's work itself takes long to end, and the watcher's 0.25 ms is a small share.
inline constexpr int64_t kLocalHoldPollWindowNs = 5'000'000;

// A completion that frees budget usually follows within microseconds of the last one when
// kernels are short: spin a little, then sleep with a growing interval. The cap bounds how late
// a completion is noticed; the budget keeps more work than that queued on the GPU, so the late
// notice costs no GPU time (estimates are not trusted for this: an unmeasured kernel counts as
// a whole budget, and sleeping on it would idle the GPU).
inline constexpr int kHeldSpinRounds = 8;
inline constexpr int64_t kMinHeldBackoffNs = 20'000;
// The shortest poll of work in flight that other processes wait on (DecideIdleWait).
inline constexpr int64_t kMinPeerPollNs = 10'000;

// How long the thread has had nothing to do, and how its waits grow; reset by progress.
struct WaitBackoff {
  int64_t idle_since_ns = -1;  // -1: not idle (the spin before parking comes first)
  int rounds = 0;
  int64_t sleep_ns = 0;
};

// The polling budget of waits for this process's own work that others wait on (kPollWindowNs).
// Plain arithmetic on the times it is given.
struct PollWindow {
  int64_t wait_since_ns = 0;  // when the current wait began
  int64_t budget_ns = 0;      // ns of polling left as of budget_at_ns
  int64_t budget_at_ns = 0;
  // Whether the current wait is still in its polling window and the budget allows it; refills
  // the budget up to `now_ns` first. Without a watcher nothing else can notice the end: open.
  bool Open(int64_t now_ns, bool has_watcher);
  // Charges `polled_ns` of polling to the budget (only with a watcher: Open ignores it without).
  void Spend(int64_t polled_ns) { budget_ns -= polled_ns; }
};

// A round held back by the policy, as the wait sees it.
struct HeldWaitFacts {
  int64_t now_ns = 0;
  // Held by the confined queue bound: when room is due (0: not held by it).
  int64_t confined_until_ns = 0;
  int rounds = 0;  // spin rounds so far (WaitBackoff::rounds)
  int64_t backoff_ns = 0;
  // The held op's priority (kNoPriority: any op may end the hold, as when the head waits for an
  // event record still being submitted).
  int held_priority = kNoPriority;
  // Read only where HeldWaitPastSpin, and each only where the one before it is true.
  bool peers_present = false;      // other processes are attached
  bool nothing_in_flight = false;  // nothing of this process tracked in flight
  bool direct_listed = false;      // direct work listed, not yet adopted
  // Read from the segment only where HeldWaitLooksAtPeers: the other processes' highest active
  // level, and the earliest held_since_ns among the queue heads (0: none held yet).
  int peers_highest_active = kNoPriority;
  int64_t earliest_head_held_since_ns = 0;
  // The policy held the op for more important work of this process (the policy's rules 1 and
  // 3, not its level's budget), and since when.
  bool held_for_more_important = false;
  int64_t held_since_ns = 0;
  bool has_watcher = false;
};

enum class HeldWaitAction {
  kSpin,           // a few pause instructions, then another round
  kParkForRoom,    // ParkHeld until room on the twin is due (park_ns)
  kParkOnPeers,    // ParkHeldOnPeers for at most park_ns
  kWatchThenPark,  // a watch on work in flight, then ParkHeld for park_ns; no watch: kPoll
  kPoll,           // ParkHeld for poll_ns
};

struct HeldWaitStep {
  HeldWaitAction action = HeldWaitAction::kSpin;
  int rounds = 0;       // the spin rounds after this step
  int64_t park_ns = 0;  // kParkForRoom, kParkOnPeers, kWatchThenPark (the backoff restarts)
  int64_t poll_ns = 0;  // kPoll and kWatchThenPark's fallback: the sleep and the next backoff
};

// Whether rules 1 and 2 below do not apply: only then does the caller read what the later
// rules look at (peers_present and on), and only in their order.
bool HeldWaitPastSpin(const HeldWaitFacts& f);
// Whether DecideHeldWait would look at the other processes' levels (rule 3 below): only then
// does the caller read them from the segment (a load per attached process).
bool HeldWaitLooksAtPeers(const HeldWaitFacts& f);
// The rules, first that applies:
// 1. Held by the confined queue bound with room due more than kMinHeldBackoffNs on: park until
//    then (at most kMaxConfinedSleepNs); the spin is not counted.
// 2. The first kHeldSpinRounds rounds: spin.
// 3. Only another process can end the hold (its level above the held op, nothing of this
//    process in flight or listed): sleep on the peers' word for kHeldOnPeersParkNs, bounded by
//    the hold bound of the earliest held head, at least kMinHeldBackoffNs.
// 4. Held for more important work of this process past kLocalHoldPollWindowNs, with a watcher:
//    hand the work to the watcher and park kWatchedParkNs, bounded by the hold bound, at least
//    kMinHeldBackoffNs.
// 5. Else poll: the backoff doubles from kMinHeldBackoffNs up to max_held_sleep_ns (and
//    peer_poll_ns with peers present).
HeldWaitStep DecideHeldWait(const HeldWaitFacts& f, const SchedulerOptions& options);

// An idle round with a coordinator, after this process's levels were published.
struct IdleWaitFacts {
  int64_t now_ns = 0;
  int rounds = 0;  // rounds of this wait on work others wait on (WaitBackoff::rounds)
  int64_t backoff_ns = 0;
  bool local_active = false;  // this process has a level active (work in flight)
  bool peers_present = false;
  bool peers_any_held = false;  // read only where IdleWaitLooksAtPeers
  bool has_watcher = false;
};

enum class IdleWaitAction {
  kWatchThenPark,  // a watch on all work in flight, then Park for park_ns; no watch: kPoll
  kPoll,           // Park for poll_ns, charged to the polling budget
  kPeerIdlePoll,   // Park for park_ns: peers attached, none waiting
  kLongPark,       // Park for park_ns, woken by direct work too
};

struct IdleWaitStep {
  IdleWaitAction action = IdleWaitAction::kLongPark;
  int rounds = 0;
  int64_t park_ns = 0;  // kWatchThenPark, kPeerIdlePoll, kLongPark (the backoff restarts)
  int64_t poll_ns = 0;  // kPoll and kWatchThenPark's fallback: the sleep and the next backoff
};

bool IdleWaitLooksAtPeers(const IdleWaitFacts& f);
// The rules, first that applies (`window`: the polling budget, refilled and restarted here):
// 1. Other processes wait on this one's work in flight (a level active, peers present, one of
//    them holding work back): the first round starts the wait's polling window; past the window
//    (or the budget), hand the work to the watcher and park kWatchedParkNs; else poll, the
//    backoff doubling from kMinPeerPollNs up to peer_poll_ns.
// 2. Work in flight, peers attached, none waiting: park peer_idle_poll_ns.
// 3. Else a long park of a second (the heartbeat), which direct work ends.
// Rules 2 and 3 restart the rounds and the backoff.
IdleWaitStep DecideIdleWait(const IdleWaitFacts& f, PollWindow* window,
                            const SchedulerOptions& options);

// The waits of one dispatcher thread. Dispatcher thread only, except where noted.
class DispatcherWaits {
 public:
  // What the waits need of the dispatcher that owns them.
  class Host {
   public:
    // Queues every op in the inbox; the highest priority among them (kNoPriority: none).
    virtual int DrainInbox() = 0;
    // Records `q`'s watch event (created on first use) behind its work, in its context; false on
    // a driver error or a destroyed stream.
    virtual bool RecordWatchEvent(StreamQueue* q) = 0;

   protected:
    ~Host() = default;
  };

  // Every argument must outlive the waits; `coordinator` and `watcher` may be null.
  DispatcherWaits(Host* host, const SchedulerOptions& options, DispatcherParking* parking,
                  const OpInbox* inbox, const std::atomic<bool>* stop, const DirectWorkList* direct,
                  const StreamRecycler* recycler, const CompletionTracker* tracker,
                  coordinator::GpuCoordinator* coordinator, CompletionWatcher* watcher);
  DispatcherWaits(const DispatcherWaits&) = delete;
  DispatcherWaits& operator=(const DispatcherWaits&) = delete;

  // A round begins: the segment's level-drop count before it looks at the peers.
  void BeginRound() {
    if (coordinator_ != nullptr) peer_drops_seen_ = coordinator_->PeerDrops();
  }

  // The op a held round found the policy holding, as IssueNext left it.
  struct Held {
    int64_t confined_until_ns = 0;
    int priority = kNoPriority;
    bool for_more_important = false;
    int64_t since_ns = 0;
  };
  // Held back by the policy (DecideHeldWait; `active`: the streams with queued ops): a short
  // spin, then sleeps of growing length (up to options.max_held_sleep_ns) that work able to go
  // first cuts short; held by the confined queue bound, one sleep until room is due. True when
  // it queued such work itself.
  bool WaitWhileHeld(const Held& held, const std::vector<StreamQueue*>& active,
                     WaitBackoff* backoff);
  // Idle with a coordinator (DecideIdleWait), after this process's levels were published at
  // `now_ns`; `local_active`: it still has a level active. Work in flight is polled (its end is
  // what other processes wait for) and the heartbeat keeps beating.
  void ParkIdle(int64_t now_ns, bool local_active, WaitBackoff* backoff);
  // Sleeps until new work or a stop request arrives (or, if asked, a released stream, or work a
  // client issued directly), or `timeout` passes, or a wake-up is asked for (Dispatcher::Wake);
  // true in the last case.
  bool Park(absl::Duration timeout, bool wake_for_released_streams,
            bool wake_for_direct_work = false);
  // Spins until work is queued or `duration_ns` passes, making no driver call.
  void SpinForWork(uint64_t duration_ns);

  // Watches handed to the watcher. Any thread.
  uint64_t watches() const { return watches_.load(std::memory_order_relaxed); }

 private:
  // Sleeps like Park while the op the policy holds (`held_priority`) is the next to go: work
  // submitted meanwhile at or below its priority cannot go before it, so it is queued without
  // ending the sleep (and its client does not wake this thread). True when work above it was
  // queued.
  bool ParkHeld(int held_priority, int64_t timeout_ns);
  // ParkHeld for a hold that only another process can end (its level is above the held op, and
  // nothing of this process is in flight): sleeps on the segment's level-drop word until a
  // process lowers its level, work above the held op is submitted, a wake-up is asked for, or
  // `timeout_ns` passes. No polling: a held process costs no CPU while it waits.
  bool ParkHeldOnPeers(int held_priority, int64_t timeout_ns);
  // Other processes wait on this one's work in flight, or it holds back less important work of
  // this process: a watch event behind it on each stream with work in flight above
  // `above_priority`, handed to the watcher, whose wake-up ends the park. True when a watch
  // covers work in flight (this one, or an earlier one still waiting: its end wakes the thread,
  // which watches again); false where none can (no watcher, too many streams or contexts, a
  // driver error): then the work's end is polled.
  bool WatchInFlight(int above_priority);

  Host* const host_;
  const SchedulerOptions& options_;
  DispatcherParking* const parking_;
  const OpInbox* const inbox_;
  const std::atomic<bool>* const stop_;
  const DirectWorkList* const direct_;
  const StreamRecycler* const recycler_;
  const CompletionTracker* const tracker_;
  coordinator::GpuCoordinator* const coordinator_;
  CompletionWatcher* const watcher_;
  // One writer (the dispatcher thread): a load and a store.
  std::atomic<uint64_t> watches_{0};

  // Dispatcher thread only.
  // The segment's level-drop count when this round began (before it looked at the peers).
  uint32_t peer_drops_seen_ = 0;
  PollWindow poll_window_;
};

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_DISPATCHER_WAITS_H_
