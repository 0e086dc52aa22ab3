// Kernel launches as ops: the parameters are copied into the op (layout from
// param_layout_cache.h), the `extra` form's buffer exactly as sized, cuLaunchKernelEx's config and
// attribute array; the client thread validates what CUDA reports at launch time (block size,
// dynamic shared memory, null function) so those errors stay immediate.
#ifndef GPUPRIO_HOOK_SCHEDULED_LAUNCH_CALLS_H_
#define GPUPRIO_HOOK_SCHEDULED_LAUNCH_CALLS_H_

#include <cuda.h>
#include <cudaTypedefs.h>

#include "hook/interceptor.h"

namespace gpuprio::hook {

#define GPUPRIO_DECLARE_LAUNCH_HANDLER(symbol, pfn)                                          \
  template <>                                                                                \
  struct ScheduledHandler<ApiId::k_##symbol, ApiClass::kOrdered> {                           \
    static CUresult Call(scheduler::Scheduler* s, pfn real, CUfunction f, unsigned int gx,   \
                         unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, \
                         unsigned int bz, unsigned int shared, CUstream stream,              \
                         void** params, void** extra);                                       \
  };
GPUPRIO_DECLARE_LAUNCH_HANDLER(cuLaunchKernel, PFN_cuLaunchKernel_v4000)
GPUPRIO_DECLARE_LAUNCH_HANDLER(cuLaunchKernel_ptsz, PFN_cuLaunchKernel_v7000_ptsz)
#undef GPUPRIO_DECLARE_LAUNCH_HANDLER

#define GPUPRIO_DECLARE_COOPERATIVE_HANDLER(symbol, pfn)                                     \
  template <>                                                                                \
  struct ScheduledHandler<ApiId::k_##symbol, ApiClass::kOrdered> {                           \
    static CUresult Call(scheduler::Scheduler* s, pfn real, CUfunction f, unsigned int gx,   \
                         unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, \
                         unsigned int bz, unsigned int shared, CUstream stream,              \
                         void** params);                                                     \
  };
GPUPRIO_DECLARE_COOPERATIVE_HANDLER(cuLaunchCooperativeKernel,
                                    PFN_cuLaunchCooperativeKernel_v9000)
GPUPRIO_DECLARE_COOPERATIVE_HANDLER(cuLaunchCooperativeKernel_ptsz,
                                    PFN_cuLaunchCooperativeKernel_v9000_ptsz)
#undef GPUPRIO_DECLARE_COOPERATIVE_HANDLER

#define GPUPRIO_DECLARE_LAUNCH_EX_HANDLER(symbol, pfn)                                    \
  template <>                                                                             \
  struct ScheduledHandler<ApiId::k_##symbol, ApiClass::kOrdered> {                        \
    static CUresult Call(scheduler::Scheduler* s, pfn real, const CUlaunchConfig* config, \
                         CUfunction f, void** params, void** extra);                      \
  };
GPUPRIO_DECLARE_LAUNCH_EX_HANDLER(cuLaunchKernelEx, PFN_cuLaunchKernelEx_v11060)
GPUPRIO_DECLARE_LAUNCH_EX_HANDLER(cuLaunchKernelEx_ptsz, PFN_cuLaunchKernelEx_v11060_ptsz)
#undef GPUPRIO_DECLARE_LAUNCH_EX_HANDLER

}  // namespace gpuprio::hook

#endif  // GPUPRIO_HOOK_SCHEDULED_LAUNCH_CALLS_H_
