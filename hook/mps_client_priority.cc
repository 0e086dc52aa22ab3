#include "hook/mps_client_priority.h"

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "scheduler/base/env_vars.h"
#include "scheduler/base/logging.h"

namespace gpuprio::hook {
namespace {

constexpr char kBelowNormal[] = "1";
constexpr char kMarkValue[] = "1";

std::optional<absl::string_view> Current() {
  const char* value = std::getenv(kMpsClientPriorityVariable);
  return value != nullptr ? std::optional<absl::string_view>(value) : std::nullopt;
}

bool Marked() {
  const char* mark = GpuprioGetenv(kMpsClientPriorityMark);
  return mark != nullptr && absl::StripAsciiWhitespace(mark) == kMarkValue;
}

// gpuprio's inherited value that the load removed, for the start to say so (the load logs
// nothing). Written before main, read at the start.
bool g_withdrawn_at_load = false;

// Applies the decision's change of the environment; false when the C library refused it.
bool ChangeEnvironment(const MpsClientPriorityDecision& decision) {
  if (decision.set_value.has_value()) {
    return setenv(kMpsClientPriorityVariable, decision.set_value->c_str(), /*overwrite=*/1) == 0 &&
           setenv(kMpsClientPriorityMark, kMarkValue, /*overwrite=*/1) == 0;
  }
  if (decision.withdraw) {
    return unsetenv(kMpsClientPriorityVariable) == 0 && unsetenv(kMpsClientPriorityMark) == 0;
  }
  if (decision.clear_mark) return unsetenv(kMpsClientPriorityMark) == 0;
  return true;
}

}  // namespace

MpsClientPriorityDecision DecideMpsClientPriority(const Config& config,
                                                  std::optional<absl::string_view> current,
                                                  bool marked) {
  MpsClientPriorityDecision decision;
  const std::optional<absl::string_view> value =
      current.has_value() ? std::optional<absl::string_view>(absl::StripAsciiWhitespace(*current))
                          : std::nullopt;
  const bool gpuprios = marked && value.has_value() && *value == kBelowNormal;
  const bool scheduling = config.mps_client_priority && config.mode == Mode::kSchedule;
  // Normal is MPS's own default, so only a process below it has anything to ask for.
  const bool wanted = scheduling && config.default_priority < 0;
  if (gpuprios || !value.has_value() || value->empty()) {
    if (wanted) {
      decision.below_normal = true;
      if (!gpuprios) decision.set_value = kBelowNormal;
    } else if (gpuprios) {
      decision.withdraw = true;
    } else if (marked) {
      decision.clear_mark = true;
    }
    return decision;
  }
  if (marked) decision.clear_mark = true;  // the value is the user's now
  if (scheduling && config.default_priority >= 0 && *value == kBelowNormal) {
    decision.warning = absl::StrCat(
        kMpsClientPriorityVariable, "=1 (a below-normal MPS client) in a process of priority ",
        config.default_priority,
        ": under MPS its kernels yield SMs to other clients' work; unset it for this process "
        "(it is inherited from the parent's environment)");
  }
  return decision;
}

void PrepareMpsClientPriorityAtLoad() {
  // The settings as they are now, their problems unreported: the start parses and reports them,
  // and a process that never uses CUDA reports nothing.
  const Config config = ParseMpsClientPriorityConfig(GpuprioGetenv);
  const MpsClientPriorityDecision decision = DecideMpsClientPriority(config, Current(), Marked());
  if (ChangeEnvironment(decision) && decision.withdraw) g_withdrawn_at_load = true;
}

void ApplyMpsClientPriority(const Config& config) {
  const MpsClientPriorityDecision decision = DecideMpsClientPriority(config, Current(), Marked());
  if (decision.warning.has_value()) Log(LogLevel::kWarning, *decision.warning);
  // Normally the load made the environment right and nothing changes here. Otherwise another
  // thread may be reading the environment at this moment; that cannot be helped any more.
  if (!ChangeEnvironment(decision)) {
    Log(LogLevel::kWarning, absl::StrCat("could not change ", kMpsClientPriorityVariable,
                                         ": this process's MPS client priority is as the "
                                         "environment had it"));
    return;
  }
  if (decision.withdraw || g_withdrawn_at_load) {
    Log(LogLevel::kInfo,
        absl::StrCat("removed ", kMpsClientPriorityVariable, "=", kBelowNormal,
                     " set by gpuprio in a parent process: this process (priority ",
                     config.default_priority, ", mode ", ModeName(config.mode),
                     ") runs as a normal MPS client; unset ", kMpsClientPriorityMark,
                     " to keep the value"));
  }
  if (decision.below_normal) {
    Log(LogLevel::kInfo,
        absl::StrCat(kMpsClientPriorityVariable, "=", kBelowNormal,
                     ": a below-normal MPS client (priority ", config.default_priority, ")"));
  }
}

}  // namespace gpuprio::hook
