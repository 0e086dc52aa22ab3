// One dispatcher per device: a thread that takes ops from its inbox into per-stream FIFOs and
// issues them to the real driver, highest priority first (issue_policy.h), keeping per-stream
// order, legacy NULL-stream order against blocking streams, and event record -> wait order.
// Completion of issued work is observed through pooled events, which feed the in-flight budget
// and the per-kernel duration estimates. With spatial isolation, work below a more important level
// is issued onto the stream's twin in an SM partition (sm_partition.h); every switch between a
// stream and its twin, and every legacy-stream relation the switch would lose, is kept with an
// event.
//
// Threading: Submit and WaitIssued are called by client threads and never take a lock on the
// common path; everything below "dispatcher thread only" is touched by the dispatcher alone.
#ifndef GPUPRIO_SCHEDULER_DISPATCHER_H_
#define GPUPRIO_SCHEDULER_DISPATCHER_H_

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/node_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "scheduler/completion_marks.h"
#include "scheduler/completion_tracker.h"
#include "scheduler/completion_watcher.h"
#include "scheduler/coordinator/gpu_coordinator.h"
#include "scheduler/direct_work.h"
#include "scheduler/dispatcher_directory.h"
#include "scheduler/dispatcher_parking.h"
#include "scheduler/dispatcher_waits.h"
#include "scheduler/driver_functions.h"
#include "scheduler/duration_estimator.h"
#include "scheduler/isolation_placement.h"
#include "scheduler/issue_order.h"
#include "scheduler/issue_policy.h"
#include "scheduler/level_accounting.h"
#include "scheduler/op.h"
#include "scheduler/op_inbox.h"
#include "scheduler/op_issuer.h"
#include "scheduler/op_observer.h"
#include "scheduler/options.h"
#include "scheduler/peer_publisher.h"
#include "scheduler/policy_view.h"
#include "scheduler/priority_levels.h"
#include "scheduler/stream_queue.h"
#include "scheduler/stream_recycler.h"
#include "scheduler/stream_state.h"
#include "scheduler/whole_device_work.h"

namespace gpuprio::scheduler {

class Dispatcher : private DispatcherWaits::Host {
 public:
  // `observer` (may be null) must outlive the dispatcher. `coordinator` (may be null): this
  // process's slot in the GPU's shared segment, through which other processes' levels take part
  // in admission (docs/coordinator.md). `directory` (may be null: one device only): the process's
  // dispatchers, through which this one and those of other devices wake each other when an op of
  // one waits for a stream of the other (an event recorded there); it must outlive them all.
  Dispatcher(int device, const DriverFunctions& driver, const SchedulerOptions& options,
             PriorityLevels* levels, OpObserver* observer,
             std::unique_ptr<coordinator::GpuCoordinator> coordinator = nullptr,
             const DispatcherDirectory* directory = nullptr);
  ~Dispatcher();  // stops the thread; ops still queued are issued first
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  int device() const { return device_; }
  coordinator::GpuCoordinator* coordinator() const { return coordinator_.get(); }
  // The levels as this device sees them (the ceiling here): stamped by Submit and NoteDirect and
  // by the dispatcher's accounting, read by the fast path. Lock-free.
  const DeviceLevels& levels_here() const { return levels_here_; }

  // What the dispatcher thread cost the process (the exit summary): CPU time over its runs that
  // have ended (a run ends at Stop: exit, a capture), how often it went to sleep (waited on its
  // condition: each sleep is a wake-up later, by new work or a timeout), and the driver calls it
  // made besides issuing ops: completion marks (event records) on the application's streams,
  // those of them behind work that clients issued themselves (the fast path: on the client's own
  // stream, while the client may be launching on it), and queries of the marks.
  struct Activity {
    int device = 0;
    uint64_t cpu_ns = 0;
    uint64_t sleeps = 0;
    uint64_t marks = 0;
    uint64_t direct_marks = 0;
    uint64_t mark_queries = 0;
  };
  Activity activity() const {
    return {device_,
            thread_cpu_ns_.load(std::memory_order_relaxed),
            parking_.sleeps(),
            tracker_.marks(),
            direct_marks_.load(std::memory_order_relaxed),
            tracker_.mark_queries()};
  }

