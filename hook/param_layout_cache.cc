#include "hook/param_layout_cache.h"

#include <cudaTypedefs.h>

#include <atomic>
#include <memory>
#include <new>

#include "absl/base/attributes.h"
#include "absl/base/const_init.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "hook/real_driver.h"
#include "hook/thread_state.h"
#include "scheduler/base/tls.h"

namespace gpuprio::hook {
namespace {

ABSL_CONST_INIT std::atomic<uint64_t> g_epoch{1};
ABSL_CONST_INIT absl::Mutex g_first_mu(absl::kConstInit);
// Replaced only in a forked child, where one thread runs: threads of the parent may be queued on
// the old mutex.
absl::Mutex* g_mu_ptr = &g_first_mu;
absl::Mutex& Mu() { return *g_mu_ptr; }
// Never destroyed (wrappers run during exit); old layouts stay alive for threads that still hold
// a pointer from before an invalidation.
absl::flat_hash_map<CUfunction, const ParamLayout*>* g_layouts ABSL_GUARDED_BY(Mu()) = nullptr;

}  // namespace

namespace internal_param_layout {
struct CacheEntry {
  CUfunction function;
  uint64_t epoch;
  const ParamLayout* layout;
};
constexpr int kCacheSize = 64;
GPUPRIO_THREAD_LOCAL CacheEntry t_cache[kCacheSize];
}  // namespace internal_param_layout

namespace {

using internal_param_layout::CacheEntry;
using internal_param_layout::kCacheSize;
using internal_param_layout::t_cache;

template <typename Getter, typename Handle>
bool ReadParams(Getter get, Handle handle, ParamLayout* layout) {
  for (size_t i = 0;; ++i) {
    size_t offset = 0;
    size_t size = 0;
    const CUresult r = get(handle, i, &offset, &size);
    if (r == CUDA_ERROR_INVALID_VALUE) return true;  // past the last parameter
    if (r != CUDA_SUCCESS) return false;
    layout->params.push_back({static_cast<uint32_t>(offset), static_cast<uint32_t>(size)});
    if (offset + size > layout->total_size) layout->total_size = static_cast<uint32_t>(offset + size);
  }
}

const ParamLayout* ReadLayout(CUfunction function) {
  const auto func_params = DriverHelper<HelperId::k_cuFuncGetParamInfo>();
  const auto kernel_params = DriverHelper<HelperId::k_cuKernelGetParamInfo>();
  const auto func_attribute = DriverHelper<HelperId::k_cuFuncGetAttribute>();
  const auto kernel_attribute = DriverHelper<HelperId::k_cuKernelGetAttribute>();
  const auto ctx_get_device = DriverHelper<HelperId::k_cuCtxGetDevice>();
  DriverCallScope in_driver;
  auto layout = std::make_unique<ParamLayout>();
  bool is_kernel = false;
  if (func_params == nullptr || !ReadParams(func_params, function, layout.get())) {
    // A CUkernel passed where a CUfunction is expected (cudart does this).
    layout->params.clear();
    layout->total_size = 0;
    if (kernel_params == nullptr ||
        !ReadParams(kernel_params, reinterpret_cast<CUkernel>(function), layout.get())) {
      return nullptr;
    }
    is_kernel = true;
  }
  int threads = 0;
  int dynamic = 0;
  if (!is_kernel && func_attribute != nullptr &&
      func_attribute(&threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, function) == CUDA_SUCCESS &&
      func_attribute(&dynamic, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, function) ==
          CUDA_SUCCESS) {
    layout->max_threads_per_block = threads;
    layout->max_dynamic_shared_bytes = dynamic;
  } else if (is_kernel && kernel_attribute != nullptr && ctx_get_device != nullptr) {
    CUdevice device = 0;
    const auto kernel = reinterpret_cast<CUkernel>(function);
    if (ctx_get_device(&device) == CUDA_SUCCESS &&
        kernel_attribute(&threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, kernel, device) ==
            CUDA_SUCCESS &&
        kernel_attribute(&dynamic, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, kernel,
                         device) == CUDA_SUCCESS) {
      layout->max_threads_per_block = threads;
      layout->max_dynamic_shared_bytes = dynamic;
    }
  }
  return layout.release();
}

}  // namespace

const ParamLayout* FindParamLayout(CUfunction function) {
  const uint64_t epoch = g_epoch.load(std::memory_order_acquire);
  CacheEntry& entry = t_cache[(reinterpret_cast<uintptr_t>(function) >> 4) % kCacheSize];
  if (entry.function == function && entry.epoch == epoch) return entry.layout;
  const ParamLayout* layout = nullptr;
  {
    absl::ReaderMutexLock lock(&Mu());
    if (g_layouts != nullptr) {
      auto it = g_layouts->find(function);
      if (it != g_layouts->end()) layout = it->second;
    }
  }
  if (layout == nullptr) {
    layout = ReadLayout(function);
    if (layout == nullptr) return nullptr;
    absl::MutexLock lock(&Mu());
    if (g_layouts == nullptr) g_layouts = new absl::flat_hash_map<CUfunction, const ParamLayout*>();
    auto [it, inserted] = g_layouts->try_emplace(function, layout);
    if (!inserted) layout = it->second;  // another thread was first; ours is kept alive anyway
  }
  entry = {function, epoch, layout};
  return layout;
}

void InvalidateParamLayouts() {
  absl::MutexLock lock(&Mu());
  if (g_layouts != nullptr) g_layouts->clear();
  g_epoch.fetch_add(1, std::memory_order_acq_rel);
}

// fork(): the child must find the cache consistent and its mutex free, whatever the parent's
// other threads were doing. The prepare handler takes the mutex (so no update is half done), the
// parent releases it, and the child starts from an empty cache behind a fresh mutex: its driver
// is a new one (CUDA cannot be used across fork), so no parent layout applies.
void LockParamLayoutsForFork() ABSL_NO_THREAD_SAFETY_ANALYSIS { Mu().Lock(); }
void UnlockParamLayoutsInParent() ABSL_NO_THREAD_SAFETY_ANALYSIS { Mu().Unlock(); }
void ResetParamLayoutsInChild() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // This thread took the mutex in the prepare handler: it releases it (so Abseil's record of the
  // locks this thread holds stays true), then moves to a new mutex, because the old one may still
  // list waiting threads of the parent that do not exist here. Static storage: nothing is
  // allocated, so nothing leaks; a grandchild builds its own there again. The map is consistent
  // (the prepare handler held the mutex) and is emptied as on a module unload.
  Mu().Unlock();
  alignas(absl::Mutex) static unsigned char child_mu_storage[sizeof(absl::Mutex)];
  g_mu_ptr = new (child_mu_storage) absl::Mutex;
  if (g_layouts != nullptr) g_layouts->clear();
  g_epoch.fetch_add(1, std::memory_order_acq_rel);
}

}  // namespace gpuprio::hook
