// gpuprio starts in a process at its first CUDA call and not before: a preloaded process that
// makes none prints nothing and creates nothing (no thread, no file), at any level but debug; one
// that uses CUDA says its start line and its exit summary once, at the level the user guide says,
// however many threads make the first call and in a forked child of its own. startup_probe runs
// with libgpuprio.so preloaded against the fake driver. (What the start costs is measured by
// tools/bench/startup_bench.sh, not here.)
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "catch2/catch.hpp"
#include "tests/client_env.h"
#include "tests/runfiles.h"
#include "tests/test_directory.h"

namespace {

using gpuprio_test::Env;

struct ProbeRun {
  std::map<std::string, std::string> values;  // the probe's key=value lines
  std::vector<std::string> lines;              // every stderr line
  std::string stderr_text;
};

// Runs startup_probe `args` preloaded in schedule mode, its segments in `shm_dir`, `extra` on top.
ProbeRun RunProbe(const std::vector<std::string>& args, const std::string& shm_dir,
                  Env extra = {}) {
  auto probe = gpuprio_test::Runfile("tests/hook/startup_probe");
  REQUIRE(probe.ok());
  extra.emplace_back("GPUPRIO_SHM_DIR", shm_dir);
  auto env = gpuprio_test::ClientEnv("schedule", std::move(extra));
  REQUIRE(env.ok());
  std::vector<std::string> argv = {*probe};
  argv.insert(argv.end(), args.begin(), args.end());
  auto result = gpuprio_test::RunProcess(argv, *env);
  REQUIRE(result.ok());
  INFO("stdout:\n" << result->stdout_text << "\nstderr:\n" << result->stderr_text);
  REQUIRE(result->exit_code == 0);
  ProbeRun run;
  run.values = gpuprio_test::StringValues(result->stdout_text);
  REQUIRE(run.values["done"] == "yes");
  run.lines = absl::StrSplit(result->stderr_text, '\n', absl::SkipEmpty());
  run.stderr_text = result->stderr_text;
  return run;
}

int CountStartingWith(const std::vector<std::string>& lines, const std::string& prefix) {
  int n = 0;
  for (const std::string& line : lines) n += absl::StartsWith(line, prefix) ? 1 : 0;
  return n;
}

// Every line names its level.
bool EveryLineHasALevel(const std::vector<std::string>& lines) {
  for (const std::string& line : lines) {
    bool labelled = false;
    for (const char* level : {"error", "warning", "info", "debug"}) {
      labelled = labelled || absl::StartsWith(line, absl::StrCat("gpuprio: ", level, ": "));
    }
    if (!labelled) return false;
  }
  return true;
}

TEST_CASE("A preloaded process that makes no CUDA call prints nothing and creates nothing",
          "[hook][startup]") {
  // GPUPRIO_MODE is bad on purpose: a process gpuprio does nothing in does not report it either.
  const std::vector<Env> settings = {
      {},
      {{"GPUPRIO_LOG", "info"}},
      {{"GPUPRIO_LOG", "info"}, {"GPUPRIO_ANNOUNCE", "1"}, {"GPUPRIO_TRACE", "/nonexistent/t.json"}},
      {{"GPUPRIO_LOG", "error"}, {"GPUPRIO_MODE", "fast"}, {"GPUPRIO_PRIORTY", "high"}},
  };
  for (const Env& setting : settings) {
    gpuprio_test::ScopedDirectory shm("startup_shm");
    const ProbeRun run = RunProbe({"none"}, shm.path(), setting);
    INFO(run.stderr_text);
    CHECK(run.stderr_text.empty());
    CHECK(run.values.at("threads") == "1");
    CHECK(gpuprio_test::DirectoryEntries(shm.path()).empty());
  }
}

TEST_CASE("At GPUPRIO_LOG=debug a process that made no CUDA call says so once at exit",
          "[hook][startup]") {
  gpuprio_test::ScopedDirectory shm("startup_shm");
  const ProbeRun run = RunProbe({"none"}, shm.path(), {{"GPUPRIO_LOG", " Debug\n"}});
  INFO(run.stderr_text);
  // The probe and its forked child, each once.
  REQUIRE(run.lines.size() == 2);
  CHECK(CountStartingWith(run.lines, "gpuprio: debug: pid ") == 2);
  CHECK(absl::EndsWith(run.lines[0], " made no CUDA call"));
  CHECK(run.values.at("threads") == "1");
  CHECK(gpuprio_test::DirectoryEntries(shm.path()).empty());
}

TEST_CASE("A process that uses CUDA says its start line and summary once, where asked",
          "[hook][startup]") {
  gpuprio_test::ScopedDirectory shm("startup_shm");
  SECTION("GPUPRIO_LOG=info: the start line and the summary, the first call from 8 threads") {
    const ProbeRun run = RunProbe({"cuda", "8"}, shm.path(), {{"GPUPRIO_LOG", "info"}});
    INFO(run.stderr_text);
    CHECK(CountStartingWith(run.lines, "gpuprio: info: pid ") == 1);
    CHECK(CountStartingWith(run.lines, "gpuprio: info: call summary: pid=") == 1);
    CHECK(absl::StrContains(run.stderr_text,
                            "gpuprio: info: calls api=cuGetProcAddress total=8 dlsym=8 gpa=0"));
    CHECK(EveryLineHasALevel(run.lines));
  }
  SECTION("GPUPRIO_ANNOUNCE=1 (gpuprio run): the start line alone, at any level") {
    const ProbeRun run = RunProbe({"cuda", "4"}, shm.path(),
                                  {{"GPUPRIO_ANNOUNCE", "1"}, {"GPUPRIO_LOG", "error"}});
    INFO(run.stderr_text);
    REQUIRE(run.lines.size() == 1);
    CHECK(absl::StartsWith(run.lines[0], "gpuprio: info: pid "));
    CHECK(absl::StrContains(run.lines[0], " mode=schedule priority=normal budget=2000us"));
  }
  SECTION("the default level: nothing") {
    const ProbeRun run = RunProbe({"cuda", "4"}, shm.path());
    INFO(run.stderr_text);
    CHECK(run.stderr_text.empty());
  }
  SECTION("a bad value is reported once, at the first CUDA call") {
    const ProbeRun run = RunProbe({"cuda", "4"}, shm.path(), {{"GPUPRIO_PRIORITY", "urgent"}});
    INFO(run.stderr_text);
    REQUIRE(run.lines.size() == 1);
    CHECK(absl::StartsWith(run.lines[0], "gpuprio: error: GPUPRIO_PRIORITY=\"urgent\" is not valid"));
  }
}

TEST_CASE("A forked child is a process of its own: it speaks only if it uses CUDA itself",
          "[hook][startup]") {
  gpuprio_test::ScopedDirectory shm("startup_shm");
  const ProbeRun run = RunProbe({"fork_cuda"}, shm.path(), {{"GPUPRIO_ANNOUNCE", "1"}});
  INFO(run.stderr_text);
  // The parent's start line and the child's (which used CUDA), not the idle child's.
  REQUIRE(run.lines.size() == 2);
  CHECK(CountStartingWith(run.lines, "gpuprio: info: pid ") == 2);
  CHECK(CountStartingWith(run.lines,
                          absl::StrCat("gpuprio: info: pid ", run.values.at("child_pid"), " ")) ==
        1);
}

}  // namespace
