// Tests of `gpuprio trace summarize`: a trace written by the C++ writer (ChromeTraceJson) from a
// synthetic input with known delays, summarised by the CLI as a subprocess; the numbers must be
// exact (nearest-rank percentiles of a known set). Hostile and foreign input: the Python tests in
// trace_summarize_input_test.py and the fuzzer trace_summarize_fuzz.py, seeded with that trace.
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "catch2/catch.hpp"
#include "cupti_tracer/chrome_trace_writer.h"
#include "cupti_tracer/trace_join.h"
#include "nlohmann/json.hpp"
#include "tests/runfiles.h"
#include "tests/tracer/synthetic_trace.h"

namespace {

using gpuprio::tracer::ApiCall;
using gpuprio::tracer::ExternalCorrelation;
using gpuprio::tracer::GpuActivity;
using gpuprio::tracer::OpIssued;
using gpuprio::tracer::OpSubmitted;
using gpuprio::tracer::TraceInput;
using nlohmann::json;

constexpr int64_t kUs = 1000;
constexpr int64_t kBase = 1700000000000000000;
constexpr uint32_t kClient = 11;
constexpr uint32_t kDispatcher = 22;

// Adds a deferred op: queued `delay_us`, its kernel (if any) starting `start_us` after issue.
void AddOp(TraceInput& in, uint64_t id, int priority, int64_t delay_us, int64_t start_us,
           const std::string& kernel, int64_t kernel_us) {
  gpuprio_test::LaunchRecords launch;
  launch.op_id = id;
  launch.client_tid = kClient;
  launch.dispatcher_tid = kDispatcher;
  launch.priority = priority;
  launch.submit_ns = kBase + static_cast<int64_t>(id) * 1000 * kUs;
  launch.issue_ns = launch.submit_ns + delay_us * kUs;
  launch.correlation = 100 + static_cast<uint32_t>(id);
  launch.kernel = kernel;
  launch.kernel_start_ns = launch.issue_ns + start_us * kUs;
  launch.kernel_end_ns = launch.kernel_start_ns + kernel_us * kUs;
  gpuprio_test::AddLaunchRecords(launch, in);
}

// Priority 1: ten ops queued 1..10 us, kernels "gemm" (10 us) starting 2k us after issue.
// Priority 0: three ops queued 100, 200, 300 us; two "relu" kernels (3 us) 5 us after issue,
// one launch whose kernel record is lost. Not an op: one "other" kernel (1 us) and a copy.
TraceInput KnownTrace() {
  TraceInput in;
  in.pid = 77;
  in.drops.records_by_cupti = 7;
  for (uint64_t k = 1; k <= 10; ++k) {
    AddOp(in, k, 1, static_cast<int64_t>(k), 2 * static_cast<int64_t>(k), "gemm", 10);
  }
  AddOp(in, 11, 0, 100, 5, "relu", 3);
  AddOp(in, 12, 0, 200, 5, "relu", 3);
  AddOp(in, 13, 0, 300, 5, "", 0);
  GpuActivity other;
  other.name = "other";
  other.correlation_id = 999;
  other.stream_id = 9;
  other.start_ns = kBase + 50000 * kUs;
  other.end_ns = other.start_ns + kUs;
  in.gpu_activities.push_back(other);
  GpuActivity copy = other;
  copy.kind = GpuActivity::Kind::kMemcpy;
  copy.name = "Memcpy HtoD";
  copy.start_ns += 10 * kUs;
  copy.end_ns = copy.start_ns + 50 * kUs;
  in.gpu_activities.push_back(copy);
  return in;
}

std::string WriteTrace(const std::string& name, const std::string& text) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  REQUIRE(tmp != nullptr);
  const std::string path = std::string(tmp) + "/" + name;
  std::ofstream(path) << text;
  return path;
}

gpuprio_test::ProcessResult RunCli(const std::vector<std::string>& args) {
  auto cli = gpuprio_test::Runfile("tools/cli/gpuprio");
  REQUIRE(cli.ok());
  std::vector<std::string> argv = {*cli};
  argv.insert(argv.end(), args.begin(), args.end());
  auto result = gpuprio_test::RunProcess(argv, {});
  REQUIRE(result.ok());
  return *result;
}

