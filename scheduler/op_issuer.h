// Turns the op a dispatcher chose into real driver calls: on its stream or its twin, bracketed by
// a start event while its cost is unknown, a call the SM partition refused run again at home, a
// failure kept for the stream's next sync, the issued op counted in flight and marked where due.
#ifndef GPUPRIO_SCHEDULER_OP_ISSUER_H_
#define GPUPRIO_SCHEDULER_OP_ISSUER_H_

#include <cuda.h>

#include <atomic>
#include <cstdint>

#include "scheduler/completion_tracker.h"
#include "scheduler/coordinator/gpu_coordinator.h"
#include "scheduler/dispatcher_directory.h"
#include "scheduler/driver_functions.h"
#include "scheduler/duration_estimator.h"
#include "scheduler/isolation_placement.h"
#include "scheduler/level_accounting.h"
#include "scheduler/op.h"
#include "scheduler/op_observer.h"
#include "scheduler/options.h"
#include "scheduler/priority_levels.h"
#include "scheduler/stream_queue.h"
#include "scheduler/stream_state.h"

namespace gpuprio::scheduler {

// Dispatcher thread only. Everything it is given must outlive it; `observer`, `coordinator` and
// `directory` may be null.
class OpIssuer {
 public:
  // `queued`: the dispatcher's count of ops submitted and not yet issued, counted down here.
  OpIssuer(int device, const DriverFunctions& driver, const SchedulerOptions& options,
           PriorityLevels* levels, OpObserver* observer, coordinator::GpuCoordinator* coordinator,
           const DispatcherDirectory* directory, std::atomic<int64_t>* queued,
           DurationEstimator* estimates, CompletionTracker* tracker, IsolationPlacement* placement,
           LevelAccounting* accounting)
      : device_(device),
        driver_(driver),
        options_(options),
        levels_(levels),
        observer_(observer),
        coordinator_(coordinator),
        directory_(directory),
        queued_(queued),
        estimates_(estimates),
        tracker_(tracker),
        placement_(placement),
        accounting_(accounting) {}
  OpIssuer(const OpIssuer&) = delete;
  OpIssuer& operator=(const OpIssuer&) = delete;

  // Issues `op`, just taken off `q`'s queue. `in_context`: the result of making its stream's
  // context current; on failure the op is not issued but fails with that error, since issued in
  // the previous context it would run there. `budget_ns`: the budget it was admitted under (0:
  // unbudgeted); `confine`: on the stream's twin. The op is not counted issued yet (CountIssued).
  void Issue(StreamQueue* q, Op* op, CUresult in_context, uint64_t budget_ns, bool confine);

  // `op` leaves the dispatcher, counted issued (issued, or abandoned at a bounded exit), and goes
  // back to its pool; other devices' dispatchers waiting for its stream's issues are woken.
  void CountIssued(Op* op);

  // Any thread: whether an op issued here ever failed (a deferred error was stored on its
  // stream). Set before that op is counted issued, and never cleared: while it is false, no
  // stream of this device has an error to report, and a context's synchronisation need not look.
  bool ReportedFailure() const { return reported_failure_.load(std::memory_order_seq_cst); }

  // `op` waits for a stream of another device: asks that device's dispatcher to issue what it
  // waits for first, as if at `priority`, and to wake this one once it has. False when that work
  // turned out to be issued already.
  bool AskOtherDevice(const Op& op, int priority);

 private:
  // The level's statistics: queueing delay, time held.
  void CountIssueStatistics(const Op& op, int64_t now_ns);
  // A start event recorded on `target` before an op whose cost is unknown, or null.
  CUevent StartMeasurement(StreamQueue* q, const Op& op, CUstream target);
  // A call the partition refused, issued again on the stream's own stream.
  CUresult IssueRefusedAtHome(StreamQueue* q, Op* op, CUresult refused, CUevent* start);
  // A failure stored on the stream for its next sync or query.
  void ReportFailure(const Op& op, CUresult result);
  // An issued op counted in flight and marked where due.
  void TrackIssued(StreamQueue* q, const Op& op, uint64_t budget_ns, uint64_t estimate,
                   CUevent start, int64_t now_ns);
  void WakeWaitingDevices(StreamState* s);

  const int device_;
  const DriverFunctions driver_;
  const SchedulerOptions options_;
  PriorityLevels* const levels_;
  OpObserver* const observer_;
  coordinator::GpuCoordinator* const coordinator_;
  const DispatcherDirectory* const directory_;
  std::atomic<int64_t>* const queued_;
  DurationEstimator* const estimates_;
  CompletionTracker* const tracker_;
  IsolationPlacement* const placement_;
  LevelAccounting* const accounting_;
  std::atomic<bool> reported_failure_{false};
};

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_OP_ISSUER_H_
