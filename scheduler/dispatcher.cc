#include "scheduler/dispatcher.h"

#include <sys/prctl.h>
#include <time.h>

#include <algorithm>

#include "absl/container/inlined_vector.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "scheduler/backpressure.h"
#include "scheduler/completion_marks.h"
#include "scheduler/base/clock.h"
#include "scheduler/base/log_throttle.h"
#include "scheduler/base/logging.h"

namespace gpuprio::scheduler {

using base::SteadyNowNs;
namespace {

// The longest sleep on another process's level (ParkHeldOnPeers): what may end such a hold
// without a level being lowered -- the holder dying or stopping, a submit window closing -- is
// noticed this much later at most. A hundred wake-ups a second at most while held.
constexpr int64_t kHeldOnPeersParkNs = 10'000'000;
// The longest park while the watcher waits for this process's work that others wait on: the
// heartbeat's beat, and the bound on a wake-up lost in the driver.
constexpr int64_t kWatchedParkNs = 10'000'000;
// The watcher's wake-up comes 0.2-0.3 ms after the GPU reaches a blocking-sync event (H100,
// driver 580), where polling every 50 us notices within 50 us: a wait for this process's own
// work while other processes are involved is polled for its first kPollWindowNs, and handed to
// the watcher only after. Polling costs about 0.13 ms of CPU per millisecond, so polling windows
// may take at most 1/kPollShareDivisor of the time (a budget of up to kPollBudgetCapNs that
// refills at that rate): a process that waits on its work often, for short waits each, still
// costs under 10 ms of CPU a second.
constexpr int64_t kPollWindowNs = 1'000'000;
constexpr int64_t kPollShareDivisor = 20;
constexpr int64_t kPollBudgetCapNs = 5'000'000;
// The same for less important work of this process held back by more important work in flight
// (rules 1 and 3), but polled longer and without a budget: here the late wake-up is GPU time the
// held work loses, where polling costs one thread's CPU (one dispatcher per device, however many
// threads wait). On an H100 a 1 ms polling window cost a batch job beside a server of 1 ms chains
// every 10 ms 3.5% of its throughput (2 ms kernels, isolation off); a hold longer than this window
// is one the server's work itself takes long to end, and the watcher's 0.25 ms is a small share.
constexpr int64_t kLocalHoldPollWindowNs = 5'000'000;

// The shared segment's layout carries the priority range: the two must agree.
static_assert(coordinator::kLowestPriority == kMinPriority);
static_assert(coordinator::kHighestPriority == kMaxPriority);
static_assert(kNoPriority < kMinPriority);

}  // namespace

Dispatcher::Dispatcher(int device, const DriverFunctions& driver,
                       const SchedulerOptions& options, PriorityLevels* levels,
                       OpObserver* observer,
                       std::unique_ptr<coordinator::GpuCoordinator> coordinator,
                       const DispatcherDirectory* directory)
    : device_(device),
      driver_(driver),
      options_(options),
      levels_(levels),
      observer_(observer),
      coordinator_(std::move(coordinator)),
      parking_(&Dispatcher::WakePeerWord, this),
      placement_(device, driver, options.reserved_sms, &record_mu_),
      accounting_(device, options, levels, observer),
      estimates_(options.default_estimate_ns),
      tracker_(driver, &estimates_, &record_mu_, &Dispatcher::OnRetired, this),
      issuer_(device, driver, options, levels, observer, coordinator_.get(), directory, &queued_,
              &estimates_, &tracker_, &placement_, &accounting_),
      policy_view_(options, levels, &accounting_, &estimates_, &tracker_, &placement_,
                   coordinator_.get()) {
  if (coordinator_ != nullptr) {
    peer_publisher_ = std::make_unique<PeerPublisher>(coordinator_.get());
  }
  if (driver_.event_synchronize != nullptr) {
    watcher_ = std::make_unique<CompletionWatcher>(driver_.ctx_set_current,
                                                   driver_.event_synchronize,
                                                   driver_.on_dispatcher_thread_start,
                                                   &Dispatcher::WakeFromWatcher, this);
  }
  Start();
}

void Dispatcher::WakeFromWatcher(void* dispatcher) {
  static_cast<Dispatcher*>(dispatcher)->Wake();
}

void Dispatcher::WakePeerWord(void* dispatcher) {
  // Only a dispatcher with a coordinator sleeps on the word (ParkHeldOnPeers).
  static_cast<Dispatcher*>(dispatcher)->coordinator_->WakeDropSleepers();
}

Dispatcher::~Dispatcher() { Stop(); }

void Dispatcher::Start() {
  if (thread_.joinable()) return;
  stop_.store(false, std::memory_order_seq_cst);
  stop_bounded_.store(false, std::memory_order_seq_cst);
  thread_ = std::thread([this] { Run(); });
}

void Dispatcher::Stop(bool bounded) {
  if (!thread_.joinable()) return;
  stop_bounded_.store(bounded, std::memory_order_seq_cst);
  stop_.store(true, std::memory_order_seq_cst);
  // A dispatcher asleep on the segment's word (ParkHeldOnPeers) is woken there; backpressure
  // waits end while the dispatcher stops.
  parking_.WakeForStop();
  thread_.join();
}

void Dispatcher::Submit(Op* op) {
  StreamState* s = op->stream;
  // Counted before it is visible anywhere else: a fast-path check that sees the op queued (or
  // the stream's count raised) also sees its level's unissued count raised.
  levels_->At(op->priority).ops_unissued.fetch_add(1, std::memory_order_seq_cst);
  queued_.fetch_add(1, std::memory_order_seq_cst);
  const uint64_t submitted = s->submitted.fetch_add(1, std::memory_order_seq_cst) + 1;
  op->stream_index = submitted;
  levels_->At(op->priority).ops_submitted.fetch_add(1, std::memory_order_relaxed);
  levels_->NoteSubmit(op->priority, op->submit_ns);
  // Other processes see the level active before the op can be issued (the dispatcher withdraws
  // it only once the op is counted, issued and complete).
  if (coordinator_ != nullptr) coordinator_->NoteSubmit(op->priority, op->submit_ns);
  const int priority = op->priority;
  inbox_.Push(op);  // `op` belongs to the dispatcher from here on
  // A dispatcher held on more important work needs no wake-up for this op: it could not go
  // first. ParkHeld sets the floor before it looks at the inbox, and this thread reads it after
  // the push (both seq_cst), so an op above the floor is either seen or wakes it.
  parking_.WakeForWork(priority);
  const uint64_t target = BackpressureWaitTarget(
      submitted, s->issued.load(std::memory_order_acquire), options_.max_queued_per_stream);
  if (target != 0) {
    // Not while the dispatcher stops (exit, capture): it may issue nothing until restarted.
    WaitIssued(s, target, /*unless_stopping=*/true);
  }
}

void Dispatcher::Wake() { parking_.Wake(); }

void Dispatcher::NoteDirect(StreamState* stream, int priority, int64_t now_ns) {
  const bool listed = direct_.List(stream, priority);
  if (coordinator_ == nullptr) return;
  coordinator_->CountDirect(priority);
  // Published again after the listing: the dispatcher may have withdrawn the level between the
  // client's PublishDirect and now. It checks the list after it withdraws, this thread checks
  // the level after it lists (all seq_cst), so one of the two sees the other.
  coordinator_->NoteSubmit(priority, now_ns);
  direct_.EndIssue();
  // A parked dispatcher adopts the work and watches for its end (once per listing, not per
  // op) at once only where that matters: in a long park (the level would stay published for
  // up to a second), or when another process holds work back, perhaps for this level. Else
  // the dispatcher's next poll (options.peer_idle_poll_ns) adopts it: a wake-up per chain of
  // a server's kernels, and the completion polls after it, compete with the server's own
  // launches for the driver. Lists, then reads the long park's flag; ParkIdle sets it, then
  // reads the list (all seq_cst): either this thread wakes it or the park does not begin.
  if (listed && coordinator_->PeersPresent() && parking_.Parked() &&
      (parking_.InLongPark() || parking_.OnPeerWord() || AnyPeerHeld())) {
    Wake();
  }
}

void Dispatcher::AdoptDirectWork(bool peers_held) {
  const int64_t now = SteadyNowNs();
  direct_.Adopt([&](StreamState* s, int priority) {
    StreamQueue& q = QueueFor(s);
    q.direct_uncovered = true;
    SetContext(s->context);
    q.in_flight.push_back({priority, 0, nullptr, now, false, nullptr, false});
    accounting_.AdjustInFlight(priority, +1, 0);
    tracker_.Track(&q);
    // Each round adopts what clients issued since the last: while work is held back that is
    // thousands of rounds a second, and a mark each would be recorded on the stream its client
    // is launching on. Work left unmarked is marked by a later round (or before a park).
    if (active_.empty() || MarkDueWhileHeld(q, now, peers_held)) {
      const size_t marks = q.marks.size();
      tracker_.Mark(&q);
      if (q.marks.size() > marks) CountActivity(direct_marks_);
    }
  });
}

CUresult Dispatcher::SetContext(CUcontext context) {
  if (context == current_context_ || context == nullptr) return CUDA_SUCCESS;
  const CUresult result = driver_.ctx_set_current(context);
  if (result == CUDA_SUCCESS) current_context_ = context;
  return result;
}

void Dispatcher::WaitIssued(StreamState* stream, uint64_t count, bool unless_stopping) {
  // Stop() wakes the waits that end when the dispatcher stops.
  parking_.WaitUntil([&] {
    return stream->issued.load(std::memory_order_seq_cst) >= count ||
           (unless_stopping && stop_.load(std::memory_order_seq_cst));
  });
}

void Dispatcher::Run() {
  // The default timer slack (50 us) would stretch the dispatcher's 10-50 us polling sleeps
  // several times over; this thread's sleeps are few and short, so it asks for precise ones.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
  if (driver_.on_dispatcher_thread_start != nullptr) driver_.on_dispatcher_thread_start();
  if (observer_ != nullptr) observer_->OnDispatcherStart(device_);
  current_context_ = nullptr;  // a new thread has no current context (Stop/Start: capture)
  Backoff backoff;
  last_progress_ns_ = SteadyNowNs();
  for (;;) {
    const bool drained = TakeNewWork();
    const bool completed = !tracker_.tracked().empty() && tracker_.Poll() > 0;
    if (coordinator_ != nullptr) PublishToPeers(SteadyNowNs(), /*held=*/false);
    bool issued = false;
    while (IssueNext()) issued = true;
    if (issued || completed) last_progress_ns_ = SteadyNowNs();
    if (drained || issued || completed) {
      backoff = Backoff();
      if (drained || issued) continue;
    }
    if (!active_.empty()) {
      WaitHeldRound(&backoff);
      continue;
    }
    if (stop_.load(std::memory_order_seq_cst) && inbox_.Empty()) break;
    WaitIdleRound(&backoff);
  }
  // Queues, in-flight marks and pooled events are kept for the next Start (after a capture). No
  // driver call at exit: the application may already have torn the context down. Before a
  // capture, work on twins returns to its streams: the capture runs on the caller's thread, on
  // the application's streams, and must follow it there.
  if (!stop_bounded_.load(std::memory_order_seq_cst)) BringAllHome();
  timespec cpu{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) == 0) {
    thread_cpu_ns_.fetch_add(
        static_cast<uint64_t>(absl::ToInt64Nanoseconds(absl::DurationFromTimespec(cpu))),
        std::memory_order_relaxed);
  }
}

