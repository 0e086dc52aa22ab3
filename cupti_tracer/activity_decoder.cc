#include "cupti_tracer/activity_decoder.h"

#include <cupti_activity.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace gpuprio::tracer {
namespace {

int64_t Ns(uint64_t t) { return static_cast<int64_t>(t); }

std::vector<std::string>& Slot(ApiCall::Kind kind, std::vector<std::string>& runtime,
                               std::vector<std::string>& driver) {
  return kind == ApiCall::Kind::kRuntime ? runtime : driver;
}

void DecodeApi(const CUpti_ActivityAPI& r, ApiCall::Kind kind, const ApiNameTable& names,
               DecodedActivity* out) {
  ApiCall call;
  call.kind = kind;
  call.cbid = r.cbid;
  call.name = names.Name(kind, r.cbid);
  call.correlation_id = r.correlationId;
  call.pid = r.processId;
  call.tid = r.threadId;
  call.start_ns = Ns(r.start);
  call.end_ns = Ns(r.end);
  out->api_calls.push_back(std::move(call));
}

// The fields every GPU record (kernel, copy, set) shares.
template <typename Record>
GpuActivity GpuActivityFrom(const Record& r, GpuActivity::Kind kind) {
  GpuActivity a;
  a.kind = kind;
  a.correlation_id = r.correlationId;
  a.device_id = r.deviceId;
  a.context_id = r.contextId;
  a.stream_id = r.streamId;
  a.start_ns = Ns(r.start);
  a.end_ns = Ns(r.end);
  return a;
}

void DecodeKernel(const CUpti_ActivityKernel10& r, DecodedActivity* out) {
  GpuActivity a = GpuActivityFrom(r, GpuActivity::Kind::kKernel);
  a.name = r.name != nullptr ? r.name : "kernel";
  out->gpu_activities.push_back(std::move(a));
}

void DecodeMemcpy(const CUpti_ActivityMemcpy6& r, DecodedActivity* out) {
  GpuActivity a = GpuActivityFrom(r, GpuActivity::Kind::kMemcpy);
  a.name = MemcpyKindName(r.copyKind);
  a.bytes = r.bytes;
  out->gpu_activities.push_back(std::move(a));
}

void DecodeMemset(const CUpti_ActivityMemset4& r, DecodedActivity* out) {
  GpuActivity a = GpuActivityFrom(r, GpuActivity::Kind::kMemset);
  a.name = "Memset";
  a.bytes = r.bytes;
  out->gpu_activities.push_back(std::move(a));
}

const char* OverheadName(CUpti_ActivityOverheadKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER:
      return "driver compiler";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH:
      return "CUPTI buffer flush";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION:
      return "CUPTI instrumentation";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE:
      return "CUPTI resource";
    case CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING:
      return "module loading";
    case CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING:
      return "lazy function loading";
    case CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL:
      return "command buffer full";
    case CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST:
      return "activity buffer request";
    case CUPTI_ACTIVITY_OVERHEAD_UVM_ACTIVITY_INIT:
      return "UVM activity init";
    default:
      return "overhead";
  }
}

void DecodeOverhead(const CUpti_ActivityOverhead3& r, DecodedActivity* out) {
  Overhead o;
  o.name = OverheadName(r.overheadKind);
  if (r.objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ||
      r.objectKind == CUPTI_ACTIVITY_OBJECT_PROCESS) {
    o.tid = r.objectId.pt.threadId;
  }
  o.start_ns = Ns(r.start);
  o.end_ns = Ns(r.end);
  out->overheads.push_back(std::move(o));
}

void DecodeSynchronization(const CUpti_ActivitySynchronization2& r, DecodedActivity* out) {
  Synchronization s;
  s.correlation_id = r.correlationId;
  // CUPTI uses CUPTI_SYNCHRONIZATION_INVALID_VALUE (all ones) for "no stream".
  s.stream_id = r.streamId;
  s.type = SynchronizationTypeName(r.type);
  s.start_ns = Ns(r.start);
  s.end_ns = Ns(r.end);
  out->synchronizations.push_back(std::move(s));
}

}  // namespace

std::string StripRuntimeVersionSuffix(const std::string& name) {
  const size_t pos = name.rfind("_v");
  if (pos == std::string::npos || pos + 2 >= name.size()) return name;
  for (size_t i = pos + 2; i < name.size(); ++i) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(name[i]))) return name;
  }
  return name.substr(0, pos);
}

void ApiNameTable::Set(ApiCall::Kind kind, uint32_t cbid, const char* name) {
  if (name == nullptr || *name == '\0') return;
  std::vector<std::string>& slot = Slot(kind, runtime_, driver_);
  if (slot.size() <= cbid) slot.resize(cbid + 1);
  slot[cbid] = kind == ApiCall::Kind::kRuntime ? StripRuntimeVersionSuffix(name) : name;
}

