// IsolationPlacement against scripted driver functions, with no dispatcher thread: the partition
// created once on first need, a stream's twin created on its first confinement and destroyed
// with the stream, the links that keep a stream's own order and the legacy stream's order across
// a switch, the unconfinable functions and the confined totals.
#include "scheduler/isolation_placement.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "catch2/catch.hpp"
#include "tests/scheduler/scripted_driver.h"

namespace {

using gpuprio::scheduler::ContextLinks;
using gpuprio::scheduler::DriverFunctions;
using gpuprio::scheduler::IsolationPlacement;
using gpuprio::scheduler::IsolationReport;
using gpuprio::scheduler::StreamQueue;
using gpuprio::scheduler::StreamState;
using gpuprio_test::g_green_streams_created;
using gpuprio_test::ScriptedDriver;
using gpuprio_test::ScriptedDriverWithGreenContexts;

// The links the placement made, as (recorded on, waited on by) pairs: a record followed by a
// wait is one link.
std::vector<CUstream> g_recorded_on;
std::vector<std::pair<CUstream, CUstream>> g_links;

CUresult RecordOn(CUevent, CUstream stream) {
  g_recorded_on.push_back(stream);
  return CUDA_SUCCESS;
}
CUresult WaitOn(CUstream stream, CUevent, unsigned int) {
  REQUIRE(!g_recorded_on.empty());
  g_links.emplace_back(g_recorded_on.back(), stream);
  return CUDA_SUCCESS;
}

DriverFunctions LinkRecordingDriver() {
  DriverFunctions d = ScriptedDriverWithGreenContexts();
  d.event_record = &RecordOn;
  d.stream_wait_event = &WaitOn;
  g_recorded_on.clear();
  g_links.clear();
  return d;
}

CUstream Handle(uintptr_t value) { return reinterpret_cast<CUstream>(value); }

// A stream of one context as the dispatcher lists it (Dispatcher::QueueFor).
struct TestStream {
  TestStream(ContextLinks* links, CUstream handle, bool legacy) {
    state.stream = handle;
    state.legacy = legacy;
    state.blocking = true;
    q.state = &state;
    q.links = links;
    if (legacy) {
      links->legacy = &q;
    } else {
      links->blocking.push_back(&q);
    }
  }
  StreamState state;
  StreamQueue q;
};

TEST_CASE("IsolationPlacement: the partition is created on first need, once") {
  absl::Mutex record_mu;
  IsolationPlacement without(0, ScriptedDriver(), 16, &record_mu);
  CHECK_FALSE(without.EnsurePartition());  // no green contexts: isolation off, tried once
  CHECK_FALSE(without.EnsurePartition());
  CHECK(without.Report().device_sms == 0);

  IsolationPlacement placement(0, ScriptedDriverWithGreenContexts(), 16, &record_mu);
  CHECK(placement.Report().device_sms == 0);  // nothing created before it is asked for
  CHECK(placement.EnsurePartition());
  CHECK(placement.EnsurePartition());
  const IsolationReport report = placement.Report();
  CHECK(report.device_sms > 0);
  CHECK(report.reserved_sms >= 16);
  CHECK_FALSE(placement.SharesSmsWithPeers());  // the scripted GPU runs no MPS
}

TEST_CASE("IsolationPlacement: a twin per stream on first confinement, linked both ways") {
  absl::Mutex record_mu;
  IsolationPlacement placement(0, LinkRecordingDriver(), 16, &record_mu);
  ContextLinks links;
  TestStream s(&links, Handle(0x301), /*legacy=*/false);

  // Without a partition, confinement is not possible: the stream's own.
  CHECK(placement.Place(&s.q, /*confine=*/true) == s.state.stream);
  CHECK(s.q.twin == nullptr);
  REQUIRE(placement.EnsurePartition());

  const int twins = g_green_streams_created.load();
  const CUstream twin = placement.Place(&s.q, /*confine=*/true);
  CHECK(twin != s.state.stream);
  CHECK(twin == s.q.twin);
  CHECK(g_green_streams_created.load() == twins + 1);
  CHECK(s.q.away);
  CHECK(s.state.away.load());
  CHECK(links.away == 1);
  // The twin's first op follows the stream's earlier work.
  REQUIRE(g_links.size() == 1);
  CHECK(g_links[0] == std::make_pair(s.state.stream, twin));

  // Staying confined: the same twin, no new link, no new twin.
  CHECK(placement.Place(&s.q, /*confine=*/true) == twin);
  CHECK(g_links.size() == 1);
  CHECK(g_green_streams_created.load() == twins + 1);

  // Home again: the stream's next op follows the twin's work.
  CHECK(placement.Place(&s.q, /*confine=*/false) == s.state.stream);
  REQUIRE(g_links.size() == 2);
  CHECK(g_links[1] == std::make_pair(twin, s.state.stream));
  CHECK_FALSE(s.q.away);
  CHECK_FALSE(s.state.away.load());
  CHECK(links.away == 0);

  // Confined again: the twin is reused.
  CHECK(placement.Place(&s.q, /*confine=*/true) == twin);
  CHECK(g_green_streams_created.load() == twins + 1);
  placement.BringHome(&s.q);
  CHECK_FALSE(s.q.away);
}

TEST_CASE("IsolationPlacement: client threads see work away that orders theirs") {
  absl::Mutex record_mu;
  IsolationPlacement placement(0, LinkRecordingDriver(), 16, &record_mu);
  REQUIRE(placement.EnsurePartition());
  ContextLinks links;
  TestStream legacy(&links, nullptr, /*legacy=*/true);
  TestStream blocking(&links, Handle(0x301), /*legacy=*/false);
  StreamState non_blocking;
  non_blocking.stream = Handle(0x302);
  non_blocking.blocking = false;

  placement.Place(&blocking.q, /*confine=*/true);
  CHECK(placement.AwayWorkOrders(&blocking.state));  // its own earlier work
  CHECK(placement.AwayWorkOrders(&legacy.state));    // a blocking stream's work
  CHECK_FALSE(placement.AwayWorkOrders(&non_blocking));

  placement.Place(&blocking.q, /*confine=*/false);
  placement.Place(&legacy.q, /*confine=*/true);
  CHECK(placement.AwayWorkOrders(&legacy.state));
  CHECK(placement.AwayWorkOrders(&blocking.state));  // the legacy stream's work
  CHECK_FALSE(placement.AwayWorkOrders(&non_blocking));

  placement.Place(&legacy.q, /*confine=*/false);
  CHECK_FALSE(placement.AwayWorkOrders(&legacy.state));
  CHECK_FALSE(placement.AwayWorkOrders(&blocking.state));
}

TEST_CASE("IsolationPlacement: the legacy stream's order is linked across a twin") {
  absl::Mutex record_mu;
  IsolationPlacement placement(0, LinkRecordingDriver(), 16, &record_mu);
  REQUIRE(placement.EnsurePartition());
  ContextLinks links;
  TestStream legacy(&links, nullptr, /*legacy=*/true);
  TestStream blocking(&links, Handle(0x301), /*legacy=*/false);

  // A blocking stream's op goes to its twin; the legacy stream's next op must follow it.
  const CUstream twin = placement.Place(&blocking.q, /*confine=*/true);
  ++blocking.q.ops_issued;  // the dispatcher counts the op once it is issued
  g_links.clear();
  CHECK(placement.Place(&legacy.q, /*confine=*/false) == nullptr);
  REQUIRE(g_links.size() == 1);
  CHECK(g_links[0] == std::make_pair(twin, CUstream{nullptr}));
  // Followed once: the next legacy op needs no new link.
  CHECK(placement.Place(&legacy.q, /*confine=*/false) == nullptr);
  CHECK(g_links.size() == 1);

  // A legacy op issued meanwhile: the blocking stream's next op on its twin follows it.
  ++links.legacy_ops;
  CHECK(placement.Place(&blocking.q, /*confine=*/true) == twin);
  REQUIRE(g_links.size() == 2);
  CHECK(g_links[1] == std::make_pair(CUstream{nullptr}, twin));

  // All home: CUDA orders the legacy stream itself, nothing is linked.
  placement.Place(&blocking.q, /*confine=*/false);
  ++blocking.q.ops_issued;
  ++links.legacy_ops;
  g_links.clear();
  placement.Place(&legacy.q, /*confine=*/false);
  placement.Place(&blocking.q, /*confine=*/false);
  CHECK(g_links.empty());
}

TEST_CASE("IsolationPlacement: a forgotten stream leaves its context's links") {
  absl::Mutex record_mu;
  IsolationPlacement placement(0, LinkRecordingDriver(), 16, &record_mu);
  REQUIRE(placement.EnsurePartition());
  ContextLinks links;
  TestStream legacy(&links, nullptr, /*legacy=*/true);
  TestStream blocking(&links, Handle(0x301), /*legacy=*/false);
  placement.Place(&blocking.q, /*confine=*/true);

  placement.Forget(&blocking.q);  // away (not expected): counted home first
  CHECK(blocking.q.twin == nullptr);
  CHECK(blocking.q.links == nullptr);
  CHECK(links.blocking.empty());
  CHECK(links.away == 0);
  CHECK_FALSE(placement.AwayWorkOrders(&legacy.state));
  placement.Forget(&legacy.q);
  CHECK(links.legacy == nullptr);
  placement.Forget(&legacy.q);  // twice: nothing left to do
}

TEST_CASE("IsolationPlacement: unconfinable functions and the confined totals") {
  absl::Mutex record_mu;
  IsolationPlacement placement(0, ScriptedDriverWithGreenContexts(), 16, &record_mu);
  const int kernel = 0;
  CHECK(placement.Confinable(nullptr));
  CHECK(placement.Confinable(&kernel));
  placement.NoteUnconfinable(&kernel);
  CHECK_FALSE(placement.Confinable(&kernel));
  CHECK(placement.Confinable(nullptr));

  StreamQueue a;
  StreamQueue b;
  placement.AddConfined(&a, 1000);
  placement.AddConfined(&a, 500);
  placement.AddConfined(&b, 2000);
  CHECK(a.confined_in_flight_ops == 2);
  CHECK(a.confined_in_flight_ns == 1500);
  CHECK(placement.Report().confined_ops == 3);
  CHECK(placement.Report().confined_ns == 3500);
  placement.RemoveConfined(&a, 1000);
  placement.RemoveConfined(&b, 2000);
  CHECK(a.confined_in_flight_ops == 1);
  CHECK(b.confined_in_flight_ns == 0);
  CHECK(placement.Report().confined_ops == 1);
  CHECK(placement.Report().confined_ns == 500);
}

}  // namespace