bool Dispatcher::TakeNewWork() {
  peers_held_this_round_ = -1;
  if (coordinator_ != nullptr) peer_drops_seen_ = coordinator_->PeerDrops();
  const bool drained = DrainInbox() != kNoPriority;
  // Before anything is admitted: work clients issued themselves counts as in flight.
  if (direct_.Listed()) AdoptDirectWork(PeersHeldThisRound());
  if (recycler_.HasReleased()) CollectReleasedStreams();
  return drained;
}

void Dispatcher::WaitHeldRound(Backoff* backoff) {
  // At exit, a GPU that completes nothing must not keep the process alive forever.
  if (stop_.load(std::memory_order_seq_cst) && stop_bounded_.load(std::memory_order_seq_cst) &&
      SteadyNowNs() - last_progress_ns_ > static_cast<int64_t>(options_.stop_stall_timeout_ns)) {
    AbandonPending();
    return;
  }
  MarkAllUncovered(/*held=*/true, PeersHeldThisRound());
  if (coordinator_ != nullptr) {
    PublishToPeers(SteadyNowNs(), /*held=*/confined_wait_until_ns_ == 0);
  }
  if (WaitWhileHeld(&backoff->rounds, &backoff->sleep_ns)) {
    // More important work arrived (queued by the wait itself): its own wait, if it is held too,
    // starts from the spin.
    backoff->rounds = 0;
    backoff->sleep_ns = 0;
  }
}

