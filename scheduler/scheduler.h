// The process-wide scheduler: maps the application's streams to StreamStates, one Dispatcher per
// device, priorities (thread > stream > process default), the waits that sync APIs need, deferred
// errors, event-record tracking and statistics. hook/ is its only client; it knows nothing of
// driver entry points beyond DriverFunctions.
//
// Hot path (Resolve + Submit): a thread-local cache in front of the stream map, a lock-free
// inbox; no global lock and no allocation once a thread has warmed up.
#ifndef GPUPRIO_SCHEDULER_SCHEDULER_H_
#define GPUPRIO_SCHEDULER_SCHEDULER_H_

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "scheduler/base/atomic_max.h"
#include "scheduler/dispatcher.h"
#include "scheduler/dispatcher_directory.h"
#include "scheduler/driver_functions.h"
#include "scheduler/host_yield.h"
#include "scheduler/op.h"
#include "scheduler/op_observer.h"
#include "scheduler/options.h"
#include "scheduler/priority_levels.h"
#include "scheduler/queued_launches.h"
#include "scheduler/stream_state.h"

namespace gpuprio::scheduler {

class Scheduler {
 public:
  // `observer` (a tracer; may be null) must outlive the scheduler.
  Scheduler(const SchedulerOptions& options, const DriverFunctions& driver,
            OpObserver* observer = nullptr);
  ~Scheduler();  // stops every dispatcher (tests; the process scheduler is never destroyed)
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  const SchedulerOptions& options() const { return options_; }
  const DriverFunctions& driver() const { return driver_; }
  OpObserver* observer() const { return observer_; }
  // The observer if it wants OnCallerIssue / OnQueueState (OpObserver::WantsTimings), else null.
  OpObserver* timing_observer() const { return timing_observer_; }
  // Whether a call run on its caller is timed: for the timing observer, or for the level's
  // statistics (SchedulerOptions::time_calls). One flag, so the untimed path tests one word.
  bool times_caller_calls() const { return times_caller_calls_; }

  // The scheduled stream a call names, or null when gpuprio does not defer work on it: the
  // per-thread default stream (CU_STREAM_PER_THREAD, or 0 through a _ptsz/_ptds entry point),
  // or no current context. `stream` is the handle as the application passed it.
  StreamState* Resolve(CUstream stream, bool per_thread_entry);

  // Thread setting, else the stream's, else the process default.
  int EffectivePriority(const StreamState* stream) const;

  // Before a launch on `stream` (null: not scheduled) whose work needs the whole GPU (a CUDA
  // graph): less important work on its device is held rather than confined below it
  // (Dispatcher::NoteWholeDevice).
  void NoteWholeDeviceWork(const StreamState* stream);

  // Takes ownership of `op` (from OpPool::ForThisThread()) and queues it on its stream.
  void Submit(Op* op);

  // The fast path. True when the dispatcher would issue an op of `priority` on `stream` at once
  // anyway — nothing submitted to its device is unissued, or (`may_pass_queued`) only less
  // important work on other streams that CUDA does not order this one after; and `priority` is
  // at the ceiling (no more important level active, so the op is on no budget) — and the calling
  // thread may issue it itself, saving the copy, the hand-off, the dispatcher's wake-up and its
  // issue rate limit. Lock-free: a few atomic loads. With other processes on the GPU
  // (coordinator), also only while none of them has a more important level active, and the level
  // is published to them before this returns true. The caller issues the real call, then calls
  // NoteDirect.
  bool MayIssueDirect(const StreamState* stream, int priority, bool may_pass_queued);
  void NoteDirect(StreamState* stream, int priority);
  // The fast path's test when the dispatcher is not idle (MayIssueDirect).
  bool OnlyLessImportantQueued(const StreamState* stream, int priority) const;

