// What a queued op that is not a kernel costs the budget before anything of it is measured
// (kernels are learned per function; these ops are never measured).
#ifndef GPUPRIO_HOOK_OP_COST_HINT_H_
#define GPUPRIO_HOOK_OP_COST_HINT_H_

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "hook/api_table.h"

namespace gpuprio::hook {

// An op that only orders or signals (an event record or wait, a value wait or write, a host
// function, stream-ordered allocation) holds no SMs. Counted at the default estimate (a whole
// budget), each of them would hold back every kernel behind it until its completion was seen,
// leaving the GPU idle around it.
inline constexpr uint64_t kSignalCostHintNs = 1;

// A copy's bytes at a nominal 20 GB/s, plus a fixed 1 us.
inline uint64_t CopyCostHintNs(size_t bytes) { return bytes / 20 + 1000; }

constexpr bool SymbolStartsWith(const char* symbol, const char* prefix) {
  for (; *prefix != '\0'; ++symbol, ++prefix) {
    if (*symbol != *prefix) return false;
  }
  return true;
}

constexpr bool SymbolContains(const char* symbol, const char* part) {
  for (; *symbol != '\0'; ++symbol) {
    if (SymbolStartsWith(symbol, part)) return true;
  }
  return false;
}

// For the ordered calls that OrderedByValue queues: kSignalCostHintNs, except that a memset costs
// its bytes like a copy and a graph's cost is unknown (0: the dispatcher's default).
template <ApiId kId, typename... Args>
uint64_t OrderedCostHintNs(Args... args) {
  constexpr const char* kSymbol = Info(kId).symbol;
  if constexpr (SymbolStartsWith(kSymbol, "cuGraphLaunch")) {
    return 0;
  } else if constexpr (SymbolStartsWith(kSymbol, "cuMemsetD")) {
    constexpr size_t kElement = SymbolContains(kSymbol, "D32") ? 4
                                : SymbolContains(kSymbol, "D16") ? 2
                                                                 : 1;
    // The size_t arguments: N (1D), or pitch, width, height (2D).
    size_t sizes[3] = {0, 0, 0};
    int count = 0;
    auto take = [&](auto arg) {
      if constexpr (std::is_same_v<decltype(arg), size_t>) {
        if (count < 3) sizes[count++] = arg;
      }
    };
    (take(args), ...);
    const size_t elements = count == 3 ? sizes[1] * sizes[2] : sizes[0];
    return CopyCostHintNs(elements * kElement);
  } else {
    return kSignalCostHintNs;
  }
}

}  // namespace gpuprio::hook

#endif  // GPUPRIO_HOOK_OP_COST_HINT_H_
