// The one wrapper shape, instantiated for every (row of driver_api.def, delivery path): take the
// real entry point, count the call, hand it to Interceptor<id>. The signature comes from the row's
// cudaTypedefs.h PFN type, so no parameter list is ever written by hand.
#ifndef GPUPRIO_HOOK_WRAPPER_H_
#define GPUPRIO_HOOK_WRAPPER_H_

#include <cuda.h>

#include "hook/api_table.h"
#include "hook/call_counters.h"
#include "hook/all_interceptors.h"
#include "hook/process_start.h"
#include "hook/real_driver.h"
#include "hook/thread_state.h"

namespace gpuprio::hook {

template <ApiId kId, CallPath kPath, typename Pfn>
struct Wrapper;

template <ApiId kId, CallPath kPath, typename... Args>
struct Wrapper<kId, kPath, CUresult(CUDAAPI*)(Args...)> {
  static CUresult CUDAAPI Call(Args... args) {
    using Real = CUresult(CUDAAPI*)(Args...);
    NoteCudaUse();  // the process's first call starts gpuprio (process_start.h)
    const auto real = reinterpret_cast<Real>(RealEntry(kId));
    // The installed driver lacks this ABI; only reachable through an exported symbol.
    if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
    // The driver calling its own exported names must not be seen as the application's work.
    if (kPath == CallPath::kExported && InDriverCall()) return real(args...);
    CountCall(kId, kPath);
    return Interceptor<kId>::Call(kPath, real, args...);
  }
};

// The wrapper of row `id` for pointers handed out through `path` (kDlsym or kProcAddress).
void* WrapperFor(ApiId id, CallPath path);

}  // namespace gpuprio::hook

#endif  // GPUPRIO_HOOK_WRAPPER_H_
