#include "tests/scheduler/scripted_driver.h"

#include <cuda.h>

namespace gpuprio_test {

std::atomic<bool> g_gpu_progresses{true};
std::atomic<int> g_events_live{0};
std::atomic<float> g_elapsed_ms{1.0f};
std::atomic<int> g_event_records{0};

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

}  // namespace gpuprio_test
