// The process's exit and fork handlers (hook/lifecycle.cc): the exit summary, and fork safety
// for gpuprio's state.
#ifndef GPUPRIO_HOOK_LIFECYCLE_H_
#define GPUPRIO_HOOK_LIFECYCLE_H_

namespace gpuprio::hook {

// Registers the handlers, once per process image. Called by the library's constructor and by
// the start (hook/process_start.h), whichever comes first: a library whose constructor uses CUDA
// starts gpuprio before gpuprio's own constructor runs (the loader initialises the program's
// dependencies before preloaded libraries), and the exit summary must still be registered before
// the scheduler's exit handler, so that it runs after the last work is issued.
void RegisterProcessHandlers();

}  // namespace gpuprio::hook

#endif  // GPUPRIO_HOOK_LIFECYCLE_H_
