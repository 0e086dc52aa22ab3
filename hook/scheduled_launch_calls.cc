#include "hook/scheduled_launch_calls.h"

#include <cstring>
#include <new>

#include "hook/param_layout_cache.h"
#include "hook/scheduled_calls.h"

namespace gpuprio::hook {
namespace {

using scheduler::Op;

// Kept in Op::args. Parameter bytes, the rebuilt pointer array and the Ex attributes live in
// Op::data: [parameter bytes, 16-aligned][void* per parameter | extra array + size][attrs].
struct LaunchRecord {
  CUfunction function;
  unsigned int grid[3];
  unsigned int block[3];
  unsigned int shared;
  CUstream stream;
  const ParamLayout* layout;  // kernelParams form; null for the extra form
  size_t extra_size;          // extra form: CU_LAUNCH_PARAM_BUFFER_SIZE
  size_t pointers_at;         // offset in data of the pointer / extra array
  size_t attrs_at;            // cuLaunchKernelEx: offset of the attribute array
  unsigned int num_attrs;
};
static_assert(sizeof(LaunchRecord) <= Op::kArgBytes);
static_assert(std::is_trivially_destructible_v<LaunchRecord>);

constexpr size_t AlignUp(size_t n) { return (n + 15) & ~size_t{15}; }

LaunchRecord& RecordOf(Op& op) { return *std::launder(reinterpret_cast<LaunchRecord*>(op.args)); }

// What the driver would reject at launch time, checked here so the error stays immediate. Only
// immutable properties: the grid and block shape, and the function's thread limit (fixed when it
// was compiled).
CUresult Validate(const ParamLayout& layout, const unsigned int block[3], unsigned int shared,
                  const unsigned int grid[3]) {
  if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0 || block[0] == 0 || block[1] == 0 ||
      block[2] == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const uint64_t threads = uint64_t{block[0]} * block[1] * block[2];
  if (layout.max_threads_per_block > 0 &&
      threads > static_cast<uint64_t>(layout.max_threads_per_block)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // Dynamic shared memory is not checked here: its limit is a mutable attribute
  // (cuFuncSetAttribute / cuKernelSetAttribute raise it, as cuDNN does before its launches), so a
  // cached value would reject valid launches. An over-limit launch fails when issued and the
  // stream's next synchronize reports it.
  (void)shared;
  return CUDA_SUCCESS;
}

// Copies the parameters of either form into op.data; false if the form is not one gpuprio
// understands (the launch then runs inline and the driver judges it).
bool CopyParams(Op& op, LaunchRecord& rec, const ParamLayout* layout, void** params,
                void** extra) {
  if (params != nullptr && extra == nullptr) {
    if (layout == nullptr) return false;
    rec.layout = layout;
    rec.pointers_at = AlignUp(layout->total_size);
    op.data.resize(rec.pointers_at + layout->params.size() * sizeof(void*));
    for (size_t i = 0; i < layout->params.size(); ++i) {
      const ParamLayout::Param& p = layout->params[i];
      std::memcpy(op.data.data() + p.offset, params[i], p.size);
    }
    return true;
  }
  if (extra != nullptr && params == nullptr) {
    const void* buffer = nullptr;
    const size_t* size = nullptr;
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
        buffer = extra[i + 1];
      } else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
        size = static_cast<const size_t*>(extra[i + 1]);
      } else {
        return false;
      }
    }
    if (buffer == nullptr || size == nullptr) return false;
    rec.layout = nullptr;
    rec.extra_size = *size;
    rec.pointers_at = AlignUp(*size);
    op.data.resize(rec.pointers_at + 5 * sizeof(void*));
    std::memcpy(op.data.data(), buffer, *size);
    return true;
  }
  if (params == nullptr && extra == nullptr && layout != nullptr && layout->params.empty()) {
    rec.layout = layout;
    rec.pointers_at = 0;
    return true;
  }
  return false;
}

