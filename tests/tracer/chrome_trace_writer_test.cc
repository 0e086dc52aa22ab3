// Tests of cupti_tracer/chrome_trace_writer: the output is parsed with nlohmann/json and checked
// against docs/trace_format.md: flows bound to slices, one incoming flow per linked GPU slice,
// properly nested slices per track, relative times, metadata, queue events, counters, counts.
#include "cupti_tracer/chrome_trace_writer.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "catch2/catch.hpp"
#include "nlohmann/json.hpp"
#include "tests/test_directory.h"
#include "tests/tracer/synthetic_trace.h"

namespace gpuprio::tracer {
namespace {

using gpuprio_test::ScenarioOptions;
using nlohmann::json;

using Track = std::pair<uint64_t, uint64_t>;  // (pid, tid)

Track TrackOf(const json& e) { return {e.at("pid").get<uint64_t>(), e.at("tid").get<uint64_t>()}; }

std::vector<json> EventsWithPhase(const json& trace, const std::string& ph) {
  std::vector<json> out;
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") == ph) out.push_back(e);
  }
  return out;
}

// Every structural rule of the format that holds for any input, whatever was lost.
void CheckTraceInvariants(const json& trace) {
  REQUIRE(trace.at("traceEvents").is_array());
  const std::vector<json> slices = EventsWithPhase(trace, "X");

  // Slices nest per track: sorted by (ts, longer first), no partial overlap.
  std::map<Track, std::vector<std::pair<double, double>>> by_track;
  for (const json& s : slices) {
    const double ts = s.at("ts").get<double>();
    by_track[TrackOf(s)].push_back({ts, ts + s.at("dur").get<double>()});
  }
  for (auto& [track, spans] : by_track) {
    std::sort(spans.begin(), spans.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;
    });
    std::vector<double> open_ends;
    for (const auto& [begin, end] : spans) {
      while (!open_ends.empty() && open_ends.back() <= begin) open_ends.pop_back();
      INFO("track pid " << track.first << " tid " << track.second << ": slice [" << begin << ", "
                        << end << "]");
      if (!open_ends.empty()) CHECK(end <= open_ends.back());  // inside its parent
      open_ends.push_back(end);
    }
  }

  // Flow steps: each binds to a slice starting at its ts on its track.
  std::set<std::tuple<Track, double>> slice_starts;
  for (const json& s : slices) slice_starts.insert({TrackOf(s), s.at("ts").get<double>()});
  std::map<uint64_t, std::map<std::string, int>> steps_by_id;
  std::map<std::tuple<Track, double>, int> incoming;  // f events per slice start
  for (const json& e : trace.at("traceEvents")) {
    const std::string ph = e.at("ph");
    if (ph != "s" && ph != "t" && ph != "f") continue;
    INFO("flow event " << e.dump());
    CHECK(e.at("cat") == "gpuprio.op");
    CHECK(e.at("name") == "op");
    CHECK(slice_starts.count({TrackOf(e), e.at("ts").get<double>()}) == 1);
    ++steps_by_id[e.at("id").get<uint64_t>()][ph];
    if (ph == "f") {
      CHECK(e.at("bp") == "e");
      ++incoming[{TrackOf(e), e.at("ts").get<double>()}];
    }
  }
  for (const auto& [id, steps] : steps_by_id) {
    INFO("flow id " << id);
    CHECK(steps.count("s") == 1);
    CHECK(steps.at("s") == 1);
    CHECK(steps.count("f") == 1);
    if (steps.count("f")) CHECK(steps.at("f") == 1);
  }

  // Every GPU slice of a known op has exactly one incoming flow; unknown ones none.
  for (const json& s : slices) {
    if (s.at("pid").get<uint64_t>() < kGpuPidBase) continue;
    const auto key = std::make_tuple(TrackOf(s), s.at("ts").get<double>());
    const int flows = incoming.count(key) ? incoming.at(key) : 0;
    INFO("GPU slice " << s.dump());
    CHECK(flows == (s.at("args").at("op_id").get<uint64_t>() != 0 ? 1 : 0));
  }

