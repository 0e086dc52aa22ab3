#include "hook/real_driver.h"

#include <cuda.h>
#include <cudaProfilerTypedefs.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "absl/base/attributes.h"
#include "absl/base/call_once.h"
#include "absl/strings/str_format.h"
#include "hook/thread_state.h"
#include "scheduler/base/logging.h"

// Read by the dlsym trampoline (hook/dlsym_hook.cc) without a call, so it has C linkage. A plain
// pointer accessed with __atomic builtins: std::atomic's member functions are out-of-line (and
// instrumented) in sanitizer builds, and this runs before a sanitizer runtime is initialised.
extern "C" {
__attribute__((visibility("hidden"))) gpuprio::hook::DlsymFn gpuprio_internal_real_dlsym =
    nullptr;
}

namespace gpuprio::hook {

namespace internal_real_driver {
ABSL_CONST_INIT std::atomic<void*> g_real_entries[kApiCount] = {};
void* g_helper_entries[kHelperCount] = {};
}  // namespace internal_real_driver

namespace {

struct EntryByPointer {
  const void* real;
  ApiId id;
};

ABSL_CONST_INIT absl::once_flag g_resolve_once;
// Set as ResolveOnce returns, whatever the outcome: false in a forked child means the parent
// forked while one of its threads was resolving (RestartUnfinishedResolveInChild).
ABSL_CONST_INIT std::atomic<bool> g_resolve_finished{false};
// Written once inside g_resolve_once, read only after it.
bool g_resolved_ok = false;
EntryByPointer g_by_pointer[kApiCount];
int g_by_pointer_count = 0;

bool IsInGpuprio(const void* address) {
  Dl_info mine;
  Dl_info theirs;
  return dladdr(reinterpret_cast<const void*>(&IsInGpuprio), &mine) != 0 &&
         dladdr(address, &theirs) != 0 && mine.dli_fbase == theirs.dli_fbase;
}

struct HelperInfo {
  const char* base;
  int version;
};

constexpr HelperInfo kHelpers[kHelperCount] = {
#define GPUPRIO_DRIVER_HELPER(id, name, version, pfn) {name, version},
#include "hook/driver_helpers.def"
#undef GPUPRIO_DRIVER_HELPER
};

// The cudaTypedefs.h type of row `kId` of driver_api.def.
template <ApiId kId>
struct RowType;
#define GPUPRIO_DRIVER_API(symbol, base, version, variant, api_class, pfn) \
  template <>                                                              \
  struct RowType<ApiId::k_##symbol> {                                      \
    using type = pfn;                                                      \
  };
#include "hook/driver_api.def"
#undef GPUPRIO_DRIVER_API

// `name` at ABI `version`, as the real driver hands it out, or null. Never one of gpuprio's own
// functions (see the note in ResolveEntries).
void* LookUp(PFN_cuGetProcAddress_v12000 get_proc_address, const char* name, int version,
             cuuint64_t flags) {
  if (get_proc_address == nullptr) return nullptr;
  void* entry = nullptr;
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  DriverCallScope in_driver;
  if (get_proc_address(name, &entry, version, flags, &status) != CUDA_SUCCESS ||
      status != CU_GET_PROC_ADDRESS_SUCCESS || entry == nullptr || IsInGpuprio(entry)) {
    return nullptr;
  }
  return entry;
}

void ResolveEntries(void* handle) {
  g_by_pointer_count = 0;  // a child may be redoing a resolve its parent had begun
  DlsymFn dl = RealDlsym();
  auto get_proc_address =
      reinterpret_cast<PFN_cuGetProcAddress_v12000>(dl(handle, "cuGetProcAddress_v2"));
  for (int i = 0; i < kApiCount; ++i) {
    const ApiInfo& info = kApis[i];
    // A driver whose own cuGetProcAddress returns its exported symbols through the global scope
    // (built without -Bsymbolic) hands back gpuprio's interposed exports: LookUp never takes
    // those as the real entry points, or a wrapper would call itself.
    void* entry = LookUp(get_proc_address, info.base, info.version,
                         info.variant == ApiVariant::kPerThread
                             ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                             : CU_GET_PROC_ADDRESS_LEGACY_STREAM);
    // The exported name is the exact ABI, so it is a sound second source (drivers without
    // cuGetProcAddress_v2, or an ABI it does not hand out); a lookup on libcuda's own handle
    // never returns gpuprio's symbols.
    if (entry == nullptr) entry = dl(handle, info.symbol);
    internal_real_driver::g_real_entries[i].store(entry, std::memory_order_release);
    if (entry != nullptr) g_by_pointer[g_by_pointer_count++] = {entry, static_cast<ApiId>(i)};
  }
  std::stable_sort(g_by_pointer, g_by_pointer + g_by_pointer_count,
                   [](const EntryByPointer& a, const EntryByPointer& b) {
                     return std::less<const void*>()(a.real, b.real);
                   });
  for (int i = 0; i < kHelperCount; ++i) {
    internal_real_driver::g_helper_entries[i] = LookUp(
        get_proc_address, kHelpers[i].base, kHelpers[i].version, CU_GET_PROC_ADDRESS_LEGACY_STREAM);
  }
}

void ResolveDriver() {
  HookScope hook;
  void* handle = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) handle = dlopen("libcuda.so.1", RTLD_LAZY);
  if (handle == nullptr) {
    const char* why = dlerror();
    Log(LogLevel::kWarning,
        absl::StrFormat("cannot load libcuda.so.1 (%s); driver calls fail with "
                        "CUDA_ERROR_NOT_FOUND", why != nullptr ? why : "unknown error"));
    return;
  }
  ResolveEntries(handle);
  g_resolved_ok = true;
}

