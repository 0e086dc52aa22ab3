// Which CUDA API calls the tracer records (activity records and, for the runtime, the callback
// that tags a client's op with its call): stream work and synchronisation (docs/architecture.md, "cupti_tracer/").
// Recording every API (PyTorch calls cudaGetDevice and cuCtxGetCurrent by the thousand) costs
// CUPTI a record per call and adds nothing a reader of the trace needs.
#ifndef GPUPRIO_CUPTI_TRACER_TRACED_APIS_H_
#define GPUPRIO_CUPTI_TRACER_TRACED_APIS_H_

#include "absl/strings/string_view.h"

namespace gpuprio::tracer {

// `name` as cuptiGetCallbackName gives it ("cudaLaunchKernel_v7000", "cuMemcpyHtoDAsync_v2").
bool IsTracedRuntimeApi(absl::string_view name);
bool IsTracedDriverApi(absl::string_view name);

}  // namespace gpuprio::tracer

#endif  // GPUPRIO_CUPTI_TRACER_TRACED_APIS_H_
