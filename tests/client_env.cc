#include "tests/client_env.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/test_directory.h"

namespace gpuprio_test {
namespace {

// Removes this test process's segment directory (TestShmDir) when it ends.
void RemoveTestSegments() { RemoveTree(TestShmDir()); }

}  // namespace

std::string TestShmDir() {
  // Under the test's own temporary directory: the real /dev/shm is never touched, and what a
  // crashed test leaves is Bazel's to clean. World-searchable, so the fake clients of tests that
  // run them as another user (secure_execution_test) can make their own directory in it.
  static const std::string* const dir = [] {
    const char* tmp = std::getenv("TEST_TMPDIR");
    std::string path = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/gpuprio-shm-XXXXXX");
    if (mkdtemp(path.data()) == nullptr) std::abort();
    chmod(path.c_str(), 01777);
    std::atexit(RemoveTestSegments);
    return new std::string(path);
  }();
  return *dir;
}

std::string TestDomain() {
  // The pid alone is not unique: Bazel runs tests in their own pid namespaces, where two test
  // processes often have the same small pid, and their clients would then meet in one segment.
  // Never destroyed: RemoveTestSegments reads it at exit, after static destructors may have run.
  static const std::string* const domain = [] {
    std::random_device random;
    return new std::string(
        absl::StrCat("test-", getpid(), "-", absl::Hex(random(), absl::kZeroPad8)));
  }();
  return *domain;
}

Env TestCoordinationVariables() {
  return {{"GPUPRIO_DOMAIN", TestDomain()}, {"GPUPRIO_SHM_DIR", TestShmDir()}};
}

absl::StatusOr<Env> ClientEnv(const std::string& mode, Env extra) {
  absl::StatusOr<std::string> fake = Runfile("tests/fake_cuda/libcuda.so.1");
  if (!fake.ok()) return fake.status();
  absl::StatusOr<std::string> suppressions = Runfile("tests/fake_cuda/tsan_dlopen.supp");
  if (!suppressions.ok()) return suppressions.status();
  Env env = {
      {"LD_LIBRARY_PATH", Dirname(*fake)},
      // A preloaded instrumented library comes before the ASan runtime in the initial library
      // list; forked children of the fork scenarios keep running under TSan.
      {"ASAN_OPTIONS", "verify_asan_link_order=0:detect_leaks=0"},
      {"TSAN_OPTIONS", "die_after_fork=0:suppressions=" + *suppressions},
  };
  if (!mode.empty()) {
    absl::StatusOr<std::string> lib = Runfile("hook/libgpuprio.so");
    if (!lib.ok()) return lib.status();
    env.push_back({"LD_PRELOAD", *lib});
    env.push_back({"GPUPRIO_MODE", mode});
  }
  // Test processes coordinate only among themselves, in segments of their own directory:
  // concurrent tests must not hold each other back, and nothing is left in /dev/shm.
  for (auto& variable : TestCoordinationVariables()) {
    bool given = false;
    for (const auto& e : extra) given |= e.first == variable.first;
    if (!given) env.push_back(std::move(variable));
  }
  for (auto& e : extra) env.push_back(std::move(e));
  return env;
}

std::map<std::string, std::string> StringValues(const std::string& text) {
  std::map<std::string, std::string> values;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    for (absl::string_view field : absl::StrSplit(line, ' ')) {
      std::pair<std::string, std::string> kv = absl::StrSplit(field, absl::MaxSplits('=', 1));
      if (!kv.first.empty() && field.find('=') != absl::string_view::npos) values[kv.first] = kv.second;
    }
  }
  return values;
}

std::map<std::string, long> IntValues(const std::string& text) {
  std::map<std::string, long> values;
  for (const auto& [key, value] : StringValues(text)) {
    long v = 0;
    if (absl::SimpleAtoi(value, &v)) values[key] = v;
  }
  return values;
}

}  // namespace gpuprio_test
