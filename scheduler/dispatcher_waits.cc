#include "scheduler/dispatcher_waits.h"

#include <algorithm>

#include "absl/types/span.h"
#include "scheduler/base/clock.h"

namespace gpuprio::scheduler {

using base::SteadyNowNs;

bool PollWindow::Open(int64_t now_ns, bool has_watcher) {
  if (!has_watcher) return true;  // nothing else can notice the end
  budget_ns =
      std::min<int64_t>(kPollBudgetCapNs, budget_ns + (now_ns - budget_at_ns) / kPollShareDivisor);
  budget_at_ns = now_ns;
  return now_ns - wait_since_ns < kPollWindowNs && budget_ns > 0;
}

namespace {

// Held by the confined queue bound: nothing to notice before room is due (IssueNext says
// when; work that could go first still wakes the thread at once). Past that, the usual
// polling, from its shortest interval.
bool ConfinedRoomDue(const HeldWaitFacts& f) {
  return f.confined_until_ns - f.now_ns > kMinHeldBackoffNs;
}

// The hold bound of a hold that began at `since_ns` caps `timeout_ns` (rule 1 lets go at the
// hold bound: be awake for it).
int64_t BoundByHold(int64_t timeout_ns, int64_t since_ns, int64_t now_ns,
                    const SchedulerOptions& options) {
  if (options.max_hold_ns == 0) return timeout_ns;
  return std::min(timeout_ns, since_ns + static_cast<int64_t>(options.max_hold_ns) - now_ns);
}

}  // namespace

bool HeldWaitPastSpin(const HeldWaitFacts& f) {
  return !ConfinedRoomDue(f) && f.rounds + 1 > kHeldSpinRounds;
}

bool HeldWaitLooksAtPeers(const HeldWaitFacts& f) {
  // Held while other processes are attached, and only another process can end the hold: a
  // level of theirs above the held op, and nothing of this process in flight whose end could
  // change the verdict.
  return HeldWaitPastSpin(f) && f.peers_present && f.nothing_in_flight && !f.direct_listed &&
         f.held_priority != kNoPriority;
}

HeldWaitStep DecideHeldWait(const HeldWaitFacts& f, const SchedulerOptions& options) {
  HeldWaitStep step;
  step.rounds = f.rounds;
  if (ConfinedRoomDue(f)) {
    step.action = HeldWaitAction::kParkForRoom;
    step.park_ns = std::min<int64_t>(f.confined_until_ns - f.now_ns, kMaxConfinedSleepNs);
    return step;
  }
  if (++step.rounds <= kHeldSpinRounds) {
    step.action = HeldWaitAction::kSpin;
    return step;
  }
  // The thread sleeps until a process lowers its level (the segment's futex word), bounded by
  // the hold bound of the oldest held op and by kHeldOnPeersParkNs (what else may end the hold
  // is time: a peer that dies or stops, a submit window that closes).
  if (HeldWaitLooksAtPeers(f) && f.peers_highest_active > f.held_priority) {
    int64_t timeout = kHeldOnPeersParkNs;
    if (f.earliest_head_held_since_ns != 0) {
      timeout = BoundByHold(timeout, f.earliest_head_held_since_ns, f.now_ns, options);
    }
    step.action = HeldWaitAction::kParkOnPeers;
    step.park_ns = std::max<int64_t>(timeout, kMinHeldBackoffNs);
    return step;
  }
  // Held while other processes are attached (by them, or for a budget their level set): the
  // GPU idles for both until the change is noticed, so it is polled more often.
  const uint64_t cap = f.peers_present
                           ? std::min(options.tuning.max_held_sleep_ns, options.tuning.peer_poll_ns)
                           : options.tuning.max_held_sleep_ns;
  step.poll_ns = std::min(static_cast<int64_t>(cap), std::max(kMinHeldBackoffNs, f.backoff_ns * 2));
  step.action = HeldWaitAction::kPoll;
  // Held until work of this process in flight ends. More important work (rules 1 and 3) is
  // polled for the first kLocalHoldPollWindowNs of the hold, then left to the watcher: such a
  // hold lasts as long as the more important work runs, and polling it cost 40-90 ms of CPU a
  // second. A budget's ops are always polled: the watcher's late wake-up would idle the GPU
  // between them (docs/decisions/2026-11-27-held-cpu.md).
  if (f.held_for_more_important && f.has_watcher &&
      f.now_ns - f.held_since_ns >= kLocalHoldPollWindowNs) {
    step.action = HeldWaitAction::kWatchThenPark;
    step.park_ns = std::max<int64_t>(
        BoundByHold(kWatchedParkNs, f.held_since_ns, f.now_ns, options), kMinHeldBackoffNs);
  }
  return step;
}

bool IdleWaitLooksAtPeers(const IdleWaitFacts& f) { return f.local_active && f.peers_present; }

IdleWaitStep DecideIdleWait(const IdleWaitFacts& f, PollWindow* window,
                            const SchedulerOptions& options) {
  IdleWaitStep step;
  if (IdleWaitLooksAtPeers(f) && f.peers_any_held) {
    // Other processes wait on this work: its end is polled for a short while (sleeps growing
    // to options.tuning.peer_poll_ns), which most waits of a latency-critical job's short kernels
    // do not outlast; after that the watcher sleeps until the GPU reaches it and wakes this thread
    // (PollWindow says why not at once). Either way the level is withdrawn right after.
    step.rounds = f.rounds + 1;
    if (step.rounds == 1) window->wait_since_ns = f.now_ns;
    const int64_t max_poll_ns =
        std::max(kMinPeerPollNs, static_cast<int64_t>(options.tuning.peer_poll_ns));
    step.poll_ns = std::min(max_poll_ns, std::max(kMinPeerPollNs, f.backoff_ns * 2));
    step.action = IdleWaitAction::kPoll;
    if (!window->Open(f.now_ns, f.has_watcher)) {
      // The timeout is a safety net, and the heartbeat's beat.
      step.action = IdleWaitAction::kWatchThenPark;
      step.park_ns = kWatchedParkNs;
    }
    return step;
  }
  if (IdleWaitLooksAtPeers(f)) {
    // Other processes are attached but none holds work back (under MPS, say, their work runs
    // confined beside this one's): polling every few microseconds would only compete with this
    // process's own launches for the driver. A peer that starts to wait is noticed within
    // options.tuning.peer_idle_poll_ns.
    step.action = IdleWaitAction::kPeerIdlePoll;
    step.park_ns = static_cast<int64_t>(options.tuning.peer_idle_poll_ns);
    return step;
  }
  // Nothing anyone waits on: wake once a second for the heartbeat (and for peers that attach
  // while work of this process is still in flight). Work a client issues directly meanwhile
  // ends this park (NoteDirect; the shorter ones above adopt it when they end).
  step.action = IdleWaitAction::kLongPark;
  step.park_ns = absl::ToInt64Nanoseconds(absl::Seconds(1));
  return step;
}

DispatcherWaits::DispatcherWaits(Host* host, const SchedulerOptions& options,
                                 DispatcherParking* parking, const OpInbox* inbox,
                                 const std::atomic<bool>* stop, const DirectWorkList* direct,
                                 const StreamRecycler* recycler, const CompletionTracker* tracker,
                                 coordinator::GpuCoordinator* coordinator,
                                 CompletionWatcher* watcher)
    : host_(host),
      options_(options),
      parking_(parking),
      inbox_(inbox),
      stop_(stop),
      direct_(direct),
      recycler_(recycler),
      tracker_(tracker),
      coordinator_(coordinator),
      watcher_(watcher) {}

bool DispatcherWaits::WaitWhileHeld(const Held& held, const std::vector<StreamQueue*>& active,
                                    WaitBackoff* backoff) {
  HeldWaitFacts f;
  f.now_ns = SteadyNowNs();
  f.confined_until_ns = held.confined_until_ns;
  f.rounds = backoff->rounds;
  f.backoff_ns = backoff->sleep_ns;
  f.held_priority = held.priority;
  f.held_for_more_important = held.for_more_important;
  f.held_since_ns = held.since_ns;
  f.has_watcher = watcher_ != nullptr;
  if (HeldWaitPastSpin(f)) {
    // What rule 3 looks at, read in its order and only as far as it needs (the segment last).
    f.peers_present = coordinator_ != nullptr && coordinator_->PeersPresent();
    f.nothing_in_flight = f.peers_present && tracker_->tracked().empty();
    f.direct_listed = f.nothing_in_flight && direct_->Listed();
  }
  if (HeldWaitLooksAtPeers(f)) {
    f.peers_highest_active =
        coordinator_->Peers(f.now_ns, options_.ceiling_window_ns, options_.unbudgeted_priority)
            .highest_active;
    for (const StreamQueue* q : active) {
      const int64_t since = q->pending.front()->held_since_ns;
      if (since != 0 &&
          (f.earliest_head_held_since_ns == 0 || since < f.earliest_head_held_since_ns)) {
        f.earliest_head_held_since_ns = since;
      }
    }
  }
  const HeldWaitStep step = DecideHeldWait(f, options_);
  backoff->rounds = step.rounds;
  switch (step.action) {
    case HeldWaitAction::kSpin:
      for (int i = 0; i < 64; ++i) CpuRelax();
      return false;
    case HeldWaitAction::kParkForRoom:
      backoff->sleep_ns = 0;
      return ParkHeld(held.priority, step.park_ns);
    case HeldWaitAction::kParkOnPeers:
      backoff->sleep_ns = 0;
      return ParkHeldOnPeers(held.priority, step.park_ns);
    case HeldWaitAction::kWatchThenPark:
      if (WatchInFlight(held.priority)) {
        backoff->sleep_ns = 0;
        return ParkHeld(held.priority, step.park_ns);
      }
      break;
    case HeldWaitAction::kPoll:
      break;
  }
  backoff->sleep_ns = step.poll_ns;
  return ParkHeld(held.priority, step.poll_ns);
}

void DispatcherWaits::ParkIdle(int64_t now_ns, bool local_active, WaitBackoff* backoff) {
  IdleWaitFacts f;
  f.now_ns = now_ns;
  f.rounds = backoff->rounds;
  f.backoff_ns = backoff->sleep_ns;
  f.local_active = local_active;
  f.peers_present = coordinator_->PeersPresent();
  f.has_watcher = watcher_ != nullptr;
  if (IdleWaitLooksAtPeers(f)) {
    f.peers_any_held =
        coordinator_->Peers(now_ns, options_.ceiling_window_ns, options_.unbudgeted_priority)
            .any_held;
  }
  const IdleWaitStep step = DecideIdleWait(f, &poll_window_, options_);
  backoff->rounds = step.rounds;
  switch (step.action) {
    case IdleWaitAction::kWatchThenPark:
      if (WatchInFlight(kNoPriority)) {
        backoff->sleep_ns = 0;
        Park(absl::Nanoseconds(step.park_ns), /*wake_for_released_streams=*/true);
        return;
      }
      break;
    case IdleWaitAction::kPoll:
      break;
    case IdleWaitAction::kPeerIdlePoll:
      backoff->sleep_ns = 0;
      Park(absl::Nanoseconds(step.park_ns), /*wake_for_released_streams=*/true);
      return;
    case IdleWaitAction::kLongPark:
      backoff->sleep_ns = 0;
      Park(absl::Nanoseconds(step.park_ns), /*wake_for_released_streams=*/true,
           /*wake_for_direct_work=*/true);
      return;
  }
  backoff->sleep_ns = step.poll_ns;
  Park(absl::Nanoseconds(step.poll_ns), /*wake_for_released_streams=*/true);
  if (watcher_ != nullptr) poll_window_.Spend(SteadyNowNs() - now_ns);
}

bool DispatcherWaits::ParkHeld(int held_priority, int64_t timeout_ns) {
  const int64_t deadline = SteadyNowNs() + timeout_ns;
  parking_->SetFloor(held_priority);
  bool urgent = false;
  for (;;) {
    // A released stream waits for the next round: it may stay listed while its ops are held.
    const bool woken = Park(absl::Nanoseconds(deadline - SteadyNowNs()),
                            /*wake_for_released_streams=*/false);
    // A stop, the timeout, or a wake-up asked for (an op above the floor, NoteDirect) ends it.
    if (woken || stop_->load(std::memory_order_seq_cst) || SteadyNowNs() >= deadline) break;
    // Woken by new work. A less or equally important op cannot go before the held one (which
    // is the most important ready to go, and older), so it only joins its queue: a batch job
    // that submits while it is held back must not turn each submission into a round of
    // completion polls, driver calls that compete with a server's own launches.
    urgent = host_->DrainInbox() > held_priority;
    if (urgent) break;
  }
  parking_->ClearFloor();
  return urgent;
}

bool DispatcherWaits::ParkHeldOnPeers(int held_priority, int64_t timeout_ns) {
  const int64_t deadline = SteadyNowNs() + timeout_ns;
  parking_->EnterPeerWordPark(held_priority);
  bool urgent = false;
  for (;;) {
    // Submit pushes, then reads the parked flag and the floor (seq_cst): work above the held op
    // pushed before the flags were set is drained here, work pushed after wakes the thread.
    if (!inbox_->Empty() && host_->DrainInbox() > held_priority) {
      urgent = true;
      break;
    }
    if (stop_->load(std::memory_order_seq_cst) || parking_->WakeRequested() || direct_->Listed()) {
      break;
    }
    const int64_t left = deadline - SteadyNowNs();
    if (left <= 0) break;
    // A level lowered since this round looked at the peers: look again.
    if (coordinator_->PeerDrops() != peer_drops_seen_) break;
    coordinator_->WaitForPeerDrop(peer_drops_seen_, left);
    if (coordinator_->PeerDrops() != peer_drops_seen_) break;
  }
  const bool woken = parking_->LeavePeerWordPark();
  return woken || urgent;
}

bool DispatcherWaits::WatchInFlight(int above_priority) {
  if (watcher_ == nullptr) return false;
  if (!watcher_->Idle()) return true;
  CUevent events[CompletionWatcher::kMaxEvents];
  size_t count = 0;
  CUcontext context = nullptr;
  for (StreamQueue* q : tracker_->tracked()) {
    if (std::none_of(q->in_flight.begin(), q->in_flight.end(),
                     [&](const InFlight& f) { return f.priority > above_priority; })) {
      continue;
    }
    // The watcher waits in one context (an event may be waited on from any of its device's
    // contexts, but the thread needs one current).
    if (count == CompletionWatcher::kMaxEvents ||
        (context != nullptr && q->state->context != context)) {
      return false;
    }
    context = q->state->context;
    if (!host_->RecordWatchEvent(q)) return false;
    events[count++] = q->watch_event;
  }
  if (count == 0) return false;
  watches_.store(watches_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  return watcher_->Watch(context, absl::MakeConstSpan(events, count));
}

void DispatcherWaits::SpinForWork(uint64_t duration_ns) {
  const int64_t start = SteadyNowNs();
  while (inbox_->Empty() && !stop_->load(std::memory_order_relaxed) &&
         SteadyNowNs() - start < static_cast<int64_t>(duration_ns)) {
    CpuRelax();
  }
}

bool DispatcherWaits::Park(absl::Duration timeout, bool wake_for_released_streams,
                           bool wake_for_direct_work) {
  // New work (perhaps more important) or a stop request ends the wait at once, and so may a
  // released stream. Waking for direct work is the long park (NoteDirect reads its flag).
  return parking_->Park(
      timeout,
      [&] {
        return !inbox_->Empty() || stop_->load(std::memory_order_seq_cst) ||
               (wake_for_released_streams && recycler_->HasReleased()) ||
               (wake_for_direct_work && direct_->Listed());
      },
      /*long_park=*/wake_for_direct_work);
}

}  // namespace gpuprio::scheduler