  // The counts agree with the events.
  const json& counts = trace.at("otherData").at("gpuprio");
  int64_t gpu_records = 0, gpu_linked = 0;
  std::set<uint64_t> ops_on_gpu;
  for (const json& s : slices) {
    if (s.at("pid").get<uint64_t>() < kGpuPidBase) continue;
    ++gpu_records;
    const uint64_t op_id = s.at("args").at("op_id");
    if (op_id != 0) {
      ++gpu_linked;
      ops_on_gpu.insert(op_id);
    }
  }
  CHECK(counts.at("version") == 2);
  CHECK(counts.at("gpu_records") == gpu_records);
  CHECK(counts.at("gpu_records_linked_to_client") == gpu_linked);
  CHECK(counts.at("ops_linked_to_gpu") == static_cast<int64_t>(ops_on_gpu.size()));
}

json ParseTrace(const TraceInput& input) {
  const std::string text = ChromeTraceJson(input);
  json trace;
  REQUIRE_NOTHROW(trace = json::parse(text));
  return trace;
}

// The flow of op `op_id`: its steps' phases in ts order, with the track of each.
std::vector<std::pair<std::string, Track>> FlowOf(const json& trace, uint64_t op_id) {
  std::vector<std::pair<std::string, Track>> steps;
  for (const json& e : trace.at("traceEvents")) {
    const std::string ph = e.at("ph");
    if ((ph == "s" || ph == "t" || ph == "f") && e.at("id") == op_id) {
      steps.push_back({ph, TrackOf(e)});
    }
  }
  return steps;
}

const Track kGpuStream7{kGpuPidBase, 7};

TEST_CASE("ChromeTrace draws each op from client to dispatcher to GPU", "[tracer]") {
  TraceInput input = gpuprio_test::Scenario();
  gpuprio_test::ShuffleRecords(input, GENERATE(1u, 2u, 3u));
  const json trace = ParseTrace(input);
  CheckTraceInvariants(trace);

  using P = std::vector<std::pair<std::string, Track>>;
  CHECK(FlowOf(trace, 1) == P{{"s", {gpuprio_test::kPid, gpuprio_test::kClientHigh}},
                              {"t", {gpuprio_test::kPid, gpuprio_test::kDispatcher}},
                              {"f", kGpuStream7}});
  CHECK(FlowOf(trace, 100) == P{{"s", {gpuprio_test::kPid, gpuprio_test::kCallerClient}},
                                {"f", {kGpuPidBase, 21}}});
  // The client slice says whether the client thread issued the op itself (format version 2;
  // version 1 called it `inline`, the name of one class of calls).
  std::map<uint64_t, json> client_args;
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") == "X" && e.at("cat") == "client") {
      client_args[e.at("args").at("op_id")] = e.at("args");
    }
  }
  REQUIRE(client_args.count(1) == 1);
  REQUIRE(client_args.count(100) == 1);
  CHECK(client_args.at(1).at("on_caller") == false);
  CHECK(client_args.at(100).at("on_caller") == true);
  CHECK_FALSE(client_args.at(100).contains("inline"));
  const json& counts = trace.at("otherData").at("gpuprio");
  CHECK(counts.at("ops") == 8);
  CHECK(counts.at("ops_linked_to_gpu") == 8);
  CHECK(counts.at("gpu_records") == 9);
  CHECK(counts.at("gpu_records_linked_to_client") == 8);
  // Every drop, by cause; dropped_records stays "CUPTI records lost" (by CUPTI + over the cap).
  CHECK(counts.at("dropped_records") == 3);
  CHECK(counts.at("dropped_records_by_cupti") == 2);
  CHECK(counts.at("dropped_records_over_cap") == 1);
  CHECK(counts.at("refused_buffers") == 1);
  CHECK(counts.at("dropped_op_events") == 4);
  CHECK(counts.at("dropped_counter_samples") == 5);
  CHECK(counts.at("pid") == gpuprio_test::kPid);
}

TEST_CASE("ChromeTrace keeps its structure whatever piece is lost", "[tracer]") {
  ScenarioOptions options;
  SECTION("external correlation") { options.drop_external_correlation_of = 2; }
  SECTION("kernel record") { options.drop_kernel_of = 2; }
  SECTION("dispatcher record") { options.drop_dispatcher_record_of = 2; }
  SECTION("client record") { options.drop_client_record_of = 2; }
  SECTION("issue record") { options.drop_issued_of = 2; }
  TraceInput input = gpuprio_test::Scenario(options);
  gpuprio_test::ShuffleRecords(input, 9);
  const json trace = ParseTrace(input);
  CheckTraceInvariants(trace);
  const auto flow = FlowOf(trace, 2);
  REQUIRE(flow.size() >= 2);
  CHECK(flow.front().first == "s");
  CHECK(flow.back().first == "f");
  if (options.drop_kernel_of == 2) {
    // The flow ends on the dispatcher slice; the op is counted as not reaching the GPU.
    CHECK(flow.back().second == Track{gpuprio_test::kPid, gpuprio_test::kDispatcher});
    CHECK(trace.at("otherData").at("gpuprio").at("ops_linked_to_gpu") == 7);
  } else {
    CHECK(flow.size() == 3);
    CHECK(flow.back().second.first == kGpuPidBase);
  }
}

