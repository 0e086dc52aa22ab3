// Secure execution with a real setuid binary: env_probe is copied, given to another user (nobody)
// and marked setuid, then run by root, so it runs with ruid 0 and euid 65534 and the kernel sets
// AT_SECURE. gpuprio must then ignore GPUPRIO_CUPTI_LIBRARY (never load the library it names) and
// GPUPRIO_TRACE (never attempt the trace), and say so in one line. The same probe without the
// setuid bit is the control: there the library is loaded, so the marker can appear.
//
// How gpuprio gets into the setuid process: the way it would in real use. In secure-execution
// mode the loader preloads only libraries named without a slash, found in a system library
// directory, that carry the setuid bit; so the test installs a setuid copy of libgpuprio.so under
// a unique name in the first writable system directory for the length of the test. (The program
// dlopen()ing gpuprio itself fails: gpuprio's initial-exec TLS needs the static TLS block, which
// only libraries loaded at startup get.) The probe dlopen()s the fake driver by absolute path.
//
// Needs root (chown to another user, writing a system directory): it warns and skips otherwise.
// Everything else the setuid process reads is copied to a directory under /tmp: it runs as
// nobody, and the test's runfiles and TEST_TMPDIR usually lie under a directory only root enters.
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "catch2/catch.hpp"
#include "tests/client_env.h"
#include "tests/runfiles.h"

namespace {

namespace fs = std::filesystem;

constexpr uid_t kNobody = 65534;

std::string Path(const char* runfile) {
  auto path = gpuprio_test::Runfile(runfile);
  REQUIRE(path.ok());
  return *path;
}

void Install(const std::string& from, const fs::path& to, fs::perms mode) {
  fs::copy_file(from, to, fs::copy_options::overwrite_existing);
  fs::permissions(to, mode);
}

int CountLines(const std::string& text, absl::string_view needle) {
  int count = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) count += absl::StrContains(line, needle);
  return count;
}

