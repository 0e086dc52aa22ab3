#include "tests/scheduler/scripted_driver.h"

#include <cuda.h>

#include <chrono>
#include <thread>

#include "tests/fake_cuda/sm_resource.h"

namespace gpuprio_test {

std::atomic<bool> g_gpu_progresses{true};
std::atomic<int> g_events_live{0};
std::atomic<float> g_elapsed_ms{1.0f};
std::atomic<int> g_event_records{0};
std::atomic<int> g_green_streams_created{0};

namespace {

CUresult SetCurrent(CUcontext) { return CUDA_SUCCESS; }
CUresult GetCurrent(CUcontext* c) {
  *c = reinterpret_cast<CUcontext>(kScriptedContext);
  return CUDA_SUCCESS;
}
CUresult GetDevice(CUdevice* d) {
  *d = 0;
  return CUDA_SUCCESS;
}
CUresult Flags(CUstream s, unsigned int* f) {
  *f = (reinterpret_cast<uintptr_t>(s) & 1) != 0 ? 0 : CU_STREAM_NON_BLOCKING;
  return CUDA_SUCCESS;
}
CUresult Priority(CUstream, int* p) {
  *p = 0;
  return CUDA_SUCCESS;
}
// Handles are numbers, not allocations: a dispatcher keeps its pooled events for the process's
// lifetime, and a test's dispatcher is destroyed with some of them still pooled.
std::atomic<uintptr_t> g_next_event{0x100000};
CUresult EventCreate(CUevent* e, unsigned int) {
  *e = reinterpret_cast<CUevent>(g_next_event.fetch_add(16));
  ++g_events_live;
  return CUDA_SUCCESS;
}
CUresult EventRecord(CUevent, CUstream) {
  ++g_event_records;
  return CUDA_SUCCESS;
}
CUresult EventQuery(CUevent) {
  return g_gpu_progresses.load() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
CUresult Elapsed(float* ms, CUevent, CUevent) {
  *ms = g_elapsed_ms.load();
  return CUDA_SUCCESS;
}
CUresult EventDestroy(CUevent) {
  --g_events_live;
  return CUDA_SUCCESS;
}

// Green contexts. Handles are numbers, as for events; a desc or green context is never looked
// at again, so none is kept.
constexpr uintptr_t kGreenContext = 0x5000;
constexpr uintptr_t kResourceDesc = 0x6000;
std::atomic<uintptr_t> g_next_green_stream{0x700000};  // even: non-blocking (Flags)

// Green contexts exist on every device below kScriptedDevices (dispatchers of several devices).
bool ScriptedDevice(CUdevice device) { return device >= 0 && device < kScriptedDevices; }

CUresult DeviceAttribute(int* value, CUdevice_attribute attribute, CUdevice device) {
  if (value == nullptr || !ScriptedDevice(device)) return CUDA_ERROR_INVALID_VALUE;
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      *value = static_cast<int>(fakecuda::kDeviceSms);
      return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MPS_ENABLED:
      *value = 0;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;  // not scripted
  }
}
CUresult DevResource(CUdevice device, CUdevResource* resource, CUdevResourceType type) {
  if (!ScriptedDevice(device) || resource == nullptr || type != CU_DEV_RESOURCE_TYPE_SM) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *resource = fakecuda::SmResource(fakecuda::kDeviceSms);
  return CUDA_SUCCESS;
}
// Up to *groups groups of `min_count` SMs rounded up to whole groups of 8 (as many as fit); the
// rest in `remaining`.
CUresult SplitByCount(CUdevResource* result, unsigned int* groups, const CUdevResource* input,
                      CUdevResource* remaining, unsigned int flags, unsigned int min_count) {
  if (groups == nullptr || input == nullptr || input->type != CU_DEV_RESOURCE_TYPE_SM ||
      flags != 0 || min_count == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const unsigned size = fakecuda::SmGroupSize(min_count);
  const unsigned fit = input->sm.smCount / size;
  if (fit == 0) return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
  const unsigned made = result == nullptr ? fit : (*groups < fit ? *groups : fit);
  for (unsigned i = 0; result != nullptr && i < made; ++i) result[i] = fakecuda::SmResource(size);
  if (remaining != nullptr) *remaining = fakecuda::SmResource(input->sm.smCount - made * size);
  *groups = made;
  return CUDA_SUCCESS;
}
CUresult GenerateDesc(CUdevResourceDesc* desc, CUdevResource* resources, unsigned int count) {
  if (desc == nullptr || resources == nullptr || count == 0) return CUDA_ERROR_INVALID_VALUE;
  *desc = reinterpret_cast<CUdevResourceDesc>(kResourceDesc);
  return CUDA_SUCCESS;
}
CUresult GreenCreate(CUgreenCtx* green, CUdevResourceDesc desc, CUdevice device,
                     unsigned int flags) {
  if (green == nullptr || desc != reinterpret_cast<CUdevResourceDesc>(kResourceDesc) ||
      !ScriptedDevice(device) || flags != CU_GREEN_CTX_DEFAULT_STREAM) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *green = reinterpret_cast<CUgreenCtx>(kGreenContext);
  return CUDA_SUCCESS;
}
CUresult GreenDestroy(CUgreenCtx green) {
  return green == reinterpret_cast<CUgreenCtx>(kGreenContext) ? CUDA_SUCCESS
                                                               : CUDA_ERROR_INVALID_HANDLE;
}
CUresult GreenStreamCreate(CUstream* stream, CUgreenCtx green, unsigned int flags, int) {
  if (green != reinterpret_cast<CUgreenCtx>(kGreenContext)) return CUDA_ERROR_INVALID_HANDLE;
  // The driver takes only non-blocking streams in a green context.
  if (stream == nullptr || flags != CU_STREAM_NON_BLOCKING) return CUDA_ERROR_INVALID_VALUE;
  *stream = reinterpret_cast<CUstream>(g_next_green_stream.fetch_add(16));
  ++g_green_streams_created;
  return CUDA_SUCCESS;
}
CUresult StreamWaitEvent(CUstream, CUevent, unsigned int) { return CUDA_SUCCESS; }
// A stream's work is done once the GPU progresses (as for events): the call blocks until then.
CUresult StreamSynchronize(CUstream) {
  while (!g_gpu_progresses.load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
  return CUDA_SUCCESS;
}
CUresult StreamDestroy(CUstream) { return CUDA_SUCCESS; }

}  // namespace

gpuprio::scheduler::DriverFunctions ScriptedDriver() {
  gpuprio::scheduler::DriverFunctions d;
  d.ctx_set_current = &SetCurrent;
  d.ctx_get_current = &GetCurrent;
  d.ctx_get_device = &GetDevice;
  d.stream_get_flags = &Flags;
  d.stream_get_priority = &Priority;
  d.event_create = &EventCreate;
  d.event_record = &EventRecord;
  d.event_query = &EventQuery;
  d.event_elapsed_time = &Elapsed;
  d.event_destroy = &EventDestroy;
  return d;
}

gpuprio::scheduler::DriverFunctions ScriptedDriverWithGreenContexts() {
  gpuprio::scheduler::DriverFunctions d = ScriptedDriver();
  d.device_get_attribute = &DeviceAttribute;
  d.device_get_dev_resource = &DevResource;
  d.dev_sm_resource_split_by_count = &SplitByCount;
  d.dev_resource_generate_desc = &GenerateDesc;
  d.green_ctx_create = &GreenCreate;
  d.green_ctx_destroy = &GreenDestroy;
  d.green_ctx_stream_create = &GreenStreamCreate;
  d.stream_wait_event = &StreamWaitEvent;
  d.stream_synchronize = &StreamSynchronize;
  d.stream_destroy = &StreamDestroy;
  return d;
}

}  // namespace gpuprio_test