void Dispatcher::WaitIdleRound(Backoff* backoff) {
  if (backoff->idle_since_ns < 0) {
    // Spin a little for new work before parking, watching the inbox alone: a full round per
    // spin would query completion events in a tight loop, driver calls that compete with the
    // client threads' own launches (a server's chain of kernels, issued on the fast path).
    backoff->idle_since_ns = SteadyNowNs();
    SpinForWork(options_.spin_before_park_ns);
    return;  // one more round (new work, direct work, completions) before parking
  }
  // Park. Work in flight gets completion marks first so its end is observed on wake-up. No
  // driver call while parked: completions are polled when work arrives (before anything is
  // issued), so a parked dispatcher costs no CPU and never races a process's teardown of the
  // driver.
  MarkAllUncovered(/*held=*/false, /*peers_held=*/false);
  if (coordinator_ != nullptr) {
    ParkIdle(&backoff->rounds, &backoff->sleep_ns);
    return;  // idle_since_ns stays: the spin is not repeated after every poll
  }
  Park(absl::InfiniteDuration(), /*wake_for_released_streams=*/true);
  backoff->idle_since_ns = -1;
}

bool Dispatcher::WaitWhileHeld(int* rounds, int64_t* backoff_ns) {
  // A completion that frees budget usually follows within microseconds of the last one when
  // kernels are short: spin a little, then sleep with a growing interval. The cap bounds how late
  // a completion is noticed; the budget keeps more work than that queued on the GPU, so the late
  // notice costs no GPU time (estimates are not trusted for this: an unmeasured kernel counts as
  // a whole budget, and sleeping on it would idle the GPU).
  constexpr int kSpinRounds = 8;
  constexpr int64_t kMinBackoffNs = 20'000;
  // Held by the confined queue bound: nothing to notice before room is due (IssueNext says
  // when; work that could go first still wakes the thread at once). Past that, the usual
  // polling, from its shortest interval.
  const int64_t until = confined_wait_until_ns_;
  const int64_t now = SteadyNowNs();
  if (until - now > kMinBackoffNs) {
    *backoff_ns = 0;
    return ParkHeld(std::min<int64_t>(until - now, kMaxConfinedSleepNs));
  }
  if (++*rounds <= kSpinRounds) {
    for (int i = 0; i < 64; ++i) CpuRelax();
    return false;
  }
  // Held while other processes are attached (by them, or for a budget their level set): the
  // GPU idles for both until the change is noticed, so it is polled more often.
  const bool peers = coordinator_ != nullptr && coordinator_->PeersPresent();
  // ...unless only another process can end the hold: a level of theirs above the held op, and
  // nothing of this process in flight whose end could change the verdict. Then the thread
  // sleeps until a process lowers its level (the segment's futex word), bounded by the hold
  // bound of the oldest held op and by kHeldOnPeersParkNs (what else may end the hold is time:
  // a peer that dies or stops, a submit window that closes).
  if (peers && tracker_.tracked().empty() && !direct_.Listed() && held_priority_ != kNoPriority &&
      coordinator_->Peers(now, options_.ceiling_window_ns, options_.unbudgeted_priority)
              .highest_active > held_priority_) {
    int64_t timeout = kHeldOnPeersParkNs;
    if (options_.max_hold_ns != 0) {
      for (const StreamQueue* q : active_) {
        const int64_t since = q->pending.front()->held_since_ns;
        if (since != 0) {
          timeout = std::min(timeout, since + static_cast<int64_t>(options_.max_hold_ns) - now);
        }
      }
    }
    *backoff_ns = 0;
    return ParkHeldOnPeers(std::max<int64_t>(timeout, kMinBackoffNs));
  }
  // Held until work of this process in flight ends. More important work (rules 1 and 3) is
  // polled for the first kLocalHoldPollWindowNs of the hold, then left to the watcher: such a
  // hold lasts as long as the more important work runs, and polling it cost 40-90 ms of CPU a
  // second. A budget's ops are always polled: the watcher's late wake-up would idle the GPU
  // between them (docs/decisions/2026-11-27-held-cpu.md).
  if (held_for_more_important_ && watcher_ != nullptr &&
      now - held_since_ns_ >= kLocalHoldPollWindowNs && WatchInFlight(held_priority_)) {
    *backoff_ns = 0;
    int64_t timeout = kWatchedParkNs;
    if (options_.max_hold_ns != 0) {  // rule 1 lets go at the hold bound: be awake for it
      timeout = std::min(timeout, held_since_ns_ + static_cast<int64_t>(options_.max_hold_ns) - now);
    }
    return ParkHeld(std::max<int64_t>(timeout, kMinBackoffNs));
  }
  const uint64_t cap = peers ? std::min(options_.max_held_sleep_ns, options_.peer_poll_ns)
                             : options_.max_held_sleep_ns;
  *backoff_ns = std::min(static_cast<int64_t>(cap), std::max(kMinBackoffNs, *backoff_ns * 2));
  return ParkHeld(*backoff_ns);
}

