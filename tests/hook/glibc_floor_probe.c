/* The program //tests/hook:glibc_floor_test runs under Debian 11's glibc 2.31 (its own loader and
 * libraries, nothing of the host's), with libgpuprio.so preloaded: written in C and linked against
 * glibc 2.31 itself (GLIBC_FLOOR_LINKOPTS), so that it needs nothing newer than that glibc. It
 * reaches the driver as the CUDA runtime does, dlopen("libcuda.so.1") (the fake driver, linked the
 * same way), through dlsym, which gpuprio intercepts, and makes real driver calls: cuInit, a
 * context, a module, two streams, kernel launches through cuLaunchKernel on them (a high-priority
 * chain, then low-priority work that gpuprio holds back until its dispatcher thread issues it),
 * cuStreamSynchronize and the results read back. It then prints what gpuprio's scheduler did (gpuprio_get_stats), the glibc it ran on
 * and every file mapped into the process, and "probe: ok" if every check passed. Exit 0 only then. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <gnu/libc-version.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "gpuprio.h"

static void* g_cuda;

static void Fail(const char* what) {
  printf("probe: FAILED: %s\n", what);
  fflush(stdout);
  exit(1);
}

/* The driver entry point `name` (cuda.h's versioned name, e.g. cuMemAlloc_v2), through dlsym. */
static void* Get(const char* name) {
  void* p = dlsym(g_cuda, name);
  if (p == NULL) {
    printf("probe: FAILED: dlsym(libcuda, %s): %s\n", name, dlerror());
    exit(1);
  }
  return p;
}
#define STRINGIFY2(x) #x
#define STRINGIFY(x) STRINGIFY2(x)
/* DRIVER(cuMemAlloc) is cuda.h's cuMemAlloc_v2, typed, from the fake libcuda through dlsym. */
#define DRIVER(fn) ((__typeof__(fn)*)Get(STRINGIFY(fn)))

static void Check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) {
    printf("probe: FAILED: %s returned CUresult %d\n", what, (int)r);
    exit(1);
  }
}

