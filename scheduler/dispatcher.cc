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

// The shared segment's layout carries the priority range: the two must agree.
static_assert(coordinator::kLowestPriority == kMinPriority);
static_assert(coordinator::kHighestPriority == kMaxPriority);
static_assert(kNoPriority < kMinPriority);

}  // namespace

Dispatcher::Dispatcher(int device, const DriverFunctions& driver, const SchedulerOptions& options,
                       PriorityLevels* levels, OpObserver* observer,
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
      watcher_(driver.event_synchronize == nullptr
                   ? nullptr
                   : std::make_unique<CompletionWatcher>(
                         driver.ctx_set_current, driver.event_synchronize,
                         driver.on_dispatcher_thread_start, &Dispatcher::WakeFromWatcher, this)),
      accounting_(device, options, levels, &levels_here_, observer),
      estimates_(options.default_estimate_ns),
      tracker_(driver, &estimates_, &record_mu_, &Dispatcher::OnRetired, this),
      issuer_(device, driver, options, levels, observer, coordinator_.get(), directory, &queued_,
              &estimates_, &tracker_, &placement_, &accounting_),
      policy_view_(options, levels, &accounting_, &estimates_, &tracker_, &placement_,
                   &whole_device_, coordinator_.get()),
      waits_(this, options_, &parking_, &inbox_, &stop_, &direct_, &recycler_, &tracker_,
             coordinator_.get(), watcher_.get()) {
  if (coordinator_ != nullptr) {
    peer_publisher_ = std::make_unique<PeerPublisher>(coordinator_.get(), options_.request_gap_ns);
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
  levels_here_.NoteWork(op->priority, op->submit_ns);
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
  // Lower levels here are on their budget from now, before the dispatcher adopts the work.
  levels_here_.NoteWork(priority, now_ns);
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
  // the dispatcher's next poll (options.tuning.peer_idle_poll_ns) adopts it: a wake-up per chain of
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
  WaitBackoff backoff;
  last_progress_ns_ = SteadyNowNs();
  for (;;) {
    const bool drained = TakeNewWork();
    const bool completed = !tracker_.tracked().empty() && tracker_.Poll() > 0;
    if (coordinator_ != nullptr) PublishToPeers(SteadyNowNs(), /*held=*/false);
    bool issued = false;
    while (IssueNext()) issued = true;
    if (issued || completed) last_progress_ns_ = SteadyNowNs();
    if (drained || issued || completed) {
      backoff = WaitBackoff();
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
  waits_.BeginRound();
  const bool drained = DrainInbox() != kNoPriority;
  // Before anything is admitted: work clients issued themselves counts as in flight.
  if (direct_.Listed()) AdoptDirectWork(PeersHeldThisRound());
  if (recycler_.HasReleased()) CollectReleasedStreams();
  return drained;
}

void Dispatcher::WaitHeldRound(WaitBackoff* backoff) {
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
  const DispatcherWaits::Held held{confined_wait_until_ns_, held_priority_,
                                   held_for_more_important_, held_since_ns_};
  if (waits_.WaitWhileHeld(held, active_, backoff)) {
    // More important work arrived (queued by the wait itself): its own wait, if it is held too,
    // starts from the spin.
    backoff->rounds = 0;
    backoff->sleep_ns = 0;
  }
}

void Dispatcher::WaitIdleRound(WaitBackoff* backoff) {
  if (backoff->idle_since_ns < 0) {
    // Spin a little for new work before parking, watching the inbox alone: a full round per
    // spin would query completion events in a tight loop, driver calls that compete with the
    // client threads' own launches (a server's chain of kernels, issued on the fast path).
    backoff->idle_since_ns = SteadyNowNs();
    waits_.SpinForWork(options_.tuning.spin_before_park_ns);
    return;  // one more round (new work, direct work, completions) before parking
  }
  // Park. Work in flight gets completion marks first so its end is observed on wake-up. No
  // driver call while parked: completions are polled when work arrives (before anything is
  // issued), so a parked dispatcher costs no CPU and never races a process's teardown of the
  // driver.
  MarkAllUncovered(/*held=*/false, /*peers_held=*/false);
  if (coordinator_ != nullptr) {
    const int64_t now = SteadyNowNs();
    PublishToPeers(now, /*held=*/false);
    waits_.ParkIdle(now, HighestLocalActive() != kNoPriority, backoff);
    return;  // idle_since_ns stays: the spin is not repeated after every poll
  }
  waits_.Park(absl::InfiniteDuration(), /*wake_for_released_streams=*/true);
  backoff->idle_since_ns = -1;
}

bool Dispatcher::RecordWatchEvent(StreamQueue* q) {
  if (SetContext(q->state->context) != CUDA_SUCCESS) return false;
  absl::MutexLock lock(&record_mu_);
  if (IsDestroyed(q->state)) return false;
  if (q->watch_event == nullptr &&
      driver_.event_create(&q->watch_event, CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING) !=
          CUDA_SUCCESS) {
    q->watch_event = nullptr;
    return false;
  }
  return driver_.event_record(q->watch_event, Location(q)) == CUDA_SUCCESS;
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
  int held_below = kNoPriority;
  const bool confine =
      WantsConfinement(view, device, options_, &held_below) && placement_.EnsurePartition();
  placement_.NoteNotConfinedBelow(held_below);
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