TEST_CASE("gpuprio trace summarize reports exact per-priority percentiles", "[cli][tracer]") {
  const std::string path =
      WriteTrace("known.json", gpuprio::tracer::ChromeTraceJson(KnownTrace()));
  const auto result = RunCli({"trace", "summarize", path, "--json"});
  INFO("stdout: " << result.stdout_text << "\nstderr: " << result.stderr_text);
  REQUIRE(result.exit_code == 0);
  json summary;
  REQUIRE_NOTHROW(summary = json::parse(result.stdout_text));

  CHECK(summary.at("ops") == 13);
  CHECK(summary.at("ops_linked_to_gpu") == 12);
  CHECK(summary.at("kernels") == 13);  // the copy is not a kernel
  CHECK(summary.at("kernels_linked_to_client") == 12);
  CHECK(summary.at("kernels_unlinked") == 1);
  CHECK(summary.at("dropped_records") == 7);

  const json& levels = summary.at("priorities");
  REQUIRE(levels.size() == 2);
  const json& high = levels.at(0);  // highest priority first
  CHECK(high.at("priority") == 1);
  CHECK(high.at("ops") == 10);
  CHECK(high.at("queue_delay_us") == json{{"count", 10}, {"p50", 5.0}, {"p99", 10.0},
                                          {"max", 10.0}});
  CHECK(high.at("issue_to_start_us") == json{{"count", 10}, {"p50", 10.0}, {"p99", 20.0},
                                             {"max", 20.0}});
  const json& low = levels.at(1);
  CHECK(low.at("priority") == 0);
  CHECK(low.at("ops") == 3);
  CHECK(low.at("queue_delay_us") == json{{"count", 3}, {"p50", 200.0}, {"p99", 300.0},
                                         {"max", 300.0}});
  CHECK(low.at("issue_to_start_us") == json{{"count", 2}, {"p50", 5.0}, {"p99", 5.0},
                                            {"max", 5.0}});

  const json& top = summary.at("top_kernels");
  REQUIRE(top.size() == 3);
  CHECK(top.at(0) == json{{"name", "gemm"}, {"count", 10}, {"total_us", 100.0},
                          {"mean_us", 10.0}});
  CHECK(top.at(1) == json{{"name", "relu"}, {"count", 2}, {"total_us", 6.0}, {"mean_us", 3.0}});
  CHECK(top.at(2).at("name") == "other");

  CHECK(summary.at("launches_missing_kernel") ==
        json{{"count", 1}, {"first", {{{"op_id", 13}, {"api", "cuLaunchKernel"}}}}});
}

TEST_CASE("gpuprio trace summarize prints tables without --json", "[cli][tracer]") {
  const std::string path =
      WriteTrace("tables.json", gpuprio::tracer::ChromeTraceJson(KnownTrace()));
  const auto result = RunCli({"trace", "summarize", path});
  INFO("stdout: " << result.stdout_text << "\nstderr: " << result.stderr_text);
  REQUIRE(result.exit_code == 0);
  CHECK(absl::StrContains(result.stdout_text, "13 ops, 12 linked to GPU work"));
  CHECK(absl::StrContains(result.stdout_text, "5.000/10.000/10.000"));
  CHECK(absl::StrContains(result.stdout_text,
                          "launch ops with no kernel record: 1: 13 (cuLaunchKernel)"));
  CHECK(absl::StrContains(result.stdout_text, "kernels not linked to a client call: 1"));
  CHECK(absl::StrContains(result.stdout_text, "dropped CUPTI records: 7"));
}

TEST_CASE("gpuprio trace summarize --top N limits the kernels in every format",
          "[cli][tracer]") {
  const std::string path = WriteTrace("top.json", gpuprio::tracer::ChromeTraceJson(KnownTrace()));
  auto result = RunCli({"trace", "summarize", path, "--top", "1"});
  INFO("stdout: " << result.stdout_text << "\nstderr: " << result.stderr_text);
  REQUIRE(result.exit_code == 0);
  CHECK(absl::StrContains(result.stdout_text, "top 1 kernels by total GPU time:"));
  CHECK(absl::StrContains(result.stdout_text, "  gemm\n"));
  CHECK_FALSE(absl::StrContains(result.stdout_text, "relu"));

  result = RunCli({"trace", "summarize", path, "--top", "0", "--format", "json"});
  REQUIRE(result.exit_code == 0);
  CHECK(json::parse(result.stdout_text).at("top_kernels").size() == 3);
  result = RunCli({"trace", "summarize", path, "--top", "2", "--json"});
  REQUIRE(result.exit_code == 0);
  CHECK(json::parse(result.stdout_text).at("top_kernels").size() == 2);
}

