// The virtual device: queues stream work with CUDA's ordering rules and runs it on one executor
// thread per device, one op at a time, highest stream priority first among the ready heads.
//
// Ordering kept here: FIFO per stream; legacy NULL stream work waits for earlier work of every
// blocking stream of its context and blocking-stream work waits for earlier legacy work
// (CU_STREAM_NON_BLOCKING streams are exempt; per-thread streams are blocking); Op::deps (event
// waits) must be done first; Op::ready (stream wait value) must hold.
#ifndef GPUPRIO_TESTS_FAKE_CUDA_VIRTUAL_DEVICE_H_
#define GPUPRIO_TESTS_FAKE_CUDA_VIRTUAL_DEVICE_H_

#include "absl/time/time.h"
#include "tests/fake_cuda/fake_state.h"

namespace fakecuda {

// Queues `op` on `stream` (or records it into the stream's capture graph) and returns at once.
// The executor of the stream's device is started on first use.
void Enqueue(Stream* stream, OpPtr op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(Mu());

// Makes an op that runs `body` (which may be empty) on the executor.
OpPtr MakeOp(const char* what, uint64_t call_order, std::function<CUresult()> body);

// Blocks (without holding Mu() meanwhile) until `op` is done. A null op is done.
void WaitDone(OpPtr op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(Mu());

// Waits for everything queued on `stream` so far; returns and clears its pending async error.
CUresult SyncStream(Stream* stream) ABSL_EXCLUSIVE_LOCKS_REQUIRED(Mu());
// Waits for everything queued in `ctx` so far; returns and clears its pending async error.
CUresult SyncContext(Context* ctx) ABSL_EXCLUSIVE_LOCKS_REQUIRED(Mu());
// Waits until no non-paused device has queued or running work.
void WaitAllIdle() ABSL_EXCLUSIVE_LOCKS_REQUIRED(Mu());
// The same, for at most `timeout`; false if work was left.
bool WaitAllIdleFor(absl::Duration timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(Mu());

bool OpDone(Op* op);

// Registers (once per process) the exit handler that lets the devices finish their queued work
// before the process ends, as the driver's teardown of its contexts does: work a program queued
// and never synchronised (host functions included) still runs. Bounded (20 s), so work that can
// never run (a paused device, a peer that never comes) delays an exit but cannot hang it. Called
// by cuInit: before any other library's first CUDA call, so that library's exit handlers (an
// interposer issuing what it still holds) run first.
void FinishWorkAtExit();

}  // namespace fakecuda

#endif  // GPUPRIO_TESTS_FAKE_CUDA_VIRTUAL_DEVICE_H_
