// Modules, libraries, functions and kernels of the fake driver (fake_module.h).
#include "tests/fake_cuda/fake_module.h"

#include <sys/stat.h>

#include <cstring>

#include "absl/synchronization/mutex.h"
#include "tests/fake_cuda/call_log.h"
#include "tests/fake_cuda/virtual_device.h"

namespace fakecuda {
namespace {

constexpr int kMaxThreadsPerBlock = 1024;
constexpr int kStaticSharedBytes = 0;

Module* NewModule(Context* ctx) ABSL_EXCLUSIVE_LOCKS_REQUIRED(Mu()) {
  auto* module = new Module;
  module->ctx = ctx;
  for (const BuiltinKernel& k : AllBuiltinKernels()) {
    auto* f = new Function{&k, module};
    Register(f, Kind::kFunction);
    module->functions.push_back(f);
  }
  Register(module, Kind::kModule);
  return module;
}

void DeleteModule(Module* module) ABSL_EXCLUSIVE_LOCKS_REQUIRED(Mu()) {
  // Queued launches hold BuiltinKernel pointers, not Functions, so freeing is safe.
  for (Function* f : module->functions) {
    Unregister(f);
    delete f;
  }
  Unregister(module);
  delete module;
}

CUresult LoadModule(CUmodule* out) {
  absl::MutexLock lock(&Mu());
  if (CUresult r = CheckInit(); r != CUDA_SUCCESS) return r;
  Context* ctx = CurrentContext();
  if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *out = reinterpret_cast<CUmodule>(NewModule(ctx));
  return CUDA_SUCCESS;
}

Function* FindFunction(Module* module, const char* name) {
  for (Function* f : module->functions) {
    if (std::strcmp(f->kernel->name, name) == 0) return f;
  }
  return nullptr;
}

CUresult ParamInfo(const BuiltinKernel* k, size_t index, size_t* offset, size_t* size) {
  if (k == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  // Past the last parameter CUDA answers INVALID_VALUE: callers count parameters this way.
  if (index >= k->params.size()) return CUDA_ERROR_INVALID_VALUE;
  if (offset != nullptr) *offset = k->params[index].offset;
  if (size != nullptr) *size = k->params[index].size;
  return CUDA_SUCCESS;
}

}  // namespace

int* MaxDynamicSharedOf(CUfunction f) {
  auto it = S().handles.find(f);
  if (it == S().handles.end()) return nullptr;
  if (it->second == Kind::kFunction) {
    return &static_cast<Function*>(static_cast<void*>(f))->max_dynamic_shared;
  }
  if (it->second == Kind::kKernel) {
    return &static_cast<Kernel*>(static_cast<void*>(f))->max_dynamic_shared;
  }
  return nullptr;
}

const BuiltinKernel* ResolveFunction(CUfunction f, const Context** ctx) {
  if (ctx != nullptr) *ctx = nullptr;
  auto it = S().handles.find(f);
  if (it == S().handles.end()) return nullptr;
  if (it->second == Kind::kFunction) {
    const Function* function = static_cast<Function*>(static_cast<void*>(f));
    if (ctx != nullptr) *ctx = function->module->ctx;
    return function->kernel;
  }
  if (it->second == Kind::kKernel) return static_cast<Kernel*>(static_cast<void*>(f))->kernel;
  return nullptr;
}

}  // namespace fakecuda

using fakecuda::CallScope;
using fakecuda::Kind;
using fakecuda::Lookup;
using fakecuda::Mu;
using fakecuda::RunApi;

extern "C" {

CUresult cuModuleLoadData(CUmodule* out, const void* image) {
  return RunApi("cuModuleLoadData", [&](CallScope&) {
    if (image == nullptr) return CUDA_ERROR_INVALID_VALUE;
    return fakecuda::LoadModule(out);
  });
}

CUresult cuModuleLoad(CUmodule* out, const char* fname) {
  return RunApi("cuModuleLoad", [&](CallScope&) {
    struct stat st;
    if (fname == nullptr || stat(fname, &st) != 0) return CUDA_ERROR_FILE_NOT_FOUND;
    return fakecuda::LoadModule(out);
  });
}

CUresult cuModuleGetFunction(CUfunction* out, CUmodule hmod, const char* name) {
  return RunApi("cuModuleGetFunction", [&](CallScope&) {
    absl::MutexLock lock(&Mu());
    auto* module = Lookup<fakecuda::Module>(hmod, Kind::kModule);
    if (module == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    if (out == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
    fakecuda::Function* f = fakecuda::FindFunction(module, name);
    if (f == nullptr) return CUDA_ERROR_NOT_FOUND;
    *out = reinterpret_cast<CUfunction>(f);
    return CUDA_SUCCESS;
  });
}

CUresult cuModuleUnload(CUmodule hmod) {
  return RunApi("cuModuleUnload", [&](CallScope&) {
    absl::MutexLock lock(&Mu());
    auto* module = Lookup<fakecuda::Module>(hmod, Kind::kModule);
    if (module == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    fakecuda::DeleteModule(module);
    return CUDA_SUCCESS;
  });
}

CUresult cuLibraryLoadData(CUlibrary* out, const void* code, CUjit_option*, void**, unsigned int,
                           CUlibraryOption*, void**, unsigned int) {
  return RunApi("cuLibraryLoadData", [&](CallScope&) {
    absl::MutexLock lock(&Mu());
    if (CUresult r = fakecuda::CheckInit(); r != CUDA_SUCCESS) return r;
    if (out == nullptr || code == nullptr) return CUDA_ERROR_INVALID_VALUE;
    // Libraries are context-independent: no module is loaded until a context asks for a
    // kernel's function (cuKernelGetFunction).
    auto* library = new fakecuda::Library;
    for (const fakecuda::BuiltinKernel& k : fakecuda::AllBuiltinKernels()) {
      auto* kernel = new fakecuda::Kernel{&k, library};
      fakecuda::Register(kernel, Kind::kKernel);
      library->kernels.push_back(kernel);
    }
    fakecuda::Register(library, Kind::kLibrary);
    *out = reinterpret_cast<CUlibrary>(library);
    return CUDA_SUCCESS;
  });
}

CUresult cuLibraryGetKernel(CUkernel* out, CUlibrary hlib, const char* name) {
  return RunApi("cuLibraryGetKernel", [&](CallScope&) {
    absl::MutexLock lock(&Mu());
    auto* library = Lookup<fakecuda::Library>(hlib, Kind::kLibrary);
    if (library == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    if (out == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
    for (fakecuda::Kernel* k : library->kernels) {
      if (std::strcmp(k->kernel->name, name) == 0) {
        *out = reinterpret_cast<CUkernel>(k);
        return CUDA_SUCCESS;
      }
    }
    return CUDA_ERROR_NOT_FOUND;
  });
}

CUresult cuLibraryUnload(CUlibrary hlib) {
  return RunApi("cuLibraryUnload", [&](CallScope&) {
    absl::MutexLock lock(&Mu());
    auto* library = Lookup<fakecuda::Library>(hlib, Kind::kLibrary);
    if (library == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    for (fakecuda::Kernel* k : library->kernels) {
      fakecuda::Unregister(k);
      delete k;
    }
    for (auto& [ctx, module] : library->modules) fakecuda::DeleteModule(module);
    fakecuda::Unregister(library);
    delete library;
    return CUDA_SUCCESS;
  });
}

CUresult cuKernelGetFunction(CUfunction* out, CUkernel hkernel) {
  return RunApi("cuKernelGetFunction", [&](CallScope&) {
    absl::MutexLock lock(&Mu());
    if (CUresult r = fakecuda::CheckInit(); r != CUDA_SUCCESS) return r;
    fakecuda::Context* ctx = fakecuda::CurrentContext();
    if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
    auto* kernel = Lookup<fakecuda::Kernel>(hkernel, Kind::kKernel);
    if (kernel == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
    // The kernel's function in the current context: one module per context and library.
    fakecuda::Module*& module = kernel->library->modules[ctx];
    if (module == nullptr) module = fakecuda::NewModule(ctx);
    *out = reinterpret_cast<CUfunction>(fakecuda::FindFunction(module, kernel->kernel->name));
    return CUDA_SUCCESS;
  });
}

CUresult cuFuncGetParamInfo(CUfunction f, size_t index, size_t* offset, size_t* size) {
  return RunApi("cuFuncGetParamInfo", [&](CallScope&) {
    absl::MutexLock lock(&Mu());
    auto* func = Lookup<fakecuda::Function>(f, Kind::kFunction);
    return fakecuda::ParamInfo(func == nullptr ? nullptr : func->kernel, index, offset, size);
  });
}

CUresult cuKernelGetParamInfo(CUkernel k, size_t index, size_t* offset, size_t* size) {
  return RunApi("cuKernelGetParamInfo", [&](CallScope&) {
    absl::MutexLock lock(&Mu());
    auto* kernel = Lookup<fakecuda::Kernel>(k, Kind::kKernel);
    return fakecuda::ParamInfo(kernel == nullptr ? nullptr : kernel->kernel, index, offset, size);
  });
}

CUresult cuFuncGetAttribute(int* value, CUfunction_attribute attrib, CUfunction f) {
  return RunApi("cuFuncGetAttribute", [&](CallScope&) {
    absl::MutexLock lock(&Mu());
    const fakecuda::BuiltinKernel* k = fakecuda::ResolveFunction(f);
    if (k == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
    switch (attrib) {
      case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = fakecuda::kMaxThreadsPerBlock; break;
      case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *value = fakecuda::kStaticSharedBytes; break;
      case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
        *value = *fakecuda::MaxDynamicSharedOf(f);
        break;
      case CU_FUNC_ATTRIBUTE_NUM_REGS: *value = 32; break;
      case CU_FUNC_ATTRIBUTE_PTX_VERSION: *value = 90; break;
      case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *value = 90; break;
      default: *value = 0; break;
    }
    return CUDA_SUCCESS;
  });
}

// Function attributes that change how later launches run. Only the dynamic shared memory limit
// has an effect here (a launch above it fails with CUDA_ERROR_INVALID_VALUE, as on a GPU); the
// cache and shared-memory configurations are accepted and ignored.
static CUresult SetAttribute(CUfunction f, CUfunction_attribute attrib, int value)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(fakecuda::Mu()) {
  if (CUresult r = fakecuda::CheckInit(); r != CUDA_SUCCESS) return r;
  int* max_dynamic_shared = fakecuda::MaxDynamicSharedOf(f);
  if (max_dynamic_shared == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (attrib == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
    if (value < 0 || value > fakecuda::kOptInMaxDynamicSharedBytes) return CUDA_ERROR_INVALID_VALUE;
    *max_dynamic_shared = value;
  }
  return CUDA_SUCCESS;
}

CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute attrib, int value) {
  return RunApi("cuFuncSetAttribute", [&](CallScope&) {
    absl::MutexLock lock(&Mu());
    return SetAttribute(f, attrib, value);
  });
}

CUresult cuKernelSetAttribute(CUfunction_attribute attrib, int value, CUkernel k, CUdevice) {
  return RunApi("cuKernelSetAttribute", [&](CallScope&) {
    absl::MutexLock lock(&Mu());
    if (Lookup<fakecuda::Kernel>(k, Kind::kKernel) == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    return SetAttribute(reinterpret_cast<CUfunction>(k), attrib, value);
  });
}

CUresult cuFuncSetCacheConfig(CUfunction f, CUfunc_cache) {
  return RunApi("cuFuncSetCacheConfig", [&](CallScope&) {
    absl::MutexLock lock(&Mu());
    return fakecuda::MaxDynamicSharedOf(f) != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
  });
}

CUresult cuKernelSetCacheConfig(CUkernel k, CUfunc_cache, CUdevice) {
  return RunApi("cuKernelSetCacheConfig", [&](CallScope&) {
    absl::MutexLock lock(&Mu());
    return Lookup<fakecuda::Kernel>(k, Kind::kKernel) != nullptr ? CUDA_SUCCESS
                                                                 : CUDA_ERROR_INVALID_HANDLE;
  });
}

CUresult cuFuncSetSharedMemConfig(CUfunction f, CUsharedconfig) {
  return RunApi("cuFuncSetSharedMemConfig", [&](CallScope&) {
    absl::MutexLock lock(&Mu());
    return fakecuda::MaxDynamicSharedOf(f) != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
  });
}

CUresult cuFuncGetName(const char** name, CUfunction f) {
  return RunApi("cuFuncGetName", [&](CallScope&) {
    absl::MutexLock lock(&Mu());
    const fakecuda::BuiltinKernel* k = fakecuda::ResolveFunction(f);
    if (k == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *name = k->name;
    return CUDA_SUCCESS;
  });
}

}  // extern "C"
