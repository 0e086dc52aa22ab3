#include "hook/api_table.h"

#include <cstring>
#include <string>

#include "catch2/catch.hpp"

namespace gpuprio::hook {
namespace {

TEST_CASE("FindApiBySymbol finds every row by its exported name", "[hook]") {
  for (int i = 0; i < kApiCount; ++i) {
    const auto id = FindApiBySymbol(kApis[i].symbol);
    REQUIRE(id.has_value());
    CHECK(static_cast<int>(*id) == i);
  }
}

TEST_CASE("FindApiBySymbol rejects names that are not rows", "[hook]") {
  CHECK_FALSE(FindApiBySymbol("cuDeviceGetName").has_value());
  CHECK_FALSE(FindApiBySymbol("cuLaunchKernel_").has_value());
  CHECK_FALSE(FindApiBySymbol("cuLaunch").has_value());
  CHECK_FALSE(FindApiBySymbol("").has_value());
  CHECK_FALSE(FindApiBySymbol("zzz").has_value());
}

TEST_CASE("API rows are consistent with the driver's naming", "[hook]") {
  for (const ApiInfo& info : kApis) {
    INFO(info.symbol);
    const std::string symbol = info.symbol;
    // The exported name extends the cuGetProcAddress name (cuMemFree -> cuMemFree_v2).
    CHECK(symbol.rfind(info.base, 0) == 0);
    const bool per_thread_name = symbol.size() > 5 && (symbol.substr(symbol.size() - 5) == "_ptsz" ||
                                                       symbol.substr(symbol.size() - 5) == "_ptds");
    CHECK(per_thread_name == (info.variant == ApiVariant::kPerThread));
    CHECK(info.version >= 2000);
    CHECK(info.version <= 13000);
  }
}

TEST_CASE("Every launch form is intercepted as ordered work, legacy and per-thread", "[hook]") {
  for (const char* name :
       {"cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz",
        "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel_ptsz"}) {
    INFO(name);
    const auto id = FindApiBySymbol(name);
    REQUIRE(id.has_value());
    CHECK(Info(*id).api_class == ApiClass::kOrdered);
  }
  for (const char* name : {"cuStreamSynchronize", "cuCtxSynchronize", "cuCtxSynchronize_v2",
                           "cuEventSynchronize", "cuStreamQuery", "cuMemFree_v2"}) {
    INFO(name);
    const auto id = FindApiBySymbol(name);
    REQUIRE(id.has_value());
    CHECK(Info(*id).api_class == ApiClass::kSync);
  }
}

TEST_CASE("LooksLikeDriverSymbol accepts only cu followed by a capital", "[hook]") {
  CHECK(LooksLikeDriverSymbol("cuInit"));
  CHECK(LooksLikeDriverSymbol("cuGetProcAddress_v2"));
  CHECK_FALSE(LooksLikeDriverSymbol("cudaMalloc"));
  CHECK_FALSE(LooksLikeDriverSymbol("cublasCreate_v2"));
  CHECK_FALSE(LooksLikeDriverSymbol("cu"));
  CHECK_FALSE(LooksLikeDriverSymbol("malloc"));
  CHECK_FALSE(LooksLikeDriverSymbol(""));
}

}  // namespace
}  // namespace gpuprio::hook
