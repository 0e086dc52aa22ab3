// A plain driver-API program, linked with -lcuda and no CUDA runtime (-cudart none), so that every
// cu* call below goes through the exported libcuda symbols (or gpuprio's exports when preloaded).
// It loads an embedded fatbin (built from driver_api_kernels.cu by build_artifacts.sh), launches
// its kernels with cuLaunchKernel (kernelParams and the `extra` buffer form) and cuLaunchKernelEx
// (with and without a launch attribute), on a blocking stream, the legacy NULL stream and a
// non-blocking priority stream joined by an event, and checks every element on the host.
// After each launch the host copies of the parameters are overwritten, so a layer that keeps a
// pointer to them instead of a copy is caught.
//
// Prints "driver_api_program: launches cuLaunchKernel=N cuLaunchKernelEx=M" and then
// "driver_api_program: OK" (exit 0) or "driver_api_program: FAILED: ..." (exit 1).
//
// Usage: driver_api_program [--iterations N]   (default 20)

#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "driver_api_image.h"  // generated: gp_driver_api_image[] (bin2c of the fatbin)

namespace {

void fail_cu(const char* what, CUresult r, int line) {
  const char* name = nullptr;
  const char* desc = nullptr;
  cuGetErrorName(r, &name);
  cuGetErrorString(r, &desc);
  std::printf("driver_api_program: FAILED: %s returned %d (%s: %s) at line %d\n", what, (int)r,
              name ? name : "?", desc ? desc : "?", line);
  std::fflush(stdout);
  std::exit(1);
}

#define CK(call)                                  \
  do {                                            \
    CUresult r_ = (call);                         \
    if (r_ != CUDA_SUCCESS) fail_cu(#call, r_, __LINE__); \
  } while (0)

// Overwrite host memory that held launch parameters; volatile so the compiler keeps the stores.
void scribble(void* p, size_t n) {
  volatile unsigned char* b = static_cast<volatile unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) b[i] = 0xA5;
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 20;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--iterations") == 0 && i + 1 < argc) {
      iterations = std::atoi(argv[++i]);
    } else {
      std::printf("usage: %s [--iterations N]\n", argv[0]);
      return 2;
    }
  }
  if (iterations < 1) iterations = 1;

  CK(cuInit(0));
  CUdevice dev;
  CK(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));

  CUmodule mod;
  CK(cuModuleLoadData(&mod, gp_driver_api_image));
  CUfunction f_fill, f_add, f_axpy;
  CK(cuModuleGetFunction(&f_fill, mod, "gp_fill"));
  CK(cuModuleGetFunction(&f_add, mod, "gp_add"));
  CK(cuModuleGetFunction(&f_axpy, mod, "gp_axpy"));

  const int n = (1 << 20) + 3;  // not a multiple of the block size
  const unsigned block = 256;
  const unsigned grid = (n + block - 1) / block;
  CUdeviceptr a, b, c;
  CK(cuMemAlloc(&a, n * sizeof(float)));
  CK(cuMemAlloc(&b, n * sizeof(float)));
  CK(cuMemAlloc(&c, n * sizeof(float)));

  CUstream s1;  // blocking: ordered with the legacy NULL stream
  CK(cuStreamCreate(&s1, CU_STREAM_DEFAULT));
  int least = 0, greatest = 0;
  CK(cuCtxGetStreamPriorityRange(&least, &greatest));
  CUstream s2;  // non-blocking, highest priority: ordered only through the event
  CK(cuStreamCreateWithPriority(&s2, CU_STREAM_NON_BLOCKING, greatest));
  CUevent ev;
  CK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));

  std::vector<float> ha(n), hb(n), hc(n);
  long launches_plain = 0, launches_ex = 0;

  for (int it = 0; it < iterations; ++it) {
    const float fa = 1.5f + (float)it;
    const float fb = 2.25f + 0.5f * (float)it;

    // Poison c (0xFFFFFFFF is a NaN) so a launch that never ran is visible.
    CK(cuMemsetD32Async(c, 0xFFFFFFFFu, n, s1));

    {  // 1. cuLaunchKernel, kernelParams, stream s1: a = fa
      CUdeviceptr p = a;
      float v = fa;
      int nn = n;
      void* params[] = {&p, &v, &nn};
      CK(cuLaunchKernel(f_fill, grid, 1, 1, block, 1, 1, 0, s1, params, nullptr));
      ++launches_plain;
      scribble(&p, sizeof p); scribble(&v, sizeof v); scribble(&nn, sizeof nn);
      scribble(params, sizeof params);
    }
    {  // 2. cuLaunchKernel, kernelParams, legacy NULL stream: b = fb
      CUdeviceptr p = b;
      float v = fb;
      int nn = n;
      void* params[] = {&p, &v, &nn};
      CK(cuLaunchKernel(f_fill, grid, 1, 1, block, 1, 1, 0, nullptr, params, nullptr));
      ++launches_plain;
      scribble(&p, sizeof p); scribble(&v, sizeof v); scribble(&nn, sizeof nn);
      scribble(params, sizeof params);
    }
    {  // 3. cuLaunchKernelEx with a priority attribute, stream s1: c = a + b
      CUdeviceptr pa = a, pb = b, pc = c;
      int nn = n;
      void* params[] = {&pa, &pb, &pc, &nn};
      CUlaunchAttribute attr[1];
      std::memset(attr, 0, sizeof attr);
      attr[0].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
      attr[0].value.priority = least;
      CUlaunchConfig cfg;
      std::memset(&cfg, 0, sizeof cfg);
      cfg.gridDimX = grid; cfg.gridDimY = 1; cfg.gridDimZ = 1;
      cfg.blockDimX = block; cfg.blockDimY = 1; cfg.blockDimZ = 1;
      cfg.sharedMemBytes = 0;
      cfg.hStream = s1;
      cfg.attrs = attr;
      cfg.numAttrs = 1;
      CK(cuLaunchKernelEx(&cfg, f_add, params, nullptr));
      ++launches_ex;
      scribble(&pa, sizeof pa); scribble(&pb, sizeof pb); scribble(&pc, sizeof pc);
      scribble(&nn, sizeof nn); scribble(params, sizeof params);
      scribble(attr, sizeof attr); scribble(&cfg, sizeof cfg);
    }
    {  // 4. cuLaunchKernel, `extra` buffer form, stream s1: a = a + 0.5 * c
      struct {
        int n;
        float alpha;
        CUdeviceptr x;
        CUdeviceptr y;
      } args;
      static_assert(sizeof(args) == 24, "unexpected parameter buffer layout");
      args.n = n; args.alpha = 0.5f; args.x = c; args.y = a;
      size_t size = sizeof(args);
      void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &args, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                       CU_LAUNCH_PARAM_END};
      CK(cuLaunchKernel(f_axpy, grid, 1, 1, block, 1, 1, 0, s1, nullptr, extra));
      ++launches_plain;
      scribble(&args, sizeof args); scribble(&size, sizeof size); scribble(extra, sizeof extra);
    }
    {  // 5. event s1 -> s2, then cuLaunchKernelEx without attributes on s2: b = b + 2 * a
      CK(cuEventRecord(ev, s1));
      CK(cuStreamWaitEvent(s2, ev, 0));
      int nn = n;
      float alpha = 2.0f;
      CUdeviceptr px = a, py = b;
      void* params[] = {&nn, &alpha, &px, &py};
      CUlaunchConfig cfg;
      std::memset(&cfg, 0, sizeof cfg);
      cfg.gridDimX = grid; cfg.gridDimY = 1; cfg.gridDimZ = 1;
      cfg.blockDimX = block; cfg.blockDimY = 1; cfg.blockDimZ = 1;
      cfg.hStream = s2;
      cfg.attrs = nullptr;
      cfg.numAttrs = 0;
      CK(cuLaunchKernelEx(&cfg, f_axpy, params, nullptr));
      ++launches_ex;
      scribble(&nn, sizeof nn); scribble(&alpha, sizeof alpha); scribble(&px, sizeof px);
      scribble(&py, sizeof py); scribble(params, sizeof params); scribble(&cfg, sizeof cfg);
    }

    CK(cuStreamSynchronize(s2));
    CK(cuStreamSynchronize(s1));
    CK(cuMemcpyDtoH(ha.data(), a, n * sizeof(float)));
    CK(cuMemcpyDtoH(hb.data(), b, n * sizeof(float)));
    CK(cuMemcpyDtoH(hc.data(), c, n * sizeof(float)));

    // All values are short dyadic fractions: every step is exact in float, so compare exactly.
    const float ec = fa + fb;
    const float ea = fa + 0.5f * ec;
    const float eb = fb + 2.0f * ea;
    const struct { const char* name; const std::vector<float>* h; float expect; } arrays[] = {
        {"c", &hc, ec}, {"a", &ha, ea}, {"b", &hb, eb}};
    for (const auto& arr : arrays) {
      for (int i = 0; i < n; ++i) {
        if ((*arr.h)[i] != arr.expect) {
          std::printf("driver_api_program: launches cuLaunchKernel=%ld cuLaunchKernelEx=%ld\n",
                      launches_plain, launches_ex);
          std::printf("driver_api_program: FAILED: iteration %d, %s[%d] = %.9g, expected %.9g\n", it,
                      arr.name, i, (double)(*arr.h)[i], (double)arr.expect);
          return 1;
        }
      }
    }
  }

  CK(cuCtxSynchronize());
  CK(cuEventDestroy(ev));
  CK(cuStreamDestroy(s2));
  CK(cuStreamDestroy(s1));
  CK(cuMemFree(a));
  CK(cuMemFree(b));
  CK(cuMemFree(c));
  CK(cuModuleUnload(mod));
  CK(cuDevicePrimaryCtxRelease(dev));

  std::printf("driver_api_program: launches cuLaunchKernel=%ld cuLaunchKernelEx=%ld\n",
              launches_plain, launches_ex);
  std::printf("driver_api_program: OK (%d iterations, %d elements)\n", iterations, n);
  return 0;
}
