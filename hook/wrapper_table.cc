// The wrappers handed out by dlsym and cuGetProcAddress, one row per driver_api.def entry.
#include <cudaProfilerTypedefs.h>
#include <cudaTypedefs.h>

#include "hook/wrapper.h"

namespace gpuprio::hook {
namespace {

struct LookupWrappers {
  void* dlsym;
  void* proc_address;
};

// Addresses of functions only: GCC emits this as relocated static data (no dynamic
// initialiser), so it is valid before any constructor runs.
const LookupWrappers kLookupWrappers[kApiCount] = {
#define GPUPRIO_DRIVER_API(symbol, base, version, variant, api_class, pfn)                    \
  {reinterpret_cast<void*>(&Wrapper<ApiId::k_##symbol, CallPath::kDlsym, pfn>::Call),         \
   reinterpret_cast<void*>(&Wrapper<ApiId::k_##symbol, CallPath::kProcAddress, pfn>::Call)},
#include "hook/driver_api.def"
#undef GPUPRIO_DRIVER_API
};

}  // namespace

void* WrapperFor(ApiId id, CallPath path) {
  const LookupWrappers& w = kLookupWrappers[static_cast<int>(id)];
  return path == CallPath::kDlsym ? w.dlsym : w.proc_address;
}

}  // namespace gpuprio::hook
