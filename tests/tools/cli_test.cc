// Tests of the user-facing tools, run as subprocesses: tools/cli/gpuprio (with env_dump as the
// child it launches) and tools/python/gpuprio.py (through tests/tools/gpuprio_py_test.py).
// No GPU is involved: env_dump reports what it was started with, and makes one CUDA call to the
// fake driver only where a test gives it ENV_DUMP_LIBCUDA (UsingCuda).
#include <link.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "catch2/catch.hpp"
#include "tests/runfiles.h"

namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

// An entry every test puts in LD_PRELOAD beforehand; gpuprio must keep it after its own.
constexpr char kExistingPreload[] = "libm.so.6";

std::string RunfileOrFail(absl::string_view path) {
  auto found = gpuprio_test::Runfile(path);
  REQUIRE(found.ok());
  return *found;
}

std::string Cli() { return RunfileOrFail("tools/cli/gpuprio"); }
std::string Lib() { return RunfileOrFail("hook/libgpuprio.so"); }
std::string EnvDump() { return RunfileOrFail("tests/tools/env_dump"); }
std::string FakeDriver() { return RunfileOrFail("tests/fake_cuda/libcuda.so.1"); }

// The first line of the repository's VERSION file, the one source of the product's version.
std::string VersionFile() {
  std::ifstream in(RunfileOrFail("VERSION"));
  std::string line;
  REQUIRE(std::getline(in, line));
  REQUIRE(!line.empty());
  return line;
}

std::string Getenv(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

// ASAN_OPTIONS for a child that preloads libgpuprio.so: under --config=asan the sanitizer runtime
// cannot come first in its library list. Later options win, so appending is enough.
std::string AsanOptions(absl::string_view extra = "") {
  std::string options = Getenv("ASAN_OPTIONS");
  absl::StrAppend(&options, options.empty() ? "" : ":", "verify_asan_link_order=0", extra);
  return options;
}

// The environment every CLI run gets on top of the test's own.
Env BaseEnv() {
  return {{"LD_PRELOAD", kExistingPreload}, {"ASAN_OPTIONS", AsanOptions()}};
}

// `env` for an env_dump that uses CUDA (one call to the fake driver): the library starts, and says
// what it says, only in a process that does.
Env UsingCuda(Env env) {
  env.emplace_back("ENV_DUMP_LIBCUDA", FakeDriver());
  return env;
}

gpuprio_test::ProcessResult Run(const std::vector<std::string>& argv, const Env& env) {
  auto result = gpuprio_test::RunProcess(argv, env);
  REQUIRE(result.ok());
  return *std::move(result);
}

std::vector<std::string> Lines(absl::string_view text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

// The value of the "NAME=value" line in env_dump's output, or "(missing)".
std::string Field(const gpuprio_test::ProcessResult& result, absl::string_view name) {
  for (const std::string& line : Lines(result.stdout_text)) {
    if (absl::StartsWith(line, absl::StrCat(name, "="))) return line.substr(name.size() + 1);
  }
  return "(missing)";
}

std::vector<std::string> GpuprioVars(const gpuprio_test::ProcessResult& result) {
  std::vector<std::string> vars;
  for (const std::string& line : Lines(result.stdout_text)) {
    if (absl::StartsWith(line, "GPUPRIO_")) vars.push_back(line);
  }
  return vars;
}

// A bad invocation: exit 2, nothing on stdout, one line on stderr containing every `needle`.
void CheckUsageError(const std::vector<std::string>& args,
                     const std::vector<std::string>& needles, const Env& env = BaseEnv()) {
  std::vector<std::string> argv = {Cli()};
  argv.insert(argv.end(), args.begin(), args.end());
  const auto result = Run(argv, env);
  INFO("argv: " << absl::StrJoin(args, " ") << "\nstdout: " << result.stdout_text
                << "\nstderr: " << result.stderr_text);
  CHECK(result.exit_code == 2);
  CHECK(result.stdout_text.empty());
  CHECK(Lines(result.stderr_text).size() == 1);
  CHECK(absl::StartsWith(result.stderr_text, "gpuprio"));
  for (const std::string& needle : needles) CHECK(absl::StrContains(result.stderr_text, needle));
}

// The sanitizer runtimes this test binary loaded (none in a plain build). An uninstrumented
// program (python3) that preloads a sanitizer build of libgpuprio.so needs them preloaded first.
std::vector<std::string> SanitizerRuntimes() {
  std::vector<std::string> runtimes;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        const absl::string_view name = info->dlpi_name != nullptr ? info->dlpi_name : "";
        if (absl::StrContains(name, "libasan.so") || absl::StrContains(name, "libtsan.so")) {
          static_cast<std::vector<std::string>*>(out)->emplace_back(name);
        }
        return 0;
      },
      &runtimes);
  return runtimes;
}

