// Counts of intercepted calls by API row and by the path that delivered the wrapper, kept per
// thread without locks (one relaxed store per call) and summed only when a summary is asked for.
#ifndef GPUPRIO_HOOK_CALL_COUNTERS_H_
#define GPUPRIO_HOOK_CALL_COUNTERS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "hook/api_table.h"
#include "scheduler/base/thread_registry.h"
#include "scheduler/base/tls.h"

namespace gpuprio::hook {

// How the caller obtained the wrapper it called.
enum class CallPath : uint8_t {
  kExported,     // called gpuprio's exported cu* symbol (program linked with -lcuda)
  kDlsym,        // pointer returned by dlsym(handle, "cu...")
  kProcAddress,  // pointer returned by cuGetProcAddress(_v2)
  kCount
};
inline constexpr int kCallPathCount = static_cast<int>(CallPath::kCount);

namespace internal_call_counters {

// A thread's counts. A block whose thread exited is taken over, counts and all, by the next
// thread that needs one.
struct CounterBlock : base::ThreadRegistryEntry<CounterBlock> {
  std::atomic<uint64_t> counts[kApiCount][kCallPathCount];
};

extern GPUPRIO_THREAD_LOCAL CounterBlock* t_block;

CounterBlock* AcquireBlockForThisThread();

}  // namespace internal_call_counters

// Hot path: no lock, no allocation after the thread's first call.
inline void CountCall(ApiId id, CallPath path) {
  using internal_call_counters::t_block;
  internal_call_counters::CounterBlock* block = t_block;
  if (block == nullptr) block = internal_call_counters::AcquireBlockForThisThread();
  std::atomic<uint64_t>& c = block->counts[static_cast<int>(id)][static_cast<int>(path)];
  // Single writer per block: a plain load + store is enough and avoids a locked instruction.
  c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

using CallCountTable = std::array<std::array<uint64_t, kCallPathCount>, kApiCount>;

// Sums all threads' counters (threads may still be counting; the result is a snapshot).
CallCountTable SumCallCounts();

// Zeroes every counter; for a forked child, whose inherited counts belong to its parent.
void ResetCallCounts();

// One line per driver API (rows with the same cuGetProcAddress name summed) with a non-zero
// total, in the form
//   calls api=cuLaunchKernel total=123 dlsym=0 gpa=120 gpa_ptsz=3 exported=0
// where gpa / gpa_ptsz split cuGetProcAddress deliveries by legacy / per-thread entry point.
std::vector<std::string> FormatCallSummary(const CallCountTable& counts);

}  // namespace gpuprio::hook

#endif  // GPUPRIO_HOOK_CALL_COUNTERS_H_
