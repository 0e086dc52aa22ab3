// The kernels every fake module contains, found by name (module images are not parsed).
//
//   empty()                                          does nothing
//   fill_u32(CUdeviceptr dst, u32 value, u32 count)  dst[i] = value
//   add_u32(CUdeviceptr buf, u32 delta, u32 count)   buf[i] += delta
//   copy_u32(CUdeviceptr dst, CUdeviceptr src, u32 count)
//   append_u32(CUdeviceptr log, u32 value)           log[1 + log[0]++] = value (execution order)
//   sleep_ns(u64 ns)                                 runs for ns nanoseconds
//   mixed(u8 a, u64 b, u32 c, u16 d, CUdeviceptr out)  *(u64*)out = a + b + c + d if out != 0;
//                                                    offsets 0, 8, 16, 20, 24 (32 bytes)
//   rendezvous_u32(CUdeviceptr mine, CUdeviceptr peer)  one rank of a fake collective: *mine = 1,
//                                                    then spins on the executor (occupying the
//                                                    device, as a real collective kernel holds
//                                                    its SMs) until *peer == 1; fails with
//                                                    CUDA_ERROR_LAUNCH_TIMEOUT after 20 s, so a
//                                                    peer that never comes cannot hang a test
// Device pointers are host addresses (fake device memory is host heap).
#ifndef GPUPRIO_TESTS_FAKE_CUDA_BUILTIN_KERNELS_H_
#define GPUPRIO_TESTS_FAKE_CUDA_BUILTIN_KERNELS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tests/fake_cuda/driver_abi.h"

namespace fakecuda {

struct ParamSlot {
  size_t offset;
  size_t size;
};

struct BuiltinKernel {
  const char* name;
  std::vector<ParamSlot> params;
  size_t param_size;                  // declared parameter space, padding included
  // Applies the kernel's effect on "device memory"; anything but CUDA_SUCCESS is the op's
  // asynchronous error (as a kernel that traps).
  CUresult (*run)(const uint8_t* params);
  bool duration_from_param;           // sleep_ns: the first u64 parameter is the duration
};

// nullptr if no built-in kernel has that name.
const BuiltinKernel* FindBuiltinKernel(const char* name);
const std::vector<BuiltinKernel>& AllBuiltinKernels();

}  // namespace fakecuda

#endif  // GPUPRIO_TESTS_FAKE_CUDA_BUILTIN_KERNELS_H_
