// Tests of `gpuprio trace merge`: two traces written by the C++ writer (ChromeTraceJson) for two
// processes that collide everywhere a merge can collide (the same pid, as in two containers, the
// same op ids, flow ids and GPU pid) with bases 2.5 ms apart, handed to trace_merge_test.py,
// which also merges hand-made traces and checks the refusals (docs/trace_format.md, "Merged
// traces").
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "cupti_tracer/chrome_trace_writer.h"
#include "cupti_tracer/trace_join.h"
#include "tests/python_unittest.h"
#include "tests/tracer/synthetic_trace.h"

namespace {

using gpuprio::tracer::ApiCall;
using gpuprio::tracer::ExternalCorrelation;
using gpuprio::tracer::GpuActivity;
using gpuprio::tracer::OpIssued;
using gpuprio::tracer::OpSubmitted;
using gpuprio::tracer::TraceInput;

constexpr int64_t kUs = 1000;
constexpr uint32_t kClient = 11;
constexpr uint32_t kDispatcher = 22;

// One process's trace: `ops` deferred launches of priority `priority`, each queued k us and
// its kernel starting 3 us after issue; one graph-like op (the last) has two kernels, so the
// writer adds a flow id above every op id.
TraceInput ProcessTrace(int64_t base, const std::string& name, int priority, int ops) {
  TraceInput in;
  in.pid = 77;
  in.process_name = name;
  in.base_ns = base;
  in.thread_names = {{kClient, "main"}, {kDispatcher, "gpuprio dispatcher (GPU 0)"}};
  for (int k = 1; k <= ops; ++k) {
    gpuprio_test::LaunchRecords launch;
    launch.op_id = static_cast<uint64_t>(k);
    launch.client_tid = kClient;
    launch.dispatcher_tid = kDispatcher;
    launch.priority = priority;
    launch.submit_ns = base + k * 100 * kUs;
    launch.issue_ns = launch.submit_ns + k * kUs;
    launch.correlation = 100 + static_cast<uint32_t>(k);
    launch.kernel = name + "_kernel";
    launch.kernel_start_ns = launch.issue_ns + 3 * kUs;
    launch.kernel_end_ns = launch.kernel_start_ns + 10 * kUs;
    gpuprio_test::AddLaunchRecords(launch, in);
    if (k == ops) {  // a second kernel of the same launch
      launch.kernel_start_ns = launch.kernel_end_ns + kUs;
      launch.kernel_end_ns = launch.kernel_start_ns + 5 * kUs;
      GpuActivity second = in.gpu_activities.back();
      second.start_ns = launch.kernel_start_ns;
      second.end_ns = launch.kernel_end_ns;
      in.gpu_activities.push_back(second);
    }
  }
  return in;
}

std::string WriteTrace(const std::string& name, const std::string& text) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  REQUIRE(tmp != nullptr);
  const std::string path = std::string(tmp) + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST_CASE("gpuprio trace merge keeps processes apart on one clock", "[cli][tracer]") {
  constexpr int64_t kBase = 1700000000000000000;
  const std::string serve = WriteTrace(
      "writer_serve.json", gpuprio::tracer::ChromeTraceJson(ProcessTrace(kBase, "serve", 1, 6)));
  const std::string batch = WriteTrace(
      "writer_batch.json",
      gpuprio::tracer::ChromeTraceJson(ProcessTrace(kBase + 2500 * kUs + 123, "batch", -1, 9)));
  gpuprio_test::CheckPythonUnittest(
      {gpuprio_test::RunfileOrFail("tests/tools/trace_merge_test.py"), "--writer-traces", serve,
       batch},
      {{"GPUPRIO_CLI_UNDER_TEST", gpuprio_test::RunfileOrFail("tools/cli/gpuprio")}});
}

}  // namespace
