// Traces for servers and multi-process jobs, end to end: trace_client under libgpuprio.so against
// the fake driver and the fake libcupti. Checked: the capture window (GPUPRIO_TRACE_DELAY_S,
// GPUPRIO_TRACE_DURATION_S, GPUPRIO_TRACE_RANGE with cuProfilerStart/Stop) records only the
// launches inside it and, with a duration or a stop, writes the trace while the program still
// runs; name patterns (%p, %q{VAR}); a .json.gz trace written on SIGTERM gunzips and parses;
// kernel names arrive demangled.
#include <signal.h>
#include <zlib.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "nlohmann/json.hpp"
#include "tests/client_env.h"
#include "tests/runfiles.h"
#include "tests/test_directory.h"

namespace {

using gpuprio_test::Env;
using nlohmann::json;

std::string Runfile(const char* path) {
  auto full = gpuprio_test::Runfile(path);
  REQUIRE(full.ok());
  return *full;
}

struct TracedRun {
  gpuprio_test::ProcessResult result;
  std::map<std::string, long> values;
};

// trace_client `args` with GPUPRIO_TRACE=`trace` and `extra` in its environment.
TracedRun Run(const std::vector<std::string>& args, const std::string& trace, Env extra = {}) {
  Env env = {{"GPUPRIO_TRACE", trace},
             {"GPUPRIO_CUPTI_LIBRARY", Runfile("tests/fake_cupti/libcupti.so.13")},
             {"GPUPRIO_LOG", "info"}};
  for (auto& e : extra) env.push_back(std::move(e));
  auto client_env = gpuprio_test::ClientEnv("schedule", std::move(env));
  REQUIRE(client_env.ok());
  std::vector<std::string> argv = {Runfile("tests/tracer/trace_client")};
  argv.insert(argv.end(), args.begin(), args.end());
  auto result = gpuprio_test::RunProcess(argv, *client_env);
  REQUIRE(result.ok());
  INFO("stderr:\n" << result->stderr_text);
  CHECK(result->stderr_text.find("Sanitizer") == std::string::npos);
  return {*result, gpuprio_test::IntValues(result->stdout_text)};
}

// The file's JSON; gunzipped (by zlib's reader) when it is gzip.
json ParseTrace(const std::string& path) {
  gzFile in = gzopen(path.c_str(), "rb");  // reads plain files as they are, too
  REQUIRE(in != nullptr);
  std::string text;
  char chunk[1 << 16];
  int n = 0;
  while ((n = gzread(in, chunk, sizeof(chunk))) > 0) text.append(chunk, static_cast<size_t>(n));
  CHECK(n == 0);
  gzclose(in);
  return json::parse(text);  // throws (and fails the test) on anything but valid JSON
}

bool IsGzip(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  char magic[2] = {};
  file.read(magic, 2);
  return file.gcount() == 2 && magic[0] == '\x1f' && magic[1] == '\x8b';
}

#define DESCRIBE(run)                                                                 \
  INFO("exit " << (run).result.exit_code << "\nstdout:\n" << (run).result.stdout_text \
               << "\nstderr:\n" << (run).result.stderr_text)

// Three phases of 10 launches: at 0 s, ~2 s and ~4 s after tracing starts (the first launch).
const std::vector<std::string> kPhases = {"phases", "10", "2000"};

TEST_CASE("GPUPRIO_TRACE_DELAY_S records from the delay on, to exit", "[tracer]") {
  const std::string dir = gpuprio_test::FreshDirectory("delay");
  const TracedRun run = Run(kPhases, dir + "/t.json", {{"GPUPRIO_TRACE_DELAY_S", "1"}});
  DESCRIBE(run);
  REQUIRE(run.result.exit_code == 0);
  CHECK(run.values.at("trace_before_exit") == 0);
  CHECK(ParseTrace(dir + "/t.json").at("otherData").at("gpuprio").at("ops") == 20);
  CHECK(run.result.stderr_text.find("trace: recording started (GPUPRIO_TRACE_DELAY_S=1)") !=
        std::string::npos);
}

TEST_CASE("GPUPRIO_TRACE_DURATION_S writes the trace when it ends, while the program runs",
          "[tracer]") {
  const std::string dir = gpuprio_test::FreshDirectory("duration");
  SECTION("from the start") {
    const TracedRun run = Run(kPhases, dir + "/t.json", {{"GPUPRIO_TRACE_DURATION_S", "1"}});
    DESCRIBE(run);
    REQUIRE(run.result.exit_code == 0);
    CHECK(run.values.at("trace_before_exit") == 1);
    CHECK(ParseTrace(dir + "/t.json").at("otherData").at("gpuprio").at("ops") == 10);
  }
  SECTION("after a delay: only the middle phase") {
    const TracedRun run = Run(kPhases, dir + "/t.json",
                              {{"GPUPRIO_TRACE_DELAY_S", "1"}, {"GPUPRIO_TRACE_DURATION_S", "2"}});
    DESCRIBE(run);
    REQUIRE(run.result.exit_code == 0);
    CHECK(run.values.at("trace_before_exit") == 1);
    const json trace = ParseTrace(dir + "/t.json");
    CHECK(trace.at("otherData").at("gpuprio").at("ops") == 10);
  }
  CHECK(gpuprio_test::DirectoryEntries(dir) == std::vector<std::string>{"t.json"});
}

TEST_CASE("GPUPRIO_TRACE_RANGE=profiler_api without cuProfilerStart writes no trace",
          "[tracer]") {
  const std::string dir = gpuprio_test::FreshDirectory("range");
  const TracedRun run = Run({"exit", "10"}, dir + "/t.json", {{"GPUPRIO_TRACE_RANGE", "profiler_api"}});
  DESCRIBE(run);
  CHECK(run.result.exit_code == 0);
  CHECK(run.result.stderr_text.find("trace: recording never started "
                                    "(GPUPRIO_TRACE_RANGE=profiler_api); no trace written") !=
        std::string::npos);
  CHECK(gpuprio_test::DirectoryEntries(dir).empty());
}

TEST_CASE("GPUPRIO_TRACE_RANGE=profiler_api records from cuProfilerStart to cuProfilerStop",
          "[tracer]") {
  const std::string dir = gpuprio_test::FreshDirectory("profiler_range");
  const TracedRun run =
      Run({"profiler_range", "10"}, dir + "/t.json", {{"GPUPRIO_TRACE_RANGE", "profiler_api"}});
  DESCRIBE(run);
  REQUIRE(run.result.exit_code == 0);
  // Written at the stop, while the program still ran; the driver received both calls.
  CHECK(run.values.at("trace_before_exit") == 1);
  CHECK(run.values.at("driver_profiler_calls") == 2);
  // Only the launches between start and stop, none of those before or after.
  CHECK(ParseTrace(dir + "/t.json").at("otherData").at("gpuprio").at("ops") == 10);
  CHECK(run.result.stderr_text.find("calls api=cuProfilerStart total=1") != std::string::npos);
  CHECK(run.result.stderr_text.find("calls api=cuProfilerStop total=1") != std::string::npos);
}

TEST_CASE("SIGTERM writes a gzip trace named by pattern, with demangled kernel names",
          "[tracer]") {
  const std::string dir = gpuprio_test::FreshDirectory("sigterm_gz");
  const TracedRun run = Run({"sigterm", "20"}, dir + "/trace.%q{RANK}.%p.json.gz",
                            {{"RANK", "3"}, {"FAKE_CUPTI_KERNEL_NAME", "_Z10add_kernelPfS_i"}});
  DESCRIBE(run);
  CHECK(run.result.exit_code == 128 + SIGTERM);
  const std::string name = "trace.3." + std::to_string(run.values.at("pid")) + ".json.gz";
  REQUIRE(gpuprio_test::DirectoryEntries(dir) == std::vector<std::string>{name});
  CHECK(IsGzip(dir + "/" + name));
  const json trace = ParseTrace(dir + "/" + name);
  CHECK(trace.at("otherData").at("gpuprio").at("ops") == 20);
  int kernels = 0;
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X" || e.value("cat", "") != "kernel") continue;
    ++kernels;
    CHECK(e.at("name") == "add_kernel(float*, float*, int)");
    CHECK(e.at("args").at("mangled") == "_Z10add_kernelPfS_i");
  }
  CHECK(kernels == 8);  // the fake CUPTI's flush
}

TEST_CASE("An unset %q{VAR} stays in the name, with a warning", "[tracer]") {
  const std::string dir = gpuprio_test::FreshDirectory("unset_var");
  const TracedRun run = Run({"exit", "5"}, dir + "/t.%q{GPUPRIO_TEST_UNSET}.json");
  DESCRIBE(run);
  CHECK(run.result.exit_code == 0);
  CHECK(gpuprio_test::DirectoryEntries(dir) ==
        std::vector<std::string>{"t.%q{GPUPRIO_TEST_UNSET}.json"});
  CHECK(run.result.stderr_text.find("GPUPRIO_TEST_UNSET is not set; kept literally") !=
        std::string::npos);
}

}  // namespace
