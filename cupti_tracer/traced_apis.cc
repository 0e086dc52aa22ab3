#include "cupti_tracer/traced_apis.h"

#include "absl/strings/match.h"

namespace gpuprio::tracer {
namespace {

// Families by prefix, so every ABI version and _ptsz/_ptds form of a call is included.
constexpr absl::string_view kRuntimePrefixes[] = {
    "cudaLaunch",          "cudaMemcpy",           "cudaMemset",
    "cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize",
    "cudaEventRecord",     "cudaStreamWaitEvent",  "cudaGraphLaunch",
    "cudaMallocAsync",     "cudaFreeAsync",
};
constexpr absl::string_view kDriverPrefixes[] = {
    "cuLaunch",           "cuMemcpy",            "cuMemset",           "cuStreamSynchronize",
    "cuCtxSynchronize",   "cuEventSynchronize",  "cuEventRecord",      "cuStreamWaitEvent",
    "cuStreamWaitValue",  "cuStreamWriteValue",  "cuStreamBatchMemOp", "cuGraphLaunch",
    "cuMemAllocAsync",    "cuMemFreeAsync",
};

template <size_t N>
bool HasPrefix(absl::string_view name, const absl::string_view (&prefixes)[N]) {
  for (absl::string_view p : prefixes) {
    if (absl::StartsWith(name, p)) return true;
  }
  return false;
}

}  // namespace

bool IsTracedRuntimeApi(absl::string_view name) { return HasPrefix(name, kRuntimePrefixes); }
bool IsTracedDriverApi(absl::string_view name) { return HasPrefix(name, kDriverPrefixes); }

}  // namespace gpuprio::tracer
