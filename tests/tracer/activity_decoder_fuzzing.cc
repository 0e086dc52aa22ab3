// The decoder's fuzz cases and checks of activity_decoder_fuzzing.h.
#include "tests/tracer/activity_decoder_fuzzing.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>

namespace gpuprio_test {

using gpuprio::tracer::ApiCall;
using gpuprio::tracer::ApiNameTable;
using gpuprio::tracer::DecodedActivity;
using gpuprio::tracer::GpuActivity;

namespace {

constexpr uint64_t kCuptiLikeNs = 1700000000000000000ull;

uint32_t Id32(Choices& c) {
  if (c.OneIn(3)) {
    return c.Pick<uint32_t>({0, 1, 2, 0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff});
  }
  return static_cast<uint32_t>(c.Below(16));  // small: ids collide
}

uint64_t Id64(Choices& c) {
  if (c.OneIn(3)) {
    return c.Pick<uint64_t>({0, 1, 0x7fffffffffffffffull, 0x8000000000000000ull, ~0ull});
  }
  return c.Below(16);
}

// A CUPTI timestamp (unsigned ns): mostly near one instant, sometimes at an edge.
uint64_t Timestamp(Choices& c) {
  if (c.OneIn(4)) {
    return c.Pick<uint64_t>({0, 1, 0x7fffffffffffffffull, 0x8000000000000000ull,
                             0x8000000000000001ull, ~0ull, ~0ull - 1});
  }
  return kCuptiLikeNs + c.Below(1000000);
}

// An end for `start`: after it, before it (CUPTI clock bugs), zero (not recorded), an edge.
uint64_t EndFor(uint64_t start, Choices& c) {
  switch (c.Below(5)) {
    case 0:
      return start - c.Below(1000);  // wraps below zero for a start near zero
    case 1:
      return 0;
    case 2:
      return Timestamp(c);
    default:
      return start + c.Below(100000);
  }
}

template <typename T>
T Noise(Choices& c) {
  T record;
  auto* bytes = reinterpret_cast<unsigned char*>(&record);
  for (size_t i = 0; i < sizeof(T); ++i) bytes[i] = static_cast<unsigned char>(c.Below(256));
  return record;
}

// Stores `value` as the raw bits of the enum field at `offset`: values past the enum's range are
// what the test wants, and converting them to the enum type is undefined. (Records are packed.)
template <typename Record>
void SetRaw(Record& record, size_t offset, uint32_t value) {
  std::memcpy(reinterpret_cast<unsigned char*>(&record) + offset, &value, sizeof(value));
}

template <typename T>
void SetSpan(T& r, Choices& c) {
  r.start = Timestamp(c);
  r.end = EndFor(r.start, c);
}

void StoreName(uint8_t* field, const char* name) { std::memcpy(field, &name, sizeof(name)); }

std::string Describe(const std::vector<size_t>& offsets, const uint8_t* buffer, size_t valid) {
  std::ostringstream s;
  s << "buffer of " << valid << " bytes, records at";
  for (size_t offset : offsets) {
    s << ' ' << offset;
    if (auto kind = KindAt(buffer, valid, offset)) s << "(kind " << *kind << ")";
  }
  return s.str();
}

}  // namespace

std::unique_ptr<uint8_t[]> ExactCopy(const uint8_t* data, size_t size) {
  if (size == 0) return nullptr;
  std::unique_ptr<uint8_t[]> copy(new uint8_t[size]);
  std::memcpy(copy.get(), data, size);
  return copy;
}

const std::vector<const char*>& KernelNamePool() {
  static const auto* const pool = [] {
    static const std::string long_name(4096, 'k');
    return new std::vector<const char*>{
        nullptr,
        "",
        "void gemm<float>(int)",
        long_name.c_str(),
        "\xff\xfe\xc3(not utf-8)\xe2\x82",
        "quote\" backslash\\ newline\n tab\t ctrl\x01\x1f del\x7f",
    };
  }();
  return *pool;
}

const ApiNameTable& FuzzApiNames() {
  static const auto* const names = [] {
    auto* table = new ApiNameTable;
    table->Set(ApiCall::Kind::kRuntime, 211, "cudaLaunchKernel_v7000");
    table->Set(ApiCall::Kind::kRuntime, 0, "cudaZero_v1");
    table->Set(ApiCall::Kind::kRuntime, 15, "cudaNoSuffix");
    table->Set(ApiCall::Kind::kRuntime, 1, "_v");
    table->Set(ApiCall::Kind::kDriver, 307, "cuLaunchKernel");
    table->Set(ApiCall::Kind::kDriver, 279, "cuMemcpyHtoD_v2");
    table->Set(ApiCall::Kind::kDriver, 3, nullptr);
    table->Set(ApiCall::Kind::kDriver, 4, "");
    return table;
  }();
  return *names;
}

std::vector<uint32_t> InterestingKinds() {
  std::vector<uint32_t> kinds;
  for (uint32_t kind = 0; kind < CUPTI_ACTIVITY_KIND_COUNT + 8; ++kind) kinds.push_back(kind);
  for (uint32_t kind : {0x7ffffffeu, 0x7fffffffu, 0x80000000u, 0xfffffffeu, 0xffffffffu}) {
    kinds.push_back(kind);
  }
  return kinds;
}

void AddRandomRecord(RecordBuffer& buffer, uint32_t kind, Choices& c) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      auto r = Noise<CUpti_ActivityAPI>(c);
      r.kind = static_cast<CUpti_ActivityKind>(kind);
      r.cbid = c.OneIn(2) ? c.Pick<uint32_t>({211, 307, 279, 0, 1, 3, 4, 15}) : Id32(c);
      SetSpan(r, c);
      r.processId = Id32(c);
      r.threadId = Id32(c);
      r.correlationId = Id32(c);
      buffer.Add(r);
      return;
    }
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      auto r = Noise<CUpti_ActivityKernel10>(c);
      r.kind = static_cast<CUpti_ActivityKind>(kind);
      SetSpan(r, c);
      r.deviceId = Id32(c);
      r.contextId = Id32(c);
      r.streamId = Id32(c);
      r.correlationId = Id32(c);
      r.name = KernelNamePool()[c.Below(KernelNamePool().size())];
      buffer.Add(r);
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      auto r = Noise<CUpti_ActivityMemcpy6>(c);
      r.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
      r.copyKind = static_cast<uint8_t>(c.Below(c.OneIn(2) ? 12 : 256));
      r.bytes = Id64(c);
      SetSpan(r, c);
      r.deviceId = Id32(c);
      r.contextId = Id32(c);
      r.streamId = Id32(c);
      r.correlationId = Id32(c);
      buffer.Add(r);
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      auto r = Noise<CUpti_ActivityMemset4>(c);
      r.kind = CUPTI_ACTIVITY_KIND_MEMSET;
      r.bytes = Id64(c);
      SetSpan(r, c);
      r.deviceId = Id32(c);
      r.contextId = Id32(c);
      r.streamId = Id32(c);
      r.correlationId = Id32(c);
      buffer.Add(r);
      return;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      auto r = Noise<CUpti_ActivityExternalCorrelation>(c);
      r.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
      SetRaw(r, offsetof(CUpti_ActivityExternalCorrelation, externalKind),
             c.OneIn(2) ? static_cast<uint32_t>(c.Below(CUPTI_EXTERNAL_CORRELATION_KIND_SIZE + 2))
                        : Id32(c));
      r.externalId = Id64(c);
      r.correlationId = Id32(c);
      buffer.Add(r);
      return;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      auto r = Noise<CUpti_ActivitySynchronization2>(c);
      r.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
      SetRaw(r, offsetof(CUpti_ActivitySynchronization2, type),
             c.OneIn(2) ? static_cast<uint32_t>(c.Below(8)) : Id32(c));
      SetSpan(r, c);
      r.correlationId = Id32(c);
      r.streamId = Id32(c);
      buffer.Add(r);
      return;
    }
    case CUPTI_ACTIVITY_KIND_OVERHEAD: {
      auto r = Noise<CUpti_ActivityOverhead3>(c);
      r.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
      SetRaw(r, offsetof(CUpti_ActivityOverhead3, overheadKind),
             c.OneIn(2) ? static_cast<uint32_t>(c.Below(10)) << 16 : Id32(c));  // CUPTI's kinds
      SetRaw(r, offsetof(CUpti_ActivityOverhead3, objectKind),
             c.OneIn(2) ? static_cast<uint32_t>(c.Below(8)) : Id32(c));
      SetSpan(r, c);
      buffer.Add(r);
      return;
    }
    default: {
      const size_t at = buffer.size();
      buffer.AddRaw(kind, 0);
      for (size_t i = at + sizeof(kind); i < buffer.size(); ++i) {
        buffer.bytes()[i] = static_cast<uint8_t>(c.Below(256));
      }
    }
  }
}

