// Modules, libraries, functions and kernels of the fake driver: every module holds all the
// built-in kernels (builtin_kernels.h); image contents are ignored.
#ifndef GPUPRIO_TESTS_FAKE_CUDA_FAKE_MODULE_H_
#define GPUPRIO_TESTS_FAKE_CUDA_FAKE_MODULE_H_

#include "tests/fake_cuda/fake_state.h"

namespace fakecuda {

// The kernel behind a CUfunction, or a CUkernel cast to CUfunction (as CUDA accepts);
// nullptr for anything else.
const BuiltinKernel* ResolveFunction(CUfunction f) ABSL_EXCLUSIVE_LOCKS_REQUIRED(Mu());

// The Function whose attributes a CUfunction (or a CUkernel cast to one) has, or nullptr.
Function* AttributesOf(CUfunction f) ABSL_EXCLUSIVE_LOCKS_REQUIRED(Mu());

// The most dynamic shared memory cuFuncSetAttribute may allow (an H100's opt-in maximum).
inline constexpr int kOptInMaxDynamicSharedBytes = 232448;

}  // namespace fakecuda

#endif  // GPUPRIO_TESTS_FAKE_CUDA_FAKE_MODULE_H_