// env_dump run with `lib` preloaded, the C API's answers included.
gpuprio_test::ProcessResult RunPreloaded(const std::string& lib) {
  return Run({EnvDump()}, {{"LD_PRELOAD", lib}, {"ASAN_OPTIONS", AsanOptions()},
                           {"GPUPRIO_MODE", "passthrough"}});
}

// libgpuprio.so, checked once to load cleanly (plain and sanitizer builds alike).
std::string ChoosePreloadLib() {
  const std::string lib = Lib();
  const auto probe = RunPreloaded(lib);
  INFO("env_dump with " << lib << " preloaded: exit " << probe.exit_code << "\nstderr: "
                        << probe.stderr_text);
  REQUIRE(probe.exit_code == 0);
  return lib;
}

std::string PreloadLib() {
  static const std::string* const lib = new std::string(ChoosePreloadLib());
  return *lib;
}

// Whether the library at `lib` exports the C API yet: asks env_dump, run with it preloaded.
bool LibraryHasCApi(const std::string& lib) {
  const auto result = RunPreloaded(lib);
  REQUIRE(result.exit_code == 0);
  return Field(result, "gpuprio_get_thread_priority") != "absent";
}

gpuprio_test::ProcessResult RunPythonTest(const Env& env) {
  // -I: ignore PYTHON* variables and user site-packages; -B: write no .pyc into the runfiles.
  return Run({"/usr/bin/env", "python3", "-I", "-B",
              RunfileOrFail("tests/tools/gpuprio_py_test.py")},
             env);
}

}  // namespace

TEST_CASE("gpuprio run preloads the library first and sets GPUPRIO_* for the child", "[cli]") {
  const std::string lib = PreloadLib();
  Env env = BaseEnv();
  env.emplace_back("GPUPRIO_LOG", "error");  // set by the caller: kept, since --log is not given
  const auto result = Run({Cli(), "run", "--lib", lib, "--priority", "high", "--mode",
                           "passthrough", "--", EnvDump()},
                          env);
  INFO("stdout: " << result.stdout_text << "\nstderr: " << result.stderr_text);
  REQUIRE(result.exit_code == 0);
  CHECK(Field(result, "LD_PRELOAD") == absl::StrCat(lib, ":", kExistingPreload));
  CHECK(GpuprioVars(result) == std::vector<std::string>{"GPUPRIO_ANNOUNCE=1", "GPUPRIO_LOG=error",
                                                        "GPUPRIO_MODE=passthrough",
                                                        "GPUPRIO_PRIORITY=high"});
  CHECK(Field(result, "gpuprio_get_default_priority") == "1");
  CHECK(Field(result, "gpuprio_get_thread_priority") == "-1000");  // GPUPRIO_PRIORITY_UNSET
  CHECK(Field(result, "gpuprio_mode") == "passthrough");
  CHECK(Field(result, "gpuprio_version") == VersionFile());
}

TEST_CASE("gpuprio run normalises values and does not preload the library twice", "[cli]") {
  const std::string lib = PreloadLib();
  Env env = BaseEnv();
  env[0].second = absl::StrCat(lib, " ", kExistingPreload);  // space-separated, gpuprio already in
  const auto result = Run({Cli(), "run", "--lib", lib, "--priority", "-7", "--mode", "OFF",
                           "--log", "Debug", "--budget-us", "500", "--", EnvDump()},
                          env);
  INFO("stdout: " << result.stdout_text << "\nstderr: " << result.stderr_text);
  REQUIRE(result.exit_code == 0);
  CHECK(Field(result, "LD_PRELOAD") == absl::StrCat(lib, ":", kExistingPreload));
  CHECK(GpuprioVars(result) == std::vector<std::string>{"GPUPRIO_ANNOUNCE=1",
                                                        "GPUPRIO_BUDGET_US=500",
                                                        "GPUPRIO_LOG=debug", "GPUPRIO_MODE=off",
                                                        "GPUPRIO_PRIORITY=-7"});
}

