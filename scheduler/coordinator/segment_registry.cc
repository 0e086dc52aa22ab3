#include "scheduler/coordinator/segment_registry.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

#include "absl/base/call_once.h"

namespace gpuprio::coordinator {
namespace {

struct Entry {
  std::atomic<uintptr_t> base{0};  // 0: unused
  std::atomic<size_t> size{0};
  std::atomic<int> fd{-1};
  std::atomic<bool> lost{false};
};

// Zero-initialised, no constructor runs: usable from the handler at any time.
Entry g_entries[kMaxRegisteredSegments];
struct sigaction g_previous;  // written once, before the handler is installed
absl::once_flag g_install_once;

bool ReplaceWithZeros(uintptr_t base, size_t size, int protection) {
  return mmap(reinterpret_cast<void*>(base), size, protection,
              MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED;
}

void OnBusError(int signal, siginfo_t* info, void* context) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Entry& e : g_entries) {
    const uintptr_t base = e.base.load(std::memory_order_acquire);
    if (base == 0 || address < base || address - base >= e.size.load(std::memory_order_acquire)) {
      continue;
    }
    // The file shrank under the mapping. The faulting access is retried on private zeros (a free
    // slot, no peer): this process goes on alone, and its coordinator sees the segment lost.
    if (ReplaceWithZeros(base, e.size.load(std::memory_order_acquire), PROT_READ | PROT_WRITE)) {
      e.lost.store(true, std::memory_order_release);
      return;
    }
    break;
  }
  // Not gpuprio's memory: whatever would have happened without gpuprio.
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(signal, info, context);
    return;
  }
  if (g_previous.sa_handler == SIG_DFL || g_previous.sa_handler == SIG_IGN) {
    // The faulting instruction runs again and faults under the default action (a synchronous
    // SIGBUS cannot be ignored).
    struct sigaction fallback {};
    fallback.sa_handler = SIG_DFL;
    sigemptyset(&fallback.sa_mask);
    sigaction(SIGBUS, &fallback, nullptr);
    return;
  }
  g_previous.sa_handler(signal);
}

void InstallHandler() {
  struct sigaction action {};
  action.sa_sigaction = &OnBusError;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  sigaction(SIGBUS, &action, &g_previous);
}

}  // namespace

int RegisterSegment(void* base, size_t size, int fd) {
  absl::call_once(g_install_once, InstallHandler);
  for (int i = 0; i < kMaxRegisteredSegments; ++i) {
    Entry& e = g_entries[i];
    uintptr_t unused = 0;
    // Claimed with a placeholder base, so no fault matches it before its size is set.
    if (!e.base.compare_exchange_strong(unused, 1, std::memory_order_acq_rel)) continue;
    e.size.store(size, std::memory_order_release);
    e.fd.store(fd, std::memory_order_release);
    e.lost.store(false, std::memory_order_release);
    e.base.store(reinterpret_cast<uintptr_t>(base), std::memory_order_release);
    return i;
  }
  return -1;
}

bool SegmentLost(int entry) {
  return entry >= 0 && g_entries[entry].lost.load(std::memory_order_acquire);
}

void ReleaseSegment(int entry) {
  if (entry < 0) return;
  Entry& e = g_entries[entry];
  const uintptr_t base = e.base.load(std::memory_order_acquire);
  const size_t size = e.size.load(std::memory_order_acquire);
  ReplaceWithZeros(base, size, PROT_NONE);
  const int fd = e.fd.exchange(-1, std::memory_order_acq_rel);
  if (fd >= 0) close(fd);
  e.base.store(0, std::memory_order_release);
}

void CloseInheritedSegments() {
  for (Entry& e : g_entries) {
    const int fd = e.fd.exchange(-1, std::memory_order_acq_rel);
    if (fd >= 0) close(fd);
    // A mapping holds the open file too (and with it the parent's lock): it becomes private
    // zeros, which the parent's abandoned scheduler, never used in the child, may still point at.
    const uintptr_t base = e.base.load(std::memory_order_acquire);
    if (base > 1) ReplaceWithZeros(base, e.size.load(std::memory_order_acquire), PROT_READ | PROT_WRITE);
  }
}

}  // namespace gpuprio::coordinator