// Rebuilds the kernelParams array or the extra array inside op.data. Returns {params, extra}.
std::pair<void**, void**> RebuildParams(Op& op, LaunchRecord& rec) {
  std::byte* base = op.data.data();
  if (rec.layout != nullptr) {
    if (rec.layout->params.empty()) return {nullptr, nullptr};
    auto** pointers = reinterpret_cast<void**>(base + rec.pointers_at);
    for (size_t i = 0; i < rec.layout->params.size(); ++i) {
      pointers[i] = base + rec.layout->params[i].offset;
    }
    return {pointers, nullptr};
  }
  auto** extra = reinterpret_cast<void**>(base + rec.pointers_at);
  extra[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
  extra[1] = base;
  extra[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
  extra[3] = &rec.extra_size;
  extra[4] = CU_LAUNCH_PARAM_END;
  return {nullptr, extra};
}

// cuLaunchKernel and cuLaunchCooperativeKernel (`kWithExtra` false: it has no `extra` array).
template <ApiId kId, typename Real, bool kWithExtra>
CUresult IssueGridLaunch(Op& op) {
  LaunchRecord& rec = RecordOf(op);
  auto [params, extra] = RebuildParams(op, rec);
  const auto real = reinterpret_cast<Real>(RealEntry(kId));
  DriverCallScope in_driver;
  if constexpr (kWithExtra) {
    return real(rec.function, rec.grid[0], rec.grid[1], rec.grid[2], rec.block[0], rec.block[1],
                rec.block[2], rec.shared, op.IssueStream(rec.stream), params, extra);
  } else {
    return real(rec.function, rec.grid[0], rec.grid[1], rec.grid[2], rec.block[0], rec.block[1],
                rec.block[2], rec.shared, op.IssueStream(rec.stream), params);
  }
}

template <ApiId kId, typename Real>
CUresult IssueLaunchEx(Op& op) {
  LaunchRecord& rec = RecordOf(op);
  auto [params, extra] = RebuildParams(op, rec);
  CUlaunchConfig config{};
  config.gridDimX = rec.grid[0];
  config.gridDimY = rec.grid[1];
  config.gridDimZ = rec.grid[2];
  config.blockDimX = rec.block[0];
  config.blockDimY = rec.block[1];
  config.blockDimZ = rec.block[2];
  config.sharedMemBytes = rec.shared;
  config.hStream = op.IssueStream(rec.stream);
  config.numAttrs = rec.num_attrs;
  config.attrs = rec.num_attrs == 0
                     ? nullptr
                     : reinterpret_cast<CUlaunchAttribute*>(op.data.data() + rec.attrs_at);
  const auto real = reinterpret_cast<Real>(RealEntry(kId));
  DriverCallScope in_driver;
  return real(&config, rec.function, params, extra);
}

// The op for a validated launch, its parameters copied (null if they cannot be: run it inline).
template <ApiId kId>
Op* LaunchOp(Op::IssueFn issue, CUfunction f, const unsigned int grid[3],
             const unsigned int block[3], unsigned int shared, CUstream stream, void** params,
             void** extra, const CUlaunchConfig* config, const ParamLayout* layout,
             scheduler::StreamState* st, int priority) {
  Op* op = scheduler::OpPool::ForThisThread().Take();
  LaunchRecord* rec = new (op->args) LaunchRecord{};
  if (!CopyParams(*op, *rec, layout, params, extra)) {
    op->home->Give(op);
    return nullptr;
  }
  rec->function = f;
  std::memcpy(rec->grid, grid, sizeof(rec->grid));
  std::memcpy(rec->block, block, sizeof(rec->block));
  rec->shared = shared;
  rec->stream = stream;
  if (config != nullptr && config->numAttrs > 0) {
    rec->attrs_at = AlignUp(op->data.size());
    rec->num_attrs = config->numAttrs;
    op->data.resize(rec->attrs_at + config->numAttrs * sizeof(CUlaunchAttribute));
    std::memcpy(op->data.data() + rec->attrs_at, config->attrs,
                config->numAttrs * sizeof(CUlaunchAttribute));
  }
  op->cost_key = f;
  return ReadyOp<kId>(op, issue, st, priority);
}

// The shared body of every launch form. `issue` rebuilds the call on the dispatcher; `inline_call`
// runs it now when it cannot be deferred.
template <ApiId kId, typename InlineCall>
CUresult ScheduleLaunch(scheduler::Scheduler* s, Op::IssueFn issue, CUfunction f,
                        const unsigned int grid[3], const unsigned int block[3],
                        unsigned int shared, CUstream stream, void** params, void** extra,
                        const CUlaunchConfig* config, InlineCall inline_call) {
  if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  scheduler::StreamState* st = s->Resolve(stream, IsPerThreadEntry(kId));
  NoExtraSteps steps;
  // Issued now, the driver validates a launch itself and nothing needs copying; only a launch to
  // be queued is validated here and copied into its op.
  auto make_op = [&](int priority) {
    const ParamLayout* layout = FindParamLayout(f);
    if (layout == nullptr) return Deferral{};
    if (const CUresult invalid = Validate(*layout, block, shared, grid); invalid != CUDA_SUCCESS) {
      return Deferral{nullptr, invalid};
    }
    return Deferral{LaunchOp<kId>(issue, f, grid, block, shared, stream, params, extra, config,
                                  layout, st, priority)};
  };
  return ScheduleStreamCall<kId>(s, st, steps, make_op, inline_call);
}

}  // namespace

#define GPUPRIO_DEFINE_LAUNCH_HANDLER(symbol, pfn)                                             \
  CUresult ScheduledHandler<ApiId::k_##symbol, ApiClass::kOrdered>::Call(                      \
      scheduler::Scheduler* s, pfn real, CUfunction f, unsigned int gx, unsigned int gy,       \
      unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared, \
      CUstream stream, void** params, void** extra) {                                          \
    const unsigned int grid[3] = {gx, gy, gz};                                                 \
    const unsigned int block[3] = {bx, by, bz};                                                \
    return ScheduleLaunch<ApiId::k_##symbol>(                                                  \
        s, &IssueGridLaunch<ApiId::k_##symbol, pfn, true>, f, grid, block, shared, stream,     \
        params, extra, nullptr,                                                                \
        [&] { return real(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra); });       \
  }