TEST_CASE("gpuprio run finds the library through GPUPRIO_LIB", "[cli]") {
  const std::string lib = PreloadLib();
  Env env = BaseEnv();
  env.emplace_back("GPUPRIO_LIB", lib);
  const auto result = Run({Cli(), "run", "--mode", "passthrough", "--", EnvDump()}, env);
  INFO("stdout: " << result.stdout_text << "\nstderr: " << result.stderr_text);
  REQUIRE(result.exit_code == 0);
  CHECK(Field(result, "LD_PRELOAD") == absl::StrCat(lib, ":", kExistingPreload));

  SECTION("and names a GPUPRIO_LIB that is not a file") {
    Env missing = BaseEnv();
    missing.emplace_back("GPUPRIO_LIB", "/nonexistent/libgpuprio.so");
    CheckUsageError({"run", "--", EnvDump()}, {"GPUPRIO_LIB", "/nonexistent/libgpuprio.so"},
                    missing);
  }
}

TEST_CASE("gpuprio run passes the child's exit status through", "[cli]") {
  const std::string lib = PreloadLib();
  SECTION("exit code") {
    const auto result = Run({Cli(), "run", "--lib", lib, "--mode", "off", "--", EnvDump(), "7"},
                            BaseEnv());
    INFO("stderr: " << result.stderr_text);
    CHECK(result.exit_code == 7);
    CHECK(absl::StrContains(result.stdout_text, "LD_PRELOAD="));
  }
  SECTION("death by signal: gpuprio replaced itself with the child") {
    const auto result = Run({Cli(), "run", "--lib", lib, "--mode", "off", "--", "/bin/sh", "-c",
                             "kill -TERM $$"},
                            BaseEnv());
    INFO("stderr: " << result.stderr_text);
    CHECK(result.exit_code == 128 + 15);
  }
  SECTION("command not found: 127, as in a shell") {
    const auto result =
        Run({Cli(), "run", "--lib", lib, "--", "gpuprio-no-such-command"}, BaseEnv());
    CHECK(result.exit_code == 127);
    CHECK(absl::StrContains(result.stderr_text, "gpuprio-no-such-command"));
  }
}

TEST_CASE("gpuprio rejects bad input with exit 2 and one message naming the problem", "[cli]") {
  const std::string lib = PreloadLib();
  const std::string child = EnvDump();
  SECTION("unknown priority name") {
    CheckUsageError({"run", "--lib", lib, "--priority", "urgent", "--", child},
                    {"--priority", "urgent"});
  }
  SECTION("priority out of range") {
    CheckUsageError({"run", "--lib", lib, "--priority", "101", "--", child},
                    {"--priority", "101", "[-100, 100]"});
  }
  SECTION("unknown mode") {
    CheckUsageError({"run", "--lib", lib, "--mode", "fast", "--", child}, {"--mode", "fast"});
  }
  SECTION("unknown log level") {
    CheckUsageError({"env", "--lib", lib, "--log", "loud"}, {"--log", "loud"});
  }
  SECTION("negative budget") {
    CheckUsageError({"run", "--lib", lib, "--budget-us", "-1", "--", child}, {"--budget-us"});
  }
  SECTION("missing command after --") {
    CheckUsageError({"run", "--lib", lib, "--priority", "high", "--"}, {"no command"});
  }
  SECTION("missing command") {
    CheckUsageError({"run", "--lib", lib, "--priority", "high"}, {"no command"});
  }
  SECTION("option without its value") {
    CheckUsageError({"run", "--lib", lib, "--priority"}, {"--priority"});
  }
  SECTION("unknown option") {
    CheckUsageError({"run", "--lib", lib, "--fast", "--", child}, {"--fast"});
  }
  SECTION("--lib that is not a file") {
    CheckUsageError({"run", "--lib", "/nonexistent/libgpuprio.so", "--", child},
                    {"--lib", "/nonexistent/libgpuprio.so"});
  }
  SECTION("trace file in a missing directory") {
    CheckUsageError({"run", "--lib", lib, "--trace", "/nonexistent/t.json", "--", child},
                    {"--trace", "/nonexistent"});
  }
  SECTION("no subcommand") { CheckUsageError({}, {"subcommand"}); }
  SECTION("unknown subcommand") { CheckUsageError({"launch"}, {"launch"}); }
}

