// A driver client that reports, as key=value lines on stdout, where each of its lookups landed
// (in libcuda, in libgpuprio, elsewhere) and what the driver answered. interception_test runs it
// with and without libgpuprio.so preloaded and compares. It reaches the driver through dlsym on a
// libcuda handle, as cublasLt does, and through cuGetProcAddress_v2, as libcudart does.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace {

std::string Where(const void* p) {
  if (p == nullptr) return "null";
  Dl_info info;
  if (dladdr(p, &info) == 0 || info.dli_fname == nullptr) return "unknown";
  const char* base = std::strrchr(info.dli_fname, '/');
  base = base != nullptr ? base + 1 : info.dli_fname;
  if (std::strncmp(base, "libcuda.so", 10) == 0) return "libcuda";
  if (std::strncmp(base, "libgpuprio.so", 13) == 0) return "libgpuprio";
  if (std::strncmp(base, "libc.so", 7) == 0) return "libc";
  return "other";
}

void Put(const char* key, const std::string& value) { std::printf("%s=%s\n", key, value.c_str()); }
void Put(const char* key, long value) { std::printf("%s=%ld\n", key, value); }

int Fail(const char* what, int code) {
  std::printf("FAILED %s: %d\n", what, code);
  std::fflush(stdout);
  return 1;
}

// Launches the fake driver's `empty` kernel through `launch`; returns the CUresult.
int LaunchEmpty(PFN_cuLaunchKernel_v4000 launch, CUfunction fn) {
  return launch(fn, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr);
}

}  // namespace