  // Client, fast path, before it issues an op of `priority` itself: publishes the level to the
  // other processes sharing the GPU (NoteDirect wakes the dispatcher to watch the work's end).
  // Until NoteDirect has listed the work, the issue counts as in progress, so the dispatcher does
  // not withdraw the level meanwhile (a launch may take milliseconds on a loaded machine).
  void PublishDirect(int priority) {
    if (coordinator_ == nullptr) return;
    direct_.BeginIssue();
    coordinator_->RaiseActive(priority);
  }

  // Another device's dispatcher, whose op waits until a stream of this device has issued some
  // ops (StreamState::awaited_count): this one takes a round at once, issuing those ops first.
  void WakeForOtherDevice() { Wake(); }

  // Client: counts the op on its stream and hands it to the dispatcher. Lock-free; wakes a
  // parked dispatcher. Blocks only when the stream has more than max_queued_per_stream unissued
  // ops (backpressure), until half of them are issued.
  void Submit(Op* op);

  // Client, fast path: true when nothing submitted to this dispatcher is still unissued, so an op
  // issued now by its own thread is ordered after everything submitted before it.
  bool Idle() const { return queued_.load(std::memory_order_acquire) == 0; }
  // Any thread: nothing submitted here is unissued and no stream's work is on a twin, so no wait
  // (WaitStream) on this device's streams has anything to wait for. The op that moves a stream to
  // a twin is counted issued only after the move is counted, and this reads the unissued count
  // first (both seq_cst): a move in progress keeps the answer false.
  bool NothingToWaitFor() const {
    return queued_.load(std::memory_order_seq_cst) == 0 && placement_.StreamsAway() == 0;
  }
  // Any thread: whether an op issued here ever failed (OpIssuer::ReportedFailure).
  bool ReportedFailure() const { return issuer_.ReportedFailure(); }

  // Client, fast path: true when an op issued on `stream` by its own thread would miss an
  // ordering CUDA gives it, because that work is on a twin: the stream's own earlier work, or
  // (legacy NULL stream and blocking streams order against each other) the other side's.
  bool AwayWorkOrders(const StreamState* stream) const {
    return placement_.AwayWorkOrders(stream);
  }

  // Client, after it issued an op of `priority` on `stream` itself: the dispatcher will treat
  // that work as in flight (lower priorities hold back) until a completion mark it puts behind it
  // has completed. Lock-free; no allocation.
  void NoteDirect(StreamState* stream, int priority, int64_t now_ns);

  // Client, before a launch of `priority` whose work needs the whole GPU (a CUDA graph): less
  // important work on this device, in this process and in the others sharing the GPU, is held
  // below it rather than confined for options.ceiling_window_ns. Lock-free.
  void NoteWholeDevice(int priority, int64_t now_ns) {
    whole_device_.Note(priority, now_ns, options_.ceiling_window_ns);
    if (coordinator_ != nullptr) {
      coordinator_->NoteWholeDevice(priority, options_.ceiling_window_ns);
    }
  }

  // Client: blocks until `stream` has issued at least `count` ops (or, with `unless_stopping`,
  // until the dispatcher is stopping).
  void WaitIssued(StreamState* stream, uint64_t count, bool unless_stopping = false);

  // Client, before the real cuStreamDestroy (after every op of the stream was issued): from now
  // on the dispatcher records nothing on the stream (its in-flight work counts as complete). The
  // dispatcher then frees what it kept for the stream (queues, pooled events) and hands the state
  // back for reuse (TakeRecycledStream).
  void ReleaseStream(StreamState* stream);

  // A released stream state the dispatcher no longer refers to, or null. Its issue counters keep
  // counting from where they were, so a stale reference to its former stream (an event's last
  // record, an op's dependency) sees all of that stream's work as issued.
  StreamState* TakeRecycledStream();

  // Stop() issues everything queued and joins the thread (exit, capture); Start() runs a new one.
  // Both are idempotent. With `bounded` (process exit), if the GPU completes nothing for
  // options.stop_stall_timeout_ns while held-back work waits, the rest is abandoned with one
  // message, so a wedged device cannot keep a process from exiting.
  void Start();
  void Stop(bool bounded = false);

