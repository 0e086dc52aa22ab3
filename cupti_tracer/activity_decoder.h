// Decoding of CUPTI activity records into the plain structs of trace_events.h.
//
// Contents:
//   ApiNameTable          callback id -> API name, per domain (the one registry of cbid names).
//   DecodedActivity       what a buffer decodes to, and its size for the memory cap.
//   DecodeActivityRecord  one record (any kind gpuprio enables; others are counted and skipped).
//   DecodeActivityBuffer  a whole buffer, walked with an injected next-record function (CUPTI's
//                         cuptiActivityGetNextRecord in production, a fake in tests).
//
// Strings (kernel names) are copied: CUPTI's pointers may not outlive the buffer.
// Pure functions, no CUPTI calls, no global state; safe from any thread.
#ifndef GPUPRIO_CUPTI_TRACER_ACTIVITY_DECODER_H_
#define GPUPRIO_CUPTI_TRACER_ACTIVITY_DECODER_H_

#include <cupti.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "cupti_tracer/trace_events.h"

namespace gpuprio::tracer {

// Names of runtime and driver API callback ids. Built once (CuptiTracer fills it from
// cuptiGetCallbackName before enabling activities) and read-only afterwards.
class ApiNameTable {
 public:
  // `name` as CUPTI spells it; runtime names lose their "_v<digits>" suffix
  // ("cudaLaunchKernel_v7000" -> "cudaLaunchKernel"). Driver names keep theirs: "cuMemcpy_v2" is
  // the driver's real symbol name.
  void Set(ApiCall::Kind kind, uint32_t cbid, const char* name);
  // The name, or "cuda api <cbid>" / "cu api <cbid>" when unknown.
  std::string Name(ApiCall::Kind kind, uint32_t cbid) const;

 private:
  std::vector<std::string> runtime_;
  std::vector<std::string> driver_;
};

// "cudaLaunchKernel_ptsz_v7000" -> "cudaLaunchKernel_ptsz". Exposed for tests.
std::string StripRuntimeVersionSuffix(const std::string& name);

struct DecodedActivity {
  std::vector<ApiCall> api_calls;
  std::vector<GpuActivity> gpu_activities;
  std::vector<ExternalCorrelation> external_correlations;
  std::vector<Synchronization> synchronizations;
  std::vector<Overhead> overheads;
  uint64_t records = 0;          // records seen, decoded or not
  uint64_t unknown_records = 0;  // kinds gpuprio does not decode (skipped)
  // Records that valid_bytes cut short: not read, not in `records` (CUPTI hands out whole ones).
  uint64_t truncated_records = 0;

  // Approximate heap bytes these records hold (structs plus string payloads), for the cap.
  size_t ApproximateBytes() const;
  void Append(DecodedActivity&& other);
  void Clear();
};

// Decodes `record` into `out`. Returns false for a kind gpuprio does not decode. The record must
// be whole (DecodeActivityBuffer checks that). Timestamps past 2^63 become INT64_MAX.
bool DecodeActivityRecord(const CUpti_Activity* record, const ApiNameTable& names,
                          DecodedActivity* out);

// Same signature as cuptiActivityGetNextRecord: on CUPTI_SUCCESS `*record` is the next record
// after `*record` (null on entry: the first), CUPTI_ERROR_MAX_LIMIT_REACHED at the end.
using NextRecordFn = CUptiResult (*)(uint8_t* buffer, size_t valid_bytes, CUpti_Activity** record);

// Decodes every record of `buffer[0, valid_bytes)`. Returns the number of records decoded;
// stops early (and returns what it had) if `next` reports anything but success or the end, or
// hands out a record that does not lie whole in the buffer. Reads nothing outside the buffer but
// kernel names, which CUPTI owns: null or NUL-terminated.
uint64_t DecodeActivityBuffer(uint8_t* buffer, size_t valid_bytes, NextRecordFn next,
                              const ApiNameTable& names, DecodedActivity* out);

// "Memcpy HtoD" etc. for a CUpti_ActivityMemcpyKind value.
const char* MemcpyKindName(uint8_t copy_kind);
// "stream", "event", "context", "stream wait event", "unknown" for a
// CUpti_ActivitySynchronizationType value.
const char* SynchronizationTypeName(uint32_t type);

}  // namespace gpuprio::tracer

#endif  // GPUPRIO_CUPTI_TRACER_ACTIVITY_DECODER_H_
