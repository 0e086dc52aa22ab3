// Kernel launches of the fake driver: cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel
// and their _ptsz forms. Launch-time errors are returned at once, like CUDA; parameters are
// copied at call time into the kernel's parameter space, which is also what the log keeps.
// The work goes to the stream's own device whatever context is current (CUDA 13); a CUfunction
// launches only on a stream of its module's device, a CUkernel on any.
#include <cstring>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "tests/fake_cuda/call_log.h"
#include "tests/fake_cuda/fake_module.h"
#include "tests/fake_cuda/fake_state.h"
#include "tests/fake_cuda/virtual_device.h"

namespace fakecuda {
namespace {

constexpr unsigned kMaxThreadsPerBlock = 1024;
constexpr unsigned kMaxBlockDimZ = 64;

struct Launch {
  CUfunction f = nullptr;
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned shared_mem = 0;
  CUstream stream = nullptr;
  void** params = nullptr;
  void** extra = nullptr;
  bool has_priority = false;
  int priority = 0;
  unsigned cluster_blocks = 1;  // CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION's x * y * z
};

// The largest thread-block cluster a green context of the fake takes. An H100 under MPS refused
// cuBLAS's 2-block clusters on a green context of 116 of its 132 SMs (CUDA error 912): the fake
// refuses every cluster on a partition, so tests can check that such a launch still runs.
constexpr unsigned kGreenMaxClusterBlocks = 1;

// Fills `bytes` (the declared parameter space) from kernelParams or from the `extra` buffer.
CUresult CopyParams(const BuiltinKernel& k, void** params, void** extra, std::vector<uint8_t>* bytes) {
  bytes->assign(k.param_size, 0);
  if (params != nullptr && extra != nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (params != nullptr) {
    for (size_t i = 0; i < k.params.size(); ++i) {
      if (params[i] == nullptr) return CUDA_ERROR_INVALID_VALUE;
      std::memcpy(bytes->data() + k.params[i].offset, params[i], k.params[i].size);
    }
    return CUDA_SUCCESS;
  }
  if (extra != nullptr) {
    const void* buffer = nullptr;
    size_t size = 0;
    bool have_size = false;
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
        buffer = extra[i + 1];
      } else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
        size = *static_cast<const size_t*>(extra[i + 1]);
        have_size = true;
      } else {
        return CUDA_ERROR_INVALID_VALUE;
      }
    }
    // The buffer may be shorter than the declared space (NCCL does this), never longer.
    if (buffer == nullptr || !have_size || size > k.param_size) return CUDA_ERROR_INVALID_VALUE;
    std::memcpy(bytes->data(), buffer, size);
    return CUDA_SUCCESS;
  }
  return k.params.empty() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult DoLaunch(CallScope& call, const Launch& l, bool per_thread) {
  absl::MutexLock lock(&Mu());
  if (CUresult r = CheckInit(); r != CUDA_SUCCESS) return r;
  if (CurrentContext() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  const Context* function_ctx = nullptr;
  const BuiltinKernel* k = ResolveFunction(l.f, &function_ctx);
  if (k == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  call.SetLaunch(k->name, l.grid, l.block, l.shared_mem);
  Stream* stream = nullptr;
  if (CUresult r = ResolveStream(l.stream, per_thread, &stream); r != CUDA_SUCCESS) return r;
  call.SetStream(stream);
  // The function's code was loaded on its module's device only. (Compared by device, not by
  // context: a green context's streams run the device's modules, as gpuprio's twins rely on.)
  if (function_ctx != nullptr && function_ctx->device != stream->ctx->device) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  for (int i = 0; i < 3; ++i) {
    if (l.grid[i] == 0 || l.block[i] == 0) return CUDA_ERROR_INVALID_VALUE;
  }
  if (stream->ctx->green && l.cluster_blocks > kGreenMaxClusterBlocks) {
    return CUDA_ERROR_INVALID_CLUSTER_SIZE;
  }
  const uint64_t threads = uint64_t{l.block[0]} * l.block[1] * l.block[2];
  if (threads > kMaxThreadsPerBlock || l.block[2] > kMaxBlockDimZ) return CUDA_ERROR_INVALID_VALUE;
  if (static_cast<int64_t>(l.shared_mem) > *MaxDynamicSharedOf(l.f)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto bytes = std::make_shared<std::vector<uint8_t>>();
  if (CUresult r = CopyParams(*k, l.params, l.extra, bytes.get()); r != CUDA_SUCCESS) return r;
  call.SetParams(*bytes);
  OpPtr op = MakeOp(k->name, call.order(), [k, bytes] { return k->run(bytes->data()); });
  op->kernel = k;
  if (k->duration_from_param) {
    uint64_t ns = 0;
    std::memcpy(&ns, bytes->data(), sizeof(ns));
    op->sleep_ns = static_cast<int64_t>(ns);
  }
  op->has_priority = l.has_priority;
  op->priority = l.priority;
  Enqueue(stream, op);
  return CUDA_SUCCESS;
}

Launch Classic(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
               unsigned bz, unsigned shared, CUstream s, void** params, void** extra) {
  Launch l;
  l.f = f;
  l.grid[0] = gx, l.grid[1] = gy, l.grid[2] = gz;
  l.block[0] = bx, l.block[1] = by, l.block[2] = bz;
  l.shared_mem = shared;
  l.stream = s;
  l.params = params;
  l.extra = extra;
  return l;
}

CUresult LaunchEx(CallScope& call, const CUlaunchConfig* config, CUfunction f, void** params,
                  void** extra, bool per_thread) {
  if (config == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Launch l = Classic(f, config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX,
                     config->blockDimY, config->blockDimZ, config->sharedMemBytes,
                     config->hStream, params, extra);
  if (config->numAttrs > 0 && config->attrs == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_PRIORITY) {
      l.has_priority = true;
      l.priority = config->attrs[i].value.priority;
    } else if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
      const auto& c = config->attrs[i].value.clusterDim;
      if (c.x == 0 || c.y == 0 || c.z == 0) return CUDA_ERROR_INVALID_VALUE;
      l.cluster_blocks = c.x * c.y * c.z;
    }
  }
  return DoLaunch(call, l, per_thread);
}

}  // namespace
}  // namespace fakecuda

using fakecuda::CallScope;
using fakecuda::Classic;
using fakecuda::RunApi;

extern "C" {

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                        unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                        CUstream s, void** params, void** extra) {
  return RunApi("cuLaunchKernel", [&](CallScope& c) {
    return fakecuda::DoLaunch(c, Classic(f, gx, gy, gz, bx, by, bz, shared, s, params, extra), false);
  });
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                             unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                             CUstream s, void** params, void** extra) {
  return RunApi("cuLaunchKernel_ptsz", [&](CallScope& c) {
    return fakecuda::DoLaunch(c, Classic(f, gx, gy, gz, bx, by, bz, shared, s, params, extra), true);
  });
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                   unsigned int bx, unsigned int by, unsigned int bz,
                                   unsigned int shared, CUstream s, void** params) {
  return RunApi("cuLaunchCooperativeKernel", [&](CallScope& c) {
    return fakecuda::DoLaunch(c, Classic(f, gx, gy, gz, bx, by, bz, shared, s, params, nullptr), false);
  });
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                        unsigned int gz, unsigned int bx, unsigned int by,
                                        unsigned int bz, unsigned int shared, CUstream s,
                                        void** params) {
  return RunApi("cuLaunchCooperativeKernel_ptsz", [&](CallScope& c) {
    return fakecuda::DoLaunch(c, Classic(f, gx, gy, gz, bx, by, bz, shared, s, params, nullptr), true);
  });
}

CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  return RunApi("cuLaunchKernelEx",
                [&](CallScope& c) { return fakecuda::LaunchEx(c, config, f, params, extra, false); });
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** params,
                               void** extra) {
  return RunApi("cuLaunchKernelEx_ptsz",
                [&](CallScope& c) { return fakecuda::LaunchEx(c, config, f, params, extra, true); });
}

}  // extern "C"