 private:
  void Run();
  // A round's first step: the inbox into the queues, direct work adopted, released streams
  // collected; true when the inbox had work.
  bool TakeNewWork();
  // A round that issued nothing: held back by the policy, or idle.
  void WaitHeldRound(WaitBackoff* backoff);
  void WaitIdleRound(WaitBackoff* backoff);
  void Wake();
  // With a coordinator: the other processes see this process's active level, queue and
  // in-flight work; a level that is no longer active is withdrawn here.
  void PublishToPeers(int64_t now_ns, bool held);
  int HighestLocalActive() const;
  static void WakeFromWatcher(void* dispatcher);
  static void WakePeerWord(void* dispatcher);
  void AbandonPending();
  void CollectReleasedStreams();
  // Frees what the dispatcher kept for released stream `s` (its queue, pooled events), unless
  // ops of it are still queued or unadopted; true when it let go of `s`.
  bool LetGo(StreamState* s);
  // DispatcherWaits::Host: queues every op in the inbox; returns the highest priority among them
  // (kNoPriority: none).
  int DrainInbox() override;
  // DispatcherWaits::Host: records `q`'s watch event behind its work.
  bool RecordWatchEvent(StreamQueue* q) override;
  void Enqueue(Op* op);  // into its stream's queue
  // Counts work clients issued themselves as in flight, marking it where due; `peers_held`:
  // whether another process holds work back (PeersHeldThisRound).
  void AdoptDirectWork(bool peers_held);
  // Makes `context` current on the dispatcher thread; the driver's result (success if it was).
  CUresult SetContext(CUcontext context);
  // The tracker's RetiredFn: a retired entry leaves the level counts and the confined totals.
  static void OnRetired(void* dispatcher, StreamQueue* q, const InFlight& f);
  // Whether `op` waits for a stream of another device that has not issued what it must follow.
  bool WaitsForOtherDevice(const Op& op) const {
    return op.depends_on != nullptr && op.depends_on->dispatcher != this &&
           op.depends_on->issued.load(std::memory_order_seq_cst) < op.depends_on_count;
  }
  // Issues the most important op that may go now; false when none may (the policy holds the
  // most important one, or each waits for another device or for room on its twin).
  bool IssueNext();
  enum class Attempt {
    kIssued,
    kHeld,      // the policy holds it (more important work, the budget, the long-op rule)
    kTwinFull,  // confined, and its twin holds all it may (*room_due_ns: when room is due)
  };
  // Issues `q`'s head if the policy lets it (`inherited`: another op waits for it, which lends it
  // its priority: no rule holds it).
  Attempt TryIssue(StreamQueue* q, bool inherited, int64_t* room_due_ns);
  // Takes `q`'s head `op` off the queues and issues it (op_issuer.h). `budget_ns`: the budget
  // the op was admitted under (0: unbudgeted); `confine`: issue it on the stream's twin.
  void Issue(StreamQueue* q, Op* op, uint64_t budget_ns, bool confine);
  // The queue of `s`, created (and listed in its context's links) on first use.
  StreamQueue& QueueFor(StreamState* s);
  static CUstream Location(const StreamQueue* q) { return IsolationPlacement::Location(*q); }
  // Before a capture: every stream's work returns to its own stream.
  void BringAllHome();
  // Marks each stream's work not yet behind a mark. `held`: the thread will sleep briefly while
  // work is held back and wake again soon, so fast-path work is marked under the
  // held_mark_interval_ns rule (else every stream is marked: a long park follows).
  void MarkAllUncovered(bool held, bool peers_held);
  // Whether the held_mark_interval_ns rule lets `q`'s uncovered work get a mark now. Only work a
  // client issued itself waits: its mark goes on the stream the client launches on, while one
  // behind the dispatcher's own work competes with no launch and frees room sooner. Not while
  // another process waits on this one (`peers_held`): a late notice idles the GPU for both.
  bool MarkDueWhileHeld(const StreamQueue& q, int64_t now_ns, bool peers_held) const {
    return scheduler::MarkDueWhileHeld(q.direct_uncovered, peers_held, !q.marks.empty(),
                                       now_ns - q.last_mark_ns, options_);
  }
  bool AnyPeerHeld() const { return coordinator_ != nullptr && coordinator_->AnyPeerHeld(); }
  // While work is held back here: whether another process holds work back (AnyPeerHeld), read
  // from the shared segment at most once per dispatcher round. False while nothing is held.
  bool PeersHeldThisRound();
  // An Activity counter has one writer (the dispatcher thread): a load and a store, no
  // read-modify-write.
  static void CountActivity(std::atomic<uint64_t>& counter) {
    counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  const int device_;
  const DriverFunctions driver_;
  const SchedulerOptions options_;
  PriorityLevels* const levels_;
  OpObserver* const observer_;

  const std::unique_ptr<coordinator::GpuCoordinator> coordinator_;
  std::unique_ptr<PeerPublisher> peer_publisher_;  // with a coordinator

  OpInbox inbox_;
  // Ops submitted and not yet issued (the fast path's test).
  std::atomic<int64_t> queued_{0};
  // Streams with work their clients issued directly and no completion mark behind it yet, and
  // direct issues between PublishDirect and their listing in NoteDirect (with a coordinator).
  DirectWorkList direct_;
  // Activity. Written by the dispatcher thread alone, read at exit.
  std::atomic<uint64_t> thread_cpu_ns_{0};
  std::atomic<uint64_t> direct_marks_{0};
  std::atomic<bool> stop_{false};
  std::atomic<bool> stop_bounded_{false};
  // How the thread sleeps and who wakes it; how clients wait for issues. Before the watcher,
  // whose wake-up uses it.
  DispatcherParking parking_;
  // Held while the dispatcher records a completion event on a stream, and by ReleaseStream while
  // it marks the stream destroyed, so no event is ever recorded on a destroyed stream. The flag
  // lives in the StreamState; these two are its only accessors, and the analysis checks both
  // sides hold the lock.
  absl::Mutex record_mu_;
  bool IsDestroyed(const StreamState* s) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(record_mu_) {
    return s->destroyed.load(std::memory_order_acquire);
  }
  void SetDestroyed(StreamState* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(record_mu_) {
    s->destroyed.store(true, std::memory_order_release);
  }
  // Spatial isolation: the partition, the twins and the links across a switch. It records links
  // under record_mu_.
  IsolationPlacement placement_;
  WholeDeviceWork whole_device_;
  DeviceLevels levels_here_;
  std::thread thread_;
  // With a coordinator and the driver's cuEventSynchronize. Declared after what its wake-up
  // uses, so it is gone before they are.
  std::unique_ptr<CompletionWatcher> watcher_;

  // Streams the application destroyed, waiting for the dispatcher to let go of them, and states
  // it has let go of, ready for reuse by another stream of this device.
  StreamRecycler recycler_;

  // Dispatcher thread only.
  // Node-based: active_ and the tracker hold pointers to the queues.
  absl::node_hash_map<StreamState*, StreamQueue> queues_;
  std::vector<StreamQueue*> active_;  // streams with pending ops
  // Pending and in-flight work per priority level.
  LevelAccounting accounting_;
  DurationEstimator estimates_;
  // Completion marks on the streams' work in flight, their polls, the retired entries.
  CompletionTracker tracker_;
  OpIssuer issuer_;
  PolicyView policy_view_;
  absl::node_hash_map<CUcontext, ContextLinks> contexts_;  // node-based: queues point in

  CUcontext current_context_ = nullptr;
  uint64_t next_seq_ = 0;
  int64_t last_progress_ns_ = 0;  // last issue or observed completion (the exit stall bound)
  // Set when IssueNext's last refusal was the confined queue bound: when room is due (the oldest
  // confined op's estimated end, or 1 ms on with enough work queued behind it). The dispatcher
  // sleeps until then instead of polling (the poll's driver calls would contend with client
  // threads' launches), and tells other processes it holds nothing back (no one waits on it).
  int64_t confined_wait_until_ns_ = 0;
  // The priority of the op IssueNext last found the policy holding (the most important one
  // ready to go); meaningful while active_ is not empty after a round that issued nothing.
  int held_priority_ = kNoPriority;
  // Whether the policy held that op for more important work (rules 1 and 3), not for its
  // level's budget, and since when (the op's held_since_ns): WaitWhileHeld leaves the end of
  // such a hold to the watcher once it outlasts the polling window (kLocalHoldPollWindowNs).
  bool held_for_more_important_ = false;
  int64_t held_since_ns_ = 0;
  // PeersHeldThisRound's reading: -1 until it is read in the current round.
  int peers_held_this_round_ = -1;
  // How the thread waits between rounds that issued nothing. Last: it refers to the members
  // above.
  DispatcherWaits waits_;
};

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_DISPATCHER_H_
