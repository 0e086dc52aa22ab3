// tools/package.sh when its Bazel build fails: the compiler's own lines must reach the user (the
// build's output used to be cut to its last line, which says only that the build failed). A
// stand-in `bazel` on PATH fails the way a compile error does.
#include <sys/stat.h>

#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "catch2/catch.hpp"
#include "tests/runfiles.h"
#include "tests/test_directory.h"

namespace {

// What Bazel prints for a compile error, its last line the generic verdict.
constexpr char kFakeBazel[] = R"(#!/bin/sh
[ "$1" = build ] || exit 2
echo "INFO: Analyzed target //hook:libgpuprio.so (0 packages loaded, 0 targets configured)."
echo "ERROR: /src/hook/BUILD.bazel:71:19: Compiling hook/lifecycle.cc failed: (Exit 1): gcc failed"
echo "hook/lifecycle.cc:42:3: error: 'NoSuchFunction' was not declared in this scope"
echo "   42 |   NoSuchFunction();"
echo "INFO: Elapsed time: 1.234s, Critical Path: 1.00s"
echo "FAILED: Build did NOT complete successfully"
exit 1
)";

TEST_CASE("package.sh shows the compiler's error when the build fails", "[tools]") {
  const std::string dir = gpuprio_test::FreshDirectory("package_script");
  const std::string bin = dir + "/bin";
  REQUIRE(mkdir(bin.c_str(), 0755) == 0);
  {
    std::ofstream fake(bin + "/bazel");
    fake << kFakeBazel;
  }
  REQUIRE(chmod((bin + "/bazel").c_str(), 0755) == 0);

  auto script = gpuprio_test::Runfile("tools/package.sh");
  REQUIRE(script.ok());
  const char* path = std::getenv("PATH");
  auto result = gpuprio_test::RunProcess(
      {"/bin/bash", *script, dir + "/out"},
      {{"PATH", absl::StrCat(bin, ":", path != nullptr ? path : "/usr/bin:/bin")},
       {"TMPDIR", dir}});
  REQUIRE(result.ok());
  const std::string output = result->stdout_text + result->stderr_text;
  INFO("output:\n" << output);
  CHECK(result->exit_code != 0);
  CHECK(absl::StrContains(output, "error: 'NoSuchFunction' was not declared in this scope"));
  CHECK(absl::StrContains(output, "Compiling hook/lifecycle.cc failed"));
  // The full output is kept, and named.
  CHECK(absl::StrContains(output, dir + "/gpuprio_package_build."));
  // Nothing was packaged.
  CHECK(gpuprio_test::DirectoryEntries(dir + "/out").empty());
}

}  // namespace
