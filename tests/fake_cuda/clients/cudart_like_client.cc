// A fake client that reaches the driver exactly as libcudart 13 does: dlopen("libcuda.so.1"),
// dlsym(handle, "cuGetProcAddress_v2"), the "" probe, ("cuGetProcAddress", 11030) and
// ("cuGetProcAddress", 12000), then every entry point through the pointer returned for 12000.
// Usage: cudart_like_client launch_forms|params|streams|fork|clusters; exits 0 only if all checks
// pass. clusters: cuLaunchKernelEx with thread-block clusters (which the fake's green contexts
// refuse, as an H100's did under MPS) on the legacy stream and a created one; every launch lands.
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <cuda.h>
#include <cudaTypedefs.h>

#include "tests/fake_cuda/clients/client_check.h"
#include "tests/fake_cuda/fake_cuda_control.h"

using fake_client::Check;
using fake_client::CheckAll;
using fake_client::CheckCu;
using fake_client::Fail;

namespace {

constexpr int kVersion = 13000;
constexpr cuuint64_t kLegacy = CU_GET_PROC_ADDRESS_DEFAULT;
constexpr cuuint64_t kPerThread = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;

void* g_lib = nullptr;
PFN_cuGetProcAddress_v12000 g_resolve = nullptr;

template <typename Fn>
Fn Get(const char* name, cuuint64_t flags = kLegacy) {
  void* p = nullptr;
  CUdriverProcAddressQueryResult status;
  const CUresult r = g_resolve(name, &p, kVersion, flags, &status);
  if (r != CUDA_SUCCESS || status != CU_GET_PROC_ADDRESS_SUCCESS || p == nullptr) {
    Fail((std::string("cuGetProcAddress_v2 could not resolve ") + name).c_str());
  }
  return reinterpret_cast<Fn>(p);
}

// The fake's own controls: plain C symbols of the same library.
template <typename Fn>
Fn Control(const char* name) {
  void* p = dlsym(g_lib, name);
  if (p == nullptr) Fail((std::string("dlsym ") + name).c_str());
  return reinterpret_cast<Fn>(p);
}

void Bootstrap() {
  g_lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (g_lib == nullptr) Fail(dlerror());
  auto entry = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(g_lib, "cuGetProcAddress_v2"));
  Check(entry != nullptr, "dlsym(handle, cuGetProcAddress_v2)");
  void* p = reinterpret_cast<void*>(1);
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
  Check(entry("", &p, kVersion, 0, &status) == CUDA_ERROR_NOT_FOUND, "probe returns NOT_FOUND");
  Check(status == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, "probe status SYMBOL_NOT_FOUND");
  void* v1 = nullptr;
  CheckCu(entry("cuGetProcAddress", &v1, 11030, 0, &status), "cuGetProcAddress at 11030");
  void* v2 = nullptr;
  CheckCu(entry("cuGetProcAddress", &v2, 12000, 0, &status), "cuGetProcAddress at 12000");
  Check(v1 != nullptr && v2 != nullptr && v1 != v2, "distinct v1 and v2 resolvers");
  // The v1 ABI has 4 arguments; it must still work.
  void* init = nullptr;
  CheckCu(reinterpret_cast<PFN_cuGetProcAddress_v11030>(v1)("cuInit", &init, kVersion, 0),
          "v1 resolver");
  g_resolve = reinterpret_cast<PFN_cuGetProcAddress_v12000>(v2);
}

struct Setup {
  CUcontext ctx = nullptr;
  CUmodule module = nullptr;
};

Setup InitContext() {
  Setup s;
  CheckCu(Get<PFN_cuInit_v2000>("cuInit")(0), "cuInit");
  CUdevice dev;
  CheckCu(Get<PFN_cuDeviceGet_v2000>("cuDeviceGet")(&dev, 0), "cuDeviceGet");
  CheckCu(Get<PFN_cuDevicePrimaryCtxRetain_v7000>("cuDevicePrimaryCtxRetain")(&s.ctx, dev),
          "cuDevicePrimaryCtxRetain");
  CheckCu(Get<PFN_cuCtxSetCurrent_v4000>("cuCtxSetCurrent")(s.ctx), "cuCtxSetCurrent");
  static const char kImage[] = "fake module image";
  CheckCu(Get<PFN_cuModuleLoadData_v2000>("cuModuleLoadData")(&s.module, kImage),
          "cuModuleLoadData");
  return s;
}