TEST_CASE("gpuprio trace summarize --format csv prints one table", "[cli][tracer]") {
  TraceInput input = KnownTrace();
  // A demangled name holds commas and quotes: CSV must quote it.
  for (GpuActivity& gpu : input.gpu_activities) {
    if (gpu.name == "relu") gpu.name = "_Z4reluIfLi2EEvPKT_PS0_i";
  }
  const std::string path = WriteTrace("csv.json", gpuprio::tracer::ChromeTraceJson(input));
  const auto result = RunCli({"trace", "summarize", path, "--top", "2", "--format", "csv"});
  INFO("stdout: " << result.stdout_text << "\nstderr: " << result.stderr_text);
  REQUIRE(result.exit_code == 0);
  const std::vector<std::string> lines = absl::StrSplit(result.stdout_text, '\n', absl::SkipEmpty());
  const std::vector<std::string> expected = {
      "section,priority,name,count,total_us,mean_us,p50_us,p99_us,max_us",
      "total,,ops,13,,,,,",
      "total,,ops_linked_to_gpu,12,,,,,",
      "total,,kernels,13,,,,,",
      "total,,kernels_linked_to_client,12,,,,,",
      "total,,kernels_unlinked,1,,,,,",
      "total,,dropped_records,7,,,,,",
      "total,,launches_missing_kernel,1,,,,,",
      "queue_delay,1,,10,,,5.0,10.0,10.0",
      "queue_delay,0,,3,,,200.0,300.0,300.0",
      "issue_to_start,1,,10,,,10.0,20.0,20.0",
      "issue_to_start,0,,2,,,5.0,5.0,5.0",
      "kernel,,gemm,10,100.0,10.0,,,",
      "kernel,,\"void relu<float, 2>(float const*, float*, int)\",2,6.0,3.0,,,",
  };
  CHECK(lines == expected);
}

TEST_CASE("gpuprio trace summarize reads the gzip trace the writer makes", "[cli][tracer]") {
  const char* tmp = std::getenv("TEST_TMPDIR");
  REQUIRE(tmp != nullptr);
  const std::string path = std::string(tmp) + "/known.json.gz";
  REQUIRE(gpuprio::tracer::WriteChromeTrace(KnownTrace(), path).ok());
  const auto result = RunCli({"trace", "summarize", path, "--json"});
  INFO("stderr: " << result.stderr_text);
  REQUIRE(result.exit_code == 0);
  CHECK(json::parse(result.stdout_text).at("ops") == 13);
}

TEST_CASE("gpuprio trace summarize refuses bad --top and --format with one line",
          "[cli][tracer]") {
  const std::string path = WriteTrace("opts.json", gpuprio::tracer::ChromeTraceJson(KnownTrace()));
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--top", "-1"},
                                             {"--top", "many"},
                                             {"--format", "xml"},
                                             {"--json", "--format", "csv"}}) {
    std::vector<std::string> argv = {"trace", "summarize", path};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto result = RunCli(argv);
    INFO("args: " << absl::StrJoin(args, " ") << "\nstderr: " << result.stderr_text);
    CHECK(result.exit_code == 2);
    CHECK(result.stdout_text.empty());
    CHECK(std::vector<std::string>(absl::StrSplit(result.stderr_text, '\n', absl::SkipEmpty()))
              .size() == 1);
  }
}

