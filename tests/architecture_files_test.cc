// docs/architecture.md's file tables cover the product: every .h/.cc/.def under hook/,
// cupti_tracer/ and scheduler/ (base/ and coordinator/ included) is named in its package's table,
// and every name in the tables is a file that exists.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "catch2/catch.hpp"
#include "tests/runfiles.h"

namespace {

std::string ReadRunfile(const std::string& path) {
  absl::StatusOr<std::string> text = gpuprio_test::RunfileText(path);
  REQUIRE(text.ok());
  return *std::move(text);
}

// One name written in a table's first column, as the page wrote it, and the package whose table
// it is in.
struct TableName {
  std::string package;
  std::string written;
};

// The backticked names in the first column of every table row under a "## <package>/: ..."
// heading. Any other heading ends a package's table, so tables of other sections are not read.
std::vector<TableName> TableNames(const std::string& doc) {
  std::vector<TableName> names;
  std::string package;
  for (absl::string_view line : absl::StrSplit(doc, '\n')) {
    if (absl::StartsWith(line, "#")) {
      package.clear();
      absl::string_view heading = line;
      if (absl::ConsumePrefix(&heading, "## ")) {
        const size_t end = heading.find("/:");
        if (end != absl::string_view::npos) package = std::string(heading.substr(0, end));
      }
      continue;
    }
    if (package.empty() || !absl::StartsWith(line, "|")) continue;
    const std::vector<absl::string_view> cells = absl::StrSplit(line, '|');
    if (cells.size() < 3) continue;
    const std::vector<absl::string_view> parts = absl::StrSplit(cells[1], '`');
    // Backticked text is at the odd indices.
    for (size_t i = 1; i < parts.size(); i += 2) {
      names.push_back({package, std::string(parts[i])});
    }
  }
  return names;
}

// The files a written name stands for, among `sources` (workspace-relative paths):
// "a.{h,cc}" is a.h and a.cc (each must exist), "a.*" every file a.<ext> (at least one), anything
// else the one file. Names that match nothing are added to `missing`.
std::set<std::string> Resolve(const TableName& name, const std::set<std::string>& sources,
                              std::vector<std::string>* missing) {
  std::set<std::string> files;
  const std::string path = absl::StrCat(name.package, "/", name.written);
  absl::string_view stem = path;
  if (absl::ConsumeSuffix(&stem, ".*")) {
    const std::string prefix = absl::StrCat(stem, ".");
    for (const auto& source : sources) {
      const absl::string_view ext = absl::string_view(source).substr(
          std::min(prefix.size(), source.size()));
      if (absl::StartsWith(source, prefix) && !absl::StrContains(ext, '/') &&
          !absl::StrContains(ext, '.')) {
        files.insert(source);
      }
    }
    if (files.empty()) missing->push_back(path);
    return files;
  }
  const size_t brace = path.find(".{");
  if (brace != std::string::npos && absl::EndsWith(path, "}")) {
    const std::string base = path.substr(0, brace);
    const std::string list = path.substr(brace + 2, path.size() - brace - 3);
    for (absl::string_view ext : absl::StrSplit(list, ',')) {
      const std::string file = absl::StrCat(base, ".", ext);
      if (sources.count(file) == 1) {
        files.insert(file);
      } else {
        missing->push_back(file);
      }
    }
    return files;
  }
  if (sources.count(path) == 1) {
    files.insert(path);
  } else {
    missing->push_back(path);
  }
  return files;
}

struct Coverage {
  std::vector<std::string> unlisted;  // source files no table names
  std::vector<std::string> missing;   // table names that are no source file
};

Coverage Check(const std::string& doc, const std::set<std::string>& sources) {
  Coverage coverage;
  std::set<std::string> listed;
  for (const auto& name : TableNames(doc)) {
    for (const auto& file : Resolve(name, sources, &coverage.missing)) listed.insert(file);
  }
  for (const auto& source : sources) {
    if (listed.count(source) == 0) coverage.unlisted.push_back(source);
  }
  return coverage;
}

}  // namespace

TEST_CASE("Every source file of the product is in architecture.md's tables, and only those",
          "[architecture]") {
  std::set<std::string> sources;
  for (absl::string_view line :
       absl::StrSplit(ReadRunfile("tests/product_sources.txt"), '\n', absl::SkipWhitespace())) {
    sources.insert(std::string(line));
  }
  // The list is made by globs in the packages' BUILD files; a handful would mean a broken glob.
  REQUIRE(sources.size() > 50);
  REQUIRE(sources.count("hook/interceptor.h") == 1);
  REQUIRE(sources.count("scheduler/base/env_vars.def") == 1);
  REQUIRE(sources.count("scheduler/coordinator/gpu_coordinator.cc") == 1);

  const Coverage coverage = Check(ReadRunfile("docs/architecture.md"), sources);
  for (const auto& file : coverage.unlisted) {
    INFO(file << " is named in no file table of docs/architecture.md: add a row for it");
    CHECK(false);
  }
  for (const auto& file : coverage.missing) {
    INFO(file << " is named in docs/architecture.md's tables but is no source file");
    CHECK(false);
  }
}

TEST_CASE("The table check sees an unlisted file and a name that does not exist",
          "[architecture]") {
  const std::string doc =
      "## Layers\n\n| package | what |\n|---|---|\n| `hook/` | x |\n\n"
      "## hook/: h\n\n| file | what it is |\n|---|---|\n"
      "| `a.{h,cc}`, `b.*` | x |\n| `include/c.h` | y |\n| `gone.h` | z |\n\n"
      "### Decisions\n| `d.h` | a table outside the file tables |\n\n"
      "## scheduler/base/: b\n\n| file | what it is |\n|---|---|\n| `e.*` | w |\n";
  const std::set<std::string> sources = {
      "hook/a.h",  "hook/a.cc",         "hook/b.h", "hook/b.cc", "hook/include/c.h",
      "hook/d.h",  "scheduler/base/e.h", "scheduler/base/e.def", "scheduler/f.h"};
  const Coverage coverage = Check(doc, sources);
  CHECK(coverage.unlisted == std::vector<std::string>{"hook/d.h", "scheduler/f.h"});
  CHECK(coverage.missing == std::vector<std::string>{"hook/gone.h"});

  // "a.{h,cc}" needs both files; "b.*" needs one; "e.*" does not reach "e.sub.h".
  const Coverage partial = Check("## hook/: h\n| `a.{h,cc}` | x |\n| `b.*` | y |\n",
                                 {"hook/a.h", "hook/b.cc", "hook/b.sub.h"});
  CHECK(partial.missing == std::vector<std::string>{"hook/a.cc"});
  CHECK(partial.unlisted == std::vector<std::string>{"hook/b.sub.h"});
}
