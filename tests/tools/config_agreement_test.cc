// One table decides what every GPUPRIO_* value may be (scheduler/base/env_vars.def): the library's
// readers (hook/config.cc, cupti_tracer/tracer_config.cc) and the launcher (tools/cli/gpuprio,
// which reads the table at run time) are fed the same values, made from the table's ranges and
// choices, and must accept and reject exactly what the table says.
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "catch2/catch.hpp"
#include "cupti_tracer/tracer_config.h"
#include "hook/config.h"
#include "scheduler/base/env_vars.h"
#include "tests/runfiles.h"

namespace {

using gpuprio::EnvVarKind;
using gpuprio::KnownEnvVar;

// The options of `gpuprio run` / `gpuprio env` that set a variable of the table.
const std::map<std::string, std::string> kCliOptions = {
    {"GPUPRIO_PRIORITY", "--priority"},
    {"GPUPRIO_MODE", "--mode"},
    {"GPUPRIO_LOG", "--log"},
    {"GPUPRIO_BUDGET_US", "--budget-us"},
    {"GPUPRIO_ISOLATION", "--isolation"},
    {"GPUPRIO_RESERVED_SMS", "--reserved-sms"},
};

std::vector<std::string> Accepted(const KnownEnvVar& var) {
  return absl::StrSplit(var.accepted, '|', absl::SkipEmpty());
}

// The values to try for `var`: the edges of its range, its choices in other cases, near misses.
std::vector<std::string> Cases(const KnownEnvVar& var) {
  std::vector<std::string> cases = {"bogus", "1_0", "1e3", "0x10", "1.5", "--1"};
  if (var.kind == EnvVarKind::kInteger || var.kind == EnvVarKind::kPriority) {
    for (int64_t v : {var.min - 1, var.min, var.max, var.max + 1, int64_t{0}, int64_t{-1}}) {
      cases.push_back(absl::StrCat(v));
    }
    cases.push_back(absl::StrCat(" +", var.min + 1, "\t"));
    cases.push_back(absl::StrCat("00", var.max));
    cases.push_back("99999999999999999999999");
  }
  for (const std::string& choice : Accepted(var)) {
    cases.push_back(choice);
    cases.push_back(absl::AsciiStrToUpper(choice));
    cases.push_back(absl::StrCat(" ", choice, " "));
    cases.push_back(choice + "x");
  }
  return cases;
}

// What the table says of `text` for `var`, written out here independently of every reader.
bool TableAccepts(const KnownEnvVar& var, absl::string_view text) {
  const absl::string_view value = absl::StripAsciiWhitespace(text);
  for (const std::string& choice : Accepted(var)) {
    if (absl::EqualsIgnoreCase(value, choice)) return true;
  }
  if (var.kind == EnvVarKind::kInteger || var.kind == EnvVarKind::kPriority) {
    int64_t number = 0;
    return absl::SimpleAtoi(value, &number) && number >= var.min && number <= var.max;
  }
  return false;
}

// Whether the library's reader for `var` takes `value` without a problem.
bool LibraryAccepts(const KnownEnvVar& var, const std::string& value) {
  const std::string name(var.name);
  auto getenv = [&](const char* n) -> const char* {
    return name == n ? value.c_str() : nullptr;
  };
  std::vector<std::string> problems;
  if (absl::StartsWith(name, "GPUPRIO_TRACE")) {
    problems = gpuprio::tracer::ParseTracerConfig(getenv).problems;
  } else {
    problems = gpuprio::hook::ParseConfig(getenv).problems;
  }
  for (const std::string& p : problems) {
    if (absl::StartsWith(p, name + "=")) return false;
  }
  return true;
}

std::string RunfileOrFail(absl::string_view path) {
  auto found = gpuprio_test::Runfile(path);
  REQUIRE(found.ok());
  return *found;
}

// Variables with a fixed set of values whose reader the test can call (GPUPRIO_ANNOUNCE is read
// by the library's constructor alone; the CLI only ever sets it to 1).
bool Checkable(const KnownEnvVar& var) {
  return var.read_by == gpuprio::EnvVarReader::kLibrary && var.kind != EnvVarKind::kText &&
         var.name != "GPUPRIO_ANNOUNCE";
}

}  // namespace

TEST_CASE("The library accepts exactly what the table says", "[config]") {
  int checked = 0;
  for (const KnownEnvVar& var : gpuprio::KnownEnvVars()) {
    if (!Checkable(var)) continue;
    for (const std::string& value : Cases(var)) {
      INFO(var.name << "=\"" << value << "\"");
      CHECK(LibraryAccepts(var, value) == TableAccepts(var, value));
      ++checked;
    }
    // The default is a value the table accepts.
    INFO(var.name << " default " << var.default_value);
    CHECK(TableAccepts(var, var.default_value));
  }
  CHECK(checked > 100);
}

TEST_CASE("gpuprio run/env accept exactly what the library accepts", "[config][cli]") {
  const std::string cli = RunfileOrFail("tools/cli/gpuprio");
  const std::string lib = RunfileOrFail("hook/libgpuprio.so");
  int accepted = 0, rejected = 0;
  for (const auto& [name, option] : kCliOptions) {
    const KnownEnvVar* var = gpuprio::FindKnownEnvVar(name);
    REQUIRE(var != nullptr);
    for (const std::string& value : Cases(*var)) {
      const auto result = gpuprio_test::RunProcess({cli, "env", "--lib", lib, option, value}, {});
      REQUIRE(result.ok());
      INFO(option << " \"" << value << "\": exit " << result->exit_code << "\nstdout: "
                  << result->stdout_text << "\nstderr: " << result->stderr_text);
      const bool library = LibraryAccepts(*var, value);
      CHECK((result->exit_code == 0) == library);
      if (library) {
        ++accepted;
        // What the CLI exports, the library reads the same way.
        const std::string prefix = absl::StrCat("export ", name, "=");
        const size_t at = result->stdout_text.find(prefix);
        REQUIRE(at != std::string::npos);
        const std::string exported = result->stdout_text.substr(
            at + prefix.size(), result->stdout_text.find('\n', at) - at - prefix.size());
        CHECK(LibraryAccepts(*var, exported));
        CHECK(result->stderr_text.empty());
      } else {
        ++rejected;
        CHECK(absl::StrContains(result->stderr_text, option));
      }
    }
  }
  CHECK(accepted > 10);
  CHECK(rejected > 10);
}

TEST_CASE("--budget-us 0 is refused by the CLI, as the library refuses GPUPRIO_BUDGET_US=0",
          "[config][cli]") {
  const KnownEnvVar* var = gpuprio::FindKnownEnvVar("GPUPRIO_BUDGET_US");
  REQUIRE(var != nullptr);
  CHECK_FALSE(LibraryAccepts(*var, "0"));
  const auto result = gpuprio_test::RunProcess(
      {RunfileOrFail("tools/cli/gpuprio"), "env", "--lib", RunfileOrFail("hook/libgpuprio.so"),
       "--budget-us", "0"},
      {});
  REQUIRE(result.ok());
  CHECK(result->exit_code == 2);
  CHECK(absl::StrContains(result->stderr_text, "[1, 10000000]"));
}
