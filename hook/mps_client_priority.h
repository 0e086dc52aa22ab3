// Under MPS, a below-normal gpuprio process asks to be a below-normal MPS client
// (CUDA_MPS_CLIENT_PRIORITY=1), so the GPU hands SMs that free up to more important clients'
// blocks first: the part of priority no launch order can give (docs/mps.md, "Client priority").
#ifndef GPUPRIO_HOOK_MPS_CLIENT_PRIORITY_H_
#define GPUPRIO_HOOK_MPS_CLIENT_PRIORITY_H_

#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "hook/config.h"

namespace gpuprio::hook {

// The variable the CUDA driver reads when it connects to an MPS server: "0" normal (its default),
// "1" below normal.
inline constexpr char kMpsClientPriorityVariable[] = "CUDA_MPS_CLIENT_PRIORITY";
// Set to "1" by gpuprio beside the value it sets, and inherited with it, so that a process can
// tell gpuprio's value (its own, or an ancestor's: a launcher of another priority) from the
// user's. Its entry in scheduler/base/env_vars.def says the same to users.
inline constexpr char kMpsClientPriorityMark[] = "GPUPRIO_MPS_CLIENT_PRIORITY_SET";

struct MpsClientPriorityDecision {
  // Set CUDA_MPS_CLIENT_PRIORITY to this, and the mark; nullopt: leave them as they are.
  std::optional<std::string> set_value;
  // Remove gpuprio's value and the mark: they were inherited from a process gpuprio gave them to,
  // and gpuprio would not give them to this one.
  bool withdraw = false;
  // Remove a mark that no longer goes with gpuprio's value (the user changed or removed the
  // variable since), so that a later deliberate `1` is not taken for gpuprio's.
  bool clear_mark = false;
  // The process is (or, once set, will be) a below-normal client by gpuprio's doing.
  bool below_normal = false;
  // One line to log at warning, if any.
  std::optional<std::string> warning;
};

// Pure. `current`: CUDA_MPS_CLIENT_PRIORITY as the process has it (nullopt when unset);
// `marked`: the mark is set. gpuprio's value (marked "1") is kept only where gpuprio would set
// it: a scheduling process below normal priority with GPUPRIO_MPS_CLIENT_PRIORITY=auto; anywhere
// else (normal or above, passthrough, off, the setting off) it is withdrawn. A value that is set,
// not blank and not gpuprio's is the user's and is never replaced. A scheduling process of normal
// priority or above that is about to run as a below-normal client by the user's value -- most
// likely inherited from a batch job's parent without gpuprio's mark -- gets a warning, since its
// kernels would then yield SMs to work they should not yield to.
MpsClientPriorityDecision DecideMpsClientPriority(const Config& config,
                                                  std::optional<absl::string_view> current,
                                                  bool marked);

// At load (the library's constructor, before main): decides for the settings as the environment
// has them then and applies it, silently (the start logs it). Changing the environment is not
// safe against another thread's getenv, and before main a preloaded library normally runs while
// the process has one thread (unless a dependency's constructor started one, or a running
// program dlopen()s the library), so this is where it is done.
void PrepareMpsClientPriorityAtLoad();

// At gpuprio's start (hook/process_start.cc), before any call reaches the real driver: decides
// for the process's configuration and logs it. Changes the environment only where the load did
// not already make it right: the start came first (a library's constructor used CUDA), or the
// program changed its GPUPRIO_* variables since.
void ApplyMpsClientPriority(const Config& config);

}  // namespace gpuprio::hook

#endif  // GPUPRIO_HOOK_MPS_CLIENT_PRIORITY_H_
