// The tracer's plain event model: CUPTI activity records decoded into our own structs, and the
// events gpuprio records itself (op submitted by a client thread, op issued by a dispatcher,
// counter samples). Everything downstream (TraceJoin, the Chrome writer, tests) works on these,
// never on CUPTI's own record layouts. All timestamps are nanoseconds on CUPTI's clock.
#ifndef GPUPRIO_CUPTI_TRACER_TRACE_EVENTS_H_
#define GPUPRIO_CUPTI_TRACER_TRACE_EVENTS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace gpuprio::tracer {

// A runtime (cuda*) or driver (cu*) API call, from CUPTI's RUNTIME / DRIVER activity kinds.
struct ApiCall {
  enum class Kind { kRuntime, kDriver };
  Kind kind = Kind::kDriver;
  uint32_t cbid = 0;
  std::string name;            // "cudaLaunchKernel", "cuLaunchKernel"
  uint32_t correlation_id = 0;  // CUPTI's id, shared with the GPU activity it caused
  uint32_t pid = 0;
  uint32_t tid = 0;  // system thread id (cuptiSetThreadIdType(SYSTEM))
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

// Work that ran on the GPU: CONCURRENT_KERNEL, MEMCPY, MEMSET.
struct GpuActivity {
  enum class Kind { kKernel, kMemcpy, kMemset };
  Kind kind = Kind::kKernel;
  uint32_t correlation_id = 0;
  uint32_t device_id = 0;
  uint32_t context_id = 0;
  uint32_t stream_id = 0;  // CUPTI's stream id (not the CUstream handle)
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  std::string name;    // kernel name, or "Memcpy HtoD" / "Memset"
  uint64_t bytes = 0;  // copies and sets
};

// EXTERNAL_CORRELATION: the API call `correlation_id` was made while `external_id` of `kind` was
// pushed on its thread. gpuprio pushes op ids with CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2.
struct ExternalCorrelation {
  uint32_t kind = 0;  // CUpti_ExternalCorrelationKind
  uint64_t external_id = 0;
  uint32_t correlation_id = 0;
};

// SYNCHRONIZATION: a host thread waited for the GPU.
struct Synchronization {
  uint32_t correlation_id = 0;
  uint32_t stream_id = 0;
  std::string type;  // "stream", "event", "context", "stream wait event"
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

// OVERHEAD: CUPTI's or the driver's own work (buffer flushes, instrumentation).
struct Overhead {
  std::string name;
  uint32_t tid = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

// gpuprio: a client thread turned a driver call into an op (or issued it to the driver itself).
struct OpSubmitted {
  uint64_t op_id = 0;  // unique in the process; pushed as the CUSTOM2 external id when issued
  uint32_t client_tid = 0;
  std::string api;  // driver API of the op, "cuLaunchKernel"
  int priority = 0;
  uint64_t stream = 0;  // the CUstream handle the application named (0: legacy stream)
  int64_t submit_ns = 0;
  int64_t return_ns = 0;  // when the interceptor returned to the application
  // CUPTI correlation id of the runtime API call the client thread was inside when it submitted
  // (from a runtime-API callback), 0 when unknown: then the client span is found by time
  // containment on client_tid.
  uint32_t client_correlation_id = 0;
  // Issued to the driver by the client thread itself (the inline class or the fast path), not
  // by the dispatcher.
  bool on_caller = false;
};

// gpuprio: a dispatcher thread issued an op: the real driver call ran in [begin_ns, end_ns] with
// op_id pushed as the CUSTOM2 external correlation id.
struct OpIssued {
  uint64_t op_id = 0;
  uint32_t dispatcher_tid = 0;
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  int result = 0;  // CUresult
};

// gpuprio: a sampled counter: `name` is the counter ("queue depth GPU 0", "budget in use GPU 0"),
// `series` the value's key within it ("p=1", "us"; "value" when empty), as in the Chrome trace.
struct CounterSample {
  std::string name;
  std::string series;
  int64_t ts_ns = 0;
  double value = 0;
};

struct ThreadName {
  uint32_t tid = 0;
  std::string name;  // "gpuprio dispatcher (GPU 0)"
};

// What the trace lacks, by cause (docs/trace_format.md, otherData). "Over the cap": refused by
// gpuprio because GPUPRIO_TRACE_MAX_MB was reached.
struct TraceDrops {
  uint64_t records_by_cupti = 0;   // CUPTI records CUPTI dropped (cuptiActivityGetNumDroppedRecords:
                                   // no buffer space, including buffers gpuprio refused at the cap)
  uint64_t records_over_cap = 0;   // CUPTI records delivered to gpuprio and discarded at the cap
  uint64_t buffers_refused = 0;    // activity buffers gpuprio refused CUPTI at the cap
  uint64_t op_events = 0;          // gpuprio's op submit/issue events discarded at the cap
  uint64_t counter_samples = 0;    // queue-depth / budget samples discarded at the cap

  // CUPTI records lost, whoever dropped them (`dropped_records` in the trace).
  uint64_t cupti_records() const { return records_by_cupti + records_over_cap; }
  bool any() const { return cupti_records() + op_events + counter_samples > 0; }
};

// Everything one trace is made of. Vectors are in no particular order: CUPTI delivers buffers
// per thread and out of order.
struct TraceInput {
  uint32_t pid = 0;
  std::string process_name;
  std::string boot_id;  // machine_identity.h; empty: unknown (not written)
  std::string host;
  int64_t base_ns = 0;  // earliest timestamp of the trace; the JSON's times are relative to it
  std::vector<ApiCall> api_calls;
  std::vector<GpuActivity> gpu_activities;
  std::vector<ExternalCorrelation> external_correlations;
  std::vector<Synchronization> synchronizations;
  std::vector<Overhead> overheads;
  std::vector<OpSubmitted> ops_submitted;
  std::vector<OpIssued> ops_issued;
  std::vector<CounterSample> counters;
  std::vector<ThreadName> thread_names;
  TraceDrops drops;
};

// The earliest non-zero timestamp of anything in `input` (0 if there is none): zeros mean "not
// recorded".
inline int64_t EarliestTimestamp(const TraceInput& input) {
  int64_t best = 0;
  auto consider = [&best](int64_t t) {
    if (t > 0 && (best == 0 || t < best)) best = t;
  };
  for (const auto& e : input.api_calls) consider(e.start_ns);
  for (const auto& e : input.gpu_activities) consider(e.start_ns);
  for (const auto& e : input.synchronizations) consider(e.start_ns);
  for (const auto& e : input.overheads) consider(e.start_ns);
  for (const auto& e : input.ops_submitted) consider(e.submit_ns);
  for (const auto& e : input.ops_issued) consider(e.begin_ns);
  for (const auto& e : input.counters) consider(e.ts_ns);
  return best;
}

}  // namespace gpuprio::tracer

#endif  // GPUPRIO_CUPTI_TRACER_TRACE_EVENTS_H_