void ResolveOnce() {
  ResolveDriver();
  g_resolve_finished.store(true, std::memory_order_release);
}

}  // namespace

// Not instrumented: sanitizer runtimes call dlsym(RTLD_NEXT, ...) while they initialise, which
// reaches this function before the runtime can handle instrumented code.
__attribute__((no_sanitize("address", "thread", "undefined"))) DlsymFn RealDlsym() {
  DlsymFn fn = __atomic_load_n(&gpuprio_internal_real_dlsym, __ATOMIC_ACQUIRE);
  if (fn != nullptr) return fn;
  void* found = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
  if (found == nullptr) found = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
  if (found == nullptr) {
    Log(LogLevel::kError, "glibc's dlsym not found (neither GLIBC_2.34 nor GLIBC_2.2.5)");
    std::abort();
  }
  fn = reinterpret_cast<DlsymFn>(found);
  __atomic_store_n(&gpuprio_internal_real_dlsym, fn, __ATOMIC_RELEASE);
  return fn;
}

bool ResolveRealDriver() {
  absl::call_once(g_resolve_once, ResolveOnce);
  return g_resolved_ok;
}

void RestartUnfinishedResolveInChild() {
  // Only this thread exists in the child: nothing else reads or writes the flag now. once_flag is
  // a trivially destructible atomic word, so constructing a new one in place is all it takes.
  if (!g_resolve_finished.load(std::memory_order_acquire)) new (&g_resolve_once) absl::once_flag();
}

scheduler::DriverFunctions RealDriverFunctions() {
  scheduler::DriverFunctions d;
  // A kIntercepted row names a row of driver_api.def: its version must be the row's, and its type
  // the row's (the assignment does not compile otherwise). Names are pasted where the table's row
  // is read: cuda.h defines some of them (cuEventElapsedTime) as macros naming a newer ABI.
#define GPUPRIO_FILL_kHelper(field, id, name, abi) d.field = DriverHelper<HelperId::id>();
#define GPUPRIO_FILL_kIntercepted(field, id, name, abi)                                \
  static_assert(Info(ApiId::id).version == abi,                                      \
                "scheduler/driver_functions.def: " name " is not at its row's version"); \
  d.field = reinterpret_cast<RowType<ApiId::id>::type>(RealEntry(ApiId::id));
#define GPUPRIO_DRIVER_FUNCTION(field, group, reach, name, version, pfn) \
  GPUPRIO_FILL_##reach(field, k_##name, #name, version)
#include "scheduler/driver_functions.def"
#undef GPUPRIO_DRIVER_FUNCTION
#undef GPUPRIO_FILL_kIntercepted
#undef GPUPRIO_FILL_kHelper
  return d;
}

std::optional<ApiId> FindApiByRealEntry(const void* p) {
  if (!ResolveRealDriver()) return std::nullopt;
  const EntryByPointer* end = g_by_pointer + g_by_pointer_count;
  const EntryByPointer* it =
      std::lower_bound(static_cast<const EntryByPointer*>(g_by_pointer), end, p, [](const EntryByPointer& e, const void* key) {
        return std::less<const void*>()(e.real, key);
      });
  if (it == end || it->real != p) return std::nullopt;
  return it->id;
}

bool AddressIsInDriver(const void* address) {
  Dl_info info;
  if (dladdr(address, &info) == 0 || info.dli_fname == nullptr) return false;
  const char* base = std::strrchr(info.dli_fname, '/');
  base = base != nullptr ? base + 1 : info.dli_fname;
  return std::strncmp(base, "libcuda.so", 10) == 0;
}

}  // namespace gpuprio::hook