// Removes `path` (a file or a directory tree) at scope exit.
class RemovedAtExit {
 public:
  explicit RemovedAtExit(fs::path path) : path_(std::move(path)) {}
  ~RemovedAtExit() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// The first of the loader's system directories that exists and that root can write.
std::string SystemLibraryDir() {
  for (const char* dir : {"/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib64",
                          "/lib64", "/usr/lib", "/lib"}) {
    if (fs::is_directory(dir) && access(dir, W_OK) == 0) return dir;
  }
  return "";
}

TEST_CASE("A setuid program ignores GPUPRIO_CUPTI_LIBRARY and GPUPRIO_TRACE, and says so once",
          "[hook][secure]") {
  if (geteuid() != 0) {
    WARN("SKIPPED: making a setuid binary of another user needs root; this test ran as uid "
         << geteuid());
    return;
  }
  char dir_name[] = "/tmp/gpuprio_secure_XXXXXX";
  REQUIRE(mkdtemp(dir_name) != nullptr);
  const RemovedAtExit dir{fs::path(dir_name)};
  fs::permissions(dir.path(), fs::perms(0755));
  struct statvfs fs_info;
  REQUIRE(statvfs(dir_name, &fs_info) == 0);
  if ((fs_info.f_flag & ST_NOSUID) != 0) {
    WARN("SKIPPED: /tmp is mounted nosuid, so no setuid binary can run from it");
    return;
  }
  const std::string system_dir = SystemLibraryDir();
  REQUIRE(!system_dir.empty());
  const std::string preload_name = absl::StrCat("libgpuprio_secure_test_", getpid(), ".so");
  const RemovedAtExit preload{fs::path(system_dir) / preload_name};
  Install(Path("hook/libgpuprio.so"), preload.path(), fs::perms(04755));

  // Writable by nobody: the marker (written by the library's constructor as whoever loads it)
  // and the trace (which must not be written at all).
  const fs::path writable = dir.path() / "w";
  fs::create_directory(writable);
  fs::permissions(writable, fs::perms(0777));
  const fs::path probe = dir.path() / "env_probe";
  const fs::path setuid_probe = dir.path() / "env_probe_setuid";
  const fs::path libcuda = dir.path() / "libcuda.so.1";
  const fs::path marker_library = writable / "libmarker.so";
  const fs::path marker = writable / "libmarker.so.loaded";
  const fs::path trace = writable / "trace.json";
  Install(Path("tests/hook/env_probe"), probe, fs::perms(0755));
  Install(Path("tests/hook/env_probe"), setuid_probe, fs::perms(0755));
  Install(Path("tests/fake_cuda/libcuda.so.1"), libcuda, fs::perms(0755));
  Install(Path("tests/hook/libmarker.so"), marker_library, fs::perms(0755));
  // chown clears the setuid bit, so the mode comes after it.
  REQUIRE(chown(setuid_probe.c_str(), kNobody, static_cast<gid_t>(-1)) == 0);
  REQUIRE(chmod(setuid_probe.c_str(), 04755) == 0);

  gpuprio_test::Env env = {
      {"LD_PRELOAD", preload_name},
      {"GPUPRIO_MODE", "schedule"},
      {"GPUPRIO_TRACE", trace.string()},
      {"GPUPRIO_CUPTI_LIBRARY", marker_library.string()},
      // The instrumented library is preloaded before the sanitizer runtime; LeakSanitizer stops
      // the world with ptrace, which a setuid (non-dumpable) process refuses.
      {"ASAN_OPTIONS", "verify_asan_link_order=0:detect_leaks=0"},
  };
  // Its segments are the test's, in a directory removed with the rest (one of them made by
  // nobody, who cannot reach the test's own temporary directory).
  const fs::path shm = writable / "shm";
  fs::create_directory(shm);
  fs::permissions(shm, fs::perms(01777));
  env.push_back({"GPUPRIO_DOMAIN", gpuprio_test::TestDomain()});
  env.push_back({"GPUPRIO_SHM_DIR", shm.string()});
  auto run = [&](const fs::path& binary) {
    auto result = gpuprio_test::RunProcess({binary.string(), libcuda.string(), "schedule"}, env);
    REQUIRE(result.ok());
    INFO(binary << "\nstdout:\n" << result->stdout_text << "\nstderr:\n" << result->stderr_text);
    REQUIRE(result->exit_code == 0);
    const auto values = gpuprio_test::StringValues(result->stdout_text);
    REQUIRE(values.count("done") == 1);
    REQUIRE(values.at("gpuprio_mode") == "schedule");  // gpuprio is in the process
    CHECK(values.at("scheduled_call") == "ok");
    return *result;
  };

  SECTION("control: without setuid the library named is loaded and the trace attempted") {
    const auto r = run(probe);
    INFO("stderr:\n" << r.stderr_text);
    CHECK(gpuprio_test::StringValues(r.stdout_text).at("at_secure") == "0");
    CHECK(fs::exists(marker));
    CHECK(CountLines(r.stderr_text, "no trace file will be written") == 1);
    CHECK(CountLines(r.stderr_text, "secure execution") == 0);
  }
  SECTION("setuid: AT_SECURE is set, nothing is loaded, one line names both variables") {
    const auto r = run(setuid_probe);
    INFO("stderr:\n" << r.stderr_text);
    const auto values = gpuprio_test::StringValues(r.stdout_text);
    REQUIRE(values.at("at_secure") == "1");
    REQUIRE(values.at("euid") == std::to_string(kNobody));
    CHECK_FALSE(fs::exists(marker));
    CHECK_FALSE(fs::exists(trace));
    CHECK(CountLines(r.stderr_text, "no trace file will be written") == 0);
    CHECK(CountLines(r.stderr_text, "secure execution") == 1);
    CHECK(CountLines(r.stderr_text, "ignoring GPUPRIO_TRACE, GPUPRIO_CUPTI_LIBRARY") == 1);
  }
}

}  // namespace
