#include "cupti_tracer/thread_event_log.h"

#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/barrier.h"
#include "catch2/catch.hpp"
#include "cupti_tracer/trace_assembly.h"

namespace gpuprio::tracer {
namespace {

TEST_CASE("EventRegistry keeps every event of many threads, with unique ids", "[tracer]") {
  constexpr int kThreads = 16;
  constexpr int kEventsPerThread = 3 * kChunkItems + 17;  // spans several chunks
  MemoryBudget budget(size_t{1} << 30);
  EventRegistry registry(&budget);
  std::atomic<uint64_t> next_id{1};
  absl::Barrier* start = new absl::Barrier(kThreads + 1);
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      if (start->Block()) delete start;
      for (int i = 0; i < kEventsPerThread; ++i) {
        SubmitRecord s;
        s.op_id = next_id.fetch_add(1);
        s.api = "cuLaunchKernel";
        s.priority = t;
        s.submit_ns = i;
        registry.RecordSubmit(s);
        registry.RecordIssue(IssueRecord{s.op_id, i, i + 1, 0});
      }
    });
  }
  // A reader walking the logs while they grow sees only complete records.
  std::thread reader([&] {
    while (!done.load()) {
      registry.ForEachLog([](const ThreadEventLog& log) {
        log.submits().ForEach([](const SubmitRecord& r) { REQUIRE(r.api != nullptr); });
      });
    }
  });
  if (start->Block()) delete start;
  for (auto& t : threads) t.join();
  done.store(true);
  reader.join();

  TraceInput input;
  AppendThreadEvents(registry, &input);
  CHECK(registry.dropped() == 0);
  REQUIRE(input.ops_submitted.size() == size_t{kThreads} * kEventsPerThread);
  REQUIRE(input.ops_issued.size() == size_t{kThreads} * kEventsPerThread);
  absl::flat_hash_set<uint64_t> ids;
  absl::flat_hash_set<uint32_t> tids;
  for (const OpSubmitted& s : input.ops_submitted) {
    ids.insert(s.op_id);
    tids.insert(s.client_tid);
    CHECK(s.api == "cuLaunchKernel");
  }
  CHECK(ids.size() == input.ops_submitted.size());
  CHECK(tids.size() == kThreads);
  CHECK(tids.count(0) == 0);
  for (const OpIssued& i : input.ops_issued) CHECK(i.end_ns == i.begin_ns + 1);
}

TEST_CASE("EventRegistry drops and counts events beyond the memory cap", "[tracer]") {
  MemoryBudget budget(ChunkList<SubmitRecord>::ChunkBytes());  // exactly one chunk
  EventRegistry registry(&budget);
  for (size_t i = 0; i < kChunkItems + 10; ++i) registry.RecordSubmit(SubmitRecord{i + 1});
  CHECK(registry.dropped() == 10);
  TraceInput input;
  AppendThreadEvents(registry, &input);
  CHECK(input.ops_submitted.size() == kChunkItems);
}

TEST_CASE("A thread alternating between registries records into its own log in each",
          "[tracer]") {
  MemoryBudget budget(size_t{1} << 26);
  EventRegistry a(&budget);
  EventRegistry b(&budget);
  for (uint64_t i = 1; i <= 6; ++i) (i % 2 ? a : b).RecordSubmit(SubmitRecord{i});
  int logs = 0;
  a.ForEachLog([&](const ThreadEventLog& log) {
    ++logs;
    CHECK(log.tid() == CurrentTid());
  });
  CHECK(logs == 1);
  TraceInput in_a;
  TraceInput in_b;
  AppendThreadEvents(a, &in_a);
  AppendThreadEvents(b, &in_b);
  CHECK(in_a.ops_submitted.size() == 3);
  CHECK(in_b.ops_submitted.size() == 3);
}

TEST_CASE("Trace assembly names counters, threads and the time base", "[tracer]") {
  using Named = std::pair<std::string, std::string>;
  CHECK(CounterNameAndSeries(QueueDepthCounterKey(0, 1)) == Named{"queue depth GPU 0", "p=1"});
  CHECK(CounterNameAndSeries(QueueDepthCounterKey(3, -2)) == Named{"queue depth GPU 3", "p=-2"});
  CHECK(CounterNameAndSeries(BudgetCounterKey(2)) == Named{"budget in use GPU 2", "us"});
  CHECK(QueueDepthCounterKey(1, 0) != BudgetCounterKey(1));

  TraceInput input;
  input.ops_submitted.push_back(OpSubmitted{1, 100, "cuLaunchKernel", 0, 0, 5000, 5100});
  input.ops_issued.push_back(OpIssued{1, 200, 6000, 6100, 0});
  input.api_calls.push_back(ApiCall{ApiCall::Kind::kDriver, 1, "cuLaunchKernel", 1, 1, 200,
                                    4000, 4100});
  input.counters.push_back(CounterSample{"x", "", 0, 1});  // ts 0 means unset: ignored
  CHECK(EarliestTimestamp(input) == 4000);

  absl::flat_hash_map<uint32_t, std::string> fixed = {{200, "gpuprio dispatcher (GPU 0)"}};
  AddThreadNames(
      fixed, [](uint32_t tid) { return tid == 100 ? std::string("python3") : std::string(); },
      &input);
  REQUIRE(input.thread_names.size() == 2);
  CHECK(input.thread_names[0].tid == 100);
  CHECK(input.thread_names[0].name == "python3");
  CHECK(input.thread_names[1].tid == 200);
  CHECK(input.thread_names[1].name == "gpuprio dispatcher (GPU 0)");

  CHECK_FALSE(ThreadNameFromProc(CurrentTid()).empty());
  CHECK(ThreadNameFromProc(0x7ffffff0u).empty());
}

}  // namespace
}  // namespace gpuprio::tracer