TEST_CASE("ChromeTrace gives every kernel of a graph launch its own incoming flow", "[tracer]") {
  TraceInput input = gpuprio_test::Scenario();
  // Two more kernels with op 3's correlation id, as a graph launch gives.
  for (int i = 1; i <= 2; ++i) {
    GpuActivity extra = input.gpu_activities[0];
    for (const GpuActivity& g : input.gpu_activities) {
      if (g.correlation_id == 5003) extra = g;
    }
    extra.name = "graph_node_" + std::to_string(i);
    extra.start_ns += i * 20000;
    extra.end_ns = extra.start_ns + 5000;
    input.gpu_activities.push_back(extra);
  }
  const json trace = ParseTrace(input);
  CheckTraceInvariants(trace);
  CHECK(trace.at("otherData").at("gpuprio").at("gpu_records_linked_to_client") == 10);
}

TEST_CASE("ChromeTrace times are microseconds relative to baseTimeNanoseconds", "[tracer]") {
  TraceInput input = gpuprio_test::Scenario();
  SECTION("base computed as the earliest timestamp") { input.base_ns = 0; }
  SECTION("base given") { input.base_ns = gpuprio_test::kBaseNs; }
  const std::string text = ChromeTraceJson(input);
  const json trace = json::parse(text);
  CHECK(trace.at("displayTimeUnit") == "ns");
  // The earliest record is op 1's client call, 100 us after kBaseNs.
  const int64_t base = trace.at("baseTimeNanoseconds");
  CHECK(base == (input.base_ns != 0 ? gpuprio_test::kBaseNs : gpuprio_test::ClientStartNs(1)));
  const double offset_us = static_cast<double>(gpuprio_test::ClientStartNs(1) - base) / 1000;
  bool found = false;
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") == "X" && e.at("cat") == "dispatch" && e.at("args").at("op_id") == 1) {
      // Issued at 5.1 us after op 1's client call: nanoseconds survive the trip.
      CHECK(e.at("ts").get<double>() == Approx(offset_us + 5.1).margin(1e-9));
      CHECK(e.at("dur").get<double>() == Approx(3.0).margin(1e-9));
      found = true;
    }
  }
  CHECK(found);
  CHECK(text.find("\"ts\":" + std::to_string(static_cast<int>(offset_us)) + ".000") !=
        std::string::npos);
}

TEST_CASE("ChromeTrace names processes, threads and GPU streams", "[tracer]") {
  const json trace = ParseTrace(gpuprio_test::Scenario());
  std::map<std::tuple<std::string, uint64_t, uint64_t>, std::string> names;
  for (const json& e : EventsWithPhase(trace, "M")) {
    const uint64_t tid = e.contains("tid") ? e.at("tid").get<uint64_t>() : 0;
    names[{e.at("name"), e.at("pid"), tid}] = e.at("args").at("name");
  }
  using K = std::tuple<std::string, uint64_t, uint64_t>;
  CHECK(names[K{"process_name", gpuprio_test::kPid, 0}] == "python serve.py");
  CHECK(names[K{"thread_name", gpuprio_test::kPid, gpuprio_test::kDispatcher}] ==
        "gpuprio dispatcher (GPU 0)");
  CHECK(names[K{"thread_name", gpuprio_test::kPid, gpuprio_test::kClientHigh}] == "main");
  CHECK(names[K{"thread_name", gpuprio_test::kPid, gpuprio_test::kClientLow}] == "thread 102");
  CHECK(names[K{"process_name", kGpuPidBase, 0}] == "GPU 0");
  CHECK(names[K{"thread_name", kGpuPidBase, 13}] == "stream 13");
}

