// Reports what a preloaded libgpuprio.so made of the environment, for the tests of configuration
// end to end (env_handling_test) and of secure execution (secure_execution_test).
//
//   env_probe LIBCUDA [schedule|cuda-first]
//
// LIBCUDA (the fake driver) is dlopen()ed by absolute path before any CUDA call: a setuid program
// ignores LD_LIBRARY_PATH, and gpuprio finds the driver already loaded by its soname. With
// "schedule", one async memset goes through gpuprio's cuMemsetD8Async, which creates the scheduler
// (with "cuda-first", the same before anything asks gpuprio's C API, whose answers start gpuprio,
// and looked up in the driver's handle as libcudart does: the first use of gpuprio is then its
// dlsym's lookup of cuInit)
// and with it the tracer (GPUPRIO_TRACE, GPUPRIO_CUPTI_LIBRARY).
// Prints key=value lines: mps_client_priority_at_main and mps_client_priority_mark_at_main
// (CUDA_MPS_CLIENT_PRIORITY and GPUPRIO_MPS_CLIENT_PRIORITY_SET as main found them: "unset" or
// the value), at_secure, ruid, euid, gpuprio_mode ("absent" without gpuprio), default_priority,
// scheduled_call, mps_client_priority_at_init (CUDA_MPS_CLIENT_PRIORITY as the fake driver's
// cuInit found it), done=yes. Exits non-zero on any failure.
// ENV_PROBE_SET_PRIORITY=VALUE: main sets GPUPRIO_PRIORITY to VALUE before anything else, as a
// program that chooses its priority itself, after gpuprio was loaded.
#include <cuda.h>
#include <dlfcn.h>
#include <sys/auxv.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

// A setuid process cannot open its own /proc/self/environ (non-dumpable: root owns it), which is
// where the sanitizer runtimes read ASAN_OPTIONS and TSAN_OPTIONS; so a sanitized build of the
// probe carries what the tests would have passed (tests/client_env.cc). Unused otherwise.
extern "C" const char* __asan_default_options() {
  return "verify_asan_link_order=0:detect_leaks=0";
}
extern "C" const char* __tsan_default_options() { return "die_after_fork=0"; }
extern "C" const char* __tsan_default_suppressions() {
  return "race:absl::*::synchronization_internal::Waiter::Post\n";  // tsan_dlopen.supp
}

namespace {

[[noreturn]] void Fail(const char* what) {
  const char* why = dlerror();
  std::fprintf(stderr, "env_probe: %s failed%s%s\n", what, why != nullptr ? ": " : "",
               why != nullptr ? why : "");
  std::exit(1);
}

// Where the scheduled call's driver functions are looked up: RTLD_DEFAULT (the preloaded gpuprio's
// exports come first), or in cuda-first mode the driver's own handle, as libcudart looks them up
// (gpuprio's dlsym answers, and its first lookup of a cu* name starts gpuprio).
void* g_lookup = RTLD_DEFAULT;

template <typename Fn>
Fn Symbol(const char* name) {
  void* symbol = dlsym(g_lookup, name);
  if (symbol == nullptr) Fail(name);
  return reinterpret_cast<Fn>(symbol);
}

void Check(CUresult result, const char* what) {
  if (result != CUDA_SUCCESS) {
    std::fprintf(stderr, "env_probe: %s returned %d\n", what, static_cast<int>(result));
    std::exit(1);
  }
}

void ScheduledCall() {
  Check(Symbol<CUresult (*)(unsigned)>("cuInit")(0), "cuInit");
  CUdevice device = 0;
  Check(Symbol<CUresult (*)(CUdevice*, int)>("cuDeviceGet")(&device, 0), "cuDeviceGet");
  CUcontext context = nullptr;
  Check(Symbol<CUresult (*)(CUcontext*, CUdevice)>("cuDevicePrimaryCtxRetain")(&context, device),
        "cuDevicePrimaryCtxRetain");
  Check(Symbol<CUresult (*)(CUcontext)>("cuCtxSetCurrent")(context), "cuCtxSetCurrent");
  CUstream stream = nullptr;
  Check(Symbol<CUresult (*)(CUstream*, unsigned)>("cuStreamCreate")(&stream, 0), "cuStreamCreate");
  CUdeviceptr memory = 0;
  Check(Symbol<CUresult (*)(CUdeviceptr*, size_t)>("cuMemAlloc_v2")(&memory, 256), "cuMemAlloc");
  Check(Symbol<CUresult (*)(CUdeviceptr, unsigned char, size_t, CUstream)>("cuMemsetD8Async")(
            memory, 7, 256, stream),
        "cuMemsetD8Async");
  Check(Symbol<CUresult (*)(CUstream)>("cuStreamSynchronize")(stream), "cuStreamSynchronize");
  std::printf("scheduled_call=ok\n");
  // What the driver found at its cuInit.
  char mps_priority[64] = "";
  const int set = Symbol<int (*)(char*, uint64_t)>("fakecuda_mps_client_priority_at_init")(
      mps_priority, sizeof mps_priority);
  std::printf("mps_client_priority_at_init=%s\n", set != 0 ? mps_priority : "unset");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: env_probe LIBCUDA [schedule|cuda-first]\n");
    return 2;
  }
  for (const auto& [key, name] :
       {std::pair<const char*, const char*>{"mps_client_priority_at_main",
                                            "CUDA_MPS_CLIENT_PRIORITY"},
        {"mps_client_priority_mark_at_main", "GPUPRIO_MPS_CLIENT_PRIORITY_SET"}}) {
    const char* value = std::getenv(name);
    std::printf("%s=%s\n", key, value != nullptr ? value : "unset");
  }
  if (const char* priority = std::getenv("ENV_PROBE_SET_PRIORITY")) {
    if (setenv("GPUPRIO_PRIORITY", priority, 1) != 0) Fail("setenv");
  }
  std::printf("at_secure=%lu ruid=%d euid=%d\n", getauxval(AT_SECURE), static_cast<int>(getuid()),
              static_cast<int>(geteuid()));
  std::fflush(stdout);
  void* driver = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
  if (driver == nullptr) Fail("dlopen of the driver");
  const bool cuda_first = argc > 2 && std::strcmp(argv[2], "cuda-first") == 0;
  if (cuda_first) {
    g_lookup = driver;
    ScheduledCall();
    g_lookup = RTLD_DEFAULT;  // gpuprio's C API is gpuprio's, not the driver's
  }
  if (dlsym(RTLD_DEFAULT, "gpuprio_mode") == nullptr) {
    std::printf("gpuprio_mode=absent\n");
  } else {
    std::printf("gpuprio_mode=%s\n", Symbol<const char* (*)()>("gpuprio_mode")());
    std::printf("default_priority=%d\n", Symbol<int (*)()>("gpuprio_get_default_priority")());
  }
  if (argc > 2 && std::strcmp(argv[2], "schedule") == 0) ScheduledCall();
  std::printf("done=yes\n");
  std::fflush(stdout);
  return 0;
}