bool Dispatcher::ParkHeld(int64_t timeout_ns) {
  const int64_t deadline = SteadyNowNs() + timeout_ns;
  parking_.SetFloor(held_priority_);
  bool urgent = false;
  for (;;) {
    // A released stream waits for the next round: it may stay listed while its ops are held.
    const bool woken = Park(absl::Nanoseconds(deadline - SteadyNowNs()),
                            /*wake_for_released_streams=*/false);
    // A stop, the timeout, or a wake-up asked for (an op above the floor, NoteDirect) ends it.
    if (woken || stop_.load(std::memory_order_seq_cst) || SteadyNowNs() >= deadline) break;
    // Woken by new work. A less or equally important op cannot go before the held one (which
    // is the most important ready to go, and older), so it only joins its queue: a batch job
    // that submits while it is held back must not turn each submission into a round of
    // completion polls, driver calls that compete with a server's own launches.
    urgent = DrainInbox() > held_priority_;
    if (urgent) break;
  }
  parking_.ClearFloor();
  return urgent;
}

bool Dispatcher::ParkHeldOnPeers(int64_t timeout_ns) {
  const int64_t deadline = SteadyNowNs() + timeout_ns;
  parking_.EnterPeerWordPark(held_priority_);
  bool urgent = false;
  for (;;) {
    // Submit pushes, then reads the parked flag and the floor (seq_cst): work above the held op
    // pushed before the flags were set is drained here, work pushed after wakes the thread.
    if (!inbox_.Empty() && DrainInbox() > held_priority_) {
      urgent = true;
      break;
    }
    if (stop_.load(std::memory_order_seq_cst) || parking_.WakeRequested() || direct_.Listed()) {
      break;
    }
    const int64_t left = deadline - SteadyNowNs();
    if (left <= 0) break;
    // A level lowered since this round looked at the peers: look again.
    if (coordinator_->PeerDrops() != peer_drops_seen_) break;
    coordinator_->WaitForPeerDrop(peer_drops_seen_, left);
    if (coordinator_->PeerDrops() != peer_drops_seen_) break;
  }
  const bool woken = parking_.LeavePeerWordPark();
  return woken || urgent;
}

