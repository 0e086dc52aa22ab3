#include "scheduler/base/env_reader.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "scheduler/base/logging.h"

namespace gpuprio {

namespace env_reader_internal {
void TableDefaultIsNotAChoice(absl::string_view name) {
  // Reached only from ChoiceDefault called outside a constant expression on a bad entry.
  Log(LogLevel::kError, absl::StrFormat("%s: the table's default is not one of its words", name));
}
}  // namespace env_reader_internal

std::string UsingTheDefault(const KnownEnvVar& var) {
  return absl::StrFormat("using the default (%s)", var.default_value);
}

std::optional<absl::string_view> EnvReader::Get(const char* name) const {
  const char* raw = getenv_(name);
  if (raw == nullptr) return std::nullopt;
  const absl::string_view value = absl::StripAsciiWhitespace(raw);
  if (value.empty()) return std::nullopt;
  return value;
}

bool EnvReader::ReadInteger(const char* name, int64_t min, int64_t max, absl::string_view what,
                            absl::string_view fallback, int64_t* value) {
  const std::optional<absl::string_view> text = Get(name);
  if (!text.has_value()) return true;
  int64_t number = 0;
  if (absl::SimpleAtoi(*text, &number) && number >= min && number <= max) {
    *value = number;
    return true;
  }
  Reject(name, absl::StrFormat("%s, %d..%d", what, min, max), fallback);
  return false;
}

bool EnvReader::ReadInteger(const char* name, absl::string_view what, absl::string_view fallback,
                            int64_t* value) {
  const KnownEnvVar* var = FindKnownEnvVar(name);
  if (var == nullptr || var->kind != EnvVarKind::kInteger) {
    return ReadInteger(name, 1, 0, what, fallback, value);
  }
  return ReadInteger(name, var->min, var->max, what, fallback, value);
}

bool EnvReader::ReadInteger(const KnownEnvVar& var, absl::string_view what, int64_t* value) {
  const std::string name(var.name);
  if (var.kind != EnvVarKind::kInteger) {
    return ReadInteger(name.c_str(), 1, 0, what, UsingTheDefault(var), value);
  }
  return ReadInteger(name.c_str(), var.min, var.max, what, UsingTheDefault(var), value);
}

void EnvReader::Reject(const char* name, absl::string_view accepted, absl::string_view fallback) {
  const char* raw = getenv_(name);
  problems_.push_back(absl::StrFormat("%s=\"%s\" is not valid (accepted: %s); %s", name,
                                      Escaped(raw != nullptr ? raw : ""), accepted, fallback));
}

}  // namespace gpuprio