  // Block until every op submitted so far to the stream / context / process has been issued, and
  // (spatial isolation) has its work back on the application's stream: what the caller issues
  // next on it, or a synchronize of it, then follows all of that work as CUDA would order it.
  void WaitStream(StreamState* stream);
  // The second half of WaitStream alone: the stream's work returns from its twin.
  void BringHome(StreamState* stream);
  void WaitContext(CUcontext context);
  void WaitAll();
  // Before a function attribute changes (cuFuncSetAttribute and the like): the queued launches
  // of `function` are issued, under the value they were launched with. Returns at once when none
  // is queued; else waits for everything submitted so far (WaitAll).
  void WaitLaunchesOf(const void* function);
  // Before work that bypasses the queues on the per-thread stream of `context` (or a stream of
  // unknown context): the legacy stream's queued work must be issued first.
  void WaitLegacy(CUcontext context);
  // Before stream work runs on its caller's thread (inline): everything CUDA orders it after is
  // issued, i.e. the stream's queue and, by CUDA's implicit legacy-stream order, every blocking
  // stream's of its context (the legacy stream) or the legacy stream's (a blocking stream).
  // `stream` null: a stream gpuprio does not queue (the per-thread stream): the legacy stream's.
  void WaitBeforeInline(StreamState* stream);
  // Before a synchronize or query of `stream`: what it covers is issued (its queue; for the
  // legacy stream, also every blocking stream's of its context). Null: as for WaitBeforeInline.
  void WaitBeforeSync(StreamState* stream);

  // The first deferred error of the stream (or of any stream of the context), cleared.
  CUresult TakeDeferredError(StreamState* stream);
  CUresult TakeDeferredError(CUcontext context);

  // cuStreamDestroy, before the driver destroys the stream: the dispatcher stops using it, and
  // the stream is never matched again (its state is kept).
  void ForgetStream(CUstream stream);

  // Event record -> wait order. A record queued on a stream makes each later wait on the event
  // (and each sync of it) follow that stream's ops up to the record; a record issued by its
  // caller leaves nothing to follow. A wait that is queued in turn is counted until it issues: a
  // new record of the event must not overtake it, nor may the event be destroyed under it.
  class EventState {
   private:
    friend class Scheduler;
    std::atomic<StreamState*> queued_record{nullptr};
    // The record's position in its stream (StreamState::submitted once it was queued): a wait
    // follows the ops up to it, not those queued on the stream after it.
    std::atomic<uint64_t> record_position{0};
    std::atomic<int> queued_waits{0};
  };
  // The event's state (created on first use; never freed, so ops may point at it).
  EventState* Event(CUevent event);
  void ForgetEvent(CUevent event);
  // Before recording `event`: its state, once the waits queued on its previous record issued.
  EventState* BeginRecord(CUevent event);
  // The record was issued now by its caller (null `stream`), or queued on `stream`.
  void EndRecord(EventState* event, StreamState* stream);
  // For a wait on the event: the stream whose queued ops up to the record it must follow, or
  // null when the record is issued (or there was none).
  StreamState* RecordToFollow(const EventState* event) const;
  // A wait on the event is about to be queued as `op`, after `recorder`'s ops submitted so far
  // (RecordToFollow; null: none); counted until the dispatcher issues it.
  void QueueWaitOn(EventState* event, StreamState* recorder, Op* op);
  // Before a wait on the event that runs on its caller: its queued record is issued.
  void WaitRecord(const EventState* event);
  // Before a sync, query, timing or destroy of the event: its record and the waits queued on it
  // are issued.
  void WaitEvent(CUevent event);

  // While any stream capture is active every stream op runs inline (capture semantics span
  // threads and streams; graphs copy their own arguments), and the dispatchers are stopped: work
  // the dispatcher itself puts on a stream (completion events) would be captured into the graph
  // or invalidate the capture. EnterCapture is called before the driver begins a capture (it
  // issues everything queued first), LeaveCapture after a capture ends or fails to begin.
  void EnterCapture();
  void LeaveCapture();
  bool CaptureActive() const { return active_captures_.load(std::memory_order_acquire) > 0; }

  // Ops run inline are counted here for statistics.
  void CountOnCaller(int priority) {
    levels_.At(priority).ops_on_caller.fetch_add(1, std::memory_order_relaxed);
    HostYield::NoteOwnLaunch(priority);
  }

