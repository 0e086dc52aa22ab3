#include "hook/api_table.h"

#include <algorithm>

namespace gpuprio::hook {
namespace {

constexpr int Compare(const char* a, const char* b) {
  while (*a != '\0' && *a == *b) {
    ++a;
    ++b;
  }
  return static_cast<unsigned char>(*a) - static_cast<unsigned char>(*b);
}

constexpr bool TableIsSorted() {
  for (int i = 1; i < kApiCount; ++i) {
    if (Compare(kApis[i - 1].symbol, kApis[i].symbol) >= 0) return false;
  }
  return true;
}

static_assert(TableIsSorted(),
              "hook/driver_api.def must be sorted by symbol (strcmp order) with no duplicates");

}  // namespace

std::optional<ApiId> FindApiBySymbol(absl::string_view symbol) {
  const ApiInfo* end = kApis + kApiCount;
  const ApiInfo* it = std::lower_bound(
      kApis, end, symbol,
      [](const ApiInfo& info, absl::string_view s) { return absl::string_view(info.symbol) < s; });
  if (it == end || absl::string_view(it->symbol) != symbol) return std::nullopt;
  return static_cast<ApiId>(it - kApis);
}

}  // namespace gpuprio::hook