void Dispatcher::ParkIdle(int* rounds, int64_t* backoff_ns) {
  const int64_t now = SteadyNowNs();
  PublishToPeers(now, /*held=*/false);
  if (HighestLocalActive() != kNoPriority && coordinator_->PeersPresent() &&
      coordinator_->Peers(now, options_.ceiling_window_ns, options_.unbudgeted_priority)
          .any_held) {
    // Other processes wait on this work: its end is polled for a short while (sleeps growing
    // to options.peer_poll_ns), which most waits of a latency-critical job's short kernels do not
    // outlast; after that the watcher sleeps until the GPU reaches it and wakes this thread
    // (PollWindowOpen says why not at once). Either way the level is withdrawn right after.
    if (++*rounds == 1) poll_wait_since_ns_ = now;
    if (!PollWindowOpen(now) && WatchInFlight(kNoPriority)) {
      // The timeout is a safety net, and the heartbeat's beat.
      *backoff_ns = 0;
      Park(absl::Nanoseconds(kWatchedParkNs), /*wake_for_released_streams=*/true);
      return;
    }
    constexpr int64_t kMinPollNs = 10'000;
    const int64_t max_poll_ns =
        std::max(kMinPollNs, static_cast<int64_t>(options_.peer_poll_ns));
    *backoff_ns = std::min(max_poll_ns, std::max(kMinPollNs, *backoff_ns * 2));
    Park(absl::Nanoseconds(*backoff_ns), /*wake_for_released_streams=*/true);
    SpendPollBudget(now);
    return;
  }
  *rounds = 0;
  *backoff_ns = 0;
  if (HighestLocalActive() != kNoPriority && coordinator_->PeersPresent()) {
    // Other processes are attached but none holds work back (under MPS, say, their work runs
    // confined beside this one's): polling every few microseconds would only compete with this
    // process's own launches for the driver. A peer that starts to wait is noticed within
    // options.peer_idle_poll_ns.
    Park(absl::Nanoseconds(options_.peer_idle_poll_ns), /*wake_for_released_streams=*/true);
    return;
  }
  // Nothing anyone waits on: wake once a second for the heartbeat (and for peers that attach
  // while work of this process is still in flight). Work a client issues directly meanwhile
  // ends this park (NoteDirect; the shorter ones above adopt it when they end).
  Park(absl::Seconds(1), /*wake_for_released_streams=*/true, /*wake_for_direct_work=*/true);
}

