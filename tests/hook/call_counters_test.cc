#include "hook/call_counters.h"

#include <string>
#include <thread>
#include <vector>

#include "catch2/catch.hpp"

namespace gpuprio::hook {
namespace {

ApiId Row(const char* symbol) {
  const auto id = FindApiBySymbol(symbol);
  REQUIRE(id.has_value());
  return *id;
}

uint64_t Count(const CallCountTable& t, ApiId id, CallPath path) {
  return t[static_cast<int>(id)][static_cast<int>(path)];
}

TEST_CASE("Call counts from many threads, including exited ones, add up", "[hook]") {
  ResetCallCounts();
  const ApiId launch = Row("cuLaunchKernel");
  const ApiId launch_ptsz = Row("cuLaunchKernel_ptsz");
  constexpr int kThreads = 8;
  constexpr int kCalls = 1000;
  for (int round = 0; round < 2; ++round) {  // the second round reuses exited threads' blocks
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < kCalls; ++i) {
          CountCall(launch, CallPath::kProcAddress);
          CountCall(launch_ptsz, CallPath::kExported);
        }
      });
    }
    for (auto& t : threads) t.join();
  }
  const CallCountTable sum = SumCallCounts();
  CHECK(Count(sum, launch, CallPath::kProcAddress) == 2 * kThreads * kCalls);
  CHECK(Count(sum, launch_ptsz, CallPath::kExported) == 2 * kThreads * kCalls);
  CHECK(Count(sum, launch, CallPath::kDlsym) == 0);
  ResetCallCounts();
  CHECK(Count(SumCallCounts(), launch, CallPath::kProcAddress) == 0);
}

TEST_CASE("FormatCallSummary sums rows of one API and splits legacy from per-thread", "[hook]") {
  CallCountTable t{};
  t[static_cast<int>(Row("cuLaunchKernel"))][static_cast<int>(CallPath::kProcAddress)] = 5;
  t[static_cast<int>(Row("cuLaunchKernel_ptsz"))][static_cast<int>(CallPath::kProcAddress)] = 3;
  t[static_cast<int>(Row("cuLaunchKernel_ptsz"))][static_cast<int>(CallPath::kDlsym)] = 2;
  t[static_cast<int>(Row("cuLaunchKernel"))][static_cast<int>(CallPath::kExported)] = 1;
  t[static_cast<int>(Row("cuCtxSynchronize_v2"))][static_cast<int>(CallPath::kExported)] = 4;
  const std::vector<std::string> lines = FormatCallSummary(t);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] == "calls api=cuCtxSynchronize total=4 dlsym=0 gpa=0 gpa_ptsz=0 exported=4");
  CHECK(lines[1] == "calls api=cuLaunchKernel total=11 dlsym=2 gpa=5 gpa_ptsz=3 exported=1");
}

}  // namespace
}  // namespace gpuprio::hook
