// Sets up the fake driver the way a -lcuda program does: cuInit, device 0's primary context made
// current, the fake module loaded. For the clients that call the exported driver names.
#ifndef GPUPRIO_TESTS_FAKE_CUDA_CLIENTS_PRIMARY_CONTEXT_H_
#define GPUPRIO_TESTS_FAKE_CUDA_CLIENTS_PRIMARY_CONTEXT_H_

#include <cuda.h>

#include "tests/fake_cuda/clients/client_check.h"

namespace fake_client {

// The module holding the fake kernels (fill_u32, add_u32, ...). Fails the client on any error.
inline CUmodule InitPrimaryContextAndLoadModule() {
  CheckCu(cuInit(0), "cuInit");
  CUdevice dev;
  CheckCu(cuDeviceGet(&dev, 0), "cuDeviceGet");
  CUcontext ctx;
  CheckCu(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  CheckCu(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  static const char kImage[] = "fake module image";
  CUmodule module = nullptr;
  CheckCu(cuModuleLoadData(&module, kImage), "cuModuleLoadData");
  return module;
}

}  // namespace fake_client

#endif  // GPUPRIO_TESTS_FAKE_CUDA_CLIENTS_PRIMARY_CONTEXT_H_
