// Tests of cupti_tracer/trace_join: links made by id and by time, with records shuffled as if
// from several CUPTI buffers, with pieces missing, and with correlation ids that collide.
#include "cupti_tracer/trace_join.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <set>

#include "catch2/catch.hpp"
#include "tests/tracer/synthetic_trace.h"

namespace gpuprio::tracer {
namespace {

using gpuprio_test::ScenarioOptions;

const JoinedOp& OpWithId(const JoinedTrace& joined, uint64_t op_id) {
  for (const JoinedOp& op : joined.ops) {
    if (op.submitted->op_id == op_id) return op;
  }
  FAIL("no op " << op_id);
  static const JoinedOp none;
  return none;
}

TEST_CASE("TraceJoin links a kernel to its client call across buffers", "[tracer]") {
  const uint32_t seed = GENERATE(1u, 2u, 3u, 4u, 5u);
  TraceInput input = gpuprio_test::Scenario();
  gpuprio_test::ShuffleRecords(input, seed);
  const JoinedTrace joined = JoinTrace(input);

  REQUIRE(joined.ops.size() == 8);
  for (uint64_t k = 1; k <= 6; ++k) {
    INFO("op " << k << ", shuffle seed " << seed);
    const JoinedOp& op = OpWithId(joined, k);
    REQUIRE(op.client.call != nullptr);
    CHECK(op.client.call->name == "cudaLaunchKernel");
    CHECK(op.client.call->tid == op.submitted->client_tid);
    CHECK(op.client.source == (k % 2 == 0 ? ClientSpan::Source::kCorrelationId
                                          : ClientSpan::Source::kContainment));
    REQUIRE(op.issued != nullptr);
    REQUIRE(op.driver_call != nullptr);
    CHECK(op.driver_call->tid == gpuprio_test::kDispatcher);
    CHECK(op.driver_call->correlation_id == 5000 + k);
    REQUIRE(op.gpu.size() == 1);
    CHECK(op.gpu[0]->name == "kernel_" + std::to_string(k));
    CHECK(op.queue_delay_ns ==
          gpuprio_test::IssueBeginNs(k) - gpuprio_test::SubmitNs(k));  // 4 us + k * 100 ns
    CHECK(op.issue_to_start_ns == 5000);
  }
  CHECK(joined.counts.ops == 8);
  CHECK(joined.counts.ops_on_caller == 2);
  CHECK(joined.counts.ops_issued == 6);
  CHECK(joined.counts.ops_linked_to_gpu == 8);
  CHECK(joined.counts.gpu_records == 9);
  CHECK(joined.counts.gpu_records_linked_to_client == 8);
  CHECK(joined.counts.ops_missing_external_correlation == 0);
  CHECK(joined.counts.ops_missing_driver_call == 0);
  REQUIRE(joined.unlinked_gpu.size() == 1);
  CHECK(joined.unlinked_gpu[0]->name == "passthrough_kernel");
}

TEST_CASE("TraceJoin prefers the runtime record when a correlation id names two", "[tracer]") {
  TraceInput input = gpuprio_test::Scenario();
  // cudart's launch: a DRIVER record with the runtime call's id, nested in it, on the client.
  ApiCall nested;
  nested.kind = ApiCall::Kind::kDriver;
  nested.name = "cuLaunchKernel";
  nested.correlation_id = 1002;
  nested.tid = gpuprio_test::kClientLow;
  nested.start_ns = gpuprio_test::ClientStartNs(2) + 500;
  nested.end_ns = gpuprio_test::ClientStartNs(2) + 3500;
  input.api_calls.insert(input.api_calls.begin(), nested);
  const JoinedTrace joined = JoinTrace(input);
  const JoinedOp& op = OpWithId(joined, 2);
  REQUIRE(op.client.call != nullptr);
  CHECK(op.client.call->kind == ApiCall::Kind::kRuntime);
  CHECK(op.client.call->name == "cudaLaunchKernel");
}

TEST_CASE("TraceJoin ignores records with colliding ids on other threads", "[tracer]") {
  // The scenario puts, on another thread, records with the ids of every op's client call and
  // dispatcher call. None may be taken for the op's.
  const TraceInput input = gpuprio_test::Scenario();
  const JoinedTrace joined = JoinTrace(input);
  for (uint64_t k = 1; k <= 6; ++k) {
    const JoinedOp& op = OpWithId(joined, k);
    INFO("op " << k);
    REQUIRE(op.client.call != nullptr);
    CHECK(op.client.call->tid != gpuprio_test::kOtherThread);
    REQUIRE(op.driver_call != nullptr);
    CHECK(op.driver_call->tid != gpuprio_test::kOtherThread);
  }
  int other_thread_calls = 0;
  for (const ApiCall* call : joined.other_api_calls) {
    if (call->tid == gpuprio_test::kOtherThread) ++other_thread_calls;
  }
  CHECK(other_thread_calls == 12);

  SECTION("also when the op's own dispatcher record is missing") {
    ScenarioOptions options;
    options.drop_dispatcher_record_of = 3;
    const TraceInput partial_input = gpuprio_test::Scenario(options);
    const JoinedTrace partial = JoinTrace(partial_input);
    const JoinedOp& op = OpWithId(partial, 3);
    CHECK(op.driver_call == nullptr);
    REQUIRE(op.gpu.size() == 1);  // the external correlation still names the kernel's id
    CHECK(op.gpu[0]->name == "kernel_3");
    CHECK(partial.counts.ops_missing_driver_call == 1);
  }
}

TEST_CASE("TraceJoin links by the issue window when the external correlation is lost",
          "[tracer]") {
  ScenarioOptions options;
  options.drop_external_correlation_of = 4;
  TraceInput input = gpuprio_test::Scenario(options);
  gpuprio_test::ShuffleRecords(input, 7);
  const JoinedTrace joined = JoinTrace(input);
  const JoinedOp& op = OpWithId(joined, 4);
  CHECK(op.correlation_ids.empty());
  REQUIRE(op.driver_call != nullptr);
  CHECK(op.driver_call->correlation_id == 5004);
  REQUIRE(op.gpu.size() == 1);
  CHECK(op.gpu[0]->name == "kernel_4");
  CHECK(joined.counts.ops_missing_external_correlation == 1);
  CHECK(joined.counts.ops_linked_to_gpu == 8);
}

TEST_CASE("TraceJoin counts an op whose kernel record is lost and links the rest", "[tracer]") {
  ScenarioOptions options;
  options.drop_kernel_of = 5;
  const TraceInput input = gpuprio_test::Scenario(options);
  const JoinedTrace joined = JoinTrace(input);
  const JoinedOp& op = OpWithId(joined, 5);
  CHECK(op.gpu.empty());
  CHECK(op.driver_call != nullptr);
  CHECK_FALSE(op.issue_to_start_ns.has_value());
  CHECK(op.queue_delay_ns.has_value());
  CHECK(joined.counts.ops_linked_to_gpu == 7);
  CHECK(joined.counts.gpu_records == 8);
  CHECK(joined.counts.gpu_records_linked_to_client == 7);
}

TEST_CASE("TraceJoin synthesizes the client span when the client's record is lost",
          "[tracer]") {
  const uint64_t k = GENERATE(1u, 2u);  // found by containment, and by correlation id
  ScenarioOptions options;
  options.drop_client_record_of = k;
  const TraceInput input = gpuprio_test::Scenario(options);
  const JoinedTrace joined = JoinTrace(input);
  const JoinedOp& op = OpWithId(joined, k);
  CHECK(op.client.source == ClientSpan::Source::kSynthesized);
  CHECK(op.client.call == nullptr);
  CHECK(op.client.start_ns == op.submitted->submit_ns);
  CHECK(op.client.end_ns == op.submitted->return_ns);
  CHECK(op.gpu.size() == 1);
  CHECK(joined.counts.client_spans_synthesized == 1);
}

TEST_CASE("TraceJoin uses the driver record when the op's issue record is lost", "[tracer]") {
  ScenarioOptions options;
  options.drop_issued_of = 6;
  const TraceInput input = gpuprio_test::Scenario(options);
  const JoinedTrace joined = JoinTrace(input);
  const JoinedOp& op = OpWithId(joined, 6);
  CHECK(op.issued == nullptr);
  REQUIRE(op.driver_call != nullptr);
  CHECK(op.issue_begin_ns == op.driver_call->start_ns);
  CHECK(op.gpu.size() == 1);
  CHECK(joined.counts.ops_issued == 5);
}

TEST_CASE("TraceJoin links on-caller ops through the client thread's own records", "[tracer]") {
  TraceInput input = gpuprio_test::Scenario();
  gpuprio_test::ShuffleRecords(input, 11);
  const JoinedTrace joined = JoinTrace(input);

  SECTION("a copy: through the driver call made inside the client's runtime call") {
    const JoinedOp& op = OpWithId(joined, 100);
    REQUIRE(op.client.call != nullptr);
    CHECK(op.client.call->name == "cudaMemcpyAsync");
    REQUIRE(op.driver_call != nullptr);
    CHECK(op.driver_call->name == "cuMemcpyHtoDAsync_v2");
    CHECK(op.driver_call->tid == gpuprio_test::kCallerClient);
    REQUIRE(op.gpu.size() == 1);
    CHECK(op.gpu[0]->kind == GpuActivity::Kind::kMemcpy);
    CHECK_FALSE(op.queue_delay_ns.has_value());
    CHECK(op.issue_to_start_ns == 9000);
  }
  SECTION("a launch: through the client call's own correlation id") {
    const JoinedOp& op = OpWithId(joined, 101);
    CHECK(op.client.source == ClientSpan::Source::kContainment);
    REQUIRE(op.gpu.size() == 1);
    CHECK(op.gpu[0]->name == "on_caller_kernel");
    CHECK(op.issue_to_start_ns == 6000);
  }
}

TEST_CASE("TraceJoin gives a GPU activity to at most one op", "[tracer]") {
  TraceInput input = gpuprio_test::Scenario();
  // A broken record: op 2's external correlation also names op 1's call.
  input.external_correlations.push_back(ExternalCorrelation{kExternalCorrelationKindGpuprio, 2,
                                                            5001});
  const JoinedTrace joined = JoinTrace(input);
  std::map<const GpuActivity*, int> owners;
  for (const JoinedOp& op : joined.ops) {
    for (const GpuActivity* gpu : op.gpu) ++owners[gpu];
  }
  for (const auto& [gpu, count] : owners) CHECK(count == 1);
  CHECK(OpWithId(joined, 1).gpu.size() == 1);
  CHECK(joined.counts.gpu_records_linked_to_client == 8);
}

TEST_CASE("TraceJoin never crashes on fragments and accounts for every record", "[tracer]") {
  std::mt19937 rng(12345);
  for (int round = 0; round < 200; ++round) {
    TraceInput input = gpuprio_test::Scenario();
    // Lose a random subset of every kind of record, and duplicate some.
    const auto thin = [&](auto& records) {
      std::bernoulli_distribution keep(0.6);
      std::bernoulli_distribution duplicate(0.1);
      auto copy = records;
      records.clear();
      for (auto& r : copy) {
        if (keep(rng)) records.push_back(r);
        if (duplicate(rng)) records.push_back(r);
      }
    };
    thin(input.api_calls);
    thin(input.gpu_activities);
    thin(input.external_correlations);
    thin(input.ops_submitted);
    thin(input.ops_issued);
    gpuprio_test::ShuffleRecords(input, static_cast<uint32_t>(round));
    const JoinedTrace joined = JoinTrace(input);

    INFO("round " << round);
    std::set<const GpuActivity*> seen;
    int64_t linked = 0;
    for (const JoinedOp& op : joined.ops) {
      for (const GpuActivity* gpu : op.gpu) {
        CHECK(seen.insert(gpu).second);
        ++linked;
      }
    }
    for (const GpuActivity* gpu : joined.unlinked_gpu) CHECK(seen.insert(gpu).second);
    CHECK(seen.size() == input.gpu_activities.size());
    CHECK(linked == joined.counts.gpu_records_linked_to_client);
    CHECK(joined.counts.ops == static_cast<int64_t>(joined.ops.size()));
    std::set<uint64_t> ids;
    for (const OpSubmitted& op : input.ops_submitted) ids.insert(op.op_id);
    CHECK(joined.ops.size() == ids.size());
  }
}

}  // namespace
}  // namespace gpuprio::tracer