int main() {
  void* libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (libcuda == nullptr) return Fail("dlopen libcuda.so.1", 0);

  // Lookups on the libcuda handle, as libraries do.
  auto gpa = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(libcuda, "cuGetProcAddress_v2"));
  Put("dlsym.cuGetProcAddress_v2", Where(reinterpret_cast<void*>(gpa)));
  Put("dlsym.cuLaunchKernel", Where(dlsym(libcuda, "cuLaunchKernel")));
  Put("dlsym.cuLaunchKernel_ptsz", Where(dlsym(libcuda, "cuLaunchKernel_ptsz")));
  Put("dlsym.cuDeviceGetName", Where(dlsym(libcuda, "cuDeviceGetName")));
  Put("dlsym.cuNoSuchFunction", Where(dlsym(libcuda, "cuNoSuchFunction")));
  Put("dlsym.fakecuda_call_count", Where(dlsym(libcuda, "fakecuda_call_count")));
  // The driver's own lookup of one of its entry points.
  using SelfDlsym = void* (*)(const char*);
  if (auto self_dlsym = reinterpret_cast<SelfDlsym>(dlsym(libcuda, "fakecuda_self_dlsym"))) {
    Put("driver_self_dlsym.cuLaunchKernel", Where(self_dlsym("cuLaunchKernel")));
  }
  // Lookups that are not gpuprio's business: other names, RTLD_DEFAULT and RTLD_NEXT.
  Put("dlsym.default.strlen", Where(dlsym(RTLD_DEFAULT, "strlen")));
  Put("dlsym.next.malloc", Where(dlsym(RTLD_NEXT, "malloc")));
  Put("dlsym.next.strlen_matches_default",
      dlsym(RTLD_NEXT, "strlen") == dlsym(RTLD_DEFAULT, "strlen") ? "yes" : "no");
  if (gpa == nullptr) return Fail("dlsym cuGetProcAddress_v2", 0);

  // cudart's start: the "" probe, then the two self-lookups.
  void* fn = reinterpret_cast<void*>(0x1);
  CUdriverProcAddressQueryResult status = static_cast<CUdriverProcAddressQueryResult>(-1);
  Put("probe.result", static_cast<long>(gpa("", &fn, 13000, 0, &status)));
  Put("probe.status", static_cast<long>(status));
  Put("probe.pfn", fn == nullptr ? "null" : Where(fn));
  void* self_v1 = nullptr;
  void* self_v2 = nullptr;
  gpa("cuGetProcAddress", &self_v1, 11030, 0, &status);
  Put("gpa.cuGetProcAddress@11030", Where(self_v1));
  gpa("cuGetProcAddress", &self_v2, 12000, 0, &status);
  Put("gpa.cuGetProcAddress@12000", Where(self_v2));
  auto resolver = reinterpret_cast<PFN_cuGetProcAddress_v12000>(self_v2);
  if (resolver == nullptr) return Fail("self-lookup 12000", 0);

  struct Lookup {
    const char* key;
    const char* name;
    int version;
    cuuint64_t flags;
  };
  const Lookup lookups[] = {
      {"gpa.cuLaunchKernel", "cuLaunchKernel", 12000, 0},
      {"gpa.cuLaunchKernel.ptsz", "cuLaunchKernel", 12000,
       CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM},
      {"gpa.cuLaunchKernelEx", "cuLaunchKernelEx", 12000, 0},
      {"gpa.cuCtxSynchronize@12000", "cuCtxSynchronize", 12000, 0},
      {"gpa.cuCtxSynchronize@13000", "cuCtxSynchronize", 13000, 0},
      {"gpa.cuDeviceGetName", "cuDeviceGetName", 12000, 0},
      {"gpa.cuLaunchKernelEx@11000", "cuLaunchKernelEx", 11000, 0},
      {"gpa.cuNoSuchFunction", "cuNoSuchFunction", 12000, 0},
  };
  for (const Lookup& l : lookups) {
    void* p = reinterpret_cast<void*>(0x1);
    status = static_cast<CUdriverProcAddressQueryResult>(-1);
    const CUresult r = resolver(l.name, &p, l.version, l.flags, &status);
    std::printf("%s=%s result=%d status=%d\n", l.key, p == nullptr ? "null" : Where(p).c_str(),
                static_cast<int>(r), static_cast<int>(status));
  }
  // The v1 ABI through the pointer returned for 11030.
  {
    void* p = nullptr;
    auto v1 = reinterpret_cast<PFN_cuGetProcAddress_v11030>(self_v1);
    const CUresult r = v1("cuStreamSynchronize", &p, 11030, 0);
    std::printf("gpa_v1.cuStreamSynchronize=%s result=%d\n", Where(p).c_str(), static_cast<int>(r));
  }

  // A launch through a pointer obtained with dlsym on the libcuda handle.
  auto init = reinterpret_cast<PFN_cuInit_v2000>(dlsym(libcuda, "cuInit"));
  auto retain = reinterpret_cast<PFN_cuDevicePrimaryCtxRetain_v7000>(
      dlsym(libcuda, "cuDevicePrimaryCtxRetain"));
  auto set_current = reinterpret_cast<PFN_cuCtxSetCurrent_v4000>(dlsym(libcuda, "cuCtxSetCurrent"));
  auto load = reinterpret_cast<PFN_cuModuleLoadData_v2000>(dlsym(libcuda, "cuModuleLoadData"));
  auto get_function =
      reinterpret_cast<PFN_cuModuleGetFunction_v2000>(dlsym(libcuda, "cuModuleGetFunction"));
  auto launch = reinterpret_cast<PFN_cuLaunchKernel_v4000>(dlsym(libcuda, "cuLaunchKernel"));
  auto sync = reinterpret_cast<PFN_cuCtxSynchronize_v2000>(dlsym(libcuda, "cuCtxSynchronize"));
  if (!init || !retain || !set_current || !load || !get_function || !launch || !sync) {
    return Fail("dlsym of the launch path", 0);
  }
  CUcontext ctx = nullptr;
  CUmodule module = nullptr;
  CUfunction empty = nullptr;
  int r = init(0);
  if (r == CUDA_SUCCESS) r = retain(&ctx, 0);
  if (r == CUDA_SUCCESS) r = set_current(ctx);
  if (r == CUDA_SUCCESS) r = load(&module, "gpuprio lookup_probe module");
  if (r == CUDA_SUCCESS) r = get_function(&empty, module, "empty");
  if (r != CUDA_SUCCESS) return Fail("context and module setup", r);
  for (int i = 0; i < 3; ++i) {
    r = LaunchEmpty(launch, empty);
    if (r != CUDA_SUCCESS) return Fail("cuLaunchKernel via dlsym", r);
  }
  if ((r = sync()) != CUDA_SUCCESS) return Fail("cuCtxSynchronize", r);
  Put("launch.dlsym", "ok");

  // A forked child keeps working: it launches through the same wrappers and exits cleanly.
  std::fflush(stdout);
  const pid_t child = fork();
  if (child == 0) {
    // A forked child starts from an uninitialised driver, as with CUDA itself.
    CUcontext child_ctx = nullptr;
    CUmodule child_module = nullptr;
    CUfunction child_empty = nullptr;
    int cr = init(0);
    if (cr == CUDA_SUCCESS) cr = retain(&child_ctx, 0);
    if (cr == CUDA_SUCCESS) cr = set_current(child_ctx);
    if (cr == CUDA_SUCCESS) cr = load(&child_module, "gpuprio lookup_probe module");
    if (cr == CUDA_SUCCESS) cr = get_function(&child_empty, child_module, "empty");
    if (cr == CUDA_SUCCESS) cr = LaunchEmpty(launch, child_empty);
    if (cr == CUDA_SUCCESS) cr = sync();
    _exit(cr == CUDA_SUCCESS ? 0 : 10 + cr);
  }
  int wstatus = 0;
  waitpid(child, &wstatus, 0);
  Put("fork.child_exit", WIFEXITED(wstatus) ? static_cast<long>(WEXITSTATUS(wstatus)) : -1L);
  Put("done", "yes");
  return 0;
}
