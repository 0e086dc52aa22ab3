#include "cupti_tracer/external_id_carrier.h"

#include <atomic>
#include <thread>
#include <vector>

#include "catch2/catch.hpp"
#include "cupti_tracer/nvtx_annotator.h"

namespace gpuprio::tracer {
namespace {

// A fake CUPTI external-id API: one stack per kind per thread, as CUPTI keeps them.
thread_local std::vector<uint64_t> t_stacks[CUPTI_EXTERNAL_CORRELATION_KIND_SIZE];
std::atomic<int> g_finder_calls{0};
std::atomic<bool> g_loaded{true};

CUptiResult FakePush(CUpti_ExternalCorrelationKind kind, uint64_t id) {
  t_stacks[kind].push_back(id);
  return CUPTI_SUCCESS;
}
CUptiResult FakePop(CUpti_ExternalCorrelationKind kind, uint64_t* id) {
  if (t_stacks[kind].empty()) return CUPTI_ERROR_QUEUE_EMPTY;
  *id = t_stacks[kind].back();
  t_stacks[kind].pop_back();
  return CUPTI_SUCCESS;
}
ExternalIdFunctions FakeFinder() {
  g_finder_calls.fetch_add(1);
  if (!g_loaded.load()) return {};
  return ExternalIdFunctions{&FakePush, &FakePop};
}

TEST_CASE("The carrier reads Kineto's ids without disturbing the client's stacks", "[tracer]") {
  g_loaded = true;
  ExternalIdCarrier carrier(&FakeFinder);
  FakePush(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 11);
  FakePush(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 12);
  FakePush(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, 21);
  FakePush(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, 99);  // not Kineto's: untouched

  scheduler::OpTraceContext ctx;
  carrier.Capture(ctx);
  CHECK(ctx.carried_mask == 3);
  CHECK(ctx.carried_ids[0] == 12);
  CHECK(ctx.carried_ids[1] == 21);
  CHECK(t_stacks[CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0] == std::vector<uint64_t>{11, 12});
  CHECK(t_stacks[CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1] == std::vector<uint64_t>{21});
  CHECK(t_stacks[CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2] == std::vector<uint64_t>{99});

  // The dispatcher thread has its own (empty) stacks: the ids are pushed around the call only.
  std::thread dispatcher([&] {
    carrier.Push(ctx);
    CHECK(t_stacks[CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0] == std::vector<uint64_t>{12});
    CHECK(t_stacks[CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1] == std::vector<uint64_t>{21});
    carrier.Pop(ctx);
    CHECK(t_stacks[CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0].empty());
    CHECK(t_stacks[CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1].empty());
  });
  dispatcher.join();
  for (auto& s : t_stacks) s.clear();
}

TEST_CASE("The carrier carries only the kinds that were pushed", "[tracer]") {
  g_loaded = true;
  ExternalIdCarrier carrier(&FakeFinder);
  FakePush(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, 5);
  scheduler::OpTraceContext ctx;
  carrier.Capture(ctx);
  CHECK(ctx.carried_mask == 2);
  CHECK(ctx.carried_ids[1] == 5);
  t_stacks[CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1].clear();
  carrier.Capture(ctx);
  CHECK(ctx.carried_mask == 0);
}

TEST_CASE("Without libcupti the carrier looks for it again only every N ops", "[tracer]") {
  std::thread fresh_thread([] {  // a thread of its own: the countdown is per thread
    g_loaded = false;
    g_finder_calls = 0;
    ExternalIdCarrier carrier(&FakeFinder, /*recheck_every=*/100);
    scheduler::OpTraceContext ctx;
    for (int i = 0; i < 250; ++i) carrier.Capture(ctx);
    CHECK(ctx.carried_mask == 0);
    CHECK(g_finder_calls.load() == 3);  // ops 0, 100, 200
    CHECK_FALSE(carrier.found());

    g_loaded = true;  // loaded later (profiler start): found at the next check
    for (int i = 0; i < 100; ++i) carrier.Capture(ctx);
    CHECK(carrier.found());
    const int calls = g_finder_calls.load();
    FakePush(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 7);
    for (int i = 0; i < 10; ++i) carrier.Capture(ctx);
    CHECK(g_finder_calls.load() == calls);  // found once, never looked for again
    CHECK(ctx.carried_ids[0] == 7);
    for (auto& s : t_stacks) s.clear();
  });
  fresh_thread.join();
}

TEST_CASE("KinetoCarrier and NvtxAnnotator ask for no timings (they ignore them)", "[tracer]") {
  KinetoCarrier kineto(&FakeFinder);
  NvtxAnnotator nvtx(&FakeFinder);
  CHECK_FALSE(kineto.WantsTimings());
  CHECK_FALSE(nvtx.WantsTimings());
}

TEST_CASE("KinetoCarrier and NvtxAnnotator push and pop in balance around the real call",
          "[tracer]") {
  g_loaded = true;
  KinetoCarrier kineto(&FakeFinder);
  NvtxAnnotator nvtx(&FakeFinder);
  for (scheduler::OpObserver* observer : {static_cast<scheduler::OpObserver*>(&kineto),
                                          static_cast<scheduler::OpObserver*>(&nvtx)}) {
    FakePush(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 40);
    scheduler::Op op;
    op.name = "cuLaunchKernel";
    op.priority = 1;
    observer->OnSubmit(op);
    CHECK(op.trace.carried_mask == 1);
    CHECK(op.trace.carried_ids[0] == 40);
    std::thread dispatcher([&] {
      observer->OnDispatcherStart(0);
      observer->OnIssueBegin(op);
      CHECK(t_stacks[CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0] == std::vector<uint64_t>{40});
      observer->OnIssueEnd(op, CUDA_SUCCESS);
      CHECK(t_stacks[CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0].empty());
    });
    dispatcher.join();
    for (auto& s : t_stacks) s.clear();
  }
}

}  // namespace
}  // namespace gpuprio::tracer
