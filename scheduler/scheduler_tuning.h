// The scheduler's internal tuning: measured constants, not user settings (no GPUPRIO_* variable
// sets them; docs/user_guide.md lists the settings). They are fields rather than constants so that
// tests can reach a state in bounded time; each says which unit reads it and why its value.
#ifndef GPUPRIO_SCHEDULER_SCHEDULER_TUNING_H_
#define GPUPRIO_SCHEDULER_SCHEDULER_TUNING_H_

#include <cstdint>

namespace gpuprio::scheduler {

struct SchedulerTuning {
  // --- The policy (issue_policy.h). ---
  // Work on the budget only because of its own level (nothing more important in this process or
  // another submitted within the window) keeps one op queued behind the op each of its streams
  // runs now: the budget counts what is queued behind those ops. Without it an op as long as the
  // budget is admitted only once the one before it is seen complete, and the GPU idles for the
  // dispatcher's reaction every time (5% of a batch job's throughput with 2 ms kernels, H100).
  // The price: the first important op after a quiet period may wait for that queued op too.
  bool idle_budget_excludes_running = true;
  // Confined work needs no budget (it cannot delay the reserved SMs), but what is queued on a
  // twin stays there when the level above goes quiet: a stream keeps at most this much estimated
  // GPU time on its twin (and always at least one op), so its return to the whole GPU waits for
  // one long kernel at most, not for a deep queue of them.
  uint64_t confined_queue_ns = 10'000'000;
  // Without isolation, an op longer than the budget (it would hold every SM it fills for longer
  // than the budget allows) is admitted below a more important level only once that level has
  // been idle this long: a level that pauses for microseconds between kernels of one burst must
  // not let a long kernel in each time.
  uint64_t long_op_idle_ns = 5'000'000;
  // ...but never longer than this after the policy first held it: then the budget alone admits
  // it, so lower work always progresses (a thread synchronising on it is never stalled for good,
  // whatever keeps the higher levels busy).
  uint64_t long_op_max_hold_ns = 50'000'000;

  // --- Completion marks (completion_marks.h). ---
  // Ops between completion events on a stream: unbudgeted, and budgeted work of known cost
  // (budgeted work of unknown cost is marked op by op, so its duration is learned at once).
  int ops_per_completion_event = 32;
  int budgeted_ops_per_completion_event = 8;
  // While work is held back, work a client issued itself (the fast path) gets a completion mark
  // at most this often while one is pending on its stream (unless another process waits on this
  // one): a mark per dispatcher round behind a server's fast-path work is an event record on the
  // very stream the server launches on. Its end is noticed up to this plus one held sleep later.
  uint64_t held_mark_interval_ns = 200'000;

  // --- The dispatcher's waits (dispatcher.h). ---
  // How long an idle dispatcher spins before it parks (no CPU use while idle).
  uint64_t spin_before_park_ns = 50'000;
  // While the policy holds work back the dispatcher polls for completions with sleeps that grow
  // to this length: the most a completion is noticed late (the budget keeps more queued).
  uint64_t max_held_sleep_ns = 200'000;
  // While another process waits on this one's work, or holds this one's work back, completions
  // and the other process's levels are polled at least this often: a late notice idles the GPU
  // for both processes.
  uint64_t peer_poll_ns = 50'000;
  // While other processes are attached but none holds work back, this process's own work in
  // flight is polled this often instead (its level is withdrawn that much later at most).
  uint64_t peer_idle_poll_ns = 1'000'000;

  // --- Host-side priority (host_yield.h). ---
  // A thread that yields to a more important one waits until that thread has launched nothing
  // for this long (GPUPRIO_HOST_YIELD_US bounds the whole wait).
  uint64_t host_yield_quiet_ns = 200'000;
  // A thread also yields when this many ops of its level are queued and not issued: the policy
  // is holding them (below a level that needs the whole GPU, or within the request gap), so the
  // thread's running ahead adds only more of them. Well above the few ops the dispatcher has in
  // hand between two issues.
  int64_t host_yield_held_backlog_ops = 16;
};

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_SCHEDULER_TUNING_H_
