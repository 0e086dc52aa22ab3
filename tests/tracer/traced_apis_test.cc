// The tracer records stream work and synchronisation, in every ABI form, and nothing else.
#include "cupti_tracer/traced_apis.h"

#include "catch2/catch.hpp"

namespace gpuprio::tracer {
namespace {

TEST_CASE("The tracer records launches, copies, sets and syncs in every form", "[tracer]") {
  for (const char* name : {"cudaLaunchKernel_v7000", "cudaLaunchKernel_ptsz_v7000",
                           "cudaLaunchKernelExC_v11060", "cudaMemcpyAsync_v3020",
                           "cudaMemsetAsync_ptsz_v7000", "cudaStreamSynchronize_v3020",
                           "cudaDeviceSynchronize_v3020", "cudaEventRecord_v3020",
                           "cudaStreamWaitEvent_v3020", "cudaGraphLaunch_v10000"}) {
    INFO(name);
    CHECK(IsTracedRuntimeApi(name));
  }
  for (const char* name : {"cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchKernelEx",
                           "cuLaunchHostFunc", "cuMemcpyHtoDAsync_v2", "cuMemsetD8Async",
                           "cuStreamSynchronize", "cuCtxSynchronize", "cuEventRecord",
                           "cuStreamWaitEvent", "cuGraphLaunch", "cuMemFreeAsync",
                           "cuStreamWaitValue32_v2"}) {
    INFO(name);
    CHECK(IsTracedDriverApi(name));
  }
}

TEST_CASE("The tracer skips the calls PyTorch makes by the thousand", "[tracer]") {
  for (const char* name : {"cudaGetDevice_v3020", "cudaGetLastError_v3020",
                           "cudaStreamIsCapturing_v10000", "cudaSetDevice_v3020", ""}) {
    INFO(name);
    CHECK_FALSE(IsTracedRuntimeApi(name));
  }
  for (const char* name : {"cuCtxGetCurrent", "cuGetProcAddress_v2", "cuPointerGetAttribute",
                           "cuStreamIsCapturing", "cuFuncGetParamInfo", "cuEventQuery",
                           "cuMemAlloc_v2", ""}) {
    INFO(name);
    CHECK_FALSE(IsTracedDriverApi(name));
  }
}

}  // namespace
}  // namespace gpuprio::tracer
