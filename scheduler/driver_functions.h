// The few real driver entry points the scheduler itself calls (context switches, completion
// events, stream properties). hook/ fills this in with the real driver's pointers; tests may fill
// it with the fake driver's. The scheduler never links or dlopens a driver.
#ifndef GPUPRIO_SCHEDULER_DRIVER_FUNCTIONS_H_
#define GPUPRIO_SCHEDULER_DRIVER_FUNCTIONS_H_

#include <cuda.h>

namespace gpuprio::scheduler {

struct DriverFunctions {
  CUresult (*ctx_set_current)(CUcontext) = nullptr;
  CUresult (*ctx_get_current)(CUcontext*) = nullptr;
  CUresult (*ctx_get_device)(CUdevice*) = nullptr;
  CUresult (*stream_get_flags)(CUstream, unsigned int*) = nullptr;
  CUresult (*stream_get_priority)(CUstream, int*) = nullptr;
  // Optional: a created stream's own context and device. With them a stream is scheduled in its
  // own context, on its own device's dispatcher, whatever context is current when it is used (a
  // thread may name another device's stream: CUDA 13 launches there); without them the current
  // context's are taken.
  CUresult (*stream_get_ctx)(CUstream, CUcontext*) = nullptr;
  CUresult (*stream_get_device)(CUstream, CUdevice*) = nullptr;
  CUresult (*event_create)(CUevent*, unsigned int) = nullptr;
  CUresult (*event_record)(CUevent, CUstream) = nullptr;
  CUresult (*event_query)(CUevent) = nullptr;
  CUresult (*event_elapsed_time)(float*, CUevent, CUevent) = nullptr;
  CUresult (*event_destroy)(CUevent) = nullptr;
  // Optional: without it, a process that others wait on polls its work's end (CompletionWatcher).
  CUresult (*event_synchronize)(CUevent) = nullptr;
  // Optional: without it there is no coordination across processes (the GPU's UUID names it).
  CUresult (*device_get_uuid)(CUuuid*, CUdevice) = nullptr;
  // Optional: spatial isolation (green contexts, a CUDA 12.5+ driver); without them it is off.
  // The stream calls are the real, unintercepted entry points.
  CUresult (*device_get_attribute)(int*, CUdevice_attribute, CUdevice) = nullptr;
  CUresult (*device_get_dev_resource)(CUdevice, CUdevResource*, CUdevResourceType) = nullptr;
  CUresult (*dev_sm_resource_split_by_count)(CUdevResource*, unsigned int*, const CUdevResource*,
                                             CUdevResource*, unsigned int, unsigned int) = nullptr;
  CUresult (*dev_resource_generate_desc)(CUdevResourceDesc*, CUdevResource*, unsigned int) =
      nullptr;
  CUresult (*green_ctx_create)(CUgreenCtx*, CUdevResourceDesc, CUdevice, unsigned int) = nullptr;
  CUresult (*green_ctx_destroy)(CUgreenCtx) = nullptr;
  CUresult (*green_ctx_stream_create)(CUstream*, CUgreenCtx, unsigned int, int) = nullptr;
  CUresult (*stream_wait_event)(CUstream, CUevent, unsigned int) = nullptr;
  CUresult (*stream_synchronize)(CUstream) = nullptr;
  CUresult (*stream_destroy)(CUstream) = nullptr;
  bool HasGreenContexts() const {
    return device_get_attribute && device_get_dev_resource && dev_sm_resource_split_by_count &&
           dev_resource_generate_desc && green_ctx_create && green_ctx_destroy &&
           green_ctx_stream_create && stream_wait_event && stream_synchronize && stream_destroy;
  }
  // Called first on every dispatcher thread: the hook marks the thread as the driver's own, so
  // calls the real driver makes into exported cu* names are never intercepted there.
  void (*on_dispatcher_thread_start)() = nullptr;

  bool Complete() const {
    return ctx_set_current && ctx_get_current && ctx_get_device && stream_get_flags &&
           stream_get_priority && event_create && event_record && event_query &&
           event_elapsed_time && event_destroy;
  }
};

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_DRIVER_FUNCTIONS_H_