CUfunction Function(const Setup& s, const char* name) {
  CUfunction f = nullptr;
  CheckCu(Get<PFN_cuModuleGetFunction_v2000>("cuModuleGetFunction")(&f, s.module, name), name);
  return f;
}

CUdeviceptr Alloc(size_t bytes) {
  CUdeviceptr p = 0;
  CheckCu(Get<PFN_cuMemAlloc_v3020>("cuMemAlloc")(&p, bytes), "cuMemAlloc");
  return p;
}

std::vector<uint32_t> ReadBack(CUdeviceptr p, size_t count, cuuint64_t flags) {
  std::vector<uint32_t> out(count);
  CheckCu(Get<PFN_cuMemcpyDtoH_v3020>("cuMemcpyDtoH", flags)(out.data(), p, count * 4),
          "cuMemcpyDtoH");
  return out;
}

int LaunchForms() {
  Setup s = InitContext();
  CUfunction fill = Function(s, "fill_u32");
  CUfunction add = Function(s, "add_u32");
  constexpr uint32_t kCount = 256;
  for (cuuint64_t flags : {kLegacy, kPerThread}) {
    auto launch = Get<PFN_cuLaunchKernel_v4000>("cuLaunchKernel", flags);
    auto launch_ex = Get<PFN_cuLaunchKernelEx_v11060>("cuLaunchKernelEx", flags);
    auto launch_coop = Get<PFN_cuLaunchCooperativeKernel_v9000>("cuLaunchCooperativeKernel", flags);
    CUdeviceptr buf = Alloc(kCount * 4);
    uint32_t value = 7, count = kCount;
    void* fill_args[] = {&buf, &value, &count};
    CheckCu(launch(fill, 1, 1, 1, 256, 1, 1, 0, nullptr, fill_args, nullptr), "cuLaunchKernel");
    uint32_t delta = 1;
    void* add_args[] = {&buf, &delta, &count};
    CUlaunchConfig config{};
    config.gridDimX = config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = 128, config.blockDimY = config.blockDimZ = 1;
    CUlaunchAttribute attr{};
    attr.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attr.value.cooperative = 0;
    config.attrs = &attr;
    config.numAttrs = 1;
    CheckCu(launch_ex(&config, add, add_args, nullptr), "cuLaunchKernelEx kernelParams");
    struct {
      CUdeviceptr buf;
      uint32_t delta;
      uint32_t count;
    } packed{buf, 10, kCount};
    size_t packed_size = sizeof(packed);
    void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE,
                     &packed_size, CU_LAUNCH_PARAM_END};
    CheckCu(launch_ex(&config, add, nullptr, extra), "cuLaunchKernelEx extra");
    delta = 100;
    CheckCu(launch_coop(add, 1, 1, 1, 64, 1, 1, 0, nullptr, add_args), "cuLaunchCooperativeKernel");
    CheckAll(ReadBack(buf, kCount, flags), 118, flags == kLegacy ? "legacy forms" : "per-thread forms");
  }
  auto count = Control<uint64_t (*)(const char*)>("fakecuda_count_calls");
  for (const char* api : {"cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchCooperativeKernel",
                          "cuLaunchCooperativeKernel_ptsz", "cuMemcpyDtoH_v2",
                          "cuMemcpyDtoH_v2_ptds"}) {
    Check(count(api) == 1, (std::string("exactly one call of ") + api).c_str());
  }
  Check(count("cuLaunchKernelEx") == 2 && count("cuLaunchKernelEx_ptsz") == 2,
        "two calls of cuLaunchKernelEx and of cuLaunchKernelEx_ptsz");
  return fake_client::Succeed();
}