TEST_CASE("ChromeTrace shows queueing as async events and counters per GPU", "[tracer]") {
  const json trace = ParseTrace(gpuprio_test::Scenario());
  const std::vector<json> begins = EventsWithPhase(trace, "b");
  const std::vector<json> ends = EventsWithPhase(trace, "e");
  REQUIRE(begins.size() == 6);  // the deferred ops; on-caller ops are not queued
  REQUIRE(ends.size() == 6);
  for (const json& b : begins) {
    const uint64_t k = b.at("id");
    INFO("op " << k);
    CHECK(b.at("cat") == "queue");
    CHECK(b.at("name") == (k % 2 == 1 ? "queued p=1" : "queued p=0"));
    CHECK(b.at("args").at("op_id") == k);
    CHECK(b.at("args").at("delay_us").get<double>() == Approx(4.0 + 0.1 * k).margin(1e-9));
    for (const json& e : ends) {
      if (e.at("id") == k) {
        CHECK(e.at("ts").get<double>() - b.at("ts").get<double>() ==
              Approx(4.0 + 0.1 * k).margin(1e-6));
        CHECK(TrackOf(e) == TrackOf(b));
      }
    }
  }
  const std::vector<json> counters = EventsWithPhase(trace, "C");
  REQUIRE(counters.size() == 12);
  int depth = 0, budget = 0;
  for (const json& c : counters) {
    if (c.at("name") == "queue depth GPU 0") {
      ++depth;
      CHECK((c.at("args").contains("p=1") || c.at("args").contains("p=0")));
    } else if (c.at("name") == "budget in use GPU 0") {
      ++budget;
      CHECK(c.at("args").at("us").get<double>() == 12.5);
    }
  }
  CHECK(depth == 6);
  CHECK(budget == 6);
}

TEST_CASE("ChromeTrace escapes names that are not plain JSON text", "[tracer]") {
  TraceInput input = gpuprio_test::Scenario();
  const std::string kernel = "void k<\"q\">(char\\*)\n\t\x01 \xff";
  input.gpu_activities[0].name = kernel;
  input.thread_names.push_back({gpuprio_test::kClientLow, "worker \"7\"\r"});
  input.process_name = "p\xc3\xa9 \x7f";
  const json trace = ParseTrace(input);
  CheckTraceInvariants(trace);
  bool kernel_found = false, thread_found = false;
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") == "X" && e.at("name") == "void k<\"q\">(char\\*)\n\t\x01 \xef\xbf\xbd") {
      kernel_found = true;
    }
    if (e.at("ph") == "M" && e.at("args").at("name") == "worker \"7\"\r") thread_found = true;
  }
  CHECK(kernel_found);
  CHECK(thread_found);
}

TEST_CASE("ChromeTrace of an empty input is a valid trace", "[tracer]") {
  const json trace = ParseTrace(TraceInput{});
  CHECK(trace.at("baseTimeNanoseconds") == 0);
  CHECK(trace.at("otherData").at("gpuprio").at("ops") == 0);
  CheckTraceInvariants(trace);
}

TEST_CASE("The boot id and host are written when known, and left out when not", "[tracer]") {
  TraceInput input = gpuprio_test::Scenario();
  CHECK_FALSE(ParseTrace(input).at("otherData").at("gpuprio").contains("boot_id"));
  CHECK_FALSE(ParseTrace(input).at("otherData").at("gpuprio").contains("host"));
  input.boot_id = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
  input.host = "node-7 \"a\"";
  const json gpuprio = ParseTrace(input).at("otherData").at("gpuprio");
  CHECK(gpuprio.at("boot_id") == "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0");
  CHECK(gpuprio.at("host") == "node-7 \"a\"");
}

TEST_CASE("WriteChromeTrace writes the file through a temporary and renames it", "[tracer]") {
  const std::string dir = gpuprio_test::FreshDirectory("write");
  const TraceInput input = gpuprio_test::Scenario();
  const std::string path = dir + "/trace.json";
  REQUIRE(WriteChromeTrace(input, path).ok());
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  CHECK(text.str() == ChromeTraceJson(input));
  CHECK(json::parse(text.str()).at("otherData").at("gpuprio").at("version") == 2);
  CHECK(gpuprio_test::DirectoryEntries(dir) == std::vector<std::string>{"trace.json"});  // no temporary left

  SECTION("and reports a directory that does not exist") {
    const absl::Status status = WriteChromeTrace(input, "/nonexistent-dir/trace.json");
    CHECK_FALSE(status.ok());
    CHECK(status.message().find("/nonexistent-dir") != absl::string_view::npos);
  }
}

}  // namespace
}  // namespace gpuprio::tracer