bool Dispatcher::PollWindowOpen(int64_t now_ns) {
  if (watcher_ == nullptr) return true;  // nothing else can notice the end
  poll_budget_ns_ = std::min<int64_t>(
      kPollBudgetCapNs, poll_budget_ns_ + (now_ns - poll_budget_at_ns_) / kPollShareDivisor);
  poll_budget_at_ns_ = now_ns;
  return now_ns - poll_wait_since_ns_ < kPollWindowNs && poll_budget_ns_ > 0;
}

void Dispatcher::SpendPollBudget(int64_t since_ns) {
  if (watcher_ != nullptr) poll_budget_ns_ -= SteadyNowNs() - since_ns;
}

bool Dispatcher::WatchInFlight(int above_priority) {
  if (watcher_ == nullptr) return false;
  if (!watcher_->Idle()) return true;
  CUevent events[CompletionWatcher::kMaxEvents];
  size_t count = 0;
  CUcontext context = nullptr;
  for (StreamQueue* q : tracker_.tracked()) {
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
    if (SetContext(context) != CUDA_SUCCESS) return false;
    absl::MutexLock lock(&record_mu_);
    if (IsDestroyed(q->state)) return false;
    if (q->watch_event == nullptr &&
        driver_.event_create(&q->watch_event, CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING) !=
            CUDA_SUCCESS) {
      q->watch_event = nullptr;
      return false;
    }
    if (driver_.event_record(q->watch_event, Location(q)) != CUDA_SUCCESS) return false;
    events[count++] = q->watch_event;
  }
  if (count == 0) return false;
  CountActivity(watches_);
  return watcher_->Watch(context, absl::MakeConstSpan(events, count));
}

void Dispatcher::SpinForWork(uint64_t duration_ns) {
  const int64_t start = SteadyNowNs();
  while (inbox_.Empty() && !stop_.load(std::memory_order_relaxed) &&
         SteadyNowNs() - start < static_cast<int64_t>(duration_ns)) {
    CpuRelax();
  }
}

int Dispatcher::HighestLocalActive() const {
  return PeerPublisher::HighestActive(accounting_.levels());
}

void Dispatcher::PublishToPeers(int64_t now_ns, bool held) {
  const IsolationReport isolation = placement_.Report();
  // Work a client published but this thread has not counted yet (in the inbox, being issued
  // directly, or issued and not adopted) keeps the level up until the next round counts it. A
  // client increments queued_ or begins its direct issue before it raises the level, and lists
  // direct work before it ends the issue; this reads them in that order after the withdrawal (all
  // seq_cst).
  peer_publisher_->Publish(
      now_ns, held, accounting_.levels(),
      [this](int64_t pending_ops) {
        return queued_.load(std::memory_order_seq_cst) > pending_ops ||
               direct_.IssuesInProgress() || direct_.Listed();
      },
      isolation);
}

bool Dispatcher::Park(absl::Duration timeout, bool wake_for_released_streams,
                      bool wake_for_direct_work) {
  // New work (perhaps more important) or a stop request ends the wait at once, and so may a
  // released stream. Waking for direct work is the long park (NoteDirect reads its flag).
  return parking_.Park(
      timeout,
      [&] {
        return !inbox_.Empty() || stop_.load(std::memory_order_seq_cst) ||
               (wake_for_released_streams && recycler_.HasReleased()) ||
               (wake_for_direct_work && direct_.Listed());
      },
      /*long_park=*/wake_for_direct_work);
}

void Dispatcher::AbandonPending() {
  int64_t abandoned = 0;
  for (StreamQueue* q : active_) {
    for (Op* op : q->pending) {
      accounting_.AdjustPending(op->priority, -1, -static_cast<int64_t>(op->queued_estimate_ns));
      issuer_.CountIssued(op);
      ++abandoned;
    }
    q->pending.clear();
  }
  active_.clear();
  parking_.NotifyIssued();
  Logf(LogLevel::kError,
       "exit: the GPU completed no work for %d ms (GPUPRIO_EXIT_TIMEOUT_MS); %d queued ops were "
       "not issued",
       static_cast<int>(options_.stop_stall_timeout_ns / 1'000'000), static_cast<int>(abandoned));
}