int Clusters() {
  Setup s = InitContext();
  CUfunction fill = Function(s, "fill_u32");
  CUfunction add = Function(s, "add_u32");
  constexpr uint32_t kCount = 64;
  auto launch = Get<PFN_cuLaunchKernel_v4000>("cuLaunchKernel", kLegacy);
  auto launch_ex = Get<PFN_cuLaunchKernelEx_v11060>("cuLaunchKernelEx", kLegacy);
  CUstream created = nullptr;
  CheckCu(Get<PFN_cuStreamCreate_v2000>("cuStreamCreate", kLegacy)(&created, 0), "cuStreamCreate");
  for (CUstream stream : {static_cast<CUstream>(nullptr), created}) {
    CUdeviceptr buf = Alloc(kCount * 4);
    uint32_t zero = 0, delta = 3, count = kCount;
    void* fill_args[] = {&buf, &zero, &count};
    CheckCu(launch(fill, 1, 1, 1, 64, 1, 1, 0, stream, fill_args, nullptr), "cuLaunchKernel fill");
    void* args[] = {&buf, &delta, &count};
    CUlaunchConfig config{};
    config.gridDimX = 2, config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = 64, config.blockDimY = config.blockDimZ = 1;
    config.hStream = stream;
    CUlaunchAttribute attr{};
    attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = 2;
    attr.value.clusterDim.y = attr.value.clusterDim.z = 1;
    config.attrs = &attr;
    config.numAttrs = 1;
    for (int i = 0; i < 5; ++i) CheckCu(launch_ex(&config, add, args, nullptr), "clustered launch");
    CheckCu(Get<PFN_cuStreamSynchronize_v2000>("cuStreamSynchronize", kLegacy)(stream),
            "cuStreamSynchronize after clustered launches");
    CheckAll(ReadBack(buf, kCount, kLegacy), 15, stream == nullptr ? "legacy stream" : "created stream");
  }
  return fake_client::Succeed();
}

// Parameter integrity: each launch's arguments live in this frame and are overwritten right
// after the call; the driver must have copied them at call time.
struct Mixed {
  uint8_t a;
  uint64_t b;
  uint32_t c;
  uint16_t d;
  CUdeviceptr out;
};

std::vector<uint8_t> MixedBytes(const Mixed& m) {
  std::vector<uint8_t> bytes(32, 0);
  std::memcpy(&bytes[0], &m.a, 1);
  std::memcpy(&bytes[8], &m.b, 8);
  std::memcpy(&bytes[16], &m.c, 4);
  std::memcpy(&bytes[20], &m.d, 2);
  std::memcpy(&bytes[24], &m.out, 8);
  return bytes;
}

Mixed MixedFor(int i, CUdeviceptr results) {
  return Mixed{static_cast<uint8_t>(i * 7 + 1), 0x0123456789abcdefull ^ static_cast<uint64_t>(i),
               0xdead0000u + static_cast<uint32_t>(i), static_cast<uint16_t>(0xbe00 + i),
               results + static_cast<CUdeviceptr>(8 * i)};
}

void __attribute__((noinline)) LaunchMixed(CUfunction f, int i, CUdeviceptr results) {
  volatile Mixed m = MixedFor(i, results);
  uint8_t a = m.a;
  uint64_t b = m.b;
  uint32_t c = m.c;
  uint16_t d = m.d;
  CUdeviceptr out = m.out;
  void* args[] = {&a, &b, &c, &d, &out};
  const cuuint64_t flags = (i % 2 == 0) ? kLegacy : kPerThread;
  CUlaunchConfig config{};
  config.gridDimX = config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = config.blockDimY = config.blockDimZ = 1;
  uint8_t packed[32];
  std::memset(packed, 0, sizeof(packed));
  const std::vector<uint8_t> expected = MixedBytes(MixedFor(i, results));
  std::memcpy(packed, expected.data(), sizeof(packed));
  size_t size = sizeof(packed);
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                   CU_LAUNCH_PARAM_END};
  switch (i % 4) {
    case 0:
    case 1:
      CheckCu(Get<PFN_cuLaunchKernel_v4000>("cuLaunchKernel", flags)(f, 1, 1, 1, 1, 1, 1, 0,
                                                                     nullptr, args, nullptr),
              "cuLaunchKernel mixed");
      break;
    case 2:
      CheckCu(Get<PFN_cuLaunchKernelEx_v11060>("cuLaunchKernelEx", flags)(&config, f, args, nullptr),
              "cuLaunchKernelEx mixed");
      break;
    default:
      CheckCu(Get<PFN_cuLaunchKernelEx_v11060>("cuLaunchKernelEx", flags)(&config, f, nullptr, extra),
              "cuLaunchKernelEx extra mixed");
      break;
  }
  // Clobber everything the driver could still be reading.
  volatile uint8_t* clobber[] = {reinterpret_cast<volatile uint8_t*>(&a),
                                 reinterpret_cast<volatile uint8_t*>(&b),
                                 reinterpret_cast<volatile uint8_t*>(&c),
                                 reinterpret_cast<volatile uint8_t*>(&d),
                                 reinterpret_cast<volatile uint8_t*>(&out)};
  const size_t sizes[] = {1, 8, 4, 2, 8};
  for (int k = 0; k < 5; ++k) {
    for (size_t j = 0; j < sizes[k]; ++j) clobber[k][j] = 0xa5;
  }
  for (auto& arg : args) arg = nullptr;
  std::memset(packed, 0x5a, sizeof(packed));
  size = 0;
}

