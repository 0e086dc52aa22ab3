// Modules, libraries, functions and kernels of the fake driver: every module holds all the
// built-in kernels (builtin_kernels.h); image contents are ignored.
#ifndef GPUPRIO_TESTS_FAKE_CUDA_FAKE_MODULE_H_
#define GPUPRIO_TESTS_FAKE_CUDA_FAKE_MODULE_H_

#include "tests/fake_cuda/fake_state.h"

namespace fakecuda {

// The kernel behind a CUfunction, or a CUkernel cast to CUfunction (as CUDA accepts);
// nullptr for anything else. With `ctx`, also the context whose module holds the function
// (nullptr for a CUkernel, which belongs to no context).
const BuiltinKernel* ResolveFunction(CUfunction f, const Context** ctx = nullptr)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(Mu());

// The dynamic shared memory limit of a CUfunction or of a CUkernel cast to one, or nullptr.
int* MaxDynamicSharedOf(CUfunction f) ABSL_EXCLUSIVE_LOCKS_REQUIRED(Mu());

// The most dynamic shared memory cuFuncSetAttribute may allow (an H100's opt-in maximum).
inline constexpr int kOptInMaxDynamicSharedBytes = 232448;

}  // namespace fakecuda

#endif  // GPUPRIO_TESTS_FAKE_CUDA_FAKE_MODULE_H_
