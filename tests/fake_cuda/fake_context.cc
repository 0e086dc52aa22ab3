// Driver init, devices, contexts and error strings of the fake driver.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/synchronization/mutex.h"
#include "tests/fake_cuda/call_log.h"
#include "tests/fake_cuda/fake_state.h"
#include "tests/fake_cuda/virtual_device.h"

namespace fakecuda {
namespace {

CUresult CheckDevice(CUdevice dev) ABSL_EXCLUSIVE_LOCKS_REQUIRED(Mu()) {
  if (CUresult r = CheckInit(); r != CUDA_SUCCESS) return r;
  return dev >= 0 && dev < S().device_count ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult CreateContext(CUcontext* pctx, unsigned flags, CUdevice dev) {
  absl::MutexLock lock(&Mu());
  if (CUresult r = CheckDevice(dev); r != CUDA_SUCCESS) return r;
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Context* ctx = NewContext(dev, flags);
  PushCurrentContext(ctx);
  *pctx = reinterpret_cast<CUcontext>(ctx);
  return CUDA_SUCCESS;
}

CUresult DestroyContext(CUcontext handle) {
  absl::MutexLock lock(&Mu());
  Context* ctx = Lookup<Context>(handle, Kind::kContext);
  if (ctx == nullptr || ctx->primary) return CUDA_ERROR_INVALID_CONTEXT;
  SyncContext(ctx);
  for (Stream* stream : std::vector<Stream*>(ctx->streams)) DestroyStream(stream);
  Unregister(ctx);
  return CUDA_SUCCESS;
}

CUresult PrimaryRelease(CUdevice dev) {
  absl::MutexLock lock(&Mu());
  if (CUresult r = CheckDevice(dev); r != CUDA_SUCCESS) return r;
  Context* ctx = S().primary[dev];
  if (ctx == nullptr || ctx->primary_refs == 0) return CUDA_ERROR_INVALID_CONTEXT;
  --ctx->primary_refs;
  return CUDA_SUCCESS;
}

CUresult PrimaryReset(CUdevice dev) {
  absl::MutexLock lock(&Mu());
  if (CUresult r = CheckDevice(dev); r != CUDA_SUCCESS) return r;
  if (Context* ctx = S().primary[dev]; ctx != nullptr) SyncContext(ctx);
  return CUDA_SUCCESS;
}

CUresult GetDevice(CUdevice* device, CUcontext handle) {
  absl::MutexLock lock(&Mu());
  if (CUresult r = CheckInit(); r != CUDA_SUCCESS) return r;
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Context* ctx = handle == nullptr ? CurrentContext() : Lookup<Context>(handle, Kind::kContext);
  if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *device = ctx->device;
  return CUDA_SUCCESS;
}

CUresult SyncCtx(CUcontext handle) {
  absl::MutexLock lock(&Mu());
  if (CUresult r = CheckInit(); r != CUDA_SUCCESS) return r;
  Context* ctx = handle == nullptr ? CurrentContext() : Lookup<Context>(handle, Kind::kContext);
  if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  return SyncContext(ctx);
}

struct ErrorText {
  CUresult code;
  const char* name;
  const char* text;
};
constexpr ErrorText kErrors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_LAUNCH_TIMEOUT, "CUDA_ERROR_LAUNCH_TIMEOUT", "the launch timed out and was terminated"},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
    {CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

const ErrorText* FindError(CUresult code) {
  for (const ErrorText& e : kErrors) {
    if (e.code == code) return &e;
  }
  return nullptr;
}

}  // namespace
}  // namespace fakecuda

using fakecuda::CallScope;
using fakecuda::Mu;
using fakecuda::RunApi;
using fakecuda::S;

extern "C" {

CUresult cuInit(unsigned int flags) {
  return RunApi("cuInit", [&](CallScope&) {
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    fakecuda::EnsureForkHandlers();
    fakecuda::FinishWorkAtExit();
    absl::MutexLock lock(&Mu());
    if (!S().initialized) {
      const char* mps_priority = std::getenv("CUDA_MPS_CLIENT_PRIORITY");
      S().mps_client_priority_set_at_init = mps_priority != nullptr;
      S().mps_client_priority_at_init = mps_priority != nullptr ? mps_priority : "";
    }
    S().initialized = true;
    return CUDA_SUCCESS;
  });
}

CUresult cuDriverGetVersion(int* version) {
  return RunApi("cuDriverGetVersion", [&](CallScope&) {
    if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *version = 13000;
    return CUDA_SUCCESS;
  });
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  return RunApi("cuDeviceGet", [&](CallScope&) {
    absl::MutexLock lock(&Mu());
    if (CUresult r = fakecuda::CheckDevice(ordinal); r != CUDA_SUCCESS) return r;
    if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *device = ordinal;
    return CUDA_SUCCESS;
  });
}

CUresult cuDeviceGetCount(int* count) {
  return RunApi("cuDeviceGetCount", [&](CallScope&) {
    absl::MutexLock lock(&Mu());
    if (CUresult r = fakecuda::CheckInit(); r != CUDA_SUCCESS) return r;
    if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *count = S().device_count;
    return CUDA_SUCCESS;
  });
}

CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  return RunApi("cuDeviceGetName", [&](CallScope&) {
    absl::MutexLock lock(&Mu());
    if (CUresult r = fakecuda::CheckDevice(dev); r != CUDA_SUCCESS) return r;
    if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    std::snprintf(name, static_cast<size_t>(len), "Fake CUDA Device %d", dev);
    return CUDA_SUCCESS;
  });
}

static CUresult GetUuid(CUuuid* uuid, CUdevice dev) {
  absl::MutexLock lock(&Mu());
  if (CUresult r = fakecuda::CheckDevice(dev); r != CUDA_SUCCESS) return r;
  if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::memset(uuid->bytes, 0, sizeof(uuid->bytes));
  std::memcpy(uuid->bytes, "fakecuda", 8);
  uuid->bytes[15] = static_cast<char>(S().physical[dev]);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  return RunApi("cuDeviceGetUuid", [&](CallScope&) { return GetUuid(uuid, dev); });
}

CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  return RunApi("cuDeviceGetUuid_v2", [&](CallScope&) { return GetUuid(uuid, dev); });
}

CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attrib, CUdevice dev) {
  return RunApi("cuDeviceGetAttribute", [&](CallScope&) {
    absl::MutexLock lock(&Mu());
    if (CUresult r = fakecuda::CheckDevice(dev); r != CUDA_SUCCESS) return r;
    if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
    switch (attrib) {  // an H100 SXM's values, where one is asked for
      case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = 1024; break;
      case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: *value = 1024; break;
      case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *value = 1024; break;
      case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *value = 64; break;
      case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *value = 2147483647; break;
      case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: *value = 65535; break;
      case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *value = 65535; break;
      case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *value = 49152; break;
      case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *value = 32; break;
      case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = 132; break;
      case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = 9; break;
      case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = 0; break;
      case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *value = 1; break;
      case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: *value = 1; break;
      case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: *value = dev; break;
      // FAKECUDA_MPS=1: the process is an MPS client (its processes then share SMs on a real GPU).
      case CU_DEVICE_ATTRIBUTE_MPS_ENABLED: {
        const char* mps = std::getenv("FAKECUDA_MPS");
        *value = mps != nullptr && std::strcmp(mps, "1") == 0 ? 1 : 0;
        break;
      }
      default: *value = 0; break;
    }
    return CUDA_SUCCESS;
  });
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  return RunApi("cuDevicePrimaryCtxRetain", [&](CallScope&) {
    absl::MutexLock lock(&Mu());
    if (CUresult r = fakecuda::CheckDevice(dev); r != CUDA_SUCCESS) return r;
    if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
    fakecuda::Context*& ctx = S().primary[dev];
    if (ctx == nullptr) {
      ctx = fakecuda::NewContext(dev, 0);
      ctx->primary = true;
    }
    ++ctx->primary_refs;
    *pctx = reinterpret_cast<CUcontext>(ctx);
    return CUDA_SUCCESS;
  });
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  return RunApi("cuDevicePrimaryCtxRelease", [&](CallScope&) { return fakecuda::PrimaryRelease(dev); });
}
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  return RunApi("cuDevicePrimaryCtxRelease_v2", [&](CallScope&) { return fakecuda::PrimaryRelease(dev); });
}
CUresult cuDevicePrimaryCtxReset(CUdevice dev) {
  return RunApi("cuDevicePrimaryCtxReset", [&](CallScope&) { return fakecuda::PrimaryReset(dev); });
}
CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  return RunApi("cuDevicePrimaryCtxReset_v2", [&](CallScope&) { return fakecuda::PrimaryReset(dev); });
}

CUresult cuCtxCreate(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  return RunApi("cuCtxCreate", [&](CallScope&) { return fakecuda::CreateContext(pctx, flags, dev); });
}
CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  return RunApi("cuCtxCreate_v2", [&](CallScope&) { return fakecuda::CreateContext(pctx, flags, dev); });
}
CUresult cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam*, int, unsigned int flags, CUdevice dev) {
  return RunApi("cuCtxCreate_v3", [&](CallScope&) { return fakecuda::CreateContext(pctx, flags, dev); });
}
CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams*, unsigned int flags, CUdevice dev) {
  return RunApi("cuCtxCreate_v4", [&](CallScope&) { return fakecuda::CreateContext(pctx, flags, dev); });
}

CUresult cuCtxDestroy(CUcontext ctx) {
  return RunApi("cuCtxDestroy", [&](CallScope&) { return fakecuda::DestroyContext(ctx); });
}
CUresult cuCtxDestroy_v2(CUcontext ctx) {
  return RunApi("cuCtxDestroy_v2", [&](CallScope&) { return fakecuda::DestroyContext(ctx); });
}

