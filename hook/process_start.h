// gpuprio's start in a process, at its first use of CUDA and never before. Most processes that
// load the library never use CUDA (every child of the shells and shims a launcher runs, /bin/true),
// so loading it must cost them almost nothing and print nothing: the library's constructor only
// registers its exit and fork handlers, and everything else -- Abseil's lazily initialised state
// (its clock calibration sleeps for milliseconds where the kernel gives no TSC frequency), the
// configuration and its problems, the environment warnings, the start line -- happens here, on
// the first use. The driver (hook/real_driver.h) and the scheduler (hook/scheduler_bridge.h) are
// loaded and created later still, on their own first use.
//
// A use of CUDA is any of: a call of an intercepted cu* function (cuGetProcAddress included), or
// a dlsym lookup that finds a cu* function in libcuda. Thread-safe: the first uses may come from
// several threads at once, and each returns only once the start is done. Fork-safe: a fork never
// happens in the middle of the start, and a forked child is a process of its own, which says its
// start line and its exit summary only if it uses CUDA itself.
#ifndef GPUPRIO_HOOK_PROCESS_START_H_
#define GPUPRIO_HOOK_PROCESS_START_H_

#include <atomic>

#include "absl/base/optimization.h"

namespace gpuprio::hook {

namespace internal_process_start {
extern std::atomic<bool> g_cuda_used;
void NoteCudaUseSlow();
}  // namespace internal_process_start

// Called on every use of CUDA (wrapper.h, dlsym_hook.cc). The first in this process starts
// gpuprio (StartGpuprio) and says the start line where it was asked for; later ones cost one load.
inline void NoteCudaUse() {
  if (ABSL_PREDICT_TRUE(internal_process_start::g_cuda_used.load(std::memory_order_acquire))) {
    return;
  }
  internal_process_start::NoteCudaUseSlow();
}

// Whether this process (not a parent it was forked from) has used CUDA: its exit summary is
// printed only then.
bool CudaUsedInThisProcess();

// The start without counting as a use of CUDA, for what may run before any (the C API asking for
// the scheduler's stats): Abseil's lazy state, the configuration and its problems, the
// environment warnings. Once per process image (a forked child inherits a finished start).
void StartGpuprio();

// Whether StartGpuprio has finished. Stable while the fork gate is held (below).
bool GpuprioStarted();

// fork() handlers (hook/lifecycle.cc). The gate is held across fork by the forking thread, so the
// start is never half done in a child; the child side forgets that CUDA was used.
void LockStartForFork();
void UnlockStartInParent();
void UnlockStartInChild();

}  // namespace gpuprio::hook

#endif  // GPUPRIO_HOOK_PROCESS_START_H_
