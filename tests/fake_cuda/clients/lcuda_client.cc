// A fake client linked like an application built with -lcuda: DT_NEEDED libcuda.so.1 and plain
// calls of the exported driver symbols (including _ptsz/_ptds names, as per-thread builds emit).
// Usage: lcuda_client launch_forms|memcpy|init; exits 0 only if all checks pass. `init` calls
// cuInit first and prints CUDA_MPS_CLIENT_PRIORITY as the fake driver's cuInit found it
// ("mps_client_priority_at_init=unset" or its value).
#include <cuda.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tests/fake_cuda/clients/client_check.h"
#include "tests/fake_cuda/clients/primary_context.h"

// What cuda.h declares only under CUDA_API_PER_THREAD_DEFAULT_STREAM.
extern "C" {
CUresult cuLaunchKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void**, void**);
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig*, CUfunction, void**, void**);
CUresult cuMemcpyDtoH_v2_ptds(void*, CUdeviceptr, size_t);
CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr, const void*, size_t, CUstream);
CUresult cuStreamSynchronize_ptsz(CUstream);
}

using fake_client::Check;
using fake_client::CheckAll;
using fake_client::CheckCu;
using fake_client::Fail;

namespace {

CUmodule g_module = nullptr;

void Init() { g_module = fake_client::InitPrimaryContextAndLoadModule(); }

CUfunction Function(const char* name) {
  CUfunction f;
  CheckCu(cuModuleGetFunction(&f, g_module, name), name);
  return f;
}

int LaunchForms() {
  Init();
  CUfunction fill = Function("fill_u32");
  CUfunction add = Function("add_u32");
  constexpr uint32_t kCount = 128;
  for (bool per_thread : {false, true}) {
    CUdeviceptr buf;
    CheckCu(cuMemAlloc(&buf, kCount * 4), "cuMemAlloc");
    uint32_t value = 3, delta = 1, count = kCount;
    void* fill_args[] = {&buf, &value, &count};
    void* add_args[] = {&buf, &delta, &count};
    CUlaunchConfig config{};
    config.gridDimX = config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = 64, config.blockDimY = config.blockDimZ = 1;
    struct {
      CUdeviceptr buf;
      uint32_t delta;
      uint32_t count;
    } packed{buf, 20, kCount};
    size_t size = sizeof(packed);
    void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                     CU_LAUNCH_PARAM_END};
    std::vector<uint32_t> out(kCount);
    if (per_thread) {
      CheckCu(cuLaunchKernel_ptsz(fill, 1, 1, 1, 64, 1, 1, 0, nullptr, fill_args, nullptr),
              "cuLaunchKernel_ptsz");
      CheckCu(cuLaunchKernelEx_ptsz(&config, add, add_args, nullptr), "cuLaunchKernelEx_ptsz");
      CheckCu(cuLaunchKernelEx_ptsz(&config, add, nullptr, extra), "cuLaunchKernelEx_ptsz extra");
      CheckCu(cuMemcpyDtoH_v2_ptds(out.data(), buf, kCount * 4), "cuMemcpyDtoH_v2_ptds");
      CheckAll(out, 24, "per-thread launches");
    } else {
      CheckCu(cuLaunchKernel(fill, 1, 1, 1, 64, 1, 1, 0, nullptr, fill_args, nullptr),
              "cuLaunchKernel");
      CheckCu(cuLaunchKernelEx(&config, add, add_args, nullptr), "cuLaunchKernelEx");
      CheckCu(cuLaunchKernelEx(&config, add, nullptr, extra), "cuLaunchKernelEx extra");
      CheckCu(cuLaunchCooperativeKernel(add, 1, 1, 1, 64, 1, 1, 0, nullptr, add_args),
              "cuLaunchCooperativeKernel");
      CheckCu(cuMemcpyDtoH(out.data(), buf, kCount * 4), "cuMemcpyDtoH");
      CheckAll(out, 25, "legacy launches");
    }
    // Launch-time validation is immediate, as in CUDA.
    Check(cuLaunchKernel(fill, 1, 1, 1, 1025, 1, 1, 0, nullptr, fill_args, nullptr) ==
              CUDA_ERROR_INVALID_VALUE,
          "1025 threads per block rejected");
    Check(cuLaunchKernel(reinterpret_cast<CUfunction>(&value), 1, 1, 1, 1, 1, 1, 0, nullptr,
                         fill_args, nullptr) == CUDA_ERROR_INVALID_HANDLE,
          "bogus function rejected");
    CheckCu(cuMemFree(buf), "cuMemFree");
  }
  return fake_client::Succeed();
}

