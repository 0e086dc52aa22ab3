// hook/op_cost_hint.h: what the budget counts for queued ops that are not kernels.
#include "hook/op_cost_hint.h"

#include <cuda.h>

#include "catch2/catch.hpp"

namespace gpuprio::hook {
namespace {

const auto kPtr = CUdeviceptr{0x1000};
const auto kStream = reinterpret_cast<CUstream>(0x2000);

TEST_CASE("Ops that only order or signal cost the budget nothing", "[hook]") {
  CHECK(OrderedCostHintNs<ApiId::k_cuLaunchHostFunc>(kStream, nullptr, nullptr) == 1);
  CHECK(OrderedCostHintNs<ApiId::k_cuStreamWriteValue32_v2>(kStream, kPtr, cuuint32_t{1},
                                                            0u) == 1);
  CHECK(OrderedCostHintNs<ApiId::k_cuMemFreeAsync>(kPtr, kStream) == 1);
}

TEST_CASE("A memset costs its bytes like a copy; a graph is unknown", "[hook]") {
  CHECK(OrderedCostHintNs<ApiId::k_cuMemsetD8Async>(kPtr, static_cast<unsigned char>(0),
                                                    size_t{2000}, kStream) ==
        CopyCostHintNs(2000));
  CHECK(OrderedCostHintNs<ApiId::k_cuMemsetD32Async>(kPtr, 0u, size_t{1000}, kStream) ==
        CopyCostHintNs(4000));
  CHECK(OrderedCostHintNs<ApiId::k_cuMemsetD16Async_ptsz>(
            kPtr, static_cast<unsigned short>(0), size_t{1000}, kStream) == CopyCostHintNs(2000));
  // 2D: pitch, then width x height elements.
  CHECK(OrderedCostHintNs<ApiId::k_cuMemsetD2D32Async>(kPtr, size_t{4096}, 0u, size_t{100},
                                                       size_t{30}, kStream) ==
        CopyCostHintNs(100 * 30 * 4));
  CHECK(OrderedCostHintNs<ApiId::k_cuGraphLaunch>(reinterpret_cast<CUgraphExec>(0x3000),
                                                  kStream) == 0);
}

}  // namespace
}  // namespace gpuprio::hook
