// Scratch directories for tests: ones that check which files a writer leaves behind, and ones
// that must leave nothing behind themselves.
#ifndef GPUPRIO_TESTS_TEST_DIRECTORY_H_
#define GPUPRIO_TESTS_TEST_DIRECTORY_H_

#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

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

// Removes `path` and everything under it; symbolic links are removed, never followed.
inline void RemoveTree(const std::string& path) {
  for (const std::string& name : DirectoryEntries(path)) {
    const std::string child = path + "/" + name;
    struct stat st;
    if (lstat(child.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      RemoveTree(child);
    } else {
      unlink(child.c_str());
    }
  }
  rmdir(path.c_str());
}

// FreshDirectory(prefix), removed with everything in it when the object goes.
class ScopedDirectory {
 public:
  explicit ScopedDirectory(const std::string& prefix) : path_(FreshDirectory(prefix)) {}
  ~ScopedDirectory() { RemoveTree(path_); }
  ScopedDirectory(const ScopedDirectory&) = delete;
  ScopedDirectory& operator=(const ScopedDirectory&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace gpuprio_test

#endif  // GPUPRIO_TESTS_TEST_DIRECTORY_H_
