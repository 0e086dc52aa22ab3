// Where the real driver lives: the real dlsym, libcuda's handle, and the real entry point of every
// row of driver_api.def, resolved through the real cuGetProcAddress_v2 (never by guessing names).
#ifndef GPUPRIO_HOOK_REAL_DRIVER_H_
#define GPUPRIO_HOOK_REAL_DRIVER_H_

#include <cudaTypedefs.h>

#include <atomic>
#include <optional>

#include "hook/api_table.h"
#include "scheduler/driver_functions.h"

namespace gpuprio::hook {

using DlsymFn = void* (*)(void*, const char*);

// glibc's dlsym, found with dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"), then "GLIBC_2.2.5".
// Never null once it returns (gpuprio aborts with a message if glibc has neither version).
DlsymFn RealDlsym();

// Loads libcuda.so.1 (it is normally loaded already) and resolves every row. Idempotent and
// thread-safe; returns false if the driver cannot be loaded.
bool ResolveRealDriver();

namespace internal_real_driver {
extern std::atomic<void*> g_real_entries[kApiCount];
}  // namespace internal_real_driver

// The driver's own entry point for `id`, or null if the driver does not have that ABI.
// Hot path: one acquire load once resolved.
inline void* RealEntry(ApiId id) {
  void* p = internal_real_driver::g_real_entries[static_cast<int>(id)].load(
      std::memory_order_acquire);
  if (p != nullptr) return p;
  ResolveRealDriver();
  return internal_real_driver::g_real_entries[static_cast<int>(id)].load(
      std::memory_order_acquire);
}

// The driver functions gpuprio calls itself without intercepting them (hook/driver_helpers.def).
enum class HelperId : uint8_t {
#define GPUPRIO_DRIVER_HELPER(id, name, version, pfn) id,
#include "hook/driver_helpers.def"
#undef GPUPRIO_DRIVER_HELPER
  kCount
};
inline constexpr int kHelperCount = static_cast<int>(HelperId::kCount);

template <HelperId kId>
struct HelperType;
#define GPUPRIO_DRIVER_HELPER(id, name, version, pfn) \
  template <>                                         \
  struct HelperType<HelperId::id> {                   \
    using type = pfn;                                 \
  };
#include "hook/driver_helpers.def"
#undef GPUPRIO_DRIVER_HELPER

namespace internal_real_driver {
// Written inside the resolve once, read only after it.
extern void* g_helper_entries[kHelperCount];
}  // namespace internal_real_driver

// The real driver's `kId`, or null if the driver lacks that ABI (or cannot be loaded).
template <HelperId kId>
typename HelperType<kId>::type DriverHelper() {
  if (!ResolveRealDriver()) return nullptr;
  return reinterpret_cast<typename HelperType<kId>::type>(
      internal_real_driver::g_helper_entries[static_cast<int>(kId)]);
}

// The scheduler's driver functions (scheduler/driver_functions.def) as this driver has them: each
// kHelper row's helper and each kIntercepted row's real entry point, null where the driver lacks
// the ABI. on_dispatcher_thread_start is the caller's to set.
scheduler::DriverFunctions RealDriverFunctions();

// fork() child side: a resolve that a thread of the parent had begun but not finished is started
// again by the child's next driver call (that thread does not exist in the child, and its once
// would stay "running" for ever). Runs in the child's fork handler; makes no call.
void RestartUnfinishedResolveInChild();

// The row whose real entry point is `p` (after ResolveRealDriver), or nullopt.
std::optional<ApiId> FindApiByRealEntry(const void* p);

// True if `address` lies in the loaded libcuda.so.* (the real driver, or tests' fake driver).
bool AddressIsInDriver(const void* address);

}  // namespace gpuprio::hook

#endif  // GPUPRIO_HOOK_REAL_DRIVER_H_
