// gpuprio's dlsym. libcudart, cuBLAS, cuDNN and the rest dlopen libcuda.so.1 and dlsym it; a
// lookup on a specific handle never searches LD_PRELOAD libraries, so dlsym itself is replaced.
//
// dlsym is a small assembly trampoline because glibc's dlsym reads its caller's return address:
// RTLD_NEXT means "the next object after the caller", so an RTLD_NEXT lookup must reach glibc by a
// tail jump with the caller's return address still on the stack (a C wrapper would make
// libgpuprio.so the caller and break sanitizer runtimes and other interposers). Other lookups go
// to DlsymWithCaller with the caller's address as a third argument.
#include <dlfcn.h>

#include "hook/api_table.h"
#include "hook/config.h"
#include "hook/process_start.h"
#include "hook/real_driver.h"
#include "hook/thread_state.h"
#include "hook/wrapper.h"

#if !defined(__x86_64__)
#error "hook/dlsym_hook.cc has a dlsym trampoline for x86-64 only"
#endif

extern "C" {

namespace {

// Lookups of the names gpuprio intercepts (cu[A-Z]...), after the cheap filter.
void* DlsymDriverSymbol(void* handle, const char* name, const void* caller) {
  using namespace gpuprio::hook;  // NOLINT: one function, many names
  const DlsymFn real = RealDlsym();
  if (InHook() || InDriverCall()) return real(handle, name);
  HookScope in_hook;
  void* result = real(handle, name);
  // The driver's own lookups, and names that resolve outside libcuda (our own exports found
  // through RTLD_DEFAULT, another library's symbol), are left alone; they are no use of CUDA yet
  // (a program probing whether CUDA is there), so gpuprio does not start for them.
  if (result == nullptr || AddressIsInDriver(caller) || !AddressIsInDriver(result)) return result;
  // Any driver function counts, intercepted or not (cuInit is the usual first).
  NoteCudaUse();
  const std::optional<ApiId> id = FindApiBySymbol(name);
  if (!id.has_value() || GetConfig().mode == Mode::kOff) return result;
  return WrapperFor(*id, CallPath::kDlsym);
}

}  // namespace

// Not instrumented, and touching nothing instrumented before the name filter: sanitizer
// runtimes look up their interceptors' targets through dlsym before they are initialised.
__attribute__((visibility("hidden"), no_sanitize("address", "thread", "undefined"))) void*
gpuprio_internal_dlsym_with_caller(void* handle, const char* name, const void* caller) {
  if (name == nullptr || name[0] != 'c' || name[1] != 'u' || name[2] < 'A' || name[2] > 'Z') {
    return gpuprio::hook::RealDlsym()(handle, name);
  }
  return DlsymDriverSymbol(handle, name, caller);
}

__attribute__((visibility("hidden"), no_sanitize("address", "thread", "undefined"))) void*
gpuprio_internal_resolve_real_dlsym() {
  return reinterpret_cast<void*>(gpuprio::hook::RealDlsym());
}

}  // extern "C"

// RTLD_NEXT is ((void*)-1). The slow path (real dlsym not yet known; a sanitizer runtime asks
// before any constructor has run) keeps the argument registers across the resolver call.
asm(R"(
  .text
  .globl dlsym
  .type dlsym, @function
  .p2align 4
dlsym:
  cmpq $-1, %rdi
  je 1f
  movq (%rsp), %rdx
  jmp gpuprio_internal_dlsym_with_caller
1:
  movq gpuprio_internal_real_dlsym(%rip), %rax
  testq %rax, %rax
  jz 2f
  jmp *%rax
2:
  pushq %rdi
  pushq %rsi
  subq $8, %rsp
  call gpuprio_internal_resolve_real_dlsym
  addq $8, %rsp
  popq %rsi
  popq %rdi
  jmp *%rax
  .size dlsym, .-dlsym
)");