void KeepNameContract(uint8_t* buffer, size_t size, Choices& c) {
  const std::vector<const char*>& pool = KernelNamePool();
  for (size_t offset : RecordOffsets(buffer, size)) {
    const std::optional<uint32_t> kind = KindAt(buffer, size, offset);
    if (!kind || !IsKernelKind(*kind)) continue;
    if (size - offset < kKernelNameOffset + sizeof(const char*)) continue;
    StoreName(buffer + offset + kKernelNameOffset, pool[c.Below(pool.size())]);
  }
}

std::vector<std::string> DecodeAndCheck(uint8_t* buffer, size_t valid_bytes, DecodedActivity* out) {
  out->Clear();
  const uint64_t decoded = gpuprio::tracer::DecodeActivityBuffer(
      buffer, valid_bytes, &FakeNextRecord, FuzzApiNames(), out);

  std::vector<std::string> broken;
  const std::vector<size_t> offsets =
      buffer != nullptr ? RecordOffsets(buffer, valid_bytes) : std::vector<size_t>{};
  const auto fail = [&](const std::string& what) {
    broken.push_back(what + " (" + Describe(offsets, buffer, valid_bytes) + ")");
  };

  // Every record that lies whole in the buffer is seen; only the last one may be cut short.
  uint64_t whole = 0;
  uint64_t unknown = 0;
  for (size_t offset : offsets) {
    const std::optional<uint32_t> kind = KindAt(buffer, valid_bytes, offset);
    if (!kind) continue;
    if (!IsDecodedKind(*kind)) ++unknown;
    if (valid_bytes - offset >= RecordSize(*kind)) ++whole;
  }
  if (out->records < whole || out->records > offsets.size()) {
    fail("records " + std::to_string(out->records) + ", but " + std::to_string(whole) +
         " whole of " + std::to_string(offsets.size()));
  }
  if (out->unknown_records != unknown) {
    fail("unknown_records " + std::to_string(out->unknown_records) + ", expected " +
         std::to_string(unknown));
  }
  if (decoded != out->records - out->unknown_records) {
    fail("returned " + std::to_string(decoded) + " decoded, but records - unknown = " +
         std::to_string(out->records - out->unknown_records));
  }
  const uint64_t stored = out->api_calls.size() + out->gpu_activities.size() +
                          out->external_correlations.size() + out->synchronizations.size() +
                          out->overheads.size();
  if (stored != decoded) {
    fail("stored " + std::to_string(stored) + " records, decoded " + std::to_string(decoded));
  }

  // Timestamps stay on [0, 2^63): downstream code subtracts them.
  const auto check_span = [&](const char* what, int64_t start, int64_t end) {
    if (start < 0 || end < 0) {
      fail(std::string(what) + " timestamp negative: [" + std::to_string(start) + ", " +
           std::to_string(end) + "]");
    }
  };
  for (const auto& r : out->api_calls) check_span("api", r.start_ns, r.end_ns);
  for (const auto& r : out->gpu_activities) check_span("gpu", r.start_ns, r.end_ns);
  for (const auto& r : out->synchronizations) check_span("sync", r.start_ns, r.end_ns);
  for (const auto& r : out->overheads) check_span("overhead", r.start_ns, r.end_ns);

  const std::vector<const char*>& pool = KernelNamePool();
  for (const GpuActivity& a : out->gpu_activities) {
    if (a.kind != GpuActivity::Kind::kKernel || a.name == "kernel") continue;
    if (std::none_of(pool.begin(), pool.end(),
                     [&](const char* name) { return name != nullptr && a.name == name; })) {
      fail("kernel name not copied from the record: \"" + a.name.substr(0, 40) + "\"");
    }
  }
  for (const ApiCall& call : out->api_calls) {
    if (call.name.empty()) fail("api call without a name, cbid " + std::to_string(call.cbid));
  }
  if (out->ApproximateBytes() <
      out->api_calls.size() * sizeof(ApiCall) + out->gpu_activities.size() * sizeof(GpuActivity)) {
    fail("ApproximateBytes below the records' own size");
  }
  return broken;
}