  // SchedulerOptions::time_calls: a stream call at `priority` took `call_ns` on the application's
  // thread; `driver_ns` of it in a real driver call made on that thread.
  void NoteCallTime(int priority, uint64_t call_ns) {
    PriorityLevelStats& level = levels_.At(priority);
    level.calls_timed.fetch_add(1, std::memory_order_relaxed);
    level.call_ns_sum.fetch_add(call_ns, std::memory_order_relaxed);
    base::AtomicMax(level.call_ns_max, call_ns);
  }
  void NoteCallerDriverTime(int priority, uint64_t driver_ns) {
    levels_.At(priority).caller_driver_ns_sum.fetch_add(driver_ns, std::memory_order_relaxed);
  }

  PriorityLevels& levels() { return levels_; }
  // One entry per device's dispatcher (the exit summary).
  std::vector<Dispatcher::Activity> DispatcherActivity();

  // Exit and captures: quiesce (issue everything, stop the dispatchers) and, after a capture,
  // restart. While stopped, Resolve returns null, so stream work runs inline on its caller.
  // `bounded` (exit): give up on held-back work if the GPU stops completing anything
  // (SchedulerOptions::stop_stall_timeout_ns). fork() needs neither: see hook/scheduler_bridge.cc.
  void StopDispatchers(bool bounded = false);
  void StartDispatchers();
  // At exit, after StopDispatchers: this process leaves the GPUs' shared segments (its slots are
  // freed for others at once rather than when a peer notices it is gone).
  void LeaveSharedSegments();

  // The calling thread's priority setting (kPriorityUnset when none).
  static void SetThreadPriority(int priority);
  static int ThreadPriority();

 private:
  struct Key {
    CUcontext context;
    CUstream stream;
    bool operator==(const Key& o) const { return context == o.context && stream == o.stream; }
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.context, k.stream);
    }
  };

  StreamState* ResolveSlow(CUcontext context, CUstream stream, bool legacy);
  // A created stream already known, by its handle alone.
  StreamState* FindByHandle(CUstream stream);
  // The device's dispatcher, created (with its slot in the GPU's shared segment) on first use.
  Dispatcher* DispatcherFor(CUdevice device) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // This process's slot in the GPU's shared segment (null: coordination off or unavailable; the
  // reason is logged once).
  std::unique_ptr<coordinator::GpuCoordinator> AttachCoordinator(CUdevice device);
  std::vector<StreamState*> Streams(CUcontext context, bool legacy_only);
  // Lock-free, no allocation: nothing submitted on any device is unissued and no stream's work is
  // on a twin, so a wait on any set of streams returns at once (the synchronisations of a program
  // whose work all goes by the fast path take no lock and copy no list of streams).
  bool NothingToWaitFor() const;

  const SchedulerOptions options_;
  const DriverFunctions driver_;
  OpObserver* const observer_;
  OpObserver* const timing_observer_;
  const bool times_caller_calls_;
  PriorityLevels levels_;
  QueuedLaunches queued_launches_;
  HostYield host_yield_{&levels_, options_.host_yield_ns, options_.tuning.host_yield_quiet_ns,
                        options_.tuning.host_yield_held_backlog_ops};
  std::atomic<int> active_captures_{0};
  std::atomic<bool> stopped_{false};
  // Bumped whenever a stream is forgotten, so thread-local caches drop stale handles.
  std::atomic<uint64_t> stream_epoch_{1};

  absl::Mutex mu_;
  // Created streams by handle alone (context null), legacy streams by context.
  absl::flat_hash_map<Key, StreamState*> streams_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<StreamState>> stream_storage_ ABSL_GUARDED_BY(mu_);
  // The dispatchers for one another (lock-free); declared first, so it outlives them.
  DispatcherDirectory directory_;
  absl::flat_hash_map<int, std::unique_ptr<Dispatcher>> dispatchers_ ABSL_GUARDED_BY(mu_);

  static constexpr int kEventShards = 16;
  struct EventShard {
    absl::Mutex mu;
    absl::flat_hash_map<CUevent, EventState*> events ABSL_GUARDED_BY(mu);
  };
  EventShard event_shards_[kEventShards];
  EventShard& ShardFor(CUevent e) {
    return event_shards_[(reinterpret_cast<uintptr_t>(e) >> 4) % kEventShards];
  }
};

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_SCHEDULER_H_
