#include "scheduler/base/env_vars.h"

#include <sys/auxv.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "scheduler/base/logging.h"

extern char** environ;

namespace gpuprio {
namespace {

constexpr KnownEnvVar kKnownEnvVars[] = {
#define GPUPRIO_ENV_VAR(name, ...) env_var::name,
#include "scheduler/base/env_vars.def"
#undef GPUPRIO_ENV_VAR
};

// A table entry whose default its own checks refuse fails the build here, not at a user's run.
constexpr bool AllDefaultsValid() {
  for (const KnownEnvVar& var : kKnownEnvVars) {
    if (!DefaultIsValid(var)) return false;
  }
  return true;
}
static_assert(AllDefaultsValid(),
              "an env_vars.def DEFAULT is not a value its entry accepts (see DefaultIsValid)");

constexpr absl::string_view kPrefix = "GPUPRIO_";

// Levenshtein distance, ASCII case ignored.
size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      const bool same = absl::ascii_toupper(static_cast<unsigned char>(a[i - 1])) ==
                        absl::ascii_toupper(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({above + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

namespace env_vars_internal {
int64_t TableDefaultIsNotAnInteger(absl::string_view name) {
  // Reached only from IntegerDefault called outside a constant expression on a bad entry.
  Log(LogLevel::kError, absl::StrFormat("%s: the table's default is not an integer", name));
  return 0;
}
}  // namespace env_vars_internal

absl::Span<const KnownEnvVar> KnownEnvVars() { return kKnownEnvVars; }

const KnownEnvVar* FindKnownEnvVar(absl::string_view name) {
  for (const KnownEnvVar& var : kKnownEnvVars) {
    if (var.name == name) return &var;
  }
  return nullptr;
}

const KnownEnvVar& ClosestKnownEnvVar(absl::string_view name) {
  const KnownEnvVar* best = &kKnownEnvVars[0];
  size_t best_distance = EditDistance(name, best->name);
  for (const KnownEnvVar& var : kKnownEnvVars) {
    const size_t distance = EditDistance(name, var.name);
    if (distance < best_distance) {
      best = &var;
      best_distance = distance;
    }
  }
  return *best;
}

bool IsSecureExecution() { return getauxval(AT_SECURE) != 0; }

const char* GetenvRespectingSecureExecution(const char* name, bool secure_execution,
                                            GetenvFunction getenv) {
  if (secure_execution) {
    const KnownEnvVar* var = FindKnownEnvVar(name);
    if (var == nullptr || var->loads_code_or_writes_file) return nullptr;
  }
  return getenv(name);
}

const char* GpuprioGetenv(const char* name) {
  return GetenvRespectingSecureExecution(name, IsSecureExecution(),
                                         [](const char* n) -> const char* { return std::getenv(n); });
}

std::vector<std::string> EnvironmentWarnings(absl::Span<const char* const> environment,
                                             bool secure_execution) {
  std::vector<std::string> warnings;
  bool ignored[std::size(kKnownEnvVars)] = {};
  for (const char* entry : environment) {
    if (entry == nullptr) continue;
    const absl::string_view text(entry);
    const size_t equals = text.find('=');
    const absl::string_view name = text.substr(0, equals);
    const absl::string_view value =
        equals == absl::string_view::npos ? absl::string_view() : text.substr(equals + 1);
    if (!absl::StartsWithIgnoreCase(name, kPrefix)) continue;
    const KnownEnvVar* var = FindKnownEnvVar(name);
    if (var == nullptr) {
      warnings.push_back(absl::StrFormat(
          "%s is not a gpuprio variable and is ignored (the closest known one is %s)",
          Escaped(name), ClosestKnownEnvVar(name).name));
      continue;
    }
    if (secure_execution && var->read_by == EnvVarReader::kLibrary &&
        var->loads_code_or_writes_file && !absl::StripAsciiWhitespace(value).empty()) {
      ignored[var - kKnownEnvVars] = true;
    }
  }
  std::vector<absl::string_view> ignored_names;  // in the table's order
  for (size_t i = 0; i < std::size(kKnownEnvVars); ++i) {
    if (ignored[i]) ignored_names.push_back(kKnownEnvVars[i].name);
  }
  if (!ignored_names.empty()) {
    warnings.push_back(absl::StrFormat(
        "secure execution (setuid, setgid or file capabilities): ignoring %s, which would load "
        "code or write a file with this program's privileges",
        absl::StrJoin(ignored_names, ", ")));
  }
  return warnings;
}

std::vector<std::string> ProcessEnvironmentWarnings() {
  std::vector<const char*> entries;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    entries.push_back(*entry);
  }
  return EnvironmentWarnings(entries, IsSecureExecution());
}

}  // namespace gpuprio