int Dispatcher::DrainInbox() {
  int highest = kNoPriority;
  while (Op* op = inbox_.Pop()) {
    highest = std::max(highest, op->priority);
    Enqueue(op);
  }
  return highest;
}

bool Dispatcher::PeersHeldThisRound() {
  if (active_.empty()) return false;
  if (peers_held_this_round_ < 0) peers_held_this_round_ = AnyPeerHeld() ? 1 : 0;
  return peers_held_this_round_ == 1;
}

void Dispatcher::Enqueue(Op* op) {
  op->seq = next_seq_++;
  StreamQueue& q = QueueFor(op->stream);
  if (q.pending.empty()) active_.push_back(&q);
  q.pending.push_back(op);
  op->queued_estimate_ns = estimates_.Estimate(op->cost_key, op->cost_hint_ns);
  accounting_.AdjustPending(op->priority, +1, static_cast<int64_t>(op->queued_estimate_ns));
}

bool Dispatcher::IssueNext() {
  confined_wait_until_ns_ = 0;
  held_for_more_important_ = false;
  if (active_.empty()) return false;
  // The most important head (another device's op waiting for it lends it its priority), then
  // what must go first for it to be correct, whatever its priority (priority inheritance): the
  // chain is acyclic because every link goes to an older head (a smaller sequence number; an
  // event wait's link too: IssueOrder). Two things end a chain without ending the round, and
  // the next most important head is tried: an event wait whose record another device's
  // dispatcher has not issued yet
  // (that dispatcher is asked to issue it first: a wait never blocks its own device's other
  // streams), and confined work whose twin holds all it may hold (room on one twin says nothing
  // of another's; the policy's rules do not apply to confined work).
  absl::InlinedVector<const StreamQueue*, 4> skipped;
  int64_t twin_room_due_ns = 0;  // the earliest a skipped twin has room; 0: none skipped
  held_priority_ = kNoPriority;
  const auto queue_of = [this](const StreamState* s) -> StreamQueue* {
    auto it = queues_.find(s);
    return it != queues_.end() ? &it->second : nullptr;
  };
  const IssueOrder order(active_, queue_of);
  for (;;) {
    int best_priority = kNoPriority;
    StreamQueue* best = order.MostImportantHead(skipped, &best_priority);
    if (best == nullptr) break;  // every head waits for another device or for room
    // If it is held, ParkHeld's floor (the first head tried is the most important one).
    if (skipped.empty()) held_priority_ = best_priority;
    bool inherited = best_priority > best->pending.front()->priority;
    bool looped = false;
    StreamQueue* q = order.FirstToIssue(best, &inherited, &looped);
    if (looped) {
      // Cannot happen (every link goes to an older op); if it did, what is issued next may break
      // an order the program relies on, and that must not pass unnoticed.
      GPUPRIO_LOG_THROTTLED(LogLevel::kError,
                            "device %d: the chain of work that must be issued first loops (%d "
                            "hops); please report this",
                            device_, IssueOrder::kMaxChainHops);
    }
    const Op& end = *q->pending.front();
    if (WaitsForOtherDevice(end) && issuer_.AskOtherDevice(end, best_priority)) {
      skipped.push_back(best);
      continue;
    }
    int64_t room_due_ns = 0;
    switch (TryIssue(q, inherited, &room_due_ns)) {
      case Attempt::kIssued:
        return true;
      case Attempt::kHeld:
        return false;
      case Attempt::kTwinFull:
        twin_room_due_ns =
            twin_room_due_ns == 0 ? room_due_ns : std::min(twin_room_due_ns, room_due_ns);
        skipped.push_back(best);
        continue;
    }
  }
  confined_wait_until_ns_ = twin_room_due_ns;
  return false;
}

