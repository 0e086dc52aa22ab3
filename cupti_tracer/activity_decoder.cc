#include "cupti_tracer/activity_decoder.h"

#include <cupti_activity.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace gpuprio::tracer {
namespace {

// CUPTI's clock counts ns in a uint64_t. A value past 2^63 is garbage (the year 2262); cast, it
// would turn negative and overflow the subtractions downstream, so it is clamped.
int64_t Ns(uint64_t t) {
  constexpr auto kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  return static_cast<int64_t>(t > kMax ? kMax : t);
}

// The enum field at `offset` of a record, as the 32 bits CUPTI wrote. CUPTI's enums end at
// 0x7fffffff; loading a larger value (a flipped bit) through the enum type is undefined behaviour.
// (The records are packed: no reference to the field itself.)
template <typename Record>
uint32_t RawEnum(const Record& record, size_t offset) {
  uint32_t value;
  std::memcpy(&value, reinterpret_cast<const unsigned char*>(&record) + offset, sizeof(value));
  return value;
}
uint32_t KindOf(const CUpti_Activity& record) {
  static_assert(offsetof(CUpti_Activity, kind) == 0 && sizeof(CUpti_ActivityKind) == 4);
  return RawEnum(record, offsetof(CUpti_Activity, kind));
}

// Callback ids of every CUPTI domain are far below this (CUPTI 13: under 1000); a larger one is
// not a name to keep (and UINT32_MAX + 1 would wrap).
constexpr uint32_t kMaxCbid = 1 << 16;

// Where the fields the decoder reads from a record of `kind` end. CUPTI only appends fields to a
// record's later versions, so the prefix is the same in an older libcupti's smaller records.
#define GPUPRIO_FIELD_END(T, field) (offsetof(T, field) + sizeof(T::field))
size_t DecodedBytes(uint32_t kind) {
  using A = CUpti_ActivityAPI;
  using K = CUpti_ActivityKernel10;
  using C = CUpti_ActivityMemcpy6;
  using S = CUpti_ActivityMemset4;
  using E = CUpti_ActivityExternalCorrelation;
  using Y = CUpti_ActivitySynchronization2;
  using O = CUpti_ActivityOverhead3;
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER:
      return std::max({GPUPRIO_FIELD_END(A, cbid), GPUPRIO_FIELD_END(A, start),
                       GPUPRIO_FIELD_END(A, end), GPUPRIO_FIELD_END(A, processId),
                       GPUPRIO_FIELD_END(A, threadId), GPUPRIO_FIELD_END(A, correlationId)});
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return std::max({GPUPRIO_FIELD_END(K, start), GPUPRIO_FIELD_END(K, end),
                       GPUPRIO_FIELD_END(K, deviceId), GPUPRIO_FIELD_END(K, contextId),
                       GPUPRIO_FIELD_END(K, streamId), GPUPRIO_FIELD_END(K, correlationId),
                       GPUPRIO_FIELD_END(K, name)});
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return std::max({GPUPRIO_FIELD_END(C, copyKind), GPUPRIO_FIELD_END(C, bytes),
                       GPUPRIO_FIELD_END(C, start), GPUPRIO_FIELD_END(C, end),
                       GPUPRIO_FIELD_END(C, deviceId), GPUPRIO_FIELD_END(C, contextId),
                       GPUPRIO_FIELD_END(C, streamId), GPUPRIO_FIELD_END(C, correlationId)});
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return std::max({GPUPRIO_FIELD_END(S, bytes), GPUPRIO_FIELD_END(S, start),
                       GPUPRIO_FIELD_END(S, end), GPUPRIO_FIELD_END(S, deviceId),
                       GPUPRIO_FIELD_END(S, contextId), GPUPRIO_FIELD_END(S, streamId),
                       GPUPRIO_FIELD_END(S, correlationId)});
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
      return std::max({GPUPRIO_FIELD_END(E, externalKind), GPUPRIO_FIELD_END(E, externalId),
                       GPUPRIO_FIELD_END(E, correlationId)});
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      return std::max({GPUPRIO_FIELD_END(Y, type), GPUPRIO_FIELD_END(Y, start),
                       GPUPRIO_FIELD_END(Y, end), GPUPRIO_FIELD_END(Y, correlationId),
                       GPUPRIO_FIELD_END(Y, streamId)});
    case CUPTI_ACTIVITY_KIND_OVERHEAD:
      return std::max({GPUPRIO_FIELD_END(O, overheadKind), GPUPRIO_FIELD_END(O, objectKind),
                       GPUPRIO_FIELD_END(O, objectId), GPUPRIO_FIELD_END(O, start),
                       GPUPRIO_FIELD_END(O, end)});
    default:
      return sizeof(CUpti_ActivityKind);
  }
}
#undef GPUPRIO_FIELD_END

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

const char* OverheadName(uint32_t kind) {
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
  o.name = OverheadName(RawEnum(r, offsetof(CUpti_ActivityOverhead3, overheadKind)));
  const uint32_t object_kind = RawEnum(r, offsetof(CUpti_ActivityOverhead3, objectKind));
  if (object_kind == CUPTI_ACTIVITY_OBJECT_THREAD || object_kind == CUPTI_ACTIVITY_OBJECT_PROCESS) {
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
  s.type = SynchronizationTypeName(RawEnum(r, offsetof(CUpti_ActivitySynchronization2, type)));
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
  if (name == nullptr || *name == '\0' || cbid >= kMaxCbid) return;
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

const char* SynchronizationTypeName(uint32_t type) {
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
  truncated_records += other.truncated_records;
  other.records = other.unknown_records = other.truncated_records = 0;
}

void DecodedActivity::Clear() { *this = DecodedActivity{}; }

bool DecodeActivityRecord(const CUpti_Activity* record, const ApiNameTable& names,
                          DecodedActivity* out) {
  ++out->records;
  switch (KindOf(*record)) {
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
          RawEnum(r, offsetof(CUpti_ActivityExternalCorrelation, externalKind)), r.externalId,
          r.correlationId});
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
  const auto begin = reinterpret_cast<uintptr_t>(buffer);
  const uintptr_t end = begin + valid_bytes;
  CUpti_Activity* record = nullptr;
  while (next(buffer, valid_bytes, &record) == CUPTI_SUCCESS && record != nullptr) {
    // Only what lies in the buffer is read: a record cut short by valid_bytes ends the walk
    // (nothing after it can be whole).
    const auto at = reinterpret_cast<uintptr_t>(record);
    if (at < begin || at >= end || end - at < sizeof(record->kind) ||
        end - at < DecodedBytes(KindOf(*record))) {
      ++out->truncated_records;
      break;
    }
    if (DecodeActivityRecord(record, names, out)) ++decoded;
  }
  return decoded;
}

}  // namespace gpuprio::tracer
