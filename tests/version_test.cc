// The product's one version: the top-level VERSION file is what the generated
// scheduler/base/version.h, and through it the trace's otherData, say, and CHANGELOG.md has its
// section. (The C API, the CLI and the Python helper are checked against the same file in
// tests/tools/cli_test.cc.)
#include <array>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "catch2/catch.hpp"
#include "cupti_tracer/chrome_trace_writer.h"
#include "nlohmann/json.hpp"
#include "scheduler/base/version.h"
#include "tests/runfiles.h"

namespace {

std::string VersionFile() {
  auto path = gpuprio_test::Runfile("VERSION");
  REQUIRE(path.ok());
  std::ifstream in(*path);
  std::string line;
  REQUIRE(std::getline(in, line));
  return line;
}

std::string ChangelogFile() {
  absl::StatusOr<std::string> text = gpuprio_test::RunfileText("CHANGELOG.md");
  REQUIRE(text.ok());
  return *std::move(text);
}

// MAJOR.MINOR.PATCH of a version ("0.10.0-rc1" -> {0, 10, 0}); false if it has none.
bool CoreVersion(const std::string& version, std::array<long, 3>* core) {
  std::smatch m;
  if (!std::regex_search(version, m, std::regex(R"(^([0-9]+)\.([0-9]+)\.([0-9]+))"))) {
    return false;
  }
  for (int i = 0; i < 3; ++i) (*core)[i] = std::stol(m[i + 1].str());
  return true;
}

// Empty when CHANGELOG.md fits VERSION, else what is wrong. Either VERSION is released: its
// `## [VERSION]` heading is the newest version heading (only `## [Unreleased]` above it); or it
// is being prepared: no heading of its own yet, `## [Unreleased]` first, and VERSION newer than
// every release listed.
std::string ChangelogProblem(const std::string& changelog, const std::string& version) {
  std::vector<std::string> headings;  // what is between the brackets, in order
  const std::regex heading(R"(^## \[([^\]]+)\])");
  std::istringstream lines(changelog);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, heading)) headings.push_back(m[1].str());
  }
  std::vector<std::string> releases;
  for (const std::string& h : headings) {
    if (h != "Unreleased") releases.push_back(h);
  }
  const bool unreleased_first = !headings.empty() && headings[0] == "Unreleased";
  if (!releases.empty() && releases[0] == version) return "";
  for (const std::string& r : releases) {
    if (r == version) return "[" + version + "] is not the newest version heading";
  }
  if (!unreleased_first) {
    return "no `## [" + version + "]` heading and no `## [Unreleased]` section first";
  }
  std::array<long, 3> ours{}, newest{};
  if (!CoreVersion(version, &ours)) return "VERSION '" + version + "' is no version";
  if (!releases.empty() && CoreVersion(releases[0], &newest) && !(newest < ours)) {
    return "VERSION " + version + " has no heading and is not newer than [" + releases[0] + "]";
  }
  return "";
}

TEST_CASE("VERSION is a semantic version and kVersion is its text", "[version]") {
  const std::string version = VersionFile();
  CHECK(std::regex_match(version, std::regex(R"([0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?)")));
  CHECK(std::string(gpuprio::base::kVersion) == version);
}

TEST_CASE("The Chrome trace's otherData names the version that wrote it", "[version]") {
  const nlohmann::json trace =
      nlohmann::json::parse(gpuprio::tracer::ChromeTraceJson(gpuprio::tracer::TraceInput{}));
  CHECK(trace.at("otherData").at("gpuprio_version") == VersionFile());
  // Beside the format's own object, which stays as readers expect it.
  CHECK(trace.at("otherData").at("gpuprio").at("version") == 2);
}

TEST_CASE("CHANGELOG.md has a section for VERSION, or an Unreleased one for it", "[version]") {
  const std::string problem = ChangelogProblem(ChangelogFile(), VersionFile());
  INFO("VERSION " << VersionFile() << ": " << problem);
  CHECK(problem.empty());
}

TEST_CASE("The changelog check refuses a VERSION the changelog does not account for",
          "[version]") {
  const std::string released = "# Changelog\n\n## [Unreleased]\n\n## [0.9.0] - 2026-11-25\n";
  CHECK(ChangelogProblem(released, "0.9.0").empty());
  CHECK(ChangelogProblem("## [0.9.0] - 2026-11-25\n## [0.8.0]\n", "0.9.0").empty());
  CHECK(ChangelogProblem(released, "0.10.0").empty());       // being prepared under Unreleased
  CHECK(ChangelogProblem(released, "0.9.1-rc1").empty());
  CHECK_FALSE(ChangelogProblem(released, "0.8.0").empty());  // older than the newest release
  CHECK_FALSE(ChangelogProblem(released, "0.9.0-rc1").empty());
  CHECK_FALSE(ChangelogProblem("## [0.9.0]\n", "0.10.0").empty());  // no Unreleased section
  CHECK_FALSE(ChangelogProblem("## [0.10.0]\n## [0.9.0]\n", "0.9.0").empty());
  CHECK_FALSE(ChangelogProblem("", "0.9.0").empty());
}

}  // namespace
