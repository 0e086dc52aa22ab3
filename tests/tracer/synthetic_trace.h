// Test support: a synthetic but realistic TraceInput (client threads submit ops, one dispatcher
// issues them, kernels run on two streams), with switches that remove the pieces CUPTI may lose,
// and a shuffle that mimics records arriving out of order from several per-thread buffers.
#ifndef GPUPRIO_TESTS_TRACER_SYNTHETIC_TRACE_H_
#define GPUPRIO_TESTS_TRACER_SYNTHETIC_TRACE_H_

#include <cstdint>
#include <string>

#include "cupti_tracer/trace_events.h"

namespace gpuprio_test {

// Fixed ids and times of the scenario, so tests can state exact expectations.
inline constexpr uint32_t kPid = 4242;
inline constexpr int64_t kBaseNs = 1700000000000000000;  // CUPTI-like: needs relative times
inline constexpr uint32_t kClientHigh = 101;  // submits the odd ops, priority 1, stream 7
inline constexpr uint32_t kClientLow = 102;   // submits the even ops, priority 0, stream 13
inline constexpr uint32_t kDispatcher = 201;
inline constexpr uint32_t kOtherThread = 301;  // unrelated calls with colliding correlation ids
inline constexpr uint32_t kCallerClient = 103;

// Op k (1-based) of the deferred ops: client call at T(k) = kBaseNs + k * 100 us.
//   client runtime record (RUNTIME cudaLaunchKernel, correlation 1000 + k): [T, T + 4 us]
//   submit at T + 1 us, return at T + 3 us; client_correlation_id set for even k only
//   issued on the dispatcher: [T + 5 us + k * 100 ns, + 3 us]
//   dispatcher DRIVER record cuLaunchKernel, correlation 5000 + k: [issue + 0.5 us, end - 0.5 us]
//   kernel "kernel_<k>", correlation 5000 + k: [issue end + 2 us, + 10 us]
// On-caller ops (ids 100 and 101, client kCallerClient):
//   op 100: cudaMemcpyAsync RUNTIME record (9001) at T0 = kBaseNs + 50 ms, [T0, T0 + 10 us],
//           the real DRIVER cuMemcpyHtoDAsync_v2 (9002) [T0 + 2 us, T0 + 8 us], memcpy 9002.
//   op 101: cudaLaunchKernel RUNTIME record (9101) at T1 = T0 + 100 us, [T1, T1 + 5 us]; the
//           kernel carries the runtime record's id 9101; no driver record.
// Not an op: a passthrough cudaLaunchKernel (7777) on kClientHigh at kBaseNs + 60 ms, its kernel.
struct ScenarioOptions {
  int deferred_ops = 6;
  bool with_on_caller_ops = true;
  bool with_unrelated_work = true;
  uint64_t drop_external_correlation_of = 0;  // op id whose EXTERNAL_CORRELATION is lost
  uint64_t drop_kernel_of = 0;                // op id whose kernel record is lost
  uint64_t drop_dispatcher_record_of = 0;     // op id whose dispatcher DRIVER record is lost
  uint64_t drop_client_record_of = 0;         // op id whose client RUNTIME record is lost
  uint64_t drop_issued_of = 0;                // op id whose OpIssued is lost
};

gpuprio::tracer::TraceInput Scenario(const ScenarioOptions& options = {});

// Times of deferred op k, as Scenario lays them out.
int64_t ClientStartNs(uint64_t k);
int64_t SubmitNs(uint64_t k);
int64_t IssueBeginNs(uint64_t k);
int64_t KernelStartNs(uint64_t k);

// One deferred launch as the tracer records it: the client submits at `submit_ns` (returning
// 1 us later), the dispatcher issues it at `issue_ns` (for 1 us) and calls the driver inside the
// issue (DRIVER record cuLaunchKernel with `correlation`, linked to the op by an external
// correlation), and, unless `kernel` is empty, the kernel runs on `stream_id` over
// [kernel_start_ns, kernel_end_ns).
struct LaunchRecords {
  uint64_t op_id = 0;
  uint32_t client_tid = 0;
  uint32_t dispatcher_tid = 0;
  int priority = 0;
  int64_t submit_ns = 0;
  int64_t issue_ns = 0;
  uint32_t correlation = 0;
  std::string kernel;
  uint32_t stream_id = 7;
  int64_t kernel_start_ns = 0;
  int64_t kernel_end_ns = 0;
};
void AddLaunchRecords(const LaunchRecords& launch, gpuprio::tracer::TraceInput& input);

// Shuffles every record vector (a different order per seed), as if CUPTI delivered the records
// in several buffers, per thread, out of order.
void ShuffleRecords(gpuprio::tracer::TraceInput& input, uint32_t seed);

}  // namespace gpuprio_test

#endif  // GPUPRIO_TESTS_TRACER_SYNTHETIC_TRACE_H_
