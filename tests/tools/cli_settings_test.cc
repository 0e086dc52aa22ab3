// What the launcher says of a setting without reading it from scheduler/base/env_vars.def -- the
// defaults, ranges and words its --help text writes out -- agrees with the table and with how
// the library parses the variable. (What it checks at run time comes from the table itself;
// config_agreement_test feeds it the same values as the library.)
#include <cstdint>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "catch2/catch.hpp"
#include "hook/config.h"
#include "scheduler/base/env_vars.h"
#include "tests/hook/config_describe.h"
#include "tests/python_unittest.h"
#include "tests/runfiles.h"

namespace {

using gpuprio::EnvVarKind;
using gpuprio::FindKnownEnvVar;
using gpuprio::KnownEnvVar;

// One option's help: "--budget-us N <description> (GPUPRIO_BUDGET_US<tail>)".
struct OptionHelp {
  std::string option;
  std::string description;
  std::string variable;
  std::string tail;
};

std::vector<OptionHelp> SettingOptions() {
  const auto result = gpuprio_test::RunProcess(
      {gpuprio_test::RunfileOrFail("tools/cli/gpuprio"), "env", "--help"}, {});
  REQUIRE(result.ok());
  REQUIRE(result->exit_code == 0);
  // One line, as argparse wraps at the terminal's width.
  const std::string text = absl::StrJoin(
      absl::StrSplit(result->stdout_text, absl::ByAnyChar(" \n\t"), absl::SkipEmpty()), " ");
  static const std::regex kOption(
      R"(--([a-z-]+) [A-Z]+ ((?:(?!--[a-z]).)*?)\((GPUPRIO_[A-Z_]+)([^)]*)\))");
  std::vector<OptionHelp> options;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kOption);
       it != std::sregex_iterator(); ++it) {
    options.push_back({(*it)[1], (*it)[2], (*it)[3], (*it)[4]});
  }
  return options;
}

// What the library makes of VAR=value: nullopt if it reports a problem, else both configurations.
std::optional<std::string> LibraryReads(const KnownEnvVar& var, const std::string& value) {
  const std::string name(var.name);
  auto getenv = [&](const char* n) -> const char* { return name == n ? value.c_str() : nullptr; };
  if (!gpuprio::hook::ParseConfig(getenv).problems.empty()) return std::nullopt;
  return gpuprio_test::DescribeEnvironment(getenv);
}

const char* Unset(const char*) { return nullptr; }

TEST_CASE("The launcher's help describes the settings as the table and the library do",
          "[cli][config]") {
  const std::vector<OptionHelp> options = SettingOptions();
  std::set<std::string> seen;
  int defaults = 0, ranges = 0, word_lists = 0;
  for (const OptionHelp& help : options) {
    const KnownEnvVar* var = FindKnownEnvVar(help.variable);
    INFO("--" << help.option << ": " << help.description << "(" << help.variable << help.tail
              << ")");
    REQUIRE(var != nullptr);
    seen.insert(help.option);

    // "the library's default is V": the table's default, which the library reads as unset.
    static const std::regex kDefault(R"(the library's default is '?([^' :;,)]+))");
    std::smatch match;
    if (std::regex_search(help.tail, match, kDefault)) {
      const std::string value = match[1].str();
      CHECK(value == std::string(var->default_value));
      CHECK(LibraryReads(*var, value) == gpuprio_test::DescribeEnvironment(Unset));
      ++defaults;
    }

    // "in [MIN, MAX]": the table's range, which the library accepts to its edges and no further.
    static const std::regex kRange(R"(in \[(-?[0-9]+), (-?[0-9]+)\])");
    if (std::regex_search(help.description, match, kRange)) {
      const int64_t min = std::stoll(match[1].str()), max = std::stoll(match[2].str());
      CHECK(min == var->min);
      CHECK(max == var->max);
      CHECK(LibraryReads(*var, std::to_string(min)).has_value());
      CHECK(LibraryReads(*var, std::to_string(max)).has_value());
      CHECK_FALSE(LibraryReads(*var, std::to_string(min - 1)).has_value());
      CHECK_FALSE(LibraryReads(*var, std::to_string(max + 1)).has_value());
      ++ranges;
    }

    // "a, b or c": words the table accepts and the library takes; a word of the table the help
    // leaves out must be another name for one it lists (GPUPRIO_LOG's warn).
    // ("low, normal, high or an integer": the words before "or an integer".)
    static const std::regex kWords(
        R"(([a-z_]+(?:, [a-z_]+)+)(?:,? or (?!an )([a-z_]+)\b(?! [a-z]))?)");
    if ((var->kind == EnvVarKind::kChoice || var->kind == EnvVarKind::kPriority) &&
        std::regex_search(help.description, match, kWords)) {
      std::vector<std::string> listed = absl::StrSplit(match[1].str(), ", ");
      if (match[2].matched) listed.push_back(match[2].str());
      std::set<std::string> readings;
      for (const std::string& word : listed) {
        INFO(word);
        CHECK(gpuprio::IsAcceptedWord(var->accepted, word));
        const std::optional<std::string> reading = LibraryReads(*var, word);
        CHECK(reading.has_value());
        if (reading.has_value()) readings.insert(*reading);
      }
      for (absl::string_view word : absl::StrSplit(var->accepted, '|')) {
        INFO("the table's " << word);
        const std::optional<std::string> reading = LibraryReads(*var, std::string(word));
        REQUIRE(reading.has_value());
        CHECK(readings.count(*reading) == 1);
      }
      ++word_lists;
    }
  }
  // The help still has what this test reads (a rewording that hides it fails here).
  CHECK(seen == std::set<std::string>{"priority", "mode", "log", "budget-us", "trace", "domain",
                                      "isolation", "reserved-sms"});
  CHECK(defaults >= 4);
  CHECK(ranges >= 2);
  CHECK(word_lists >= 4);
}

}  // namespace
