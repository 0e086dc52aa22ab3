// The glibc symbols newer than glibc 2.28 that libgpuprio.so would otherwise need, defined inside it
// (hidden, like everything the version script does not export): glibc_compat.h says which and why;
// docs/decisions/2026-11-27-glibc-floor.md how the library is linked against glibc 2.31 and checked
// for 2.28. Each is correct on any glibc: where the real one exists, _dl_find_object calls it.
#include "hook/glibc_compat.h"

#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace gpuprio::glibc_compat {
namespace {

struct FindState {
  uintptr_t address = 0;
  uintptr_t map_start = 0;
  uintptr_t map_end = 0;
  void* eh_frame = nullptr;
  bool found = false;
};

// One loaded object: does its mapping (from the first PT_LOAD's page to the last PT_LOAD's end, gaps
// included, as glibc's l_map_start and l_map_end) hold the address?
int FindCallback(struct dl_phdr_info* info, size_t, void* data) {
  auto* state = static_cast<FindState*>(data);
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  uintptr_t low = UINTPTR_MAX, high = 0;
  void* eh_frame = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& phdr = info->dlpi_phdr[i];
    const uintptr_t start = info->dlpi_addr + phdr.p_vaddr;
    if (phdr.p_type == PT_LOAD && phdr.p_memsz > 0) {
      low = std::min(low, start & ~(page - 1));
      high = std::max(high, start + phdr.p_memsz);
    } else if (phdr.p_type == PT_GNU_EH_FRAME) {
      eh_frame = reinterpret_cast<void*>(start);
    }
  }
  if (low >= high || state->address < low || state->address >= high) return 0;
  state->map_start = low;
  state->map_end = high;
  state->eh_frame = eh_frame;
  state->found = true;
  return 1;  // stops the iteration
}

using FindObjectFunction = int (*)(void*, struct dl_find_object*);

// glibc's own _dl_find_object (2.35 and later), or nullptr; looked up once.
FindObjectFunction RealFindObject() {
  static std::atomic<uintptr_t> cached{0};  // 0: not looked up yet; 1: glibc has none
  uintptr_t value = cached.load(std::memory_order_acquire);
  if (value == 0) {
    void* found = dlvsym(RTLD_DEFAULT, "_dl_find_object", "GLIBC_2.35");
    value = found != nullptr ? reinterpret_cast<uintptr_t>(found) : 1;
    cached.store(value, std::memory_order_release);
  }
  return value == 1 ? nullptr : reinterpret_cast<FindObjectFunction>(value);
}

// Looks it up while the library loads, so that an exception is never the first to ask.
__attribute__((constructor)) void LookUpRealFindObject() { RealFindObject(); }

bool FillFromUrandom(char* out, size_t size) {
  int fd;
  do {
    fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return false;
  bool ok = true;
  while (size > 0) {
    const ssize_t n = read(fd, out, size);
    if (n > 0) {
      out += n;
      size -= static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      ok = false;
      break;
    }
  }
  close(fd);
  return ok;
}

}  // namespace

int FindObjectFallback(void* address, struct dl_find_object* result) {
  FindState state;
  state.address = reinterpret_cast<uintptr_t>(address);
  dl_iterate_phdr(FindCallback, &state);
  if (!state.found) return -1;
  std::memset(result, 0, sizeof(*result));
  result->dlfo_map_start = reinterpret_cast<void*>(state.map_start);
  result->dlfo_map_end = reinterpret_cast<void*>(state.map_end);
  result->dlfo_eh_frame = state.eh_frame;
  Dl_info info;
  struct link_map* map = nullptr;
  if (dladdr1(address, &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) != 0) {
    result->dlfo_link_map = map;
  }
  return 0;
}

bool FillRandom(void* buffer, size_t size) {
  const int saved_errno = errno;
  char* out = static_cast<char*>(buffer);
  bool ok = true;
  while (size > 0) {
    const long n = syscall(SYS_getrandom, out, size, 0);
    if (n > 0) {
      out += n;
      size -= static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      ok = n < 0 && errno == ENOSYS && FillFromUrandom(out, size);  // Linux before 3.17
      break;
    }
  }
  errno = saved_errno;
  return ok;
}

}  // namespace gpuprio::glibc_compat

extern "C" {

// GLIBC_2.32. libstdc++ (static guards, iostream init, shared_ptr counts) skips its atomics while
// this is non-zero; 0 always takes the thread-safe path, which is correct in any process.
__attribute__((visibility("hidden"))) char __libc_single_threaded = 0;

// GLIBC_2.36. Only std::random_device can call it, and gpuprio does not use one; libstdc++'s
// random.o comes in with the rest of its string instantiations.
__attribute__((visibility("hidden"))) uint32_t arc4random(void) noexcept {
  uint32_t value;
  if (!gpuprio::glibc_compat::FillRandom(&value, sizeof(value))) abort();
  return value;
}

// GLIBC_2.35. libgcc's unwinder (every thrown exception) finds a frame's object through it.
__attribute__((visibility("hidden"))) int _dl_find_object(void* address,
                                                          struct dl_find_object* result) noexcept {
  if (auto real = gpuprio::glibc_compat::RealFindObject()) return real(address, result);
  return gpuprio::glibc_compat::FindObjectFallback(address, result);
}

// glibc 2.29 made a new default version of log2 (GLIBC_2.29); Abseil's sampling calls it. The
// GLIBC_2.2.5 one, which every glibc has, returns the same values. log2 is a compiler builtin, whose
// implicit declaration is not hidden, so the assembler is told (.hidden) instead of the compiler:
// a log2 that the program exports could otherwise bind log2@GLIBC_2.2.5 back to this one.
double gpuprio_glibc_log2_2_2_5(double) noexcept;
__asm__(".symver gpuprio_glibc_log2_2_2_5, log2@GLIBC_2.2.5");
__asm__(".hidden log2");
double log2(double x) noexcept { return gpuprio_glibc_log2_2_2_5(x); }

}  // extern "C"
