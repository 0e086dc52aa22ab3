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
    const uint64_t id = static_cast<uint64_t>(k);
    const int64_t submit = base + k * 100 * kUs;
    const uint32_t correlation = 100 + static_cast<uint32_t>(k);
    OpSubmitted op;
    op.op_id = id;
    op.client_tid = kClient;
    op.api = "cuLaunchKernel";
    op.priority = priority;
    op.submit_ns = submit;
    op.return_ns = submit + kUs;
    in.ops_submitted.push_back(op);
    const int64_t issue = submit + k * kUs;
    in.ops_issued.push_back(OpIssued{id, kDispatcher, issue, issue + kUs, 0});
    in.external_correlations.push_back(
        ExternalCorrelation{gpuprio::tracer::kExternalCorrelationKindGpuprio, id, correlation});
    ApiCall call;
    call.name = "cuLaunchKernel";
    call.correlation_id = correlation;
    call.tid = kDispatcher;
    call.start_ns = issue + 100;
    call.end_ns = issue + 900;
    in.api_calls.push_back(call);
    GpuActivity gpu;
    gpu.name = name + "_kernel";
    gpu.correlation_id = correlation;
    gpu.stream_id = 7;
    gpu.start_ns = issue + 3 * kUs;
    gpu.end_ns = gpu.start_ns + 10 * kUs;
    in.gpu_activities.push_back(gpu);
    if (k == ops) {
      gpu.start_ns = gpu.end_ns + kUs;
      gpu.end_ns = gpu.start_ns + 5 * kUs;
      in.gpu_activities.push_back(gpu);
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
