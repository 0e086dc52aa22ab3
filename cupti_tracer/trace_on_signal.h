// Writing the trace when SIGTERM or SIGINT ends the process. Servers are stopped with SIGTERM,
// which by default ends a process without running its exit handlers, so the trace (written at
// exit) was never written.
//
// FinishOnTerminatingSignals(finish, abandon, bound) takes each of SIGTERM and SIGINT whose
// disposition is SIG_DFL at the call. When one arrives:
//   1. the handler (async-signal-safe: sem_post only) wakes a thread started at the call;
//   2. that thread runs `finish` on a helper thread and waits for it at most `bound`; if it takes
//      longer (a wedged driver) it calls `abandon` and goes on;
//   3. it restores SIG_DFL and raises the signal again: the process still dies by the signal, and
//      its exit status says so.
// Rules that follow:
//   - A signal that is ignored or has the program's handler at the call is left alone.
//   - A handler the program installs later replaces this one: the program's handler runs, and the
//     trace is written at exit if the program exits (as without a signal).
//   - A second signal while `finish` runs calls `abandon` and ends the process at once.
//   - In a forked child (which has no such thread) the signal ends the process at once.
// `abandon` must be async-signal-safe (it may run in the handler). Once per process: later calls
// take nothing.
#ifndef GPUPRIO_CUPTI_TRACER_TRACE_ON_SIGNAL_H_
#define GPUPRIO_CUPTI_TRACER_TRACE_ON_SIGNAL_H_

#include <vector>

#include "absl/time/time.h"

namespace gpuprio::tracer {

// Returns the signals taken (SIGTERM, SIGINT, in that order; empty if none was SIG_DFL, or if
// the thread could not be started: then nothing is installed and a message says so).
std::vector<int> FinishOnTerminatingSignals(void (*finish)(), void (*abandon)(),
                                            absl::Duration bound);

}  // namespace gpuprio::tracer

#endif  // GPUPRIO_CUPTI_TRACER_TRACE_ON_SIGNAL_H_