std::vector<std::string> FuzzDecoderOnce(Choices& c) {
  static const std::vector<uint32_t> kinds = InterestingKinds();
  RecordBuffer buffer;
  const uint64_t count = c.Below(12);
  for (uint64_t i = 0; i < count; ++i) {
    // Mostly kinds gpuprio decodes; the rest anything.
    const uint32_t kind = c.OneIn(3) ? kinds[c.Below(kinds.size())]
                                     : kDecodedKinds[c.Below(std::size(kDecodedKinds))];
    AddRandomRecord(buffer, kind, c);
  }

  std::vector<uint8_t>& bytes = buffer.bytes();
  const uint64_t mutations = c.Below(6);
  for (uint64_t i = 0; i < mutations && !bytes.empty(); ++i) {
    const std::vector<size_t> offsets = RecordOffsets(bytes.data(), bytes.size());
    switch (c.Below(5)) {
      case 0:  // a bit flipped anywhere
        bytes[c.Below(bytes.size())] ^= static_cast<uint8_t>(1u << c.Below(8));
        break;
      case 1: {  // a record's kind replaced: the walk then sees another layout there
        const size_t at = offsets[c.Below(offsets.size())];
        if (bytes.size() - at < sizeof(uint32_t)) break;
        const uint32_t kind = kinds[c.Below(kinds.size())];
        std::memcpy(bytes.data() + at, &kind, sizeof(kind));
        break;
      }
      case 2: {  // an aligned 4- or 8-byte field at an edge: sizes, ids, timestamps
        const size_t width = c.OneIn(2) ? 4 : 8;
        if (bytes.size() < width) break;
        const size_t at = c.Below((bytes.size() - width) / width + 1) * width;
        const uint64_t value =
            c.Pick<uint64_t>({0, 1, 0x7fffffff, 0x80000000, 0xffffffff, 0x7fffffffffffffffull,
                              0x8000000000000000ull, ~0ull});
        std::memcpy(bytes.data() + at, &value, width);
        break;
      }
      case 3: {  // a record repeated at the end: every id in it collides
        const size_t at = offsets[c.Below(offsets.size())];
        const size_t end =
            std::min(bytes.size(),
                     at + Aligned(RecordSize(KindAt(bytes.data(), bytes.size(), at).value_or(0))));
        bytes.insert(bytes.end(), bytes.begin() + static_cast<ptrdiff_t>(at),
                     bytes.begin() + static_cast<ptrdiff_t>(end));
        break;
      }
      default:  // a byte set to 0 or 0xff
        bytes[c.Below(bytes.size())] = c.OneIn(2) ? 0 : 0xff;
        break;
    }
  }
  KeepNameContract(bytes.data(), bytes.size(), c);

  // Decoded from exact-size copies (a vector's spare capacity would hide reads past the end):
  // the whole buffer, then the same records as a shorter fill, cut anywhere.
  DecodedActivity out;
  std::unique_ptr<uint8_t[]> whole = ExactCopy(bytes.data(), bytes.size());
  std::vector<std::string> broken = DecodeAndCheck(whole.get(), bytes.size(), &out);
  const size_t cut = c.Below(bytes.size() + 1);
  std::unique_ptr<uint8_t[]> prefix = ExactCopy(bytes.data(), cut);
  for (std::string& b : DecodeAndCheck(prefix.get(), cut, &out)) {
    broken.push_back("cut at " + std::to_string(cut) + ": " + b);
  }
  return broken;
}

std::vector<std::string> FuzzDecoderRaw(const uint8_t* data, size_t size) {
  std::unique_ptr<uint8_t[]> buffer = ExactCopy(data, size);
  Choices names(data, size);
  KeepNameContract(buffer.get(), size, names);
  DecodedActivity out;
  return DecodeAndCheck(buffer.get(), size, &out);
}

}  // namespace gpuprio_test
