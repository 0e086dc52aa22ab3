// Seeded fuzzing of the CUPTI record decoder (activity_decoder_fuzzing.h states the input
// contract): every kind value, every truncation length, random mutations; and the regressions the
// fuzzing found. Iterations are divided by kSanitizerSlowdown under ASan and TSan.
#include <cupti_activity.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "cupti_tracer/activity_decoder.h"
#include "tests/tracer/activity_decoder_fuzzing.h"
#include "tests/tracer/cupti_record_buffer.h"
#include "tests/tracer/fuzz_choices.h"

namespace gpuprio::tracer {
namespace {

using gpuprio_test::Choices;
using gpuprio_test::DecodeAndCheck;
using gpuprio_test::ExactCopy;
using gpuprio_test::RecordBuffer;

std::string Joined(const std::vector<std::string>& lines) {
  std::string all;
  for (const std::string& line : lines) all += line + "\n";
  return all;
}

// Field-by-field equality of what two decodes produced, for the prefix check.
bool Same(const ApiCall& a, const ApiCall& b) {
  return a.kind == b.kind && a.cbid == b.cbid && a.name == b.name &&
         a.correlation_id == b.correlation_id && a.pid == b.pid && a.tid == b.tid &&
         a.start_ns == b.start_ns && a.end_ns == b.end_ns;
}
bool Same(const GpuActivity& a, const GpuActivity& b) {
  return a.kind == b.kind && a.correlation_id == b.correlation_id && a.device_id == b.device_id &&
         a.context_id == b.context_id && a.stream_id == b.stream_id && a.start_ns == b.start_ns &&
         a.end_ns == b.end_ns && a.name == b.name && a.bytes == b.bytes;
}
bool Same(const ExternalCorrelation& a, const ExternalCorrelation& b) {
  return a.kind == b.kind && a.external_id == b.external_id && a.correlation_id == b.correlation_id;
}
bool Same(const Synchronization& a, const Synchronization& b) {
  return a.correlation_id == b.correlation_id && a.stream_id == b.stream_id && a.type == b.type &&
         a.start_ns == b.start_ns && a.end_ns == b.end_ns;
}
bool Same(const Overhead& a, const Overhead& b) {
  return a.name == b.name && a.tid == b.tid && a.start_ns == b.start_ns && a.end_ns == b.end_ns;
}
template <typename T>
bool IsPrefix(const std::vector<T>& part, const std::vector<T>& whole) {
  if (part.size() > whole.size()) return false;
  for (size_t i = 0; i < part.size(); ++i) {
    if (!Same(part[i], whole[i])) return false;
  }
  return true;
}

TEST_CASE("Decoder fuzz: every kind value, whole and cut at every length", "[tracer][fuzz]") {
  for (uint32_t kind : gpuprio_test::InterestingKinds()) {
    INFO("kind " << kind);
    Choices choices(kind);
    RecordBuffer buffer;
    gpuprio_test::AddRandomRecord(buffer, kind, choices);
    gpuprio_test::AddRandomRecord(buffer, CUPTI_ACTIVITY_KIND_DRIVER, choices);
    gpuprio_test::KeepNameContract(buffer.data(), buffer.size(), choices);

    DecodedActivity out;
    auto whole = ExactCopy(buffer.data(), buffer.size());
    REQUIRE(Joined(DecodeAndCheck(whole.get(), buffer.size(), &out)) == "");
    CHECK(out.records == 2);
    CHECK(out.unknown_records == (gpuprio_test::IsDecodedKind(kind) ? 0 : 1));
    for (size_t cut = 0; cut < buffer.size(); ++cut) {
      INFO("cut at " << cut);
      auto prefix = ExactCopy(buffer.data(), cut);
      REQUIRE(Joined(DecodeAndCheck(prefix.get(), cut, &out)) == "");
    }
  }
}

TEST_CASE("Decoder fuzz: a buffer cut anywhere decodes to a prefix of the whole",
          "[tracer][fuzz]") {
  const uint64_t seed = GENERATE(1u, 2u, 3u);
  Choices choices(seed);
  RecordBuffer buffer;
  for (int round = 0; round < 2; ++round) {
    for (uint32_t kind : gpuprio_test::kDecodedKinds) {
      gpuprio_test::AddRandomRecord(buffer, kind, choices);
    }
    gpuprio_test::AddRandomRecord(buffer, CUPTI_ACTIVITY_KIND_MARKER, choices);
    gpuprio_test::AddRandomRecord(buffer, 0xffffffffu, choices);
  }
  gpuprio_test::KeepNameContract(buffer.data(), buffer.size(), choices);
  DecodedActivity whole;
  auto whole_copy = ExactCopy(buffer.data(), buffer.size());
  REQUIRE(Joined(DecodeAndCheck(whole_copy.get(), buffer.size(), &whole)) == "");
  REQUIRE(whole.records == 2 * (std::size(gpuprio_test::kDecodedKinds) + 2));

  for (size_t cut = 0; cut <= buffer.size(); ++cut) {
    INFO("seed " << seed << ", cut at " << cut << " of " << buffer.size());
    auto prefix = ExactCopy(buffer.data(), cut);
    DecodedActivity part;
    REQUIRE(Joined(DecodeAndCheck(prefix.get(), cut, &part)) == "");
    CHECK(IsPrefix(part.api_calls, whole.api_calls));
    CHECK(IsPrefix(part.gpu_activities, whole.gpu_activities));
    CHECK(IsPrefix(part.external_correlations, whole.external_correlations));
    CHECK(IsPrefix(part.synchronizations, whole.synchronizations));
    CHECK(IsPrefix(part.overheads, whole.overheads));
  }
}

TEST_CASE("Decoder fuzz: random records, mutated", "[tracer][fuzz]") {
  const int cases = 40000 / gpuprio_test::kSanitizerSlowdown;
  int failures = 0;
  for (int seed = 0; seed < cases && failures < 5; ++seed) {
    Choices choices(static_cast<uint64_t>(seed));
    const std::string broken = Joined(gpuprio_test::FuzzDecoderOnce(choices));
    INFO("seed " << seed);
    CHECK(broken == "");
    failures += !broken.empty();
  }
}

// Regressions found by the fuzzing above.

TEST_CASE("Decoder: a kernel record cut short by valid_bytes is not read", "[tracer][fuzz]") {
  // CUPTI's walk is trusted for where records start, not for their length: a kernel record
  // whose name pointer lies past valid_bytes must not be decoded (it was read past the end).
  Choices choices(7);
  RecordBuffer buffer;
  gpuprio_test::AddRandomRecord(buffer, CUPTI_ACTIVITY_KIND_RUNTIME, choices);
  gpuprio_test::AddRandomRecord(buffer, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, choices);
  const size_t cut = sizeof(CUpti_ActivityAPI) + gpuprio_test::kKernelNameOffset;  // name cut
  auto prefix = ExactCopy(buffer.data(), cut);
  DecodedActivity out;
  CHECK(DecodeActivityBuffer(prefix.get(), cut, &gpuprio_test::FakeNextRecord,
                             gpuprio_test::FuzzApiNames(), &out) == 1);
  CHECK(out.api_calls.size() == 1);
  CHECK(out.gpu_activities.empty());
  CHECK(out.records == 1);
  CHECK(out.truncated_records == 1);

  SECTION("and a record of which not even the kind fits ends the walk") {
    auto two_bytes = ExactCopy(buffer.data(), sizeof(CUpti_ActivityAPI) + 2);
    DecodedActivity short_out;
    CHECK(DecodeActivityBuffer(two_bytes.get(), sizeof(CUpti_ActivityAPI) + 2,
                               &gpuprio_test::FakeNextRecord, gpuprio_test::FuzzApiNames(),
                               &short_out) == 1);
    CHECK(short_out.truncated_records == 1);
  }
}

TEST_CASE("Decoder: timestamps past 2^63 stay non-negative", "[tracer][fuzz]") {
  // CUPTI's clock counts ns in a uint64_t; ours is int64_t and the writer subtracts timestamps.
  // A garbage value past 2^63 turned negative and overflowed those subtractions.
  RecordBuffer buffer;
  CUpti_ActivityAPI api = {};
  api.kind = CUPTI_ACTIVITY_KIND_DRIVER;
  api.start = 0x8000000000000000ull;
  api.end = ~0ull;
  buffer.Add(api);
  CUpti_ActivityKernel10 kernel = {};
  kernel.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  kernel.start = 0;  // not recorded: stays 0
  kernel.end = 0x7fffffffffffffffull;
  buffer.Add(kernel);
  DecodedActivity out;
  REQUIRE(DecodeActivityBuffer(buffer.data(), buffer.size(), &gpuprio_test::FakeNextRecord,
                               gpuprio_test::FuzzApiNames(), &out) == 2);
  CHECK(out.api_calls[0].start_ns == std::numeric_limits<int64_t>::max());
  CHECK(out.api_calls[0].end_ns == std::numeric_limits<int64_t>::max());
  CHECK(out.gpu_activities[0].start_ns == 0);
  CHECK(out.gpu_activities[0].end_ns == std::numeric_limits<int64_t>::max());
}

TEST_CASE("Decoder: enum fields past 0x7fffffff are read as numbers", "[tracer][fuzz]") {
  // CUPTI's enums end at 0x7fffffff; a record kind, sync type, overhead kind or external kind
  // above it was loaded through the enum type, which is undefined (UBSan: "not a valid value").
  const auto set_raw = [](auto& record, size_t offset, uint32_t value) {
    std::memcpy(reinterpret_cast<unsigned char*>(&record) + offset, &value, sizeof(value));
  };
  RecordBuffer buffer;
  buffer.AddRaw(0x80000000u, 0);
  CUpti_ActivitySynchronization2 sync = {};
  sync.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  set_raw(sync, offsetof(CUpti_ActivitySynchronization2, type), 0xffffffffu);
  buffer.Add(sync);
  CUpti_ActivityOverhead3 overhead = {};
  overhead.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
  set_raw(overhead, offsetof(CUpti_ActivityOverhead3, overheadKind), 0x80000000u);
  set_raw(overhead, offsetof(CUpti_ActivityOverhead3, objectKind), 0xfffffffeu);
  buffer.Add(overhead);
  CUpti_ActivityExternalCorrelation external = {};
  external.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  set_raw(external, offsetof(CUpti_ActivityExternalCorrelation, externalKind), 0xffffffffu);
  buffer.Add(external);
  DecodedActivity out;
  CHECK(DecodeActivityBuffer(buffer.data(), buffer.size(), &gpuprio_test::FakeNextRecord,
                             gpuprio_test::FuzzApiNames(), &out) == 3);
  CHECK(out.unknown_records == 1);
  REQUIRE(out.synchronizations.size() == 1);
  CHECK(out.synchronizations[0].type == "unknown");
  REQUIRE(out.overheads.size() == 1);
  CHECK(out.overheads[0].name == "overhead");
  CHECK(out.overheads[0].tid == 0);
  REQUIRE(out.external_correlations.size() == 1);
  CHECK(out.external_correlations[0].kind == 0xffffffffu);
}

TEST_CASE("ApiNameTable ignores callback ids no CUPTI domain has", "[tracer][fuzz]") {
  // cbid + 1 wrapped to 0 for UINT32_MAX: the table was resized to nothing and written past its
  // end; large ids asked for a table of billions of strings.
  ApiNameTable names;
  names.Set(ApiCall::Kind::kDriver, std::numeric_limits<uint32_t>::max(), "cuHuge");
  names.Set(ApiCall::Kind::kRuntime, std::numeric_limits<uint32_t>::max() - 1, "cudaHuge_v1");
  names.Set(ApiCall::Kind::kDriver, 307, "cuLaunchKernel");
  CHECK(names.Name(ApiCall::Kind::kDriver, std::numeric_limits<uint32_t>::max()) ==
        "cu api 4294967295");
  CHECK(names.Name(ApiCall::Kind::kRuntime, std::numeric_limits<uint32_t>::max() - 1) ==
        "cuda api 4294967294");
  CHECK(names.Name(ApiCall::Kind::kDriver, 307) == "cuLaunchKernel");
}

}  // namespace
}  // namespace gpuprio::tracer
