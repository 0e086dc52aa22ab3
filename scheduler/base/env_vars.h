// gpuprio's environment variables as a whole: the one table of known GPUPRIO_* names (the one
// docs/user_guide.md lists; a test compares them), secure execution (a setuid program ignores the
// variables that load code or write files), and the checks of the whole environment at load
// (misspelt names, ignored variables). Reading one value is env_reader.h.
#ifndef GPUPRIO_SCHEDULER_BASE_ENV_VARS_H_
#define GPUPRIO_SCHEDULER_BASE_ENV_VARS_H_

#include <cstdint>
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

// Every GPUPRIO_* variable gpuprio or its tools read: scheduler/base/env_vars.def, the table the
// launcher (tools/cli/gpuprio) reads too.
absl::Span<const KnownEnvVar> KnownEnvVars();

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
