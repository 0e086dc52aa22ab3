#include "hook/call_counters.h"

#include <cstring>

#include "absl/base/attributes.h"
#include "absl/strings/str_format.h"

namespace gpuprio::hook {
namespace internal_call_counters {

GPUPRIO_THREAD_LOCAL CounterBlock* t_block = nullptr;

namespace {

// Blocks are never freed: memory is bounded by the peak number of counting threads.
ABSL_CONST_INIT base::ThreadRegistry<CounterBlock> g_blocks;

}  // namespace

struct BlockReleaser {
  ~BlockReleaser() {
    if (t_block != nullptr) {
      base::ThreadRegistry<CounterBlock>::Release(t_block);
      t_block = nullptr;
    }
  }
};

GPUPRIO_THREAD_LOCAL_WITH_DESTRUCTOR BlockReleaser t_releaser;

CounterBlock* AcquireBlockForThisThread() {
  (void)&t_releaser;  // registers the thread-exit hand-back
  t_block = g_blocks.Acquire();
  return t_block;
}

CounterBlock* FirstBlock() { return g_blocks.First(); }

}  // namespace internal_call_counters

CallCountTable SumCallCounts() {
  CallCountTable sum{};
  for (auto* b = internal_call_counters::FirstBlock(); b != nullptr; b = b->next_in_registry()) {
    for (int api = 0; api < kApiCount; ++api) {
      for (int path = 0; path < kCallPathCount; ++path) {
        sum[api][path] += b->counts[api][path].load(std::memory_order_relaxed);
      }
    }
  }
  return sum;
}

void ResetCallCounts() {
  for (auto* b = internal_call_counters::FirstBlock(); b != nullptr; b = b->next_in_registry()) {
    for (auto& row : b->counts) {
      for (auto& c : row) c.store(0, std::memory_order_relaxed);
    }
  }
}

std::vector<std::string> FormatCallSummary(const CallCountTable& counts) {
  struct BaseTotals {
    const char* base;
    uint64_t dlsym, gpa, gpa_ptsz, exported;
  };
  std::vector<BaseTotals> bases;
  for (int api = 0; api < kApiCount; ++api) {
    const ApiInfo& info = kApis[api];
    BaseTotals* t = nullptr;
    for (auto& b : bases) {
      if (std::strcmp(b.base, info.base) == 0) t = &b;
    }
    if (t == nullptr) {
      bases.push_back({info.base, 0, 0, 0, 0});
      t = &bases.back();
    }
    const auto& c = counts[api];
    t->exported += c[static_cast<int>(CallPath::kExported)];
    t->dlsym += c[static_cast<int>(CallPath::kDlsym)];
    (info.variant == ApiVariant::kPerThread ? t->gpa_ptsz : t->gpa) +=
        c[static_cast<int>(CallPath::kProcAddress)];
  }
  std::vector<std::string> lines;
  for (const auto& b : bases) {
    const uint64_t total = b.dlsym + b.gpa + b.gpa_ptsz + b.exported;
    if (total == 0) continue;
    lines.push_back(absl::StrFormat("calls api=%s total=%d dlsym=%d gpa=%d gpa_ptsz=%d exported=%d",
                                    b.base, total, b.dlsym, b.gpa, b.gpa_ptsz, b.exported));
  }
  return lines;
}

}  // namespace gpuprio::hook
