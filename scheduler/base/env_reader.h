// Reading gpuprio's variables with one rule for all of them (hook/config.cc and
// cupti_tracer/tracer_config.cc): leading and trailing ASCII whitespace is ignored; unset or blank
// means the default; a bad value gives one message naming the variable, the value (escaped) and
// what is accepted, saying what is used instead, and changes nothing else.
#ifndef GPUPRIO_SCHEDULER_BASE_ENV_READER_H_
#define GPUPRIO_SCHEDULER_BASE_ENV_READER_H_

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "scheduler/base/env_vars.h"

namespace gpuprio {

// A configuration read from the environment: always usable (each bad value replaced by its
// fallback), and one message per bad value.
template <typename T>
struct ParsedEnv {
  T config;
  std::vector<std::string> problems;
};

class EnvReader {
 public:
  // `getenv` must outlive the reader.
  explicit EnvReader(GetenvFunction getenv) : getenv_(getenv) {}

  // The value without leading and trailing ASCII whitespace; nullopt when unset or blank.
  std::optional<absl::string_view> Get(const char* name) const;

  // The Read* functions leave `*value` alone when `name` is unset or blank and set it when the
  // value is valid. A bad value is recorded as a problem ending in "; <fallback>", and they return
  // false (the caller applies the fallback, which is usually "leave the default").

  // One of `choices`, compared ignoring ASCII case.
  template <typename T>
  bool ReadChoice(const char* name,
                  std::initializer_list<std::pair<absl::string_view, T>> choices,
                  absl::string_view fallback, T* value);

  // A base-10 integer in [min, max]; `what` says what it counts ("an integer number of MiB").
  bool ReadInteger(const char* name, int64_t min, int64_t max, absl::string_view what,
                   absl::string_view fallback, int64_t* value);

  // The same, in the [min, max] that scheduler/base/env_vars.def gives `name` (a kInteger entry;
  // a name the table lacks accepts nothing, which its tests catch).
  bool ReadInteger(const char* name, absl::string_view what, absl::string_view fallback,
                   int64_t* value);

  // Records: NAME="<value as set>" is not valid (accepted: <accepted>); <fallback>
  void Reject(const char* name, absl::string_view accepted, absl::string_view fallback);

  std::vector<std::string> TakeProblems() { return std::move(problems_); }

 private:
  GetenvFunction getenv_;
  std::vector<std::string> problems_;
};

template <typename T>
bool EnvReader::ReadChoice(const char* name,
                           std::initializer_list<std::pair<absl::string_view, T>> choices,
                           absl::string_view fallback, T* value) {
  const std::optional<absl::string_view> text = Get(name);
  if (!text.has_value()) return true;
  for (const auto& [choice, choice_value] : choices) {
    if (absl::EqualsIgnoreCase(*text, choice)) {
      *value = choice_value;
      return true;
    }
  }
  std::string accepted;
  for (const auto& choice : choices) {
    if (!accepted.empty()) accepted += ", ";
    accepted.append(choice.first.data(), choice.first.size());
  }
  Reject(name, accepted, fallback);
  return false;
}

}  // namespace gpuprio

#endif  // GPUPRIO_SCHEDULER_BASE_ENV_READER_H_
