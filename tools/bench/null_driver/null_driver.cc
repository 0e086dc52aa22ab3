// A driver that does nothing, for measuring what gpuprio's wrappers cost: cuGetProcAddress(_v2)
// hand out a few entry points that return CUDA_SUCCESS at once — enough for passthrough, and for
// schedule mode (a current context, stream properties, events that are always complete, kernels
// without parameters). Not a test double (tests use tests/fake_cuda); its only user is
// tools/bench/passthrough_overhead.
#include <cuda.h>

#include <cstring>

extern "C" {

__attribute__((visibility("default"))) CUresult cuInit(unsigned int) { return CUDA_SUCCESS; }

__attribute__((visibility("default"))) CUresult cuStreamQuery(CUstream) { return CUDA_SUCCESS; }

#define NULL_DRIVER_API(name, ...) \
  __attribute__((visibility("default"))) CUresult name(__VA_ARGS__)

NULL_DRIVER_API(cuCtxGetCurrent, CUcontext* ctx) {
  *ctx = reinterpret_cast<CUcontext>(0x1000);  // one context, always current
  return CUDA_SUCCESS;
}
NULL_DRIVER_API(cuCtxSetCurrent, CUcontext) { return CUDA_SUCCESS; }
NULL_DRIVER_API(cuCtxGetDevice, CUdevice* device) {
  *device = 0;
  return CUDA_SUCCESS;
}
NULL_DRIVER_API(cuStreamGetFlags, CUstream, unsigned int* flags) {
  *flags = CU_STREAM_NON_BLOCKING;
  return CUDA_SUCCESS;
}
NULL_DRIVER_API(cuStreamGetPriority, CUstream, int* priority) {
  *priority = 0;
  return CUDA_SUCCESS;
}
NULL_DRIVER_API(cuEventCreate, CUevent* event, unsigned int) {
  static char events[1];
  *event = reinterpret_cast<CUevent>(events);
  return CUDA_SUCCESS;
}
NULL_DRIVER_API(cuEventRecord, CUevent, CUstream) { return CUDA_SUCCESS; }
NULL_DRIVER_API(cuEventQuery, CUevent) { return CUDA_SUCCESS; }
NULL_DRIVER_API(cuEventElapsedTime, float* ms, CUevent, CUevent) {
  *ms = 0.001f;
  return CUDA_SUCCESS;
}
NULL_DRIVER_API(cuEventDestroy_v2, CUevent) { return CUDA_SUCCESS; }
// Kernels have no parameters (the benchmark passes none).
NULL_DRIVER_API(cuFuncGetParamInfo, CUfunction, size_t, size_t*, size_t*) {
  return CUDA_ERROR_INVALID_VALUE;
}
NULL_DRIVER_API(cuFuncGetAttribute, int* value, CUfunction_attribute attribute, CUfunction) {
  *value = attribute == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ? 1024 : 0;
  return CUDA_SUCCESS;
}
#undef NULL_DRIVER_API

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
      {"cuCtxGetCurrent", reinterpret_cast<void*>(&cuCtxGetCurrent)},
      {"cuCtxSetCurrent", reinterpret_cast<void*>(&cuCtxSetCurrent)},
      {"cuCtxGetDevice", reinterpret_cast<void*>(&cuCtxGetDevice)},
      {"cuStreamGetFlags", reinterpret_cast<void*>(&cuStreamGetFlags)},
      {"cuStreamGetPriority", reinterpret_cast<void*>(&cuStreamGetPriority)},
      {"cuEventCreate", reinterpret_cast<void*>(&cuEventCreate)},
      {"cuEventRecord", reinterpret_cast<void*>(&cuEventRecord)},
      {"cuEventQuery", reinterpret_cast<void*>(&cuEventQuery)},
      {"cuEventElapsedTime", reinterpret_cast<void*>(&cuEventElapsedTime)},
      {"cuEventDestroy", reinterpret_cast<void*>(&cuEventDestroy_v2)},
      {"cuFuncGetParamInfo", reinterpret_cast<void*>(&cuFuncGetParamInfo)},
      {"cuFuncGetAttribute", reinterpret_cast<void*>(&cuFuncGetAttribute)},
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
