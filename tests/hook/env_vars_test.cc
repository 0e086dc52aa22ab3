// scheduler/env_vars: the table of known variables (and that docs/user_guide.md lists the same),
// the closest-name warnings, and the secure-execution rule.
#include "scheduler/base/env_vars.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "catch2/catch.hpp"
#include "cupti_tracer/tracer_config.h"
#include "hook/config.h"
#include "tests/runfiles.h"

namespace gpuprio {
namespace {

// Names in the first column of the user guide's variable tables (header "| variable | values").
std::set<std::string> DocumentedVariables() {
  absl::StatusOr<std::string> text = gpuprio_test::RunfileText("docs/user_guide.md");
  REQUIRE(text.ok());
  std::set<std::string> names;
  bool in_table = false;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    if (absl::StartsWith(line, "| variable | values")) {
      in_table = true;
      continue;
    }
    if (!absl::StartsWith(line, "|")) in_table = false;
    if (!in_table || !absl::ConsumePrefix(&line, "| `")) continue;
    const size_t end = line.find('`');
    if (end != absl::string_view::npos && absl::StartsWith(line, "GPUPRIO_")) {
      names.emplace(line.substr(0, end));
    }
  }
  return names;
}

TEST_CASE("The user guide lists exactly the known variables", "[config]") {
  std::set<std::string> known;
  for (const KnownEnvVar& var : KnownEnvVars()) known.emplace(var.name);
  CHECK(known.size() == KnownEnvVars().size());  // no name twice
  CHECK(DocumentedVariables() == known);
}

TEST_CASE("The closest known variable is found for a misspelling", "[config]") {
  const std::map<std::string, std::string> kTypos = {
      {"GPUPRIO_PRIORTY", "GPUPRIO_PRIORITY"},
      {"gpuprio_mode", "GPUPRIO_MODE"},
      {"GPUPRIO_BUDGET", "GPUPRIO_BUDGET_US"},
      {"GPUPRIO_TRACE_MAXMB", "GPUPRIO_TRACE_MAX_MB"},
      {"GPUPRIO_CUPTI_LIB", "GPUPRIO_CUPTI_LIBRARY"},
      {"GPUPRIO_MAXQUEUED", "GPUPRIO_MAX_QUEUED"},
  };
  for (const auto& [typo, meant] : kTypos) {
    INFO(typo);
    CHECK(ClosestKnownEnvVar(typo).name == meant);
  }
}

TEST_CASE("Unknown GPUPRIO_ names get one warning each, naming the closest known one",
          "[config]") {
  const std::vector<const char*> environment = {
      "PATH=/bin",         "GPUPRIO_PRIORTY=high", "GPUPRIO_MODE=schedule",
      "GPUPRIO_LIB=/x.so", "Gpuprio_Log=info",     "GPUPRIO_\x1b[2J=1",
      "NOT_GPUPRIO_X=1",   "GPUPRIO_NO_EQUALS"};
  const std::vector<std::string> warnings = EnvironmentWarnings(environment, false);
  REQUIRE(warnings.size() == 4);
  CHECK(warnings[0] ==
        "GPUPRIO_PRIORTY is not a gpuprio variable and is ignored (the closest known one is "
        "GPUPRIO_PRIORITY)");
  CHECK(absl::StrContains(warnings[1], "Gpuprio_Log is not a gpuprio variable"));
  CHECK(absl::EndsWith(warnings[1], "(the closest known one is GPUPRIO_LOG)"));
  CHECK(absl::StartsWith(warnings[2], "GPUPRIO_\\x1b[2J is not"));
  CHECK(absl::StartsWith(warnings[3], "GPUPRIO_NO_EQUALS is not"));
  CHECK(EnvironmentWarnings({"GPUPRIO_MODE=off", "GPUPRIO_CHECK_TIMEOUT=5"}, false).empty());
}

// An environment of the library's variables, each set.
const std::map<std::string, std::string> kEnvironment = {
    {"GPUPRIO_MODE", "passthrough"},     {"GPUPRIO_PRIORITY", "high"},
    {"GPUPRIO_BUDGET_US", "500"},        {"GPUPRIO_MAX_QUEUED", "64"},
    {"GPUPRIO_DIRECT_ISSUE", "0"},       {"GPUPRIO_LOG", "error"},
    {"GPUPRIO_TRACE", "/tmp/t.json"},    {"GPUPRIO_TRACE_MAX_MB", "64"},
    {"GPUPRIO_TRACE_ALL_APIS", "1"},     {"GPUPRIO_CUPTI_LIBRARY", "/tmp/libevil.so"},
    {"GPUPRIO_SOMETHING_NEW", "/a/path"}};

const char* Lookup(const char* name) {
  auto it = kEnvironment.find(name);
  return it == kEnvironment.end() ? nullptr : it->second.c_str();
}

TEST_CASE("Under secure execution the variables that load code or write files read as unset",
          "[config][secure]") {
  for (const auto& [name, value] : kEnvironment) {
    const KnownEnvVar* var = FindKnownEnvVar(name);
    const bool ignored = var == nullptr || var->loads_code_or_writes_file;
    INFO(name);
    CHECK(GetenvRespectingSecureExecution(name.c_str(), false, Lookup) == value);
    const char* secure = GetenvRespectingSecureExecution(name.c_str(), true, Lookup);
    CHECK((secure == nullptr) == ignored);
  }
  CHECK(FindKnownEnvVar("GPUPRIO_TRACE")->loads_code_or_writes_file);
  CHECK(FindKnownEnvVar("GPUPRIO_CUPTI_LIBRARY")->loads_code_or_writes_file);

  auto secure_getenv = [](const char* name) {
    return GetenvRespectingSecureExecution(name, true, Lookup);
  };
  const tracer::TracerConfig tracer = tracer::ParseTracerConfig(secure_getenv).config;
  CHECK(tracer.path.empty());
  CHECK(tracer.cupti_library.empty());
  CHECK(tracer.max_bytes == size_t{64} << 20);
  CHECK(tracer.all_apis);
  const hook::Config config = hook::ParseConfig(secure_getenv).config;
  CHECK(config.mode == hook::Mode::kPassthrough);
  CHECK(config.default_priority == 1);
}

TEST_CASE("Under secure execution one line names the variables set and ignored, in table order",
          "[config][secure]") {
  const std::vector<const char*> both = {"GPUPRIO_CUPTI_LIBRARY=/tmp/libevil.so",
                                         "GPUPRIO_MODE=schedule", "GPUPRIO_TRACE=/tmp/t.json",
                                         "GPUPRIO_LIB=/x.so"};
  const std::vector<std::string> warnings = EnvironmentWarnings(both, true);
  REQUIRE(warnings.size() == 1);
  CHECK(absl::StartsWith(warnings[0],
                         "secure execution (setuid, setgid or file capabilities): ignoring "
                         "GPUPRIO_TRACE, GPUPRIO_CUPTI_LIBRARY, which would load code"));
  CHECK(EnvironmentWarnings(both, false).empty());
  CHECK(EnvironmentWarnings({"GPUPRIO_TRACE= ", "GPUPRIO_MODE=off"}, true).empty());
}

}  // namespace
}  // namespace gpuprio
