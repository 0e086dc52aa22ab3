#include "hook/mps_client_priority.h"

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "scheduler/base/logging.h"

namespace gpuprio::hook {

MpsClientPriorityDecision DecideMpsClientPriority(const Config& config,
                                                  std::optional<absl::string_view> current) {
  MpsClientPriorityDecision decision;
  if (!config.mps_client_priority || config.mode != Mode::kSchedule) return decision;
  const std::optional<absl::string_view> value =
      current.has_value() ? std::optional<absl::string_view>(absl::StripAsciiWhitespace(*current))
                          : std::nullopt;
  if (!value.has_value() || value->empty()) {
    // Normal is MPS's own default, so only a process below it has anything to ask for.
    if (config.default_priority < 0) decision.set_value = "1";
    return decision;
  }
  if (config.default_priority >= 0 && *value == "1") {
    decision.warning = absl::StrCat(
        kMpsClientPriorityVariable, "=1 (a below-normal MPS client) in a process of priority ",
        config.default_priority,
        ": under MPS its kernels yield SMs to other clients' work; unset it for this process "
        "(it is inherited from the parent's environment)");
  }
  return decision;
}

void ApplyMpsClientPriority(const Config& config) {
  const char* current = std::getenv(kMpsClientPriorityVariable);
  const MpsClientPriorityDecision decision =
      DecideMpsClientPriority(config, current != nullptr
                                          ? std::optional<absl::string_view>(current)
                                          : std::nullopt);
  if (decision.warning.has_value()) Log(LogLevel::kWarning, *decision.warning);
  if (!decision.set_value.has_value()) return;
  // At gpuprio's start (the first use of CUDA), before the driver reads it. Changing the
  // environment is not safe against other threads' getenv; this happens once, in the window where
  // a CUDA program sets its own variables up.
  // Overwrites only a blank value (the decision sets nothing over a value the user chose).
  if (setenv(kMpsClientPriorityVariable, decision.set_value->c_str(), /*overwrite=*/1) != 0) {
    Log(LogLevel::kWarning, absl::StrCat("could not set ", kMpsClientPriorityVariable,
                                         ": this process runs as a normal MPS client"));
    return;
  }
  Log(LogLevel::kInfo, absl::StrCat(kMpsClientPriorityVariable, "=", *decision.set_value,
                                    ": a below-normal MPS client (priority ",
                                    config.default_priority, ")"));
}

}  // namespace gpuprio::hook