std::string ApiNameTable::Name(ApiCall::Kind kind, uint32_t cbid) const {
  const std::vector<std::string>& slot = kind == ApiCall::Kind::kRuntime ? runtime_ : driver_;
  if (cbid < slot.size() && !slot[cbid].empty()) return slot[cbid];
  return absl::StrCat(kind == ApiCall::Kind::kRuntime ? "cuda api " : "cu api ", cbid);
}

const char* MemcpyKindName(uint8_t copy_kind) {
  switch (copy_kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return "Memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return "Memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
      return "Memcpy HtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
      return "Memcpy AtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
      return "Memcpy AtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
      return "Memcpy AtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
      return "Memcpy DtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return "Memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return "Memcpy HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return "Memcpy PtoP";
    default:
      return "Memcpy";
  }
}

const char* SynchronizationTypeName(CUpti_ActivitySynchronizationType type) {
  switch (type) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE:
      return "event";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT:
      return "stream wait event";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE:
      return "stream";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE:
      return "context";
    default:
      return "unknown";
  }
}

size_t DecodedActivity::ApproximateBytes() const {
  size_t bytes = api_calls.size() * sizeof(ApiCall) + gpu_activities.size() * sizeof(GpuActivity) +
                 external_correlations.size() * sizeof(ExternalCorrelation) +
                 synchronizations.size() * sizeof(Synchronization) +
                 overheads.size() * sizeof(Overhead);
  // Short names fit std::string's inline buffer; count the rest (kernel names can be long).
  for (const ApiCall& c : api_calls) bytes += c.name.capacity() > 15 ? c.name.capacity() : 0;
  for (const GpuActivity& a : gpu_activities) {
    bytes += a.name.capacity() > 15 ? a.name.capacity() : 0;
  }
  return bytes;
}

void DecodedActivity::Append(DecodedActivity&& other) {
  auto move_all = [](auto& to, auto& from) {
    if (to.empty()) {
      to = std::move(from);
    } else {
      to.insert(to.end(), std::make_move_iterator(from.begin()),
                std::make_move_iterator(from.end()));
    }
    from.clear();
  };
  move_all(api_calls, other.api_calls);
  move_all(gpu_activities, other.gpu_activities);
  move_all(external_correlations, other.external_correlations);
  move_all(synchronizations, other.synchronizations);
  move_all(overheads, other.overheads);
  records += other.records;
  unknown_records += other.unknown_records;
  other.records = other.unknown_records = 0;
}

void DecodedActivity::Clear() { *this = DecodedActivity{}; }

bool DecodeActivityRecord(const CUpti_Activity* record, const ApiNameTable& names,
                          DecodedActivity* out) {
  ++out->records;
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_RUNTIME:
      DecodeApi(*reinterpret_cast<const CUpti_ActivityAPI*>(record), ApiCall::Kind::kRuntime,
                names, out);
      return true;
    case CUPTI_ACTIVITY_KIND_DRIVER:
      DecodeApi(*reinterpret_cast<const CUpti_ActivityAPI*>(record), ApiCall::Kind::kDriver, names,
                out);
      return true;
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      DecodeKernel(*reinterpret_cast<const CUpti_ActivityKernel10*>(record), out);
      return true;
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      DecodeMemcpy(*reinterpret_cast<const CUpti_ActivityMemcpy6*>(record), out);
      return true;
    case CUPTI_ACTIVITY_KIND_MEMSET:
      DecodeMemset(*reinterpret_cast<const CUpti_ActivityMemset4*>(record), out);
      return true;
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto& r = *reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
      out->external_correlations.push_back(ExternalCorrelation{
          static_cast<uint32_t>(r.externalKind), r.externalId, r.correlationId});
      return true;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      DecodeSynchronization(*reinterpret_cast<const CUpti_ActivitySynchronization2*>(record), out);
      return true;
    case CUPTI_ACTIVITY_KIND_OVERHEAD:
      DecodeOverhead(*reinterpret_cast<const CUpti_ActivityOverhead3*>(record), out);
      return true;
    default:
      ++out->unknown_records;
      return false;
  }
}

uint64_t DecodeActivityBuffer(uint8_t* buffer, size_t valid_bytes, NextRecordFn next,
                              const ApiNameTable& names, DecodedActivity* out) {
  uint64_t decoded = 0;
  if (buffer == nullptr || valid_bytes == 0) return 0;
  CUpti_Activity* record = nullptr;
  while (next(buffer, valid_bytes, &record) == CUPTI_SUCCESS && record != nullptr) {
    if (DecodeActivityRecord(record, names, out)) ++decoded;
  }
  return decoded;
}

}  // namespace gpuprio::tracer
