#include "hook/config.h"

#include <cstdlib>

#include "absl/base/attributes.h"
#include "absl/base/call_once.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"

namespace gpuprio::hook {
namespace {

absl::Status BadValue(absl::string_view var, absl::string_view value,
                      absl::string_view accepted) {
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s=\"%s\" is not valid (accepted: %s)", var, value, accepted));
}

}  // namespace

absl::string_view ModeName(Mode mode) {
  switch (mode) {
    case Mode::kSchedule:
      return "schedule";
    case Mode::kPassthrough:
      return "passthrough";
    case Mode::kOff:
      return "off";
  }
  return "unknown";
}

std::optional<int> ParsePriority(absl::string_view text) {
  const std::string value = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  if (value == "low") return -1;
  if (value == "normal") return 0;
  if (value == "high") return 1;
  int number = 0;
  if (!absl::SimpleAtoi(value, &number) || number < -100 || number > 100) return std::nullopt;
  return number;
}

absl::StatusOr<Config> ParseConfig(
    absl::FunctionRef<const char*(const char*)> getenv) {
  Config config;
  if (const char* raw = getenv("GPUPRIO_MODE"); raw != nullptr && *raw != '\0') {
    const std::string value = absl::AsciiStrToLower(raw);
    if (value == "schedule") {
      config.mode = Mode::kSchedule;
    } else if (value == "passthrough") {
      config.mode = Mode::kPassthrough;
    } else if (value == "off") {
      config.mode = Mode::kOff;
    } else {
      return BadValue("GPUPRIO_MODE", raw, "schedule, passthrough, off");
    }
  }
  if (const char* raw = getenv("GPUPRIO_LOG"); raw != nullptr && *raw != '\0') {
    const std::string value = absl::AsciiStrToLower(raw);
    if (value == "error") {
      config.log_level = LogLevel::kError;
    } else if (value == "warning" || value == "warn") {
      config.log_level = LogLevel::kWarning;
    } else if (value == "info") {
      config.log_level = LogLevel::kInfo;
    } else if (value == "debug") {
      config.log_level = LogLevel::kDebug;
    } else {
      return BadValue("GPUPRIO_LOG", raw, "error, warning, info, debug");
    }
  }
  if (const char* raw = getenv("GPUPRIO_PRIORITY"); raw != nullptr && *raw != '\0') {
    const std::optional<int> priority = ParsePriority(raw);
    if (!priority.has_value()) {
      return BadValue("GPUPRIO_PRIORITY", raw, "low, normal, high, or an integer -100..100");
    }
    config.default_priority = *priority;
  }
  if (const char* raw = getenv("GPUPRIO_BUDGET_US"); raw != nullptr && *raw != '\0') {
    int64_t us = 0;
    if (!absl::SimpleAtoi(raw, &us) || us < 1 || us > 10'000'000) {
      return BadValue("GPUPRIO_BUDGET_US", raw, "an integer number of microseconds, 1..10000000");
    }
    config.budget_ns = static_cast<uint64_t>(us) * 1000;
  }
  if (const char* raw = getenv("GPUPRIO_DIRECT_ISSUE"); raw != nullptr && *raw != '\0') {
    const std::string value(absl::StripAsciiWhitespace(raw));
    if (value == "1") {
      config.direct_issue = true;
    } else if (value == "0") {
      config.direct_issue = false;
    } else {
      return BadValue("GPUPRIO_DIRECT_ISSUE", raw, "1, 0");
    }
  }
  if (const char* raw = getenv("GPUPRIO_MAX_QUEUED"); raw != nullptr && *raw != '\0') {
    int64_t ops = 0;
    if (!absl::SimpleAtoi(raw, &ops) || ops < 2 || ops > 1'000'000) {
      return BadValue("GPUPRIO_MAX_QUEUED", raw, "an integer number of ops per stream, 2..1000000");
    }
    config.max_queued = static_cast<uint64_t>(ops);
  }
  return config;
}

const Config& GetConfig() {
  ABSL_CONST_INIT static absl::once_flag once;
  // Never destroyed: wrappers may run during exit, after static destructors.
  static Config* config = nullptr;
  absl::call_once(once, [] {
    absl::StatusOr<Config> parsed = ParseConfig([](const char* name) { return std::getenv(name); });
    if (parsed.ok()) {
      config = new Config(*parsed);
    } else {
      config = new Config;
      config->mode = Mode::kPassthrough;
      Log(LogLevel::kError,
          absl::StrFormat("%s; running unscheduled (passthrough)", parsed.status().message()));
    }
    SetLogLevel(config->log_level);
  });
  return *config;
}

}  // namespace gpuprio::hook