TEST_CASE("gpuprio env prints export lines a shell can eval", "[cli]") {
  const std::string lib = PreloadLib();
  const std::string tmp = Getenv("TEST_TMPDIR");
  REQUIRE(!tmp.empty());
  const std::string trace = absl::StrCat(tmp, "/my trace.json");  // a space: must be quoted
  const std::vector<std::string> env_args = {"env", "--lib", lib, "--priority", "LOW",
                                             "--trace", trace};

  std::vector<std::string> argv = {Cli()};
  argv.insert(argv.end(), env_args.begin(), env_args.end());
  const auto printed = Run(argv, BaseEnv());
  INFO("stdout: " << printed.stdout_text << "\nstderr: " << printed.stderr_text);
  REQUIRE(printed.exit_code == 0);
  CHECK(printed.stderr_text.empty());
  const std::vector<std::string> lines = Lines(printed.stdout_text);
  REQUIRE(lines.size() == 3);
  CHECK(absl::StartsWith(lines[0], "export LD_PRELOAD="));
  CHECK(lines[1] == "export GPUPRIO_PRIORITY=low");
  CHECK(absl::StartsWith(lines[2], "export GPUPRIO_TRACE="));

  // What a user does with it: eval in a shell, then start the program.
  std::string script = "eval \"$(\"$0\"";
  for (size_t i = 0; i < env_args.size(); ++i) absl::StrAppend(&script, " \"$", i + 1, "\"");
  absl::StrAppend(&script, ")\" && exec \"$", env_args.size() + 1, "\"");
  std::vector<std::string> shell = {"/bin/sh", "-c", script, Cli()};
  shell.insert(shell.end(), env_args.begin(), env_args.end());
  shell.push_back(EnvDump());
  const auto child = Run(shell, BaseEnv());
  INFO("script: " << script << "\nchild stdout: " << child.stdout_text
                  << "\nchild stderr: " << child.stderr_text);
  REQUIRE(child.exit_code == 0);
  CHECK(Field(child, "LD_PRELOAD") == absl::StrCat(lib, ":", kExistingPreload));
  // The child loaded gpuprio at low priority: it made itself a below-normal MPS client before its
  // main, and marked the value as gpuprio's (env_handling_test checks the value itself).
  CHECK(GpuprioVars(child) == std::vector<std::string>{"GPUPRIO_MPS_CLIENT_PRIORITY_SET=1",
                                                       "GPUPRIO_PRIORITY=low",
                                                       "GPUPRIO_TRACE=" + trace});
}

TEST_CASE("gpuprio --version prints the VERSION file's version", "[cli]") {
  const auto result = Run({Cli(), "--version"}, BaseEnv());
  INFO("stdout: " << result.stdout_text << "\nstderr: " << result.stderr_text);
  CHECK(result.exit_code == 0);
  CHECK(result.stdout_text == absl::StrCat("gpuprio ", VersionFile(), "\n"));
  CHECK(result.stderr_text.empty());
}

TEST_CASE("The library's exit summary names its version", "[cli]") {
  const auto result = Run({Cli(), "run", "--lib", PreloadLib(), "--mode", "passthrough", "--log",
                           "info", "--", EnvDump()},
                          UsingCuda(BaseEnv()));
  INFO("stdout: " << result.stdout_text << "\nstderr: " << result.stderr_text);
  REQUIRE(result.exit_code == 0);
  CHECK(absl::StrContains(result.stderr_text,
                          absl::StrCat(" mode=passthrough version=", VersionFile(), "\n")));
  CHECK(absl::StrContains(result.stderr_text, "gpuprio: info: call summary: pid="));
}

TEST_CASE("Under gpuprio run the library says once at start how it runs; plain preload is quiet",
          "[cli]") {
  const std::string lib = PreloadLib();
  const auto result = Run({Cli(), "run", "--lib", lib, "--mode", "passthrough", "--priority",
                           "low", "--budget-us", "700", "--log", "error", "--", EnvDump()},
                          UsingCuda(BaseEnv()));
  INFO("stdout: " << result.stdout_text << "\nstderr: " << result.stderr_text);
  REQUIRE(result.exit_code == 0);
  CHECK(Field(result, "cuda_call") == "0");
  const std::string pid = Field(result, "pid");
  const std::string line = absl::StrCat("gpuprio: info: pid ", pid,
                                        " mode=passthrough priority=low budget=700us trace=none");
  CHECK(absl::StrContains(result.stderr_text, line));
  CHECK(Lines(result.stderr_text).size() == 1);

  Env plain = UsingCuda(BaseEnv());
  plain[0].second = absl::StrCat(lib, ":", kExistingPreload);
  plain.emplace_back("GPUPRIO_MODE", "passthrough");
  const auto quiet = Run({EnvDump()}, plain);
  INFO("plain stderr: " << quiet.stderr_text);
  REQUIRE(quiet.exit_code == 0);
  CHECK(Field(quiet, "gpuprio_mode") == "passthrough");  // the library was there
  CHECK(Field(quiet, "cuda_call") == "0");
  CHECK(quiet.stderr_text.empty());
}

