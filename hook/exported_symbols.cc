// The concrete cu* names libgpuprio.so exports, for programs linked with -lcuda. Each export is a
// one-instruction trampoline (a tail jump, so every argument register and stack argument reaches
// the wrapper untouched) into the row's kExported wrapper.
#include <cudaProfilerTypedefs.h>
#include <cudaTypedefs.h>

#include "hook/wrapper.h"

#if !defined(__x86_64__)
#error "hook/exported_symbols.cc has trampolines for x86-64 only"
#endif

namespace gpuprio::hook {

#define GPUPRIO_DRIVER_API(symbol, base, version, variant, api_class, pfn)                   \
  extern "C" __attribute__((visibility("hidden"), used)) void* const                         \
      gpuprio_export_target_##symbol =                                                       \
          reinterpret_cast<void*>(&Wrapper<ApiId::k_##symbol, CallPath::kExported, pfn>::Call); \
  asm(".text\n"                                                                              \
      ".globl " #symbol "\n"                                                                 \
      ".type " #symbol ", @function\n"                                                       \
      ".p2align 4\n" #symbol ":\n"                                                           \
      "  jmp *gpuprio_export_target_" #symbol "(%rip)\n"                                     \
      ".size " #symbol ", .-" #symbol "\n");
#include "hook/driver_api.def"
#undef GPUPRIO_DRIVER_API

}  // namespace gpuprio::hook