int Params() {
  Setup s = InitContext();
  CUfunction mixed = Function(s, "mixed");
  constexpr int kLaunches = 200;
  CUdeviceptr results = Alloc(8 * kLaunches);
  auto call_count = Control<uint64_t (*)()>("fakecuda_call_count");
  auto get_call = Control<int (*)(uint64_t, fakecuda_call_record*)>("fakecuda_get_call");
  auto get_params = Control<uint64_t (*)(uint64_t, void*, uint64_t)>("fakecuda_get_call_params");
  const uint64_t first = call_count();
  for (int i = 0; i < kLaunches; ++i) LaunchMixed(mixed, i, results);
  // At 13000 "cuCtxSynchronize" is the v2 ABI, which takes a context (NULL: the current one).
  CheckCu(Get<PFN_cuCtxSynchronize_v13000>("cuCtxSynchronize")(nullptr), "cuCtxSynchronize");
  int seen = 0;
  for (uint64_t idx = first; idx < call_count(); ++idx) {
    fakecuda_call_record rec;
    Check(get_call(idx, &rec) == 0, "fakecuda_get_call");
    if (std::strcmp(rec.function, "mixed") != 0) continue;
    std::vector<uint8_t> bytes(64, 0);
    const uint64_t n = get_params(idx, bytes.data(), bytes.size());
    Check(n == 32, "mixed logs 32 parameter bytes");
    bytes.resize(32);
    if (bytes != MixedBytes(MixedFor(seen, results))) {
      Fail(("parameter bytes of launch " + std::to_string(seen) + " differ").c_str());
    }
    ++seen;
  }
  Check(seen == kLaunches, "every mixed launch was logged");
  std::vector<uint64_t> sums(kLaunches);
  CheckCu(Get<PFN_cuMemcpyDtoH_v3020>("cuMemcpyDtoH")(sums.data(), results, 8 * kLaunches),
          "cuMemcpyDtoH");
  for (int i = 0; i < kLaunches; ++i) {
    const Mixed m = MixedFor(i, results);
    if (sums[i] != m.a + m.b + m.c + m.d) Fail(("kernel result " + std::to_string(i)).c_str());
  }
  return fake_client::Succeed();
}

