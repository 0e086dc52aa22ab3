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

struct MpsClientPriorityDecision {
  // The value to set CUDA_MPS_CLIENT_PRIORITY to; nullopt: leave the environment as it is.
  std::optional<std::string> set_value;
  // One line to log at warning, if any.
  std::optional<std::string> warning;
};

// Pure. `current`: CUDA_MPS_CLIENT_PRIORITY as the process has it (nullopt when unset). Only a
// scheduling process acts (passthrough and off change nothing), and never over a value that is
// set and not blank: the user's (or a launcher's) choice wins. A process of normal priority or
// above that is about to run as a below-normal client -- most likely the variable was inherited
// from a batch job's parent, which gpuprio cannot tell from a deliberate choice -- gets a warning,
// since its kernels would then yield SMs to work they should not yield to.
MpsClientPriorityDecision DecideMpsClientPriority(const Config& config,
                                                  std::optional<absl::string_view> current);

// Applies the decision to the real environment, before the driver starts: called once by
// gpuprio's start (hook/process_start.cc), which runs before any call reaches the real driver.
void ApplyMpsClientPriority(const Config& config);

}  // namespace gpuprio::hook

#endif  // GPUPRIO_HOOK_MPS_CLIENT_PRIORITY_H_
