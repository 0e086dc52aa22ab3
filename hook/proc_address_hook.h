// cuGetProcAddress and cuGetProcAddress_v2 as interceptors: the caller's lookup goes to the real
// driver unchanged (errors, the "" probe and symbolStatus included) and a returned driver pointer
// is swapped for the wrapper of the same ABI, found by the real pointer's identity.
#ifndef GPUPRIO_HOOK_PROC_ADDRESS_HOOK_H_
#define GPUPRIO_HOOK_PROC_ADDRESS_HOOK_H_

#include <cuda.h>
#include <cudaTypedefs.h>

#include "hook/interceptor.h"

namespace gpuprio::hook {

// The wrapper handed out for a driver pointer `real`, or `real` itself when gpuprio does not
// intercept that ABI (or runs with GPUPRIO_MODE=off).
void* WrapperForDriverPointer(void* real);

template <>
struct Interceptor<ApiId::k_cuGetProcAddress> {
  static CUresult Call(CallPath path, PFN_cuGetProcAddress_v11030 real, const char* symbol,
                       void** pfn, int cuda_version, cuuint64_t flags);
};

template <>
struct Interceptor<ApiId::k_cuGetProcAddress_v2> {
  static CUresult Call(CallPath path, PFN_cuGetProcAddress_v12000 real, const char* symbol,
                       void** pfn, int cuda_version, cuuint64_t flags,
                       CUdriverProcAddressQueryResult* symbol_status);
};

}  // namespace gpuprio::hook

#endif  // GPUPRIO_HOOK_PROC_ADDRESS_HOOK_H_