int Streams() {
  Setup s = InitContext();
  CUfunction fill = Function(s, "fill_u32");
  CUfunction add = Function(s, "add_u32");
  auto set_duration = Control<void (*)(const char*, uint64_t)>("fakecuda_set_kernel_duration_ns");
  // A slow fill makes an ignored dependency visible: the add would run first and be overwritten.
  set_duration("fill_u32", 2000000);
  auto create = Get<PFN_cuStreamCreateWithPriority_v5050>("cuStreamCreateWithPriority");
  auto ev_create = Get<PFN_cuEventCreate_v2000>("cuEventCreate");
  auto record = Get<PFN_cuEventRecord_v2000>("cuEventRecord");
  auto wait = Get<PFN_cuStreamWaitEvent_v3020>("cuStreamWaitEvent");
  auto launch = Get<PFN_cuLaunchKernel_v4000>("cuLaunchKernel");
  auto sync = Get<PFN_cuStreamSynchronize_v2000>("cuStreamSynchronize");
  CUstream s1, s2, s3;
  CheckCu(create(&s1, 0, 0), "create s1");
  CheckCu(create(&s2, 0, -2), "create s2");
  CheckCu(create(&s3, CU_STREAM_NON_BLOCKING, -5), "create s3");
  CUevent e1, e2;
  CheckCu(ev_create(&e1, 0), "event e1");
  CheckCu(ev_create(&e2, 0), "event e2");
  constexpr uint32_t kCount = 64;
  CUdeviceptr buf = Alloc(kCount * 4);
  uint32_t count = kCount, one = 1, two = 2, three = 3;
  void* fill_args[] = {&buf, &one, &count};
  void* add2[] = {&buf, &two, &count};
  void* add3[] = {&buf, &three, &count};
  CheckCu(launch(fill, 1, 1, 1, 32, 1, 1, 0, s1, fill_args, nullptr), "fill on s1");
  CheckCu(record(e1, s1), "record e1");
  CheckCu(wait(s2, e1, 0), "s2 waits e1");
  CheckCu(launch(add, 1, 1, 1, 32, 1, 1, 0, s2, add2, nullptr), "add on s2");
  CheckCu(record(e2, s2), "record e2");
  CheckCu(wait(s3, e2, 0), "s3 waits e2");
  CheckCu(launch(add, 1, 1, 1, 32, 1, 1, 0, s3, add3, nullptr), "add on s3");
  uint32_t* pinned = nullptr;
  CheckCu(Get<PFN_cuMemAllocHost_v3020>("cuMemAllocHost")(reinterpret_cast<void**>(&pinned),
                                                          kCount * 4),
          "cuMemAllocHost");
  CheckCu(Get<PFN_cuMemcpyDtoHAsync_v3020>("cuMemcpyDtoHAsync")(pinned, buf, kCount * 4, s3),
          "cuMemcpyDtoHAsync");
  CheckCu(sync(s3), "sync s3");
  CheckAll(std::vector<uint32_t>(pinned, pinned + kCount), 6, "event chain");

  // Legacy stream: work on it waits for earlier work of blocking stream s1.
  CUdeviceptr buf2 = Alloc(kCount * 4);
  uint32_t five = 5;
  void* fill2[] = {&buf2, &five, &count};
  void* add1[] = {&buf2, &one, &count};
  CheckCu(launch(fill, 1, 1, 1, 32, 1, 1, 0, s1, fill2, nullptr), "fill on s1");
  CheckCu(launch(add, 1, 1, 1, 32, 1, 1, 0, nullptr, add1, nullptr), "add on legacy stream");
  CheckAll(ReadBack(buf2, kCount, kLegacy), 6, "legacy stream after s1");
  auto destroy = Get<PFN_cuStreamDestroy_v4000>("cuStreamDestroy");
  for (CUstream st : {s1, s2, s3}) CheckCu(destroy(st), "cuStreamDestroy");
  return fake_client::Succeed();
}

int SmallWorkload(const char* who) {
  Setup s = InitContext();
  CUfunction fill = Function(s, "fill_u32");
  CUfunction add = Function(s, "add_u32");
  constexpr uint32_t kCount = 32;
  CUdeviceptr buf = Alloc(kCount * 4);
  uint32_t value = 40, delta = 2, count = kCount;
  void* fill_args[] = {&buf, &value, &count};
  void* add_args[] = {&buf, &delta, &count};
  auto launch = Get<PFN_cuLaunchKernel_v4000>("cuLaunchKernel", kPerThread);
  CheckCu(launch(fill, 1, 1, 1, 32, 1, 1, 0, nullptr, fill_args, nullptr), who);
  CheckCu(launch(add, 1, 1, 1, 32, 1, 1, 0, nullptr, add_args, nullptr), who);
  CheckAll(ReadBack(buf, kCount, kPerThread), 42, who);
  return 0;
}

int Fork() {
  SmallWorkload("parent before fork");
  std::fflush(stdout);
  const pid_t pid = fork();
  Check(pid >= 0, "fork");
  if (pid == 0) {
    fake_client::g_scenario = "fork (child)";
    SmallWorkload("child");
    std::_Exit(0);
  }
  SmallWorkload("parent after fork");
  int status = 0;
  Check(waitpid(pid, &status, 0) == pid, "waitpid");
  Check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child exited 0");
  return fake_client::Succeed();
}

}  // namespace

int main(int argc, char** argv) {
  fake_client::g_client_name = "cudart_like_client";
  if (argc != 2) Fail("usage: cudart_like_client launch_forms|params|streams|fork");
  fake_client::g_scenario = argv[1];
  Bootstrap();
  const std::string scenario = argv[1];
  if (scenario == "launch_forms") return LaunchForms();
  if (scenario == "params") return Params();
  if (scenario == "streams") return Streams();
  if (scenario == "fork") return Fork();
  if (scenario == "clusters") return Clusters();
  Fail("unknown scenario");
}
