// Includes cuda.h the way the driver itself is built: every versioning macro (cuMemAlloc ->
// cuMemAlloc_v2, cuGetProcAddress -> cuGetProcAddress_v2, ...) is undone, so the fake defines
// each concrete ELF name with the ABI cuda.h declares for it (a mismatch fails to compile).
#ifndef GPUPRIO_TESTS_FAKE_CUDA_DRIVER_ABI_H_
#define GPUPRIO_TESTS_FAKE_CUDA_DRIVER_ABI_H_

#ifndef __CUDA_API_VERSION_INTERNAL
#define __CUDA_API_VERSION_INTERNAL 1
#endif
#include <cuda.h>
#include <cudaProfiler.h>

#endif  // GPUPRIO_TESTS_FAKE_CUDA_DRIVER_ABI_H_
