// What glibc_compat.cc adds to libgpuprio.so so that it loads on glibc 2.28 and later while built on
// Debian 12 (docs/decisions/2026-11-27-glibc-floor.md): definitions, inside the library and hidden,
// of the glibc symbols newer than 2.28 that GCC 12's static libstdc++ and libgcc_eh reference
// (__libc_single_threaded, arc4random, _dl_find_object), and log2 bound to its GLIBC_2.2.5 version
// (Abseil calls it; glibc 2.29 added a new default version). The functions below are the parts the
// library's own callers never see, declared for //tests/hook:glibc_compat_test.
#ifndef GPUPRIO_HOOK_GLIBC_COMPAT_H_
#define GPUPRIO_HOOK_GLIBC_COMPAT_H_

#include <dlfcn.h>

#include <cstddef>

namespace gpuprio::glibc_compat {

// _dl_find_object as glibc 2.35 defines it, found with dl_iterate_phdr (what libgcc's unwinder did
// before GCC 12): fills `result` for the loaded object whose mapping holds `address` (its first
// page and the end of its last segment, its link map and its PT_GNU_EH_FRAME, nullptr if it has none)
// and returns
// 0, or returns -1. The library's _dl_find_object calls glibc's where glibc has one (2.35 and
// later) and this otherwise.
int FindObjectFallback(void* address, struct dl_find_object* result);

// Fills `buffer` from the kernel's random source (getrandom, or /dev/urandom on a kernel without
// it); false if neither works. The library's arc4random aborts then, as glibc's does.
bool FillRandom(void* buffer, size_t size);

}  // namespace gpuprio::glibc_compat

#endif  // GPUPRIO_HOOK_GLIBC_COMPAT_H_
