// The dependency statement of docs/architecture.md ("Layers") is the truth: every dependency a
// BUILD.bazel of the product declares on another package of the product is listed there, and
// every listed one is declared by some BUILD file.
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "catch2/catch.hpp"
#include "tests/runfiles.h"

namespace {

const std::vector<std::string> kPackages = {"hook", "cupti_tracer", "scheduler", "scheduler/base",
                                            "scheduler/coordinator"};

std::string ReadRunfile(const std::string& path) {
  absl::StatusOr<std::string> text = gpuprio_test::RunfileText(path);
  REQUIRE(text.ok());
  return *std::move(text);
}

// "//pkg:target" or "//pkg" -> {pkg, target}; the target of "//pkg" is the package's last part.
std::pair<std::string, std::string> SplitLabel(absl::string_view label) {
  label = absl::StripPrefix(label, "//");
  const size_t colon = label.find(':');
  if (colon != absl::string_view::npos) {
    return {std::string(label.substr(0, colon)), std::string(label.substr(colon + 1))};
  }
  const size_t slash = label.rfind('/');
  return {std::string(label),
          std::string(slash == absl::string_view::npos ? label : label.substr(slash + 1))};
}

// Every "//..." label inside a deps list of `build`, as {package, target}, other than the
// package's own.
std::set<std::pair<std::string, std::string>> DeclaredDeps(const std::string& package,
                                                           const std::string& build) {
  std::set<std::pair<std::string, std::string>> deps;
  bool in_deps = false;
  for (absl::string_view line : absl::StrSplit(build, '\n')) {
    const absl::string_view trimmed = absl::StripAsciiWhitespace(line);
    if (absl::StartsWith(trimmed, "deps = [")) in_deps = true;
    if (in_deps) {
      for (absl::string_view field : absl::StrSplit(trimmed, '"')) {
        if (!absl::StartsWith(field, "//")) continue;
        auto label = SplitLabel(field);
        if (label.first != package) deps.insert(label);
      }
    }
    if (in_deps && absl::StrContains(trimmed, "]")) in_deps = false;
  }
  return deps;
}

bool IsProductPackage(const std::string& package) {
  for (const auto& p : kPackages) {
    if (p == package) return true;
  }
  return false;
}

// The ```layering block of the architecture page: package -> allowed labels.
std::map<std::string, std::vector<std::string>> DocumentedLayers(const std::string& doc) {
  std::map<std::string, std::vector<std::string>> layers;
  const size_t begin = doc.find("```layering\n");
  REQUIRE(begin != std::string::npos);
  const size_t end = doc.find("```", begin + 12);
  REQUIRE(end != std::string::npos);
  for (absl::string_view line :
       absl::StrSplit(doc.substr(begin + 12, end - begin - 12), '\n', absl::SkipWhitespace())) {
    std::vector<std::string> sides = absl::StrSplit(line, "->");
    REQUIRE(sides.size() == 2);
    const std::string package(absl::StripAsciiWhitespace(sides[0]));
    layers[package] = absl::StrSplit(sides[1], ' ', absl::SkipWhitespace());
  }
  return layers;
}

// A declared {package, target} is allowed by "//pkg" (any target of it) or "//pkg:target".
bool Allows(const std::string& allowed, const std::pair<std::string, std::string>& dep) {
  const absl::string_view a = absl::StripPrefix(allowed, "//");
  if (a.find(':') == absl::string_view::npos) return a == dep.first;
  return a == dep.first + ":" + dep.second;
}

}  // namespace

TEST_CASE("The documented layers are exactly the BUILD files' dependencies", "[layering]") {
  const auto layers = DocumentedLayers(ReadRunfile("docs/architecture.md"));
  for (const auto& package : kPackages) REQUIRE(layers.count(package) == 1);
  for (const auto& package : kPackages) {
    const auto declared = DeclaredDeps(package, ReadRunfile(package + "/BUILD.bazel"));
    const std::vector<std::string>& allowed = layers.at(package);
    std::set<std::string> used;
    for (const auto& dep : declared) {
      if (!IsProductPackage(dep.first)) continue;
      bool ok = false;
      for (const auto& a : allowed) {
        if (Allows(a, dep)) {
          ok = true;
          used.insert(a);
        }
      }
      INFO(package << " depends on //" << dep.first << ":" << dep.second);
      CHECK(ok);
    }
    for (const auto& a : allowed) {
      INFO(package << " -> " << a << " is documented but no BUILD rule of " << package
                   << " declares it");
      CHECK(used.count(a) == 1);
    }
  }
}

TEST_CASE("The layering check sees a dependency that breaks the layers", "[layering]") {
  // The parser on a BUILD text written here: a scheduler rule that names the tracer.
  const auto deps = DeclaredDeps("scheduler", "cc_library(\n    deps = [\n        \":op\",\n"
                                              "        \"//cupti_tracer:trace_join\",\n"
                                              "        \"//scheduler/base\",\n    ],\n)\n");
  CHECK(deps.count({"cupti_tracer", "trace_join"}) == 1);
  CHECK(deps.count({"scheduler/base", "base"}) == 1);
  CHECK_FALSE(Allows("//scheduler/base", {"cupti_tracer", "trace_join"}));
  CHECK(Allows("//scheduler:op_observer", {"scheduler", "op_observer"}));
  CHECK_FALSE(Allows("//scheduler:op_observer", {"scheduler", "scheduler"}));
}
