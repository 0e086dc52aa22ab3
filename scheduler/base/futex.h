// Sleeping on a 32-bit word until another thread or process changes it (Linux futex). The word
// may live in memory shared between processes, so the calls use the shared (non-private) forms.
#ifndef GPUPRIO_SCHEDULER_BASE_FUTEX_H_
#define GPUPRIO_SCHEDULER_BASE_FUTEX_H_

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdint>

namespace gpuprio::base {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));

// Sleeps while `*word` holds `expected`, for at most `timeout_ns` (relative): returns at once if
// it already differs, when woken by FutexWakeAll, on a signal, or at the timeout. Spurious
// returns are allowed; callers look at what they wait for again.
inline void FutexWait(const std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns) {
  if (timeout_ns <= 0) return;
  timespec timeout{static_cast<time_t>(timeout_ns / 1'000'000'000),
                   static_cast<long>(timeout_ns % 1'000'000'000)};
  syscall(SYS_futex, reinterpret_cast<const uint32_t*>(word), FUTEX_WAIT, expected, &timeout,
          nullptr, 0);
}

// Wakes every thread, of any process, sleeping in FutexWait on `word`.
inline void FutexWakeAll(const std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<const uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr,
          nullptr, 0);
}

}  // namespace gpuprio::base

#endif  // GPUPRIO_SCHEDULER_BASE_FUTEX_H_
