// A program linked with a library that used CUDA in its constructor (cuda_in_constructor_library):
// it adds 1 to the library's buffer 1000 times on the same stream (work enough to keep a dispatcher
// thread busy) and checks every word is 1007. Exits 0 only if so. Usage: cuda_in_constructor_client
#include <cuda.h>

#include <cstdint>
#include <vector>

#include "tests/fake_cuda/clients/client_check.h"

extern "C" CUdeviceptr CudaInConstructorBuffer();
extern "C" CUmodule CudaInConstructorModule();

int main() {
  using fake_client::Check;
  using fake_client::CheckCu;
  fake_client::g_client_name = "cuda_in_constructor_client";
  fake_client::g_scenario = "after_constructor";
  CUdeviceptr buffer = CudaInConstructorBuffer();
  Check(buffer != 0, "the library's constructor allocated its buffer");
  CUfunction add;
  CheckCu(cuModuleGetFunction(&add, CudaInConstructorModule(), "add_u32"), "add_u32");
  uint32_t delta = 1, count = 128;
  void* args[] = {&buffer, &delta, &count};
  for (int i = 0; i < 1000; ++i) {
    CheckCu(cuLaunchKernel(add, 1, 1, 1, 64, 1, 1, 0, nullptr, args, nullptr), "cuLaunchKernel");
  }
  std::vector<uint32_t> out(count);
  CheckCu(cuMemcpyDtoH(out.data(), buffer, count * 4), "cuMemcpyDtoH");
  fake_client::CheckAll(out, 1007, "the library's fill, then the program's adds");
  return fake_client::Succeed();
}
