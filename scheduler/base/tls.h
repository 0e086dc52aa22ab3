// GPUPRIO_THREAD_LOCAL: how every thread-local variable of gpuprio is declared and defined.
#ifndef GPUPRIO_SCHEDULER_BASE_TLS_H_
#define GPUPRIO_SCHEDULER_BASE_TLS_H_

// - __thread, not thread_local: constant-initialised, so an access is never a call to a TLS
//   wrapper or guard (thread-locals that need a destructor are thread_local, and few).
// - initial-exec: libgpuprio.so is loaded at start-up (LD_PRELOAD), so its TLS block is static and
//   an access is one %fs-relative load instead of a __tls_get_addr call.
// - hidden, and of external linkage (never in an anonymous namespace): GNU ld 2.40 mis-relocated
//   an initial-exec access to an internal-linkage TLS variable of this shared object (a TPOFF64
//   against a section symbol without the variable's offset: one thread-local read another).
//   Hidden keeps them out of reach of other objects all the same.
#define GPUPRIO_THREAD_LOCAL __attribute__((visibility("hidden"), tls_model("initial-exec"))) __thread

// For the few thread-locals with a destructor (thread-exit hooks): hidden, external linkage.
#define GPUPRIO_THREAD_LOCAL_WITH_DESTRUCTOR __attribute__((visibility("hidden"))) thread_local

#endif  // GPUPRIO_SCHEDULER_BASE_TLS_H_