TEST_CASE("Under gpuprio run a program that makes no CUDA call gets no line from the library",
          "[cli]") {
  // The launcher's own shell and every process it starts load the library; only those that use
  // CUDA say anything, and this one uses none, even at --log info.
  const auto result = Run({Cli(), "run", "--lib", PreloadLib(), "--log", "info", "--", "/bin/sh",
                           "-c", absl::StrCat("/bin/true && ", EnvDump())},
                          BaseEnv());
  INFO("stdout: " << result.stdout_text << "\nstderr: " << result.stderr_text);
  REQUIRE(result.exit_code == 0);
  CHECK(Field(result, "gpuprio_mode") == "schedule");  // the library was there
  CHECK(result.stderr_text.empty());
}

TEST_CASE("The start line names the file this process's trace goes to, its pattern expanded",
          "[cli]") {
  const std::string dir = Getenv("TEST_TMPDIR");
  REQUIRE(!dir.empty());
  Env env = BaseEnv();
  env.emplace_back("TRACE_TEST_RANK", "3");
  // Passthrough: no tracer starts, so nothing is written; the line is what one would write.
  const auto result =
      Run({Cli(), "run", "--lib", PreloadLib(), "--mode", "passthrough", "--trace",
           dir + "/trace_%p_%q{TRACE_TEST_RANK}.json", "--", EnvDump()},
          UsingCuda(env));
  INFO("stdout: " << result.stdout_text << "\nstderr: " << result.stderr_text);
  REQUIRE(result.exit_code == 0);
  const std::string pid = Field(result, "pid");
  CHECK(absl::StrContains(
      result.stderr_text,
      absl::StrCat("gpuprio: info: pid ", pid,
                   " mode=passthrough priority=normal budget=2000us trace=",
                   dir, "/trace_", pid, "_3.json version=")));
  CHECK(Lines(result.stderr_text).size() == 1);
}

TEST_CASE("gpuprio --help lists the subcommands and each has its own usage", "[cli]") {
  const auto top = Run({Cli(), "--help"}, BaseEnv());
  CHECK(top.exit_code == 0);
  CHECK(absl::StrContains(top.stdout_text, "usage: gpuprio"));
  CHECK(absl::StrContains(top.stdout_text, "run "));
  CHECK(absl::StrContains(top.stdout_text, "env "));
  CHECK(absl::StrContains(top.stdout_text, "top "));  // tested in top_test.cc

  const auto run = Run({Cli(), "run", "--help"}, BaseEnv());
  CHECK(run.exit_code == 0);
  CHECK(absl::StrContains(run.stdout_text, "usage: gpuprio run [options] -- CMD [ARGS...]"));
  for (const char* option : {"--priority", "--mode", "--log", "--budget-us", "--trace", "--lib"}) {
    CHECK(absl::StrContains(run.stdout_text, option));
  }
  const auto env = Run({Cli(), "env", "--help"}, BaseEnv());
  CHECK(env.exit_code == 0);
  CHECK(absl::StrContains(env.stdout_text, "usage: gpuprio env [options]"));
}

TEST_CASE("The Python helper is a no-op that warns once without the library", "[python]") {
  const auto result = RunPythonTest({{"TEST_GPUPRIO_EXPECT_API", "0"}});
  INFO("output: " << result.stdout_text << result.stderr_text);
  CHECK(result.exit_code == 0);
}

TEST_CASE("The Python helper sets and restores priorities in the preloaded library", "[python]") {
  const std::string lib = PreloadLib();
  const bool has_api = LibraryHasCApi(lib);
  REQUIRE(has_api);
  std::vector<std::string> preload = SanitizerRuntimes();
  preload.push_back(lib);
  const auto result = RunPythonTest({{"LD_PRELOAD", absl::StrJoin(preload, ":")},
                                     {"GPUPRIO_MODE", "passthrough"},
                                     {"GPUPRIO_PRIORITY", "low"},
                                     {"TEST_GPUPRIO_EXPECT_API", has_api ? "1" : "0"},
                                     // CPython's own allocations at exit are not ours to check.
                                     {"ASAN_OPTIONS", AsanOptions(":detect_leaks=0")}});
  INFO("LD_PRELOAD: " << absl::StrJoin(preload, ":") << "\noutput: " << result.stdout_text
                      << result.stderr_text);
  CHECK(result.exit_code == 0);
}
