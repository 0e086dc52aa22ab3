#include "hook/proc_address_hook.h"

#include "hook/config.h"
#include "hook/real_driver.h"
#include "hook/wrapper.h"

namespace gpuprio::hook {

void* WrapperForDriverPointer(void* real) {
  if (real == nullptr || GetConfig().mode == Mode::kOff) return real;
  // Identity, not name: cuGetProcAddress picks the ABI from (name, cudaVersion, flags), and the
  // pointer it returns already says which ABI that was. Unknown pointers go back unchanged.
  std::optional<ApiId> id = FindApiByRealEntry(real);
  if (!id.has_value()) return real;
  return WrapperFor(*id, CallPath::kProcAddress);
}

CUresult Interceptor<ApiId::k_cuGetProcAddress>::Call(CallPath /*path*/,
                                                       PFN_cuGetProcAddress_v11030 real,
                                                       const char* symbol, void** pfn,
                                                       int cuda_version, cuuint64_t flags) {
  CUresult result;
  {
    DriverCallScope in_driver;
    result = real(symbol, pfn, cuda_version, flags);
  }
  if (result == CUDA_SUCCESS && pfn != nullptr) *pfn = WrapperForDriverPointer(*pfn);
  return result;
}

CUresult Interceptor<ApiId::k_cuGetProcAddress_v2>::Call(
    CallPath /*path*/, PFN_cuGetProcAddress_v12000 real, const char* symbol, void** pfn,
    int cuda_version, cuuint64_t flags, CUdriverProcAddressQueryResult* symbol_status) {
  CUresult result;
  {
    DriverCallScope in_driver;
    result = real(symbol, pfn, cuda_version, flags, symbol_status);
  }
  if (result == CUDA_SUCCESS && pfn != nullptr) *pfn = WrapperForDriverPointer(*pfn);
  return result;
}

}  // namespace gpuprio::hook
