// The synthetic scenario of synthetic_trace.h.
#include "tests/tracer/synthetic_trace.h"

#include <algorithm>
#include <random>
#include <string>

namespace gpuprio_test {

using gpuprio::tracer::ApiCall;
using gpuprio::tracer::CounterSample;
using gpuprio::tracer::ExternalCorrelation;
using gpuprio::tracer::GpuActivity;
using gpuprio::tracer::OpIssued;
using gpuprio::tracer::OpSubmitted;
using gpuprio::tracer::TraceInput;

namespace {

constexpr int64_t kUs = 1000;
constexpr uint32_t kCustom2 = 5;  // CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2
constexpr uint32_t kCustom0 = 3;  // Kineto's kind: must be ignored by the join

ApiCall Call(ApiCall::Kind kind, std::string name, uint32_t correlation_id, uint32_t tid,
             int64_t start_ns, int64_t end_ns) {
  ApiCall call;
  call.kind = kind;
  call.name = std::move(name);
  call.correlation_id = correlation_id;
  call.pid = kPid;
  call.tid = tid;
  call.start_ns = start_ns;
  call.end_ns = end_ns;
  return call;
}

GpuActivity Kernel(std::string name, uint32_t correlation_id, uint32_t stream, int64_t start_ns,
                   int64_t end_ns) {
  GpuActivity gpu;
  gpu.kind = GpuActivity::Kind::kKernel;
  gpu.name = std::move(name);
  gpu.correlation_id = correlation_id;
  gpu.device_id = 0;
  gpu.stream_id = stream;
  gpu.start_ns = start_ns;
  gpu.end_ns = end_ns;
  return gpu;
}

}  // namespace

int64_t ClientStartNs(uint64_t k) { return kBaseNs + static_cast<int64_t>(k) * 100 * kUs; }
int64_t SubmitNs(uint64_t k) { return ClientStartNs(k) + 1 * kUs; }
int64_t IssueBeginNs(uint64_t k) {
  return ClientStartNs(k) + 5 * kUs + static_cast<int64_t>(k) * 100;
}
int64_t KernelStartNs(uint64_t k) { return IssueBeginNs(k) + 3 * kUs + 2 * kUs; }

TraceInput Scenario(const ScenarioOptions& options) {
  TraceInput in;
  in.pid = kPid;
  in.process_name = "python serve.py";
  in.thread_names = {{kDispatcher, "gpuprio dispatcher (GPU 0)"}, {kClientHigh, "main"}};
  in.drops.records_by_cupti = 2;
  in.drops.records_over_cap = 1;
  in.drops.buffers_refused = 1;
  in.drops.op_events = 4;
  in.drops.counter_samples = 5;

  for (uint64_t k = 1; k <= static_cast<uint64_t>(options.deferred_ops); ++k) {
    const bool high = k % 2 == 1;
    const uint32_t client = high ? kClientHigh : kClientLow;
    const uint32_t client_correlation = 1000 + static_cast<uint32_t>(k);
    const uint32_t correlation = 5000 + static_cast<uint32_t>(k);
    const int64_t t = ClientStartNs(k);

    if (options.drop_client_record_of != k) {
      in.api_calls.push_back(Call(ApiCall::Kind::kRuntime, "cudaLaunchKernel", client_correlation,
                                  client, t, t + 4 * kUs));
    }
    OpSubmitted op;
    op.op_id = k;
    op.client_tid = client;
    op.api = "cuLaunchKernel";
    op.priority = high ? 1 : 0;
    op.stream = high ? 0x7000 : 0x1300;
    op.submit_ns = SubmitNs(k);
    op.return_ns = t + 3 * kUs;
    op.client_correlation_id = k % 2 == 0 ? client_correlation : 0;
    in.ops_submitted.push_back(op);

    const int64_t issue = IssueBeginNs(k);
    if (options.drop_issued_of != k) {
      in.ops_issued.push_back(OpIssued{k, kDispatcher, issue, issue + 3 * kUs, 0});
    }
    if (options.drop_dispatcher_record_of != k) {
      in.api_calls.push_back(Call(ApiCall::Kind::kDriver, "cuLaunchKernel", correlation,
                                  kDispatcher, issue + kUs / 2, issue + 3 * kUs - kUs / 2));
    }
    if (options.drop_external_correlation_of != k) {
      in.external_correlations.push_back(ExternalCorrelation{kCustom2, k, correlation});
    }
    // Kineto's own id for the same call: another kind, must not confuse the join.
    in.external_correlations.push_back(ExternalCorrelation{kCustom0, 90000 + k, correlation});
    if (options.drop_kernel_of != k) {
      in.gpu_activities.push_back(Kernel("kernel_" + std::to_string(k), correlation,
                                         high ? 7 : 13, KernelStartNs(k),
                                         KernelStartNs(k) + 10 * kUs));
    }
    if (options.with_unrelated_work) {
      // Colliding ids on another thread: the same numbers as this op's client and dispatcher
      // records, on a thread that has nothing to do with it.
      in.api_calls.push_back(Call(ApiCall::Kind::kDriver, "cuMemGetInfo", correlation,
                                  kOtherThread, issue, issue + kUs));
      in.api_calls.push_back(Call(ApiCall::Kind::kRuntime, "cudaGetDevice", client_correlation,
                                  kOtherThread, t + 10 * kUs, t + 11 * kUs));
    }
    in.counters.push_back(CounterSample{"queue depth GPU 0", high ? "p=1" : "p=0",
                                        op.submit_ns, 1.0});
    in.counters.push_back(CounterSample{"budget in use GPU 0", "us", issue, 12.5});
  }

  if (options.with_on_caller_ops) {
    const int64_t t0 = kBaseNs + 50000 * kUs;
    in.api_calls.push_back(Call(ApiCall::Kind::kRuntime, "cudaMemcpyAsync", 9001, kCallerClient,
                                t0, t0 + 10 * kUs));
    in.api_calls.push_back(Call(ApiCall::Kind::kDriver, "cuMemcpyHtoDAsync_v2", 9002,
                                kCallerClient, t0 + 2 * kUs, t0 + 8 * kUs));
    GpuActivity copy = Kernel("Memcpy HtoD", 9002, 21, t0 + 9 * kUs, t0 + 20 * kUs);
    copy.kind = GpuActivity::Kind::kMemcpy;
    copy.bytes = 4096;
    in.gpu_activities.push_back(copy);
    OpSubmitted copy_op;
    copy_op.op_id = 100;
    copy_op.client_tid = kCallerClient;
    copy_op.api = "cuMemcpyHtoDAsync";
    copy_op.priority = -1;
    copy_op.submit_ns = t0 + 1 * kUs;
    copy_op.return_ns = t0 + 9 * kUs;
    copy_op.client_correlation_id = 9001;
    copy_op.on_caller = true;
    in.ops_submitted.push_back(copy_op);

    const int64_t t1 = t0 + 100 * kUs;
    in.api_calls.push_back(Call(ApiCall::Kind::kRuntime, "cudaLaunchKernel", 9101, kCallerClient,
                                t1, t1 + 5 * kUs));
    in.gpu_activities.push_back(Kernel("on_caller_kernel", 9101, 21, t1 + 6 * kUs, t1 + 9 * kUs));
    OpSubmitted launch_op = copy_op;
    launch_op.op_id = 101;
    launch_op.api = "cuLaunchKernel";
    launch_op.submit_ns = t1 + 1 * kUs;
    launch_op.return_ns = t1 + 4 * kUs;
    launch_op.client_correlation_id = 0;  // found by containment
    in.ops_submitted.push_back(launch_op);
  }

  if (options.with_unrelated_work) {
    const int64_t t = kBaseNs + 60000 * kUs;
    in.api_calls.push_back(
        Call(ApiCall::Kind::kRuntime, "cudaLaunchKernel", 7777, kClientHigh, t, t + 3 * kUs));
    in.gpu_activities.push_back(Kernel("passthrough_kernel", 7777, 7, t + 4 * kUs, t + 6 * kUs));
  }
  return in;
}

void AddLaunchRecords(const LaunchRecords& launch, TraceInput& in) {
  OpSubmitted op;
  op.op_id = launch.op_id;
  op.client_tid = launch.client_tid;
  op.api = "cuLaunchKernel";
  op.priority = launch.priority;
  op.submit_ns = launch.submit_ns;
  op.return_ns = launch.submit_ns + kUs;
  in.ops_submitted.push_back(op);
  in.ops_issued.push_back(
      OpIssued{launch.op_id, launch.dispatcher_tid, launch.issue_ns, launch.issue_ns + kUs, 0});
  in.external_correlations.push_back(ExternalCorrelation{
      kCustom2, launch.op_id, launch.correlation});
  ApiCall call;
  call.name = "cuLaunchKernel";
  call.correlation_id = launch.correlation;
  call.tid = launch.dispatcher_tid;
  call.start_ns = launch.issue_ns + 100;
  call.end_ns = launch.issue_ns + 900;
  in.api_calls.push_back(call);
  if (launch.kernel.empty()) return;
  GpuActivity gpu;
  gpu.name = launch.kernel;
  gpu.correlation_id = launch.correlation;
  gpu.stream_id = launch.stream_id;
  gpu.start_ns = launch.kernel_start_ns;
  gpu.end_ns = launch.kernel_end_ns;
  in.gpu_activities.push_back(gpu);
}

void ShuffleRecords(TraceInput& input, uint32_t seed) {
  std::mt19937 rng(seed);
  std::shuffle(input.api_calls.begin(), input.api_calls.end(), rng);
  std::shuffle(input.gpu_activities.begin(), input.gpu_activities.end(), rng);
  std::shuffle(input.external_correlations.begin(), input.external_correlations.end(), rng);
  std::shuffle(input.ops_submitted.begin(), input.ops_submitted.end(), rng);
  std::shuffle(input.ops_issued.begin(), input.ops_issued.end(), rng);
  std::shuffle(input.counters.begin(), input.counters.end(), rng);
}

}  // namespace gpuprio_test
