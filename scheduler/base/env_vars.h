// gpuprio's environment variables as a whole: the one table of known GPUPRIO_* names, ranges,
// defaults and meanings (env_vars.def; its entries as constants here, and the user guide's tables
// generated from it), secure execution (a setuid program ignores the
// variables that load code or write files), and the checks of the whole environment at load
// (misspelt names, ignored variables). Reading one value is env_reader.h.
#ifndef GPUPRIO_SCHEDULER_BASE_ENV_VARS_H_
#define GPUPRIO_SCHEDULER_BASE_ENV_VARS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace gpuprio {

// getenv's shape; tests inject their own environment.
using GetenvFunction = absl::FunctionRef<const char*(const char*)>;

enum class EnvVarReader {
  kLibrary,  // libgpuprio.so
  kTools,    // the launcher (tools/cli/gpuprio) or the GPU check scripts; never the library
};

// What a variable accepts (env_vars.def explains each kind).
enum class EnvVarKind { kChoice, kInteger, kPriority, kText };

struct KnownEnvVar {
  absl::string_view name;
  EnvVarReader read_by;
  bool loads_code_or_writes_file;  // ignored by the library under secure execution
  EnvVarKind kind;
  int64_t min;                     // kInteger, kPriority: the accepted integers
  int64_t max;
  absl::string_view default_value;
  absl::string_view accepted;      // kChoice, kPriority: '|'-separated words; kText: a phrase
  absl::string_view meaning;
};

// Each entry of the table as a constant named after its variable (env_var::GPUPRIO_BUDGET_US), so
// that readers take a variable's range, default and accepted words from the table itself, never
// from a copy.
namespace env_var {
#define GPUPRIO_ENV_VAR(name, read_by, loads_code, kind, min, max, default_value, accepted,    \
                        meaning)                                                             \
  inline constexpr KnownEnvVar name = {#name,   EnvVarReader::read_by, loads_code,            \
                                       EnvVarKind::kind, min, max, default_value, accepted,   \
                                       meaning};
#include "scheduler/base/env_vars.def"
#undef GPUPRIO_ENV_VAR
}  // namespace env_var

// Every GPUPRIO_* variable gpuprio or its tools read: scheduler/base/env_vars.def, the table the
// launcher (tools/cli/gpuprio) reads too.
absl::Span<const KnownEnvVar> KnownEnvVars();

// `text` as a base-10 integer with an optional sign (absl::SimpleAtoi's digits, without its
// whitespace); nullopt otherwise. For the table's defaults, at compile time.
constexpr std::optional<int64_t> ParseTableInteger(absl::string_view text) {
  size_t i = 0;
  bool negative = false;
  if (i < text.size() && (text[i] == '-' || text[i] == '+')) negative = text[i++] == '-';
  if (i == text.size()) return std::nullopt;
  int64_t value = 0;
  for (; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9' || value > (INT64_MAX - 9) / 10) return std::nullopt;
    value = value * 10 + (text[i] - '0');
  }
  return negative ? -value : value;
}

// Whether `word` is one of `accepted`'s '|'-separated words, ASCII case ignored.
constexpr bool IsAcceptedWord(absl::string_view accepted, absl::string_view word) {
  size_t start = 0;
  while (start <= accepted.size()) {
    size_t end = accepted.find('|', start);
    if (end == absl::string_view::npos) end = accepted.size();
    const absl::string_view candidate = accepted.substr(start, end - start);
    bool same = !candidate.empty() && candidate.size() == word.size();
    for (size_t i = 0; same && i < word.size(); ++i) {
      const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; };
      same = lower(candidate[i]) == lower(word[i]);
    }
    if (same) return true;
    start = end + 1;
  }
  return false;
}

// Whether the table's DEFAULT of `var` is a value the entry accepts: unset (blank) or a phrase for
// kText, one of ACCEPTED for kChoice, an integer in [MIN, MAX] for kInteger, either for kPriority.
// env_vars.cc checks every entry when compiled.
constexpr bool DefaultIsValid(const KnownEnvVar& var) {
  const std::optional<int64_t> number = ParseTableInteger(var.default_value);
  const bool in_range = number.has_value() && *number >= var.min && *number <= var.max;
  switch (var.kind) {
    case EnvVarKind::kChoice:
      return IsAcceptedWord(var.accepted, var.default_value);
    case EnvVarKind::kInteger:
      return in_range;
    case EnvVarKind::kPriority:
      return in_range || IsAcceptedWord(var.accepted, var.default_value);
    case EnvVarKind::kText:
      return true;
  }
  return false;
}

namespace env_vars_internal {
// Deliberately not constexpr: a constant whose value reaches it does not compile.
int64_t TableDefaultIsNotAnInteger(absl::string_view name);
}  // namespace env_vars_internal

// The DEFAULT of a kInteger entry as a number. Give it to a constexpr variable: a default that is
// not an integer in the entry's range then fails the build.
constexpr int64_t IntegerDefault(const KnownEnvVar& var) {
  if (var.kind != EnvVarKind::kInteger || !DefaultIsValid(var)) {
    return env_vars_internal::TableDefaultIsNotAnInteger(var.name);
  }
  return *ParseTableInteger(var.default_value);
}

// The entry for `name` (exact, case-sensitive, as the environment is), or null.
const KnownEnvVar* FindKnownEnvVar(absl::string_view name);

// The known variable nearest to `name` by edit distance, ignoring case (for "did you mean").
const KnownEnvVar& ClosestKnownEnvVar(absl::string_view name);

// Whether this process runs with secure execution: getauxval(AT_SECURE), set by the kernel for
// setuid and setgid programs and for file capabilities (the loader then ignores LD_LIBRARY_PATH).
bool IsSecureExecution();

// getenv(name), except that under secure execution a variable the table does not list as plain
// data (one that loads code or writes a file, or an unknown one) reads as unset: secure_getenv's
// rule, for exactly those variables.
const char* GetenvRespectingSecureExecution(const char* name, bool secure_execution,
                                            GetenvFunction getenv);

// How the library reads its variables: the rule above on the real environment.
const char* GpuprioGetenv(const char* name);

// The warnings for an environment (NAME=VALUE entries): one per GPUPRIO_* name that is not known
// (any case; naming the closest known one), and under secure execution one line naming every
// variable set but ignored. Pure.
std::vector<std::string> EnvironmentWarnings(absl::Span<const char* const> environment,
                                             bool secure_execution);

// EnvironmentWarnings of this process (environ, IsSecureExecution()).
std::vector<std::string> ProcessEnvironmentWarnings();

}  // namespace gpuprio

#endif  // GPUPRIO_SCHEDULER_BASE_ENV_VARS_H_
