// A shared library that uses CUDA in its constructor, as libraries with static CUDA state do. A
// program that links it runs that constructor before a preloaded libgpuprio.so's own (the loader
// initialises the program's dependencies before the preloaded libraries), so gpuprio starts, and
// schedules work, before its constructor has run. CudaInConstructorBuffer() returns the buffer
// the constructor filled (128 words of 7) on the primary context's legacy stream, unsynchronised.
#include <cuda.h>

#include <cstdint>

#include "tests/fake_cuda/clients/client_check.h"
#include "tests/fake_cuda/clients/primary_context.h"

namespace {

CUdeviceptr g_buffer = 0;
CUmodule g_module = nullptr;

__attribute__((constructor)) void UseCudaAtLoad() {
  using fake_client::CheckCu;
  fake_client::g_scenario = "library constructor";
  g_module = fake_client::InitPrimaryContextAndLoadModule();
  CUfunction fill;
  CheckCu(cuModuleGetFunction(&fill, g_module, "fill_u32"), "fill_u32");
  CheckCu(cuMemAlloc(&g_buffer, 128 * 4), "cuMemAlloc");
  uint32_t value = 7, count = 128;
  void* args[] = {&g_buffer, &value, &count};
  CheckCu(cuLaunchKernel(fill, 1, 1, 1, 64, 1, 1, 0, nullptr, args, nullptr), "cuLaunchKernel");
}

}  // namespace

extern "C" CUdeviceptr CudaInConstructorBuffer() { return g_buffer; }
extern "C" CUmodule CudaInConstructorModule() { return g_module; }
