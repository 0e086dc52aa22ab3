// JoinTrace: links gpuprio's op records to the CUPTI records they caused, across threads and
// buffers: client API call -> op -> dispatcher's driver call -> GPU work (docs/trace_format.md). Pure logic
// on trace_events.h structs; the Chrome writer serialises its result.
#ifndef GPUPRIO_CUPTI_TRACER_TRACE_JOIN_H_
#define GPUPRIO_CUPTI_TRACER_TRACE_JOIN_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "cupti_tracer/trace_events.h"

namespace gpuprio::tracer {

// CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2 in cupti_activity.h (CUDA 13.0): the kind gpuprio
// pushes op ids with. A named constant so this target needs no CUPTI header; the CUPTI side
// static_asserts that it matches.
inline constexpr uint32_t kExternalCorrelationKindGpuprio = 5;

// The span on the client thread an op is drawn under.
struct ClientSpan {
  enum class Source {
    kCorrelationId,  // the API record named by OpSubmitted::client_correlation_id
    kContainment,    // the innermost API record on client_tid containing submit_ns
    kSynthesized,    // no record: [submit_ns, return_ns] of the op itself
  };
  Source source = Source::kSynthesized;
  const ApiCall* call = nullptr;  // null when synthesized
  uint32_t tid = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

struct JoinedOp {
  const OpSubmitted* submitted = nullptr;  // never null
  ClientSpan client;
  const OpIssued* issued = nullptr;  // null for on-caller ops and lost records
  // CUPTI correlation ids recorded for this op (EXTERNAL_CORRELATION, kind gpuprio).
  std::vector<uint32_t> correlation_ids;
  // The real driver call: the dispatcher's DRIVER record, or for an on-caller op the client
  // thread's DRIVER record that caused the GPU work. Null when not found.
  const ApiCall* driver_call = nullptr;
  // GPU work caused by the op, earliest first (a graph launch yields several).
  std::vector<const GpuActivity*> gpu;

  // When the op was issued: OpIssued::begin_ns, else the dispatcher's driver record start; for
  // an on-caller op the start of its client span (the real call ran inside it).
  std::optional<int64_t> issue_begin_ns;
  // issue_begin - submit_ns; only for ops that went through a dispatcher.
  std::optional<int64_t> queue_delay_ns;
  // Start of the earliest GPU activity - issue_begin.
  std::optional<int64_t> issue_to_start_ns;
};

// What could and could not be linked. Every field counts records of the input, once.
struct JoinCounts {
  int64_t ops = 0;  // distinct op ids submitted
  int64_t ops_on_caller = 0;
  int64_t ops_issued = 0;                         // with an OpIssued record
  int64_t ops_missing_external_correlation = 0;   // issued, but no EXTERNAL_CORRELATION
  int64_t ops_missing_driver_call = 0;            // not on the caller and no driver record found
  int64_t ops_linked_to_gpu = 0;                  // at least one GPU activity
  int64_t client_spans_by_correlation_id = 0;
  int64_t client_spans_by_containment = 0;
  int64_t client_spans_synthesized = 0;
  int64_t duplicate_op_records = 0;  // OpSubmitted/OpIssued repeating an op id (first kept)
  int64_t orphan_ops_issued = 0;     // OpIssued whose op was never submitted
  int64_t gpu_records = 0;
  int64_t gpu_records_linked_to_client = 0;  // linked to an op
  int64_t api_records = 0;
};

struct JoinedTrace {
  std::vector<JoinedOp> ops;  // by op id
  // API records that are neither an op's client span nor its driver call, by start time.
  std::vector<const ApiCall*> other_api_calls;
  // GPU activities linked to no op, by start time.
  std::vector<const GpuActivity*> unlinked_gpu;
  JoinCounts counts;
};

// Joins `input`'s records. The result points into `input`, which must outlive it and stay
// unchanged. Records may come in any order and any of them may be missing or duplicated: what
// can be linked is linked, the rest is counted. Each GPU activity goes to at most one op; links
// by recorded id (external correlation, client correlation id) are made before links guessed from
// time, so a guess never takes work that an id names.
JoinedTrace JoinTrace(const TraceInput& input);
// The result would point into a temporary.
JoinedTrace JoinTrace(TraceInput&& input) = delete;

}  // namespace gpuprio::tracer

#endif  // GPUPRIO_CUPTI_TRACER_TRACE_JOIN_H_
