// The intercepted driver surface as data: an id, names, ABI version and class for every row of
// hook/driver_api.def, plus name lookup. Everything else in hook/ is generated from this table.
#ifndef GPUPRIO_HOOK_API_TABLE_H_
#define GPUPRIO_HOOK_API_TABLE_H_

#include <cstdint>
#include <optional>

#include "absl/strings/string_view.h"

namespace gpuprio::hook {

// Which default stream a stream handle of 0 names for this entry point.
enum class ApiVariant : uint8_t {
  kLegacy,     // the context's legacy NULL stream
  kPerThread,  // the calling thread's per-thread default stream (_ptsz / _ptds)
};

// How the scheduler treats a call (docs/architecture.md has the full definitions).
enum class ApiClass : uint8_t { kOrdered, kSync, kInline, kPassThrough, kSelf };

enum class ApiId : uint16_t {
#define GPUPRIO_DRIVER_API(symbol, base, version, variant, api_class, pfn) k_##symbol,
#include "hook/driver_api.def"
#undef GPUPRIO_DRIVER_API
  kCount
};

inline constexpr int kApiCount = static_cast<int>(ApiId::kCount);

struct ApiInfo {
  const char* symbol;  // exported ELF name
  const char* base;    // name given to cuGetProcAddress
  int version;         // cudaVersion that selects this ABI
  ApiVariant variant;
  ApiClass api_class;
};

inline constexpr ApiInfo kApis[kApiCount] = {
#define GPUPRIO_DRIVER_API(symbol, base, version, variant, api_class, pfn) \
  {#symbol, #base, version, ApiVariant::variant, ApiClass::api_class},
#include "hook/driver_api.def"
#undef GPUPRIO_DRIVER_API
};

constexpr const ApiInfo& Info(ApiId id) { return kApis[static_cast<int>(id)]; }

// The row exported as `symbol` (binary search over the sorted table), or nullopt.
std::optional<ApiId> FindApiBySymbol(absl::string_view symbol);

// True for names of the form cu[A-Z]*: the only dlsym lookups gpuprio looks at twice.
inline bool LooksLikeDriverSymbol(const char* name) {
  return name[0] == 'c' && name[1] == 'u' && name[2] >= 'A' && name[2] <= 'Z';
}

}  // namespace gpuprio::hook

#endif  // GPUPRIO_HOOK_API_TABLE_H_
