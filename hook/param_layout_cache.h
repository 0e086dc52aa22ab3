// Kernel parameter layouts and thread limits per CUfunction (or CUkernel passed as one), read
// from the driver once (cuFuncGetParamInfo / cuKernelGetParamInfo until CUDA_ERROR_INVALID_VALUE
// gives the count) and cached: a per-thread direct-mapped cache in front of a shared map, so a
// launch of a known kernel takes no lock. Module and library unloads invalidate everything.
#ifndef GPUPRIO_HOOK_PARAM_LAYOUT_CACHE_H_
#define GPUPRIO_HOOK_PARAM_LAYOUT_CACHE_H_

#include <cuda.h>

#include <cstdint>
#include <vector>

namespace gpuprio::hook {

struct ParamLayout {
  struct Param {
    uint32_t offset;
    uint32_t size;
  };
  std::vector<Param> params;
  uint32_t total_size = 0;          // end of the last parameter
  int max_threads_per_block = 0;    // 0: unknown, not validated
  int max_dynamic_shared_bytes = -1;  // at first launch (mutable: informational only)
};

// The layout of `function`, or null when the driver cannot describe it (the launch then runs
// inline and the driver itself validates it). Layouts are never freed.
const ParamLayout* FindParamLayout(CUfunction function);

// After cuModuleUnload / cuLibraryUnload: handles may be reused for other kernels.
void InvalidateParamLayouts();

// fork() handlers (hook/scheduler_bridge.cc): prepare, parent, child.
void LockParamLayoutsForFork();
void UnlockParamLayoutsInParent();
void ResetParamLayoutsInChild();

}  // namespace gpuprio::hook

#endif  // GPUPRIO_HOOK_PARAM_LAYOUT_CACHE_H_
