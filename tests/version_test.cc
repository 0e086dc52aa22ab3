// The product's one version: the top-level VERSION file is what the generated
// scheduler/base/version.h, and through it the trace's otherData, say. (The C API, the CLI and
// the Python helper are checked against the same file in tests/tools/cli_test.cc.)
#include <fstream>
#include <regex>
#include <string>

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

}  // namespace
