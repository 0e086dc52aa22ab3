// A driver that does nothing, for measuring what gpuprio's wrappers cost: cuGetProcAddress(_v2)
// hand out a few entry points that return CUDA_SUCCESS at once. Not a test double (tests use
// tests/fake_cuda); its only user is tools/bench/passthrough_overhead.
#include <cuda.h>

#include <cstring>

extern "C" {

__attribute__((visibility("default"))) CUresult cuInit(unsigned int) { return CUDA_SUCCESS; }

__attribute__((visibility("default"))) CUresult cuStreamQuery(CUstream) { return CUDA_SUCCESS; }

__attribute__((visibility("default"))) CUresult cuLaunchKernel(CUfunction, unsigned, unsigned,
                                                               unsigned, unsigned, unsigned,
                                                               unsigned, unsigned, CUstream,
                                                               void**, void**) {
  return CUDA_SUCCESS;
}

#undef cuGetProcAddress
__attribute__((visibility("default"))) CUresult cuGetProcAddress_v2(
    const char* symbol, void** pfn, int, cuuint64_t, CUdriverProcAddressQueryResult* status);

__attribute__((visibility("default"))) CUresult cuGetProcAddress(const char* symbol, void** pfn,
                                                                 int version, cuuint64_t flags) {
  return cuGetProcAddress_v2(symbol, pfn, version, flags, nullptr);
}

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t,
                             CUdriverProcAddressQueryResult* status) {
  struct Entry {
    const char* name;
    void* fn;
  };
  const Entry entries[] = {
      {"cuInit", reinterpret_cast<void*>(&cuInit)},
      {"cuStreamQuery", reinterpret_cast<void*>(&cuStreamQuery)},
      {"cuLaunchKernel", reinterpret_cast<void*>(&cuLaunchKernel)},
      {"cuGetProcAddress", version >= 12000 ? reinterpret_cast<void*>(&cuGetProcAddress_v2)
                                            : reinterpret_cast<void*>(&cuGetProcAddress)},
  };
  for (const Entry& e : entries) {
    if (symbol != nullptr && std::strcmp(symbol, e.name) == 0) {
      *pfn = e.fn;
      if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SUCCESS;
      return CUDA_SUCCESS;
    }
  }
  *pfn = nullptr;
  if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_ERROR_NOT_FOUND;
}

}  // extern "C"