CUresult cuCtxSetCurrent(CUcontext handle) {
  return RunApi("cuCtxSetCurrent", [&](CallScope&) {
    absl::MutexLock lock(&Mu());
    if (CUresult r = fakecuda::CheckInit(); r != CUDA_SUCCESS) return r;
    fakecuda::Context* ctx = nullptr;
    if (handle != nullptr) {
      ctx = fakecuda::Lookup<fakecuda::Context>(handle, fakecuda::Kind::kContext);
      if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
    }
    fakecuda::SetCurrentContext(ctx);
    return CUDA_SUCCESS;
  });
}

CUresult cuCtxGetCurrent(CUcontext* pctx) {
  return RunApi("cuCtxGetCurrent", [&](CallScope&) {
    absl::MutexLock lock(&Mu());
    if (CUresult r = fakecuda::CheckInit(); r != CUDA_SUCCESS) return r;
    if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *pctx = reinterpret_cast<CUcontext>(fakecuda::CurrentContext());
    return CUDA_SUCCESS;
  });
}

// The profiler API: nothing to profile here; what matters is that the call arrives (call log).
CUresult cuProfilerStart() {
  return RunApi("cuProfilerStart", [&](CallScope&) {
    absl::MutexLock lock(&Mu());
    return fakecuda::CheckInit();
  });
}
CUresult cuProfilerStop() {
  return RunApi("cuProfilerStop", [&](CallScope&) {
    absl::MutexLock lock(&Mu());
    return fakecuda::CheckInit();
  });
}

CUresult cuCtxGetDevice(CUdevice* device) {
  return RunApi("cuCtxGetDevice", [&](CallScope&) { return fakecuda::GetDevice(device, nullptr); });
}
CUresult cuCtxGetDevice_v2(CUdevice* device, CUcontext ctx) {
  return RunApi("cuCtxGetDevice_v2", [&](CallScope&) { return fakecuda::GetDevice(device, ctx); });
}

static CUresult PushCtx(CUcontext handle) {
  absl::MutexLock lock(&Mu());
  if (CUresult r = fakecuda::CheckInit(); r != CUDA_SUCCESS) return r;
  auto* ctx = fakecuda::Lookup<fakecuda::Context>(handle, fakecuda::Kind::kContext);
  if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  fakecuda::PushCurrentContext(ctx);
  return CUDA_SUCCESS;
}

static CUresult PopCtx(CUcontext* pctx) {
  absl::MutexLock lock(&Mu());
  if (CUresult r = fakecuda::CheckInit(); r != CUDA_SUCCESS) return r;
  if (fakecuda::CurrentContext() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  fakecuda::Context* ctx = fakecuda::PopCurrentContext();
  if (pctx != nullptr) *pctx = reinterpret_cast<CUcontext>(ctx);
  return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent(CUcontext ctx) {
  return RunApi("cuCtxPushCurrent", [&](CallScope&) { return PushCtx(ctx); });
}
CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  return RunApi("cuCtxPushCurrent_v2", [&](CallScope&) { return PushCtx(ctx); });
}
CUresult cuCtxPopCurrent(CUcontext* pctx) {
  return RunApi("cuCtxPopCurrent", [&](CallScope&) { return PopCtx(pctx); });
}
CUresult cuCtxPopCurrent_v2(CUcontext* pctx) {
  return RunApi("cuCtxPopCurrent_v2", [&](CallScope&) { return PopCtx(pctx); });
}

CUresult cuCtxSynchronize(void) {
  return RunApi("cuCtxSynchronize", [&](CallScope&) { return fakecuda::SyncCtx(nullptr); });
}
CUresult cuCtxSynchronize_v2(CUcontext ctx) {
  return RunApi("cuCtxSynchronize_v2", [&](CallScope&) { return fakecuda::SyncCtx(ctx); });
}

CUresult cuCtxGetStreamPriorityRange(int* least, int* greatest) {
  return RunApi("cuCtxGetStreamPriorityRange", [&](CallScope&) {
    if (least != nullptr) *least = 0;
    if (greatest != nullptr) *greatest = -5;
    return CUDA_SUCCESS;
  });
}

CUresult cuGetErrorName(CUresult error, const char** str) {
  return RunApi("cuGetErrorName", [&](CallScope&) {
    if (str == nullptr) return CUDA_ERROR_INVALID_VALUE;
    const fakecuda::ErrorText* e = fakecuda::FindError(error);
    *str = e == nullptr ? nullptr : e->name;
    return e == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
  });
}

CUresult cuGetErrorString(CUresult error, const char** str) {
  return RunApi("cuGetErrorString", [&](CallScope&) {
    if (str == nullptr) return CUDA_ERROR_INVALID_VALUE;
    const fakecuda::ErrorText* e = fakecuda::FindError(error);
    *str = e == nullptr ? nullptr : e->text;
    return e == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
  });
}

}  // extern "C"