GPUPRIO_DEFINE_LAUNCH_HANDLER(cuLaunchKernel, PFN_cuLaunchKernel_v4000)
GPUPRIO_DEFINE_LAUNCH_HANDLER(cuLaunchKernel_ptsz, PFN_cuLaunchKernel_v7000_ptsz)
#undef GPUPRIO_DEFINE_LAUNCH_HANDLER

#define GPUPRIO_DEFINE_COOPERATIVE_HANDLER(symbol, pfn)                                        \
  CUresult ScheduledHandler<ApiId::k_##symbol, ApiClass::kOrdered>::Call(                      \
      scheduler::Scheduler* s, pfn real, CUfunction f, unsigned int gx, unsigned int gy,       \
      unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared, \
      CUstream stream, void** params) {                                                        \
    const unsigned int grid[3] = {gx, gy, gz};                                                 \
    const unsigned int block[3] = {bx, by, bz};                                                \
    return ScheduleLaunch<ApiId::k_##symbol>(                                                  \
        s, &IssueGridLaunch<ApiId::k_##symbol, pfn, false>, f, grid, block, shared, stream,    \
        params, nullptr, nullptr,                                                              \
        [&] { return real(f, gx, gy, gz, bx, by, bz, shared, stream, params); });              \
  }
GPUPRIO_DEFINE_COOPERATIVE_HANDLER(cuLaunchCooperativeKernel,
                                   PFN_cuLaunchCooperativeKernel_v9000)
GPUPRIO_DEFINE_COOPERATIVE_HANDLER(cuLaunchCooperativeKernel_ptsz,
                                   PFN_cuLaunchCooperativeKernel_v9000_ptsz)
#undef GPUPRIO_DEFINE_COOPERATIVE_HANDLER

#define GPUPRIO_DEFINE_LAUNCH_EX_HANDLER(symbol, pfn)                                        \
  CUresult ScheduledHandler<ApiId::k_##symbol, ApiClass::kOrdered>::Call(                    \
      scheduler::Scheduler* s, pfn real, const CUlaunchConfig* config, CUfunction f,         \
      void** params, void** extra) {                                                         \
    if (config == nullptr) return CallDriver(real, config, f, params, extra);                \
    const unsigned int grid[3] = {config->gridDimX, config->gridDimY, config->gridDimZ};     \
    const unsigned int block[3] = {config->blockDimX, config->blockDimY, config->blockDimZ}; \
    return ScheduleLaunch<ApiId::k_##symbol>(                                                \
        s, &IssueLaunchEx<ApiId::k_##symbol, pfn>, f, grid, block, config->sharedMemBytes,   \
        config->hStream, params, extra, config,                                              \
        [&] { return real(config, f, params, extra); });                                     \
  }
GPUPRIO_DEFINE_LAUNCH_EX_HANDLER(cuLaunchKernelEx, PFN_cuLaunchKernelEx_v11060)
GPUPRIO_DEFINE_LAUNCH_EX_HANDLER(cuLaunchKernelEx_ptsz, PFN_cuLaunchKernelEx_v11060_ptsz)
#undef GPUPRIO_DEFINE_LAUNCH_EX_HANDLER

}  // namespace gpuprio::hook
