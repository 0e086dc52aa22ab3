// A driver that does nothing, for measuring what gpuprio's wrappers cost: cuGetProcAddress(_v2)
// hand out a few entry points that return CUDA_SUCCESS at once — enough for passthrough, and for
// schedule mode (a current context, a GPU UUID, stream properties, events that are always
// complete, kernels without parameters). Not a test double (tests use tests/fake_cuda): its users are
// tools/bench/passthrough_overhead and the soak test (tests/scheduler/soak_client), which runs
// gpuprio at full speed for liveness and memory only; for that client it also exports the few
// calls the client makes itself (streams, events, memory, synchronisation), all doing nothing.
#include <cuda.h>

#include <atomic>
#include <cstdint>
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
// One fixed GPU identity, so gpuprio attaches to the per-GPU coordination segment as on a GPU.
NULL_DRIVER_API(cuDeviceGetUuid, CUuuid* uuid, CUdevice) {
  std::memset(uuid->bytes, 0, sizeof(uuid->bytes));
  std::memcpy(uuid->bytes, "nulldriver", 10);
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
// Distinct handles that are never dereferenced: gpuprio keys streams and events by handle.
uintptr_t NewHandle() {
  static std::atomic<uintptr_t> next{0x100000};
  return next.fetch_add(16, std::memory_order_relaxed);
}

NULL_DRIVER_API(cuEventCreate, CUevent* event, unsigned int) {
  *event = reinterpret_cast<CUevent>(NewHandle());
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
// What the soak client calls itself. Memory is handles too: nothing is ever read or written.
NULL_DRIVER_API(cuDeviceGet, CUdevice* device, int) {
  *device = 0;
  return CUDA_SUCCESS;
}
NULL_DRIVER_API(cuDevicePrimaryCtxRetain, CUcontext* ctx, CUdevice) {
  *ctx = reinterpret_cast<CUcontext>(0x1000);
  return CUDA_SUCCESS;
}
NULL_DRIVER_API(cuModuleLoadData, CUmodule* module, const void*) {
  *module = reinterpret_cast<CUmodule>(NewHandle());
  return CUDA_SUCCESS;
}
NULL_DRIVER_API(cuModuleGetFunction, CUfunction* f, CUmodule, const char*) {
  *f = reinterpret_cast<CUfunction>(NewHandle());
  return CUDA_SUCCESS;
}
NULL_DRIVER_API(cuMemAlloc_v2, CUdeviceptr* p, size_t) {
  *p = static_cast<CUdeviceptr>(NewHandle());
  return CUDA_SUCCESS;
}
NULL_DRIVER_API(cuMemsetD8_v2, CUdeviceptr, unsigned char, size_t) { return CUDA_SUCCESS; }
NULL_DRIVER_API(cuMemsetD32_v2, CUdeviceptr, unsigned int, size_t) { return CUDA_SUCCESS; }
NULL_DRIVER_API(cuMemcpyDtoH_v2, void*, CUdeviceptr, size_t) { return CUDA_SUCCESS; }
NULL_DRIVER_API(cuMemcpyDtoDAsync_v2, CUdeviceptr, CUdeviceptr, size_t, CUstream) {
  return CUDA_SUCCESS;
}
NULL_DRIVER_API(cuStreamCreateWithPriority, CUstream* stream, unsigned int, int) {
  *stream = reinterpret_cast<CUstream>(NewHandle());
  return CUDA_SUCCESS;
}
NULL_DRIVER_API(cuStreamDestroy_v2, CUstream) { return CUDA_SUCCESS; }
NULL_DRIVER_API(cuStreamSynchronize, CUstream) { return CUDA_SUCCESS; }
NULL_DRIVER_API(cuStreamWaitEvent, CUstream, CUevent, unsigned int) { return CUDA_SUCCESS; }
NULL_DRIVER_API(cuCtxSynchronize) { return CUDA_SUCCESS; }
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
      {"cuDeviceGetUuid", reinterpret_cast<void*>(&cuDeviceGetUuid)},
      {"cuStreamGetFlags", reinterpret_cast<void*>(&cuStreamGetFlags)},
      {"cuStreamGetPriority", reinterpret_cast<void*>(&cuStreamGetPriority)},
      {"cuEventCreate", reinterpret_cast<void*>(&cuEventCreate)},
      {"cuEventRecord", reinterpret_cast<void*>(&cuEventRecord)},
      {"cuEventQuery", reinterpret_cast<void*>(&cuEventQuery)},
      {"cuEventElapsedTime", reinterpret_cast<void*>(&cuEventElapsedTime)},
      {"cuEventDestroy", reinterpret_cast<void*>(&cuEventDestroy_v2)},
      {"cuFuncGetParamInfo", reinterpret_cast<void*>(&cuFuncGetParamInfo)},
      {"cuFuncGetAttribute", reinterpret_cast<void*>(&cuFuncGetAttribute)},
      {"cuStreamCreateWithPriority", reinterpret_cast<void*>(&cuStreamCreateWithPriority)},
      {"cuCtxSynchronize", reinterpret_cast<void*>(&cuCtxSynchronize)},
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
