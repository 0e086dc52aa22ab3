// Scratch directories for tests that check which files a writer leaves behind.
#ifndef GPUPRIO_TESTS_TEST_DIRECTORY_H_
#define GPUPRIO_TESTS_TEST_DIRECTORY_H_

#include <dirent.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "catch2/catch.hpp"

namespace gpuprio_test {

// A new, empty directory under Bazel's TEST_TMPDIR whose name starts with `prefix`.
inline std::string FreshDirectory(const std::string& prefix) {
  const char* tmpdir = std::getenv("TEST_TMPDIR");
  REQUIRE(tmpdir != nullptr);
  std::string dir = std::string(tmpdir) + "/" + prefix + "_XXXXXX";
  REQUIRE(mkdtemp(dir.data()) != nullptr);
  return dir;
}

// Names in `dir`, sorted, without "." and "..".
inline std::vector<std::string> DirectoryEntries(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (const dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace gpuprio_test

#endif  // GPUPRIO_TESTS_TEST_DIRECTORY_H_
