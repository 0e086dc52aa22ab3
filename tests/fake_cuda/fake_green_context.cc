// Green contexts in the fake driver: an H100's 132 SMs split in groups of 8, green contexts whose
// streams record the SMs their work may use (fakecuda_exec_record::sm_count), and events that
// cross contexts freely, as on the real driver. The virtual device runs one op at a time, so
// partitions change what is recorded, not timing.
#include <cstdlib>
#include <cstring>

#include "tests/fake_cuda/call_log.h"
#include "tests/fake_cuda/fake_state.h"

namespace fakecuda {
namespace {

// FAKECUDA_GREEN_CONTEXTS=0 in a client's environment: a driver without green contexts from the
// start (fakecuda_set_green_contexts does the same from inside a process).
bool NoGreenContextsByEnvironment() {
  static const bool none = [] {
    const char* v = std::getenv("FAKECUDA_GREEN_CONTEXTS");
    return v != nullptr && std::strcmp(v, "0") == 0;
  }();
  return none;
}

CUresult GetDevResource(CUdevice device, CUdevResource* resource, CUdevResourceType type) {
  absl::MutexLock lock(&Mu());
  if (CUresult r = CheckInit(); r != CUDA_SUCCESS) return r;
  if (device < 0 || device >= S().device_count) return CUDA_ERROR_INVALID_DEVICE;
  if (!S().green_contexts || NoGreenContextsByEnvironment()) return CUDA_ERROR_NOT_SUPPORTED;
  if (resource == nullptr || type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_VALUE;
  *resource = SmResource(kDeviceSms);
  return CUDA_SUCCESS;
}

// As the driver documents it: groups of at least `min_count` SMs (rounded up to the
// granularity), as many as asked for and as fit; the rest in `remaining`.
CUresult SplitByCount(CUdevResource* result, unsigned* groups, const CUdevResource* input,
                      CUdevResource* remaining, unsigned flags, unsigned min_count) {
  if (groups == nullptr || input == nullptr || input->type != CU_DEV_RESOURCE_TYPE_SM ||
      flags != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const unsigned size = SmGroupSize(min_count);
  const unsigned fit = input->sm.smCount / size;
  if (fit == 0) return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
  const unsigned made = result == nullptr ? fit : std::min(*groups, fit);
  for (unsigned i = 0; result != nullptr && i < made; ++i) result[i] = SmResource(size);
  if (remaining != nullptr) *remaining = SmResource(input->sm.smCount - made * size);
  *groups = made;
  return CUDA_SUCCESS;
}

CUresult GenerateDesc(CUdevResourceDesc* out, CUdevResource* resources, unsigned count) {
  absl::MutexLock lock(&Mu());
  if (out == nullptr || resources == nullptr || count == 0) return CUDA_ERROR_INVALID_VALUE;
  auto* desc = new ResourceDesc;
  for (unsigned i = 0; i < count; ++i) {
    if (resources[i].type != CU_DEV_RESOURCE_TYPE_SM) {
      delete desc;
      return CUDA_ERROR_INVALID_RESOURCE_TYPE;
    }
    desc->sm_count += resources[i].sm.smCount;
  }
  Register(desc, Kind::kResourceDesc);
  *out = reinterpret_cast<CUdevResourceDesc>(desc);
  return CUDA_SUCCESS;
}

CUresult CreateGreen(CUgreenCtx* out, CUdevResourceDesc handle, CUdevice device, unsigned flags) {
  absl::MutexLock lock(&Mu());
  if (CUresult r = CheckInit(); r != CUDA_SUCCESS) return r;
  if (device < 0 || device >= S().device_count) return CUDA_ERROR_INVALID_DEVICE;
  auto* desc = Lookup<ResourceDesc>(handle, Kind::kResourceDesc);
  if (out == nullptr || desc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  // The driver requires the default-stream flag (a green context has no other kind).
  if (flags != CU_GREEN_CTX_DEFAULT_STREAM) return CUDA_ERROR_INVALID_VALUE;
  Context* ctx = NewContext(device, 0);
  ctx->green = true;
  ctx->sm_count = desc->sm_count;
  auto* green = new GreenContext{ctx};
  ctx->green_handle = green;
  Register(green, Kind::kGreenContext);
  *out = reinterpret_cast<CUgreenCtx>(green);
  return CUDA_SUCCESS;
}

CUresult DestroyGreen(CUgreenCtx handle) {
  absl::MutexLock lock(&Mu());
  auto* green = Lookup<GreenContext>(handle, Kind::kGreenContext);
  if (green == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  // Its streams' queued work still runs; the objects are leaked so those ops keep their owners.
  Unregister(green);
  return CUDA_SUCCESS;
}

CUresult FromGreen(CUcontext* out, CUgreenCtx handle) {
  absl::MutexLock lock(&Mu());
  auto* green = Lookup<GreenContext>(handle, Kind::kGreenContext);
  if (green == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *out = reinterpret_cast<CUcontext>(green->ctx);
  return CUDA_SUCCESS;
}

CUresult GreenStream(CUstream* out, CUgreenCtx handle, unsigned flags, int priority) {
  absl::MutexLock lock(&Mu());
  auto* green = Lookup<GreenContext>(handle, Kind::kGreenContext);
  if (green == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  // The driver requires CU_STREAM_NON_BLOCKING for green context streams.
  if (out == nullptr || flags != CU_STREAM_NON_BLOCKING) return CUDA_ERROR_INVALID_VALUE;
  *out = reinterpret_cast<CUstream>(NewStream(green->ctx, flags, priority, StreamRole::kUser));
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace fakecuda

using fakecuda::CallScope;
using fakecuda::RunApi;

extern "C" {

CUresult cuDeviceGetDevResource(CUdevice device, CUdevResource* resource,
                                CUdevResourceType type) {
  return RunApi("cuDeviceGetDevResource",
                [&](CallScope&) { return fakecuda::GetDevResource(device, resource, type); });
}
CUresult cuDevSmResourceSplitByCount(CUdevResource* result, unsigned int* groups,
                                     const CUdevResource* input, CUdevResource* remaining,
                                     unsigned int flags, unsigned int min_count) {
  return RunApi("cuDevSmResourceSplitByCount", [&](CallScope&) {
    return fakecuda::SplitByCount(result, groups, input, remaining, flags, min_count);
  });
}
CUresult cuDevResourceGenerateDesc(CUdevResourceDesc* out, CUdevResource* resources,
                                   unsigned int count) {
  return RunApi("cuDevResourceGenerateDesc",
                [&](CallScope&) { return fakecuda::GenerateDesc(out, resources, count); });
}
CUresult cuGreenCtxCreate(CUgreenCtx* out, CUdevResourceDesc desc, CUdevice device,
                          unsigned int flags) {
  return RunApi("cuGreenCtxCreate",
                [&](CallScope&) { return fakecuda::CreateGreen(out, desc, device, flags); });
}
CUresult cuGreenCtxDestroy(CUgreenCtx green) {
  return RunApi("cuGreenCtxDestroy", [&](CallScope&) { return fakecuda::DestroyGreen(green); });
}
CUresult cuCtxFromGreenCtx(CUcontext* out, CUgreenCtx green) {
  return RunApi("cuCtxFromGreenCtx", [&](CallScope&) { return fakecuda::FromGreen(out, green); });
}
CUresult cuGreenCtxStreamCreate(CUstream* out, CUgreenCtx green, unsigned int flags,
                                int priority) {
  return RunApi("cuGreenCtxStreamCreate", [&](CallScope&) {
    return fakecuda::GreenStream(out, green, flags, priority);
  });
}

}  // extern "C"