Dispatcher::Attempt Dispatcher::TryIssue(StreamQueue* q, bool inherited, int64_t* room_due_ns) {
  Op* op = q->pending.front();
  // An event wait whose record is still being submitted (counted, not yet in the inbox) is not
  // ordered after ops to come: any op may be the one it waits for, so any op ends a held sleep.
  if (op->depends_on != nullptr &&
      op->depends_on->issued.load(std::memory_order_acquire) < op->depends_on_count) {
    held_priority_ = kNoPriority;
  }
  const int64_t now = SteadyNowNs();
  const PolicyView::Queries queries(&policy_view_, q, now);
  const DeviceSnapshot device = policy_view_.Snapshot(*q, op->priority, active_, now, &queries);
  const OpView view = policy_view_.View(*op, inherited, now);
  // The partition is created the first time the policy wants it.
  const bool confine = WantsConfinement(view, device, options_) && placement_.EnsurePartition();
  const Decision decision = Decide(view, device, confine, options_);
  if (decision.passed_hold_bound) {
    levels_->At(op->priority).ops_hold_bound.fetch_add(1, std::memory_order_relaxed);
  }
  if (decision.verdict == Verdict::kHold) {
    if (op->held_since_ns == 0) op->held_since_ns = now;
    held_for_more_important_ =
        decision.reason == Reason::kHigherPriority || decision.reason == Reason::kLongOp;
    held_since_ns_ = op->held_since_ns;
    if (decision.reason != Reason::kTwinFull) return Attempt::kHeld;
    *room_due_ns = decision.look_again_ns;
    return Attempt::kTwinFull;
  }
  Issue(q, op, decision.budget_ns, decision.verdict == Verdict::kIssueConfined);
  return Attempt::kIssued;
}

StreamQueue& Dispatcher::QueueFor(StreamState* s) {
  StreamQueue& q = queues_[s];
  if (q.state == nullptr) {
    q.state = s;
    q.links = &contexts_[s->context];
    if (s->legacy) {
      q.links->legacy = &q;
    } else if (s->blocking) {
      q.links->blocking.push_back(&q);
    }
  }
  return q;
}

void Dispatcher::BringAllHome() {
  for (auto& [state, q] : queues_) {
    if (!q.away) continue;
    SetContext(state->context);
    placement_.BringHome(&q);
  }
}

void Dispatcher::Issue(StreamQueue* q, Op* op, uint64_t budget_ns, bool confine) {
  q->pending.pop_front();
  accounting_.AdjustPending(op->priority, -1, -static_cast<int64_t>(op->queued_estimate_ns));
  if (q->pending.empty()) active_.erase(std::find(active_.begin(), active_.end(), q));
  // An op runs in its own context or not at all: issued after a failed switch it would run in
  // the previous context (legacy-stream work on that context's legacy stream). It fails with the
  // switch's error instead, which its stream reports like any failed op's.
  issuer_.Issue(q, op, SetContext(op->stream->context), budget_ns, confine);
  issuer_.CountIssued(op);
  parking_.NotifyIssued();
}

void Dispatcher::ReleaseStream(StreamState* stream) {
  {
    absl::MutexLock lock(&record_mu_);
    SetDestroyed(stream);
  }
  recycler_.Release(stream);
  parking_.Signal();
}

StreamState* Dispatcher::TakeRecycledStream() {
  return recycler_.TakeRecycled();
}

void Dispatcher::CollectReleasedStreams() {
  const std::vector<StreamState*> released = recycler_.TakeReleased();
  // Work a client issued itself just before destroying the stream is adopted first, so the
  // state is no longer listed for adoption when it is recycled.
  if (direct_.Listed()) AdoptDirectWork(PeersHeldThisRound());
  recycler_.Return(released, [this](StreamState* s) { return LetGo(s); });
}

bool Dispatcher::LetGo(StreamState* s) {
  auto it = queues_.find(s);
  if (it == queues_.end()) return true;
  StreamQueue& q = it->second;
  // Ops submitted after the destroy began (an application race): collected on a later round.
  if (!q.pending.empty() || s->direct_unmarked.load(std::memory_order_acquire)) return false;
  // Nothing more is recorded on a destroyed stream: its in-flight work counts as complete.
  tracker_.Retire(&q, q.in_flight.size());
  const std::vector<CUevent> events = StreamRecycler::TakeEvents(&q);
  SetContext(s->context);
  for (CUevent e : events) driver_.event_destroy(e);
  tracker_.Untrack(&q);
  placement_.Forget(&q);
  queues_.erase(it);
  return true;
}

void Dispatcher::MarkAllUncovered(bool held, bool peers_held) {
  const int64_t now = held ? SteadyNowNs() : 0;
  for (StreamQueue* q : tracker_.tracked()) {
    if (held && !MarkDueWhileHeld(*q, now, peers_held)) continue;
    SetContext(q->state->context);
    tracker_.Mark(q);
  }
}

void Dispatcher::OnRetired(void* dispatcher, StreamQueue* q, const InFlight& f) {
  Dispatcher* d = static_cast<Dispatcher*>(dispatcher);
  d->accounting_.AdjustInFlight(f.priority, -1, -static_cast<int64_t>(f.estimate_ns));
  if (f.confined) d->placement_.RemoveConfined(q, f.estimate_ns);
}

}  // namespace gpuprio::scheduler