TEST_CASE("gpuprio trace summarize rejects a bad file with one line and exit 2",
          "[cli][tracer]") {
  std::string path;
  SECTION("missing") { path = "/nonexistent/trace.json"; }
  SECTION("not JSON") { path = WriteTrace("broken.json", "{\"traceEvents\": ["); }
  SECTION("JSON but not a trace") { path = WriteTrace("array.json", "[1, 2]"); }
  SECTION("not a gpuprio trace") {
    path = WriteTrace("torch.json", R"({"schemaVersion":1,"traceEvents":[]})");
  }
  SECTION("malformed events") {
    path = WriteTrace("odd.json",
                      R"({"traceEvents":[{"ph":"X","cat":"client","ts":"x",)"
                      R"("args":{"op_id":1}}],"otherData":{"gpuprio":{"version":2}}})");
  }
  const auto result = RunCli({"trace", "summarize", path});
  INFO("stderr: " << result.stderr_text);
  CHECK(result.exit_code == 2);
  CHECK(result.stdout_text.empty());
  const std::vector<std::string> lines =
      absl::StrSplit(result.stderr_text, '\n', absl::SkipEmpty());
  CHECK(lines.size() == 1);
  CHECK(absl::StartsWith(result.stderr_text, "gpuprio trace: error:"));
  CHECK(absl::StrContains(result.stderr_text, path));
}

TEST_CASE("gpuprio trace summarize names the malformed event and field", "[cli][tracer]") {
  json trace = json::parse(gpuprio::tracer::ChromeTraceJson(KnownTrace()));
  size_t index = 0;
  while (trace["traceEvents"][index].value("cat", "") != "kernel") ++index;
  trace["traceEvents"][index]["dur"] = "10";
  const std::string path = WriteTrace("string_dur.json", trace.dump());
  const auto result = RunCli({"trace", "summarize", path, "--json"});
  INFO("stderr: " << result.stderr_text);
  CHECK(result.exit_code == 2);
  CHECK(absl::StrContains(result.stderr_text, absl::StrCat("traceEvents[", index,
                                                           "].dur is a string '10'")));
}

// Runs a Python script of tests/tools with `args`, pointed at the CLI in the runfiles.
gpuprio_test::ProcessResult RunPythonScript(const std::string& script,
                                            const std::vector<std::string>& args) {
  auto path = gpuprio_test::Runfile("tests/tools/" + script);
  REQUIRE(path.ok());
  auto cli = gpuprio_test::Runfile("tools/cli/gpuprio");
  REQUIRE(cli.ok());
  // -I: ignore PYTHON* variables and user site-packages; -S: no site-packages at all (standard
  // library only; their .pth files cost more than the tests' start); -B: no .pyc in the runfiles.
  std::vector<std::string> argv = {"/usr/bin/env", "python3", "-I", "-S", "-B", *path};
  argv.insert(argv.end(), args.begin(), args.end());
  auto result = gpuprio_test::RunProcess(argv, {{"GPUPRIO_CLI_UNDER_TEST", *cli}});
  REQUIRE(result.ok());
  return *result;
}

TEST_CASE("gpuprio trace summarize refuses hostile and foreign input with one line",
          "[cli][tracer]") {
  const auto result = RunPythonScript("trace_summarize_input_test.py", {});
  INFO("stdout:\n" << result.stdout_text << "\nstderr:\n" << result.stderr_text);
  CHECK(result.exit_code == 0);
  // unittest's own verdict: every test ran and passed.
  CHECK(result.stderr_text.find("\nOK") != std::string::npos);
  CHECK(result.stderr_text.find("skipped") == std::string::npos);
}

TEST_CASE("Fuzzed traces never make gpuprio trace summarize crash", "[cli][tracer]") {
  // The writer's own trace is one of the seeds the fuzzer mutates.
  const std::string seed =
      WriteTrace("fuzz_seed.json", gpuprio::tracer::ChromeTraceJson(KnownTrace()));
  auto cli = gpuprio_test::Runfile("tools/cli/gpuprio");
  REQUIRE(cli.ok());
  const auto result =
      RunPythonScript("trace_summarize_fuzz.py", {"--cli", *cli, "--seed-trace", seed});
  INFO("stdout:\n" << result.stdout_text << "\nstderr:\n" << result.stderr_text);
  CHECK(result.exit_code == 0);
  CHECK(absl::StrContains(result.stdout_text, "6000 executions"));
  CHECK(absl::StrContains(result.stdout_text, "0 failing executions"));
  CHECK(absl::StrContains(result.stdout_text, "3 seed traces"));
}

}  // namespace