int Memcpy() {
  Init();
  constexpr size_t kCount = 1000;
  CUdeviceptr a, b;
  CheckCu(cuMemAlloc(&a, kCount * 4), "cuMemAlloc a");
  CheckCu(cuMemAlloc(&b, kCount * 4), "cuMemAlloc b");
  std::vector<uint32_t> host(kCount);
  for (size_t i = 0; i < kCount; ++i) host[i] = static_cast<uint32_t>(i * 3 + 1);
  CheckCu(cuMemcpyHtoD(a, host.data(), kCount * 4), "cuMemcpyHtoD");
  CheckCu(cuMemcpyDtoD(b, a, kCount * 4), "cuMemcpyDtoD");
  std::vector<uint32_t> back(kCount, 0);
  CheckCu(cuMemcpyDtoH(back.data(), b, kCount * 4), "cuMemcpyDtoH");
  Check(back == host, "HtoD, DtoD, DtoH round trip");

  // A pageable async source is staged at call time: changing it afterwards must not matter.
  CUstream s;
  CheckCu(cuStreamCreate(&s, 0), "cuStreamCreate");
  std::vector<uint32_t> pageable(kCount, 77);
  CheckCu(cuMemcpyHtoDAsync(a, pageable.data(), kCount * 4, s), "cuMemcpyHtoDAsync pageable");
  std::fill(pageable.begin(), pageable.end(), 0u);
  uint32_t* pinned = nullptr;
  CheckCu(cuMemAllocHost(reinterpret_cast<void**>(&pinned), kCount * 4), "cuMemAllocHost");
  CheckCu(cuMemcpyDtoHAsync(pinned, a, kCount * 4, s), "cuMemcpyDtoHAsync pinned");
  CheckCu(cuStreamSynchronize(s), "cuStreamSynchronize");
  CheckAll(std::vector<uint32_t>(pinned, pinned + kCount), 77, "staged pageable copy");

  unsigned type = 0;
  CheckCu(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a), "attr device");
  Check(type == CU_MEMORYTYPE_DEVICE, "device memory type");
  CheckCu(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                reinterpret_cast<CUdeviceptr>(pinned)),
          "attr pinned");
  Check(type == CU_MEMORYTYPE_HOST, "pinned memory type");
  Check(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                              reinterpret_cast<CUdeviceptr>(pageable.data())) ==
            CUDA_ERROR_INVALID_VALUE,
        "pageable memory has no attributes");

  CheckCu(cuMemsetD32(a, 0x01020304u, kCount), "cuMemsetD32");
  CheckCu(cuMemsetD16Async(a, 0xaaaa, 2, s), "cuMemsetD16Async");
  CheckCu(cuMemsetD8Async(a + 4, 0x55, 1, s), "cuMemsetD8Async");
  CheckCu(cuStreamSynchronize(s), "cuStreamSynchronize");
  CheckCu(cuMemcpyDtoH(back.data(), a, kCount * 4), "cuMemcpyDtoH");
  Check(back[0] == 0xaaaaaaaau, "memset D16 over D32");
  Check(back[1] == 0x01020355u, "memset D8 over D32");
  Check(back[2] == 0x01020304u && back[kCount - 1] == 0x01020304u, "memset D32");

  // Per-thread copies through the _ptsz/_ptds exports.
  std::vector<uint32_t> ones(kCount, 1);
  CheckCu(cuMemcpyHtoDAsync_v2_ptsz(b, ones.data(), kCount * 4, nullptr), "HtoDAsync_v2_ptsz");
  CheckCu(cuStreamSynchronize_ptsz(nullptr), "cuStreamSynchronize_ptsz");
  CheckCu(cuMemcpyDtoH_v2_ptds(back.data(), b, kCount * 4), "cuMemcpyDtoH_v2_ptds");
  Check(back == ones, "per-thread copies");

  CheckCu(cuMemFreeHost(pinned), "cuMemFreeHost");
  CheckCu(cuStreamDestroy(s), "cuStreamDestroy");
  CheckCu(cuMemFree(a), "cuMemFree a");
  CheckCu(cuMemFree(b), "cuMemFree b");
  return fake_client::Succeed();
}

}  // namespace

// The fake's control API, looked up at run time (this client links only the driver's names).
int InitScenario() {
  CheckCu(cuInit(0), "cuInit");
  using AtInit = int (*)(char*, uint64_t);
  auto at_init =
      reinterpret_cast<AtInit>(dlsym(RTLD_DEFAULT, "fakecuda_mps_client_priority_at_init"));
  Check(at_init != nullptr, "fakecuda_mps_client_priority_at_init found");
  char value[64] = "";
  const int set = at_init(value, sizeof value);
  std::printf("mps_client_priority_at_init=%s\n", set != 0 ? value : "unset");
  return 0;
}

int main(int argc, char** argv) {
  fake_client::g_client_name = "lcuda_client";
  if (argc != 2) Fail("usage: lcuda_client launch_forms|memcpy|init");
  fake_client::g_scenario = argv[1];
  const std::string scenario = argv[1];
  if (scenario == "launch_forms") return LaunchForms();
  if (scenario == "memcpy") return Memcpy();
  if (scenario == "init") return InitScenario();
  Fail("unknown scenario");
}
