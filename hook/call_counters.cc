#include "hook/call_counters.h"

#include <cstring>

#include "absl/base/attributes.h"
#include "absl/strings/str_format.h"

namespace gpuprio::hook {
namespace internal_call_counters {

__thread CounterBlock* t_block = nullptr;

namespace {

// Blocks are never freed: a thread that exits hands its block (and its counts) to the next
// thread that needs one, so memory is bounded by the peak number of counting threads.
ABSL_CONST_INIT std::atomic<CounterBlock*> g_blocks{nullptr};

}  // namespace

struct BlockReleaser {
  ~BlockReleaser() {
    if (t_block != nullptr) {
      t_block->in_use.store(false, std::memory_order_release);
      t_block = nullptr;
    }
  }
};

// External linkage on purpose: see the note on TLS in scheduler/scheduler.cc.
__attribute__((visibility("hidden"))) thread_local BlockReleaser t_releaser;

CounterBlock* AcquireBlockForThisThread() {
  (void)&t_releaser;  // registers the thread-exit hand-back
  for (CounterBlock* b = g_blocks.load(std::memory_order_acquire); b != nullptr; b = b->next) {
    bool expected = false;
    if (b->in_use.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
      t_block = b;
      return b;
    }
  }
  auto* block = new CounterBlock();
  for (auto& row : block->counts) {
    for (auto& c : row) c.store(0, std::memory_order_relaxed);
  }
  block->in_use.store(true, std::memory_order_relaxed);
  CounterBlock* head = g_blocks.load(std::memory_order_relaxed);
  do {
    block->next = head;
  } while (!g_blocks.compare_exchange_weak(head, block, std::memory_order_release,
                                           std::memory_order_relaxed));
  t_block = block;
  return block;
}

CounterBlock* FirstBlock() { return g_blocks.load(std::memory_order_acquire); }

}  // namespace internal_call_counters

CallCountTable SumCallCounts() {
  CallCountTable sum{};
  for (auto* b = internal_call_counters::FirstBlock(); b != nullptr; b = b->next) {
    for (int api = 0; api < kApiCount; ++api) {
      for (int path = 0; path < kCallPathCount; ++path) {
        sum[api][path] += b->counts[api][path].load(std::memory_order_relaxed);
      }
    }
  }
  return sum;
}

void ResetCallCounts() {
  for (auto* b = internal_call_counters::FirstBlock(); b != nullptr; b = b->next) {
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
