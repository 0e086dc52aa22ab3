// Reading gpuprio's variables with one rule for all of them (hook/config.cc and
// cupti_tracer/tracer_config.cc): leading and trailing ASCII whitespace is ignored; unset or blank
// means the default; a bad value gives one message naming the variable, the value (escaped) and
// what is accepted, saying what is used instead, and changes nothing else.
#ifndef GPUPRIO_SCHEDULER_BASE_ENV_READER_H_
#define GPUPRIO_SCHEDULER_BASE_ENV_READER_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "scheduler/base/env_vars.h"

namespace gpuprio {

// One word a kChoice or kPriority variable accepts, and what it means to its reader.
template <typename T>
using EnvChoice = std::pair<absl::string_view, T>;

// Whether a reader's words are exactly the ACCEPTED words of `var` in env_vars.def (any order,
// ASCII case ignored). For a static_assert beside the reader's list, so that the launcher and the
// user guide, which show the table's words, cannot disagree with what the reader takes.
template <typename T, size_t N>
constexpr bool ChoicesMatchTable(const KnownEnvVar& var, const EnvChoice<T> (&choices)[N]) {
  size_t accepted_words = 0;
  for (size_t start = 0; start <= var.accepted.size(); ++accepted_words) {
    size_t end = var.accepted.find('|', start);
    if (end == absl::string_view::npos) end = var.accepted.size();
    start = end + 1;
  }
  if (var.accepted.empty()) accepted_words = 0;
  if (accepted_words != N) return false;
  for (const EnvChoice<T>& choice : choices) {
    if (!IsAcceptedWord(var.accepted, choice.first)) return false;
  }
  return true;
}

namespace env_reader_internal {
// Deliberately not constexpr: a constant whose value reaches it does not compile.
void TableDefaultIsNotAChoice(absl::string_view name);
}  // namespace env_reader_internal

// What the table's DEFAULT of `var` means among `choices`. Give it to a constexpr variable: a
// default that is not one of the words fails the build.
template <typename T, size_t N>
constexpr T ChoiceDefault(const KnownEnvVar& var, const EnvChoice<T> (&choices)[N]) {
  for (const EnvChoice<T>& choice : choices) {
    if (IsAcceptedWord(choice.first, var.default_value)) return choice.second;
  }
  env_reader_internal::TableDefaultIsNotAChoice(var.name);
  return choices[0].second;
}

// The fallback of a bad value that leaves the default: "using the default (<the table's>)".
std::string UsingTheDefault(const KnownEnvVar& var);

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
  bool ReadChoice(const char* name, absl::Span<const EnvChoice<T>> choices,
                  absl::string_view fallback, T* value);
  template <typename T>
  bool ReadChoice(const char* name, std::initializer_list<EnvChoice<T>> choices,
                  absl::string_view fallback, T* value) {
    return ReadChoice(name, absl::Span<const EnvChoice<T>>(choices), fallback, value);
  }
  // The same for a table entry, whose words `choices` must be (ChoicesMatchTable).
  template <typename T, size_t N>
  bool ReadChoice(const KnownEnvVar& var, const EnvChoice<T> (&choices)[N],
                  absl::string_view fallback, T* value) {
    return ReadChoice(std::string(var.name).c_str(), absl::Span<const EnvChoice<T>>(choices),
                      fallback, value);
  }

  // A base-10 integer in [min, max]; `what` says what it counts ("an integer number of MiB").
  bool ReadInteger(const char* name, int64_t min, int64_t max, absl::string_view what,
                   absl::string_view fallback, int64_t* value);

  // The same, in the [min, max] that scheduler/base/env_vars.def gives `name` (a kInteger entry;
  // a name the table lacks accepts nothing, which its tests catch).
  bool ReadInteger(const char* name, absl::string_view what, absl::string_view fallback,
                   int64_t* value);

  // The same for a kInteger table entry: its range, and UsingTheDefault as the fallback.
  bool ReadInteger(const KnownEnvVar& var, absl::string_view what, int64_t* value);

  // Records: NAME="<value as set>" is not valid (accepted: <accepted>); <fallback>
  void Reject(const char* name, absl::string_view accepted, absl::string_view fallback);

  std::vector<std::string> TakeProblems() { return std::move(problems_); }

 private:
  GetenvFunction getenv_;
  std::vector<std::string> problems_;
};

template <typename T>
bool EnvReader::ReadChoice(const char* name, absl::Span<const EnvChoice<T>> choices,
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
