// Kernel names as people read them: CUPTI reports the mangled symbol ("_Z10add_kernelPfS_i");
// torch.profiler and Nsight show it demangled ("add_kernel(float*, float*, int)").
#ifndef GPUPRIO_CUPTI_TRACER_KERNEL_NAME_H_
#define GPUPRIO_CUPTI_TRACER_KERNEL_NAME_H_

#include <string>

#include "absl/strings/string_view.h"

namespace gpuprio::tracer {

// The demangled form of an Itanium-ABI name (abi::__cxa_demangle, as torch.profiler does: full
// signature, templates and all). A name that is not mangled ("kernel", an extern "C" kernel) or
// does not demangle is returned as it is.
std::string DemangledKernelName(absl::string_view name);

}  // namespace gpuprio::tracer

#endif  // GPUPRIO_CUPTI_TRACER_KERNEL_NAME_H_
