// Seeded fuzzing of the record join and the Chrome trace written from it
// (trace_join_fuzzing.h states the input contract and the properties checked); and the
// regressions the fuzzing found. Iterations are divided by kSanitizerSlowdown under ASan and TSan.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "cupti_tracer/trace_join.h"
#include "tests/tracer/fuzz_choices.h"
#include "tests/tracer/trace_join_fuzzing.h"

namespace gpuprio::tracer {
namespace {

using gpuprio_test::Choices;

std::string Joined(const std::vector<std::string>& lines) {
  std::string all;
  for (const std::string& line : lines) all += line + "\n";
  return all;
}

TEST_CASE("Join fuzz: random record sets keep every property", "[tracer][fuzz]") {
  const int cases = 2000 / gpuprio_test::kSanitizerSlowdown;
  int failures = 0;
  for (int seed = 0; seed < cases && failures < 5; ++seed) {
    Choices choices(static_cast<uint64_t>(seed));
    const std::string broken = Joined(gpuprio_test::FuzzJoinOnce(choices));
    INFO("seed " << seed);
    CHECK(broken == "");
    failures += !broken.empty();
  }
}

TEST_CASE("Join fuzz: a seed always makes the same records and the same result", "[tracer][fuzz]") {
  for (uint64_t seed = 0; seed < 50; ++seed) {
    Choices first(seed);
    Choices second(seed);
    gpuprio_test::RandomTraceOptions options;
    const TraceInput a = gpuprio_test::RandomTrace(first, options);
    const TraceInput b = gpuprio_test::RandomTrace(second, options);
    INFO("seed " << seed);
    CHECK(gpuprio_test::JoinDigest(a, JoinTrace(a)) == gpuprio_test::JoinDigest(b, JoinTrace(b)));
  }
}

// Regressions found by the fuzzing above.

TEST_CASE("Join: time differences saturate instead of overflowing", "[tracer][fuzz]") {
  // Timestamps are data: the queueing delay, issue-to-start and the overlap of a driver call with
  // an issue window were plain int64_t differences, which overflowed (UBSan) at the edges.
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  TraceInput input;
  OpSubmitted early;  // submitted at the very beginning of time, issued late, ran at its start
  early.op_id = 1;
  early.client_tid = 10;
  early.submit_ns = kMin;
  input.ops_submitted.push_back(early);
  input.ops_issued.push_back(OpIssued{1, 20, 1000, 2000, 0});
  input.external_correlations.push_back(ExternalCorrelation{kExternalCorrelationKindGpuprio, 1, 5});
  GpuActivity kernel;
  kernel.correlation_id = 5;
  kernel.start_ns = kMin;
  input.gpu_activities.push_back(kernel);

  OpSubmitted spanning = early;  // its issue window and its driver call span all of time
  spanning.op_id = 2;
  spanning.submit_ns = 0;
  input.ops_submitted.push_back(spanning);
  input.ops_issued.push_back(OpIssued{2, 20, kMin, kMax, 0});
  ApiCall driver;
  driver.kind = ApiCall::Kind::kDriver;
  driver.correlation_id = 7;
  driver.tid = 20;
  driver.start_ns = kMin;
  driver.end_ns = kMax;
  input.api_calls.push_back(driver);
  kernel.correlation_id = 7;
  kernel.start_ns = kMax;
  input.gpu_activities.push_back(kernel);

  const JoinedTrace joined = JoinTrace(input);
  REQUIRE(joined.ops.size() == 2);
  CHECK(joined.ops[0].queue_delay_ns == kMax);              // 1000 - kMin
  CHECK(joined.ops[0].issue_to_start_ns == kMin);           // kMin - 1000
  CHECK(joined.ops[1].driver_call == &input.api_calls[0]);  // linked by its window
  REQUIRE(joined.ops[1].gpu.size() == 1);
  CHECK(joined.ops[1].queue_delay_ns == kMin);     // kMin - 0
  CHECK(joined.ops[1].issue_to_start_ns == kMax);  // kMax - kMin
  CHECK(gpuprio_test::JoinViolations(input, joined).empty());
}

}  // namespace
}  // namespace gpuprio::tracer