int main(void) {
  enum { kCount = 256, kLaunches = 40 };
  printf("glibc: %s\n", gnu_get_libc_version());
  g_cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (g_cuda == NULL) Fail(dlerror());
  const char* (*mode)(void) = (const char* (*)(void))dlsym(RTLD_DEFAULT, "gpuprio_mode");
  if (mode == NULL) Fail("gpuprio_mode not found: libgpuprio.so is not loaded");

  Check(DRIVER(cuInit)(0), "cuInit");
  CUdevice device;
  Check(DRIVER(cuDeviceGet)(&device, 0), "cuDeviceGet");
  CUcontext context;
  Check(DRIVER(cuDevicePrimaryCtxRetain)(&context, device), "cuDevicePrimaryCtxRetain");
  Check(DRIVER(cuCtxSetCurrent)(context), "cuCtxSetCurrent");
  static const char kImage[] = "fake module image";
  CUmodule module;
  Check(DRIVER(cuModuleLoadData)(&module, kImage), "cuModuleLoadData");
  CUfunction fill, add;
  Check(DRIVER(cuModuleGetFunction)(&fill, module, "fill_u32"), "cuModuleGetFunction fill_u32");
  Check(DRIVER(cuModuleGetFunction)(&add, module, "add_u32"), "cuModuleGetFunction add_u32");
  /* Each add_u32 runs 1 ms on the virtual device. The thread launches a high-priority chain on
   * one stream, then low-priority work on another while the chain is still in flight: gpuprio holds
   * the low-priority launches back and its dispatcher thread issues them later. */
  void (*set_duration)(const char*, uint64_t) =
      (void (*)(const char*, uint64_t))Get("fakecuda_set_kernel_duration_ns");
  set_duration("add_u32", 1000000);
  int (*set_priority)(int) = (int (*)(int))dlsym(RTLD_DEFAULT, "gpuprio_set_thread_priority");
  if (set_priority == NULL) Fail("gpuprio_set_thread_priority not found");
  __typeof__(cuLaunchKernel)* launch = DRIVER(cuLaunchKernel);
  CUstream streams[2];
  CUdeviceptr buffers[2];
  const int priorities[2] = {GPUPRIO_PRIORITY_HIGH, GPUPRIO_PRIORITY_LOW};
  const int launches[2] = {kLaunches / 4, kLaunches - kLaunches / 4};
  uint32_t value = 5, count = kCount, delta = 3;
  for (int s = 0; s < 2; ++s) {
    Check(DRIVER(cuStreamCreate)(&streams[s], CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    Check(DRIVER(cuMemAlloc)(&buffers[s], kCount * sizeof(uint32_t)), "cuMemAlloc");
    if (set_priority(priorities[s]) != 0) Fail("gpuprio_set_thread_priority");
    void* fill_args[] = {&buffers[s], &value, &count};
    Check(launch(fill, 1, 1, 1, kCount, 1, 1, 0, streams[s], fill_args, NULL),
          "cuLaunchKernel fill_u32");
    void* add_args[] = {&buffers[s], &delta, &count};
    for (int i = 0; i < launches[s]; ++i) {
      Check(launch(add, 1, 1, 1, kCount, 1, 1, 0, streams[s], add_args, NULL),
            "cuLaunchKernel add_u32");
    }
  }
  set_priority(GPUPRIO_PRIORITY_UNSET);
  for (int s = 0; s < 2; ++s) {
    Check(DRIVER(cuStreamSynchronize)(streams[s]), "cuStreamSynchronize");
    uint32_t host[kCount];
    Check(DRIVER(cuMemcpyDtoH)(host, buffers[s], sizeof(host)), "cuMemcpyDtoH");
    const uint32_t expected = 5 + 3 * (uint32_t)launches[s];
    for (int i = 0; i < kCount; ++i) {
      if (host[i] != expected) {
        printf("probe: FAILED: stream %d element %d is %u, expected %u\n", s, i, host[i], expected);
        return 1;
      }
    }
    printf("launches: %d on stream %d (priority %d), every element %u\n", 1 + launches[s], s,
           priorities[s], expected);
  }
  uint64_t (*count_calls)(const char*) = (uint64_t(*)(const char*))Get("fakecuda_count_calls");
  printf("driver: cuLaunchKernel reached the driver %llu times\n",
         (unsigned long long)count_calls("cuLaunchKernel"));
  if (count_calls("cuLaunchKernel") != 2 + kLaunches) Fail("not every launch reached the driver");

  int (*get_stats)(gpuprio_priority_stats*, int) =
      (int (*)(gpuprio_priority_stats*, int))dlsym(RTLD_DEFAULT, "gpuprio_get_stats");
  if (get_stats == NULL) Fail("gpuprio_get_stats not found");
  gpuprio_priority_stats stats[4];
  memset(stats, 0, sizeof(stats));
  const int levels = get_stats(stats, 4);
  uint64_t seen = 0, low_submitted = 0, low_issued = 0;
  for (int i = 0; i < levels && i < 4; ++i) {
    printf("scheduler: priority=%d submitted=%llu issued=%llu on_caller=%llu\n",
           (int)stats[i].priority, (unsigned long long)stats[i].ops_submitted,
           (unsigned long long)stats[i].ops_issued, (unsigned long long)stats[i].ops_on_caller);
    seen += stats[i].ops_submitted + stats[i].ops_on_caller;
    if (stats[i].priority == GPUPRIO_PRIORITY_LOW) {
      low_submitted = stats[i].ops_submitted;
      low_issued = stats[i].ops_issued;
    }
  }
  printf("gpuprio: mode=%s\n", mode());
  /* ops_on_caller: what the calling thread issued itself (the fast path); ops_submitted: what was
   * queued for gpuprio's dispatcher thread, and ops_issued what it issued of that. */
  if (seen < 2 + kLaunches) Fail("the scheduler did not see every launch");
  if (low_submitted < 1 + (uint64_t)launches[1]) Fail("the low-priority launches were not queued");
  if (low_issued != low_submitted) Fail("the dispatcher did not issue every queued launch");
  for (int s = 0; s < 2; ++s) Check(DRIVER(cuStreamDestroy)(streams[s]), "cuStreamDestroy");

  FILE* maps = fopen("/proc/self/maps", "r");
  if (maps == NULL) Fail("cannot read /proc/self/maps");
  char line[4096], last[4096] = "";
  while (fgets(line, sizeof(line), maps) != NULL) {
    char* path = strchr(line, '/');
    if (path == NULL) continue;
    path[strcspn(path, "\n")] = '\0';
    if (strcmp(path, last) != 0) printf("mapped: %s\n", path);
    snprintf(last, sizeof(last), "%s", path);
  }
  fclose(maps);
  printf("probe: ok\n");
  return 0;
}
