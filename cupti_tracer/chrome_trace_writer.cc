// Chrome trace writer: the joined trace becomes a flat list of events, sorted by time so slices
// nest per track, then written with JsonWriter (which owns escaping and separators).
#include "cupti_tracer/chrome_trace_writer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "cupti_tracer/gzip_output.h"
#include "cupti_tracer/json_writer.h"
#include "cupti_tracer/kernel_name.h"
#include "cupti_tracer/trace_file.h"
#include "cupti_tracer/trace_join.h"
#include "scheduler/base/version.h"

namespace gpuprio::tracer {
namespace {

constexpr int kFormatVersion = 2;

// A duration or relative time in microseconds, written with 3 decimals.
struct Micros {
  double value;
};
using ArgValue = std::variant<int64_t, uint64_t, bool, std::string, Micros, double>;
struct Arg {
  std::string key;
  ArgValue value;
};

// One trace event before serialisation; times are still in CUPTI nanoseconds.
struct Event {
  char ph = 'X';
  std::string name;
  std::string cat;
  uint32_t pid = 0;
  uint32_t tid = 0;
  bool has_tid = true;
  int64_t ts_ns = 0;
  int64_t dur_ns = 0;  // 'X' only
  bool has_id = false;
  uint64_t id = 0;
  std::vector<Arg> args;
};

// At equal timestamps: slices before what binds to them (flows, async events), and the longer
// slice first so a child never precedes its parent.
int PhaseRank(char ph) {
  switch (ph) {
    case 'X': return 0;
    case 'C': return 1;
    case 'e': return 2;
    case 'b': return 3;
    default: return 4;  // flows s, t, f
  }
}

const char* GpuCategory(GpuActivity::Kind kind) {
  switch (kind) {
    case GpuActivity::Kind::kKernel: return "kernel";
    case GpuActivity::Kind::kMemcpy: return "memcpy";
    case GpuActivity::Kind::kMemset: return "memset";
  }
  return "kernel";
}

std::string GpuName(const GpuActivity& gpu) {
  if (!gpu.name.empty()) return gpu.name;
  switch (gpu.kind) {
    case GpuActivity::Kind::kKernel: return "kernel";
    case GpuActivity::Kind::kMemcpy: return "Memcpy";
    case GpuActivity::Kind::kMemset: return "Memset";
  }
  return "kernel";
}

struct FlowStep {
  uint32_t pid;
  uint32_t tid;
  int64_t ts_ns;
};

class EventBuilder {
 public:
  EventBuilder(const TraceInput& input, const JoinedTrace& joined)
      : input_(input), joined_(joined) {}

  std::vector<Event> Build() {
    uint64_t max_op_id = 0;
    for (const JoinedOp& op : joined_.ops) max_op_id = std::max(max_op_id, op.submitted->op_id);
    next_extra_flow_id_ = max_op_id + 1;
    for (const JoinedOp& op : joined_.ops) AddOp(op);
    for (const ApiCall* call : joined_.other_api_calls) {
      Event& e = AddSlice(call->name, "cuda_api", input_.pid, call->tid, call->start_ns,
                          call->end_ns);
      e.args.push_back({"correlation_id", int64_t{call->correlation_id}});
    }
    for (const GpuActivity* gpu : joined_.unlinked_gpu) AddGpuSlice(*gpu, nullptr);
    for (const CounterSample& sample : input_.counters) AddCounter(sample);
    std::stable_sort(events_.begin(), events_.end(), [](const Event& a, const Event& b) {
      if (a.ts_ns != b.ts_ns) return a.ts_ns < b.ts_ns;
      if (PhaseRank(a.ph) != PhaseRank(b.ph)) return PhaseRank(a.ph) < PhaseRank(b.ph);
      return a.dur_ns > b.dur_ns;
    });
    std::vector<Event> all = MetadataEvents();
    all.insert(all.end(), std::make_move_iterator(events_.begin()),
               std::make_move_iterator(events_.end()));
    return all;
  }

 private:
  Event& AddSlice(std::string name, std::string cat, uint32_t pid, uint32_t tid, int64_t start_ns,
                  int64_t end_ns) {
    Event e;
    e.ph = 'X';
    e.name = std::move(name);
    e.cat = std::move(cat);
    e.pid = pid;
    e.tid = tid;
    e.ts_ns = start_ns;
    e.dur_ns = std::max<int64_t>(0, end_ns - start_ns);
    if (pid == input_.pid) cpu_tids_.insert(tid);
    events_.push_back(std::move(e));
    return events_.back();
  }

  void AddOp(const JoinedOp& op) {
    const OpSubmitted& s = *op.submitted;
    const auto priority = int64_t{s.priority};
    std::vector<FlowStep> steps;

    // Client slice: once per API record, however many ops it submitted (the first op's args).
    const bool first_use =
        op.client.call == nullptr || emitted_client_calls_.insert(op.client.call).second;
    if (first_use) {
      Event& e = AddSlice(op.client.call != nullptr ? op.client.call->name : s.api, "client",
                          input_.pid, op.client.tid, op.client.start_ns, op.client.end_ns);
      e.args = {{"op_id", s.op_id}, {"priority", priority}, {"api", s.api},
                {"on_caller", s.on_caller}};
    }
    steps.push_back({input_.pid, op.client.tid, op.client.start_ns});

    // Dispatcher slice: gpuprio's own issue window, named after the real call.
    if (!s.on_caller && (op.issued != nullptr || op.driver_call != nullptr)) {
      const uint32_t tid =
          op.issued != nullptr ? op.issued->dispatcher_tid : op.driver_call->tid;
      const int64_t begin = op.issued != nullptr ? op.issued->begin_ns : op.driver_call->start_ns;
      const int64_t end = op.issued != nullptr ? op.issued->end_ns : op.driver_call->end_ns;
      uint32_t correlation_id = op.driver_call != nullptr ? op.driver_call->correlation_id : 0;
      if (correlation_id == 0 && !op.correlation_ids.empty()) {
        correlation_id = op.correlation_ids[0];
      }
      Event& e = AddSlice(op.driver_call != nullptr ? op.driver_call->name : s.api, "dispatch",
                          input_.pid, tid, begin, end);
      e.args = {{"op_id", s.op_id}, {"priority", priority},
                {"correlation_id", int64_t{correlation_id}}};
      if (op.issued != nullptr) e.args.push_back({"result", int64_t{op.issued->result}});
      steps.push_back({input_.pid, tid, begin});
    }

    for (const GpuActivity* gpu : op.gpu) AddGpuSlice(*gpu, &op);
    if (!op.gpu.empty()) {
      const GpuActivity& first = *op.gpu.front();
      steps.push_back({kGpuPidBase + first.device_id, first.stream_id, first.start_ns});
    }
    AddFlow(s.op_id, steps);
    // Further GPU slices (a graph launch) each get their own flow from the last CPU step, with
    // an id above every op id, so every GPU slice of a known op has exactly one incoming flow.
    for (size_t i = 1; i < op.gpu.size(); ++i) {
      const GpuActivity& gpu = *op.gpu[i];
      AddFlow(next_extra_flow_id_++,
              {steps[steps.size() - 2],
               {kGpuPidBase + gpu.device_id, gpu.stream_id, gpu.start_ns}});
    }

    if (op.queue_delay_ns) {
      Event b;
      b.ph = 'b';
      b.name = absl::StrCat("queued p=", s.priority);
      b.cat = "queue";
      b.pid = input_.pid;
      b.tid = s.client_tid;
      b.ts_ns = s.submit_ns;
      b.has_id = true;
      b.id = s.op_id;
      Event e = b;
      e.ph = 'e';
      e.ts_ns = *op.issue_begin_ns;
      b.args = {{"op_id", s.op_id}, {"priority", priority},
                {"delay_us", Micros{static_cast<double>(*op.queue_delay_ns) / 1000.0}}};
      cpu_tids_.insert(s.client_tid);
      events_.push_back(std::move(b));
      events_.push_back(std::move(e));
    }
  }

  // s on the first step, t on the middle ones, f ("bp":"e") on the last; nothing if there is
  // only one step to bind.
  void AddFlow(uint64_t id, const std::vector<FlowStep>& steps) {
    if (steps.size() < 2) return;
    for (size_t i = 0; i < steps.size(); ++i) {
      Event e;
      e.ph = i == 0 ? 's' : (i + 1 == steps.size() ? 'f' : 't');
      e.name = "op";
      e.cat = "gpuprio.op";
      e.pid = steps[i].pid;
      e.tid = steps[i].tid;
      e.ts_ns = steps[i].ts_ns;
      e.has_id = true;
      e.id = id;
      events_.push_back(std::move(e));
    }
  }

  void AddGpuSlice(const GpuActivity& gpu, const JoinedOp* op) {
    gpu_streams_[gpu.device_id].insert(gpu.stream_id);
    std::string name = GpuName(gpu);
    std::string mangled;
    if (gpu.kind == GpuActivity::Kind::kKernel) {
      // Demangled once per distinct name: a run launches few kernels many times.
      auto [it, added] = demangled_.try_emplace(name);
      if (added) it->second = DemangledKernelName(name);
      if (it->second != name) mangled = std::exchange(name, it->second);
    }
    Event& e = AddSlice(std::move(name), GpuCategory(gpu.kind), kGpuPidBase + gpu.device_id,
                        gpu.stream_id, gpu.start_ns, gpu.end_ns);
    e.args = {{"op_id", op != nullptr ? op->submitted->op_id : uint64_t{0}},
              {"correlation_id", int64_t{gpu.correlation_id}}};
    if (!mangled.empty()) e.args.push_back({"mangled", std::move(mangled)});
    if (op != nullptr) e.args.push_back({"priority", int64_t{op->submitted->priority}});
    e.args.push_back({"device", int64_t{gpu.device_id}});
    e.args.push_back({"stream", int64_t{gpu.stream_id}});
    if (gpu.kind != GpuActivity::Kind::kKernel) e.args.push_back({"bytes", gpu.bytes});
  }

  void AddCounter(const CounterSample& sample) {
    Event e;
    e.ph = 'C';
    e.name = sample.name;
    e.pid = input_.pid;
    e.has_tid = false;
    e.ts_ns = sample.ts_ns;
    std::string series = sample.series.empty() ? "value" : sample.series;
    // Pending-op counts are integers; keep them so in the JSON.
    const double v = sample.value;
    if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9007199254740992.0) {
      e.args.push_back({std::move(series), static_cast<int64_t>(v)});
    } else {
      e.args.push_back({std::move(series), v});
    }
    events_.push_back(std::move(e));
  }

  std::vector<Event> MetadataEvents() const {
    std::vector<Event> meta;
    const auto add = [&](const char* what, uint32_t pid, uint32_t tid, bool has_tid,
                         std::string name) {
      Event e;
      e.ph = 'M';
      e.name = what;
      e.pid = pid;
      e.tid = tid;
      e.has_tid = has_tid;
      e.args = {{"name", std::move(name)}};
      meta.push_back(std::move(e));
    };
    add("process_name", input_.pid, 0, false,
        input_.process_name.empty() ? absl::StrCat("process ", input_.pid) : input_.process_name);
    absl::flat_hash_map<uint32_t, std::string> names;
    for (const ThreadName& t : input_.thread_names) names.emplace(t.tid, t.name);
    for (uint32_t tid : cpu_tids_) {
      auto it = names.find(tid);
      add("thread_name", input_.pid, tid, true,
          it != names.end() ? it->second : absl::StrCat("thread ", tid));
    }
    for (const auto& [device, streams] : gpu_streams_) {
      add("process_name", kGpuPidBase + device, 0, false, absl::StrCat("GPU ", device));
      for (uint32_t stream : streams) {
        add("thread_name", kGpuPidBase + device, stream, true, absl::StrCat("stream ", stream));
      }
    }
    return meta;
  }

  const TraceInput& input_;
  const JoinedTrace& joined_;
  std::vector<Event> events_;
  std::set<uint32_t> cpu_tids_;                            // ordered: stable output
  std::map<uint32_t, std::set<uint32_t>> gpu_streams_;     // device -> stream ids
  std::set<const ApiCall*> emitted_client_calls_;
  absl::flat_hash_map<std::string, std::string> demangled_;  // kernel name -> as shown
  uint64_t next_extra_flow_id_ = 1;
};

void WriteArgValue(JsonWriter& w, const ArgValue& value) {
  struct Visitor {
    JsonWriter& w;
    void operator()(int64_t v) { w.Int(v); }
    void operator()(uint64_t v) { w.Uint(v); }
    void operator()(bool v) { w.Bool(v); }
    void operator()(const std::string& v) { w.String(v); }
    void operator()(Micros v) { w.Double(v.value); }
    // Counter values that are not integers: Double() gives 3 decimals, enough for microseconds.
    void operator()(double v) { w.Double(v); }
  };
  std::visit(Visitor{w}, value);
}

void WriteEvent(JsonWriter& w, const Event& e, int64_t base_ns) {
  const auto micros = [&](int64_t ns) { return static_cast<double>(ns - base_ns) / 1000.0; };
  w.BeginObject();
  w.Key("ph");
  w.String(std::string(1, e.ph));
  w.Key("name");
  w.String(e.name);
  if (!e.cat.empty()) {
    w.Key("cat");
    w.String(e.cat);
  }
  w.Key("pid");
  w.Uint(e.pid);
  if (e.has_tid) {
    w.Key("tid");
    w.Uint(e.tid);
  }
  if (e.ph != 'M') {
    w.Key("ts");
    w.Double(micros(e.ts_ns));
  }
  if (e.ph == 'X') {
    w.Key("dur");
    w.Double(static_cast<double>(e.dur_ns) / 1000.0);
  }
  if (e.has_id) {
    w.Key("id");
    w.Uint(e.id);
  }
  if (e.ph == 'f') {
    w.Key("bp");
    w.String("e");
  }
  if (!e.args.empty()) {
    w.Key("args");
    w.BeginObject();
    for (const Arg& arg : e.args) {
      w.Key(arg.key);
      WriteArgValue(w, arg.value);
    }
    w.EndObject();
  }
  w.EndObject();
}

void SerializeChromeTrace(const TraceInput& input, JsonWriter& w) {
  const JoinedTrace joined = JoinTrace(input);
  const std::vector<Event> events = EventBuilder(input, joined).Build();
  const int64_t base_ns = input.base_ns != 0 ? input.base_ns : EarliestTimestamp(input);
  const JoinCounts& c = joined.counts;

  w.BeginObject();
  w.Key("traceEvents");
  w.BeginArray();
  for (const Event& e : events) WriteEvent(w, e, base_ns);
  w.EndArray();
  w.Key("displayTimeUnit");
  w.String("ns");
  w.Key("baseTimeNanoseconds");
  w.Int(base_ns);
  w.Key("otherData");
  w.BeginObject();
  w.Key("gpuprio_version");  // the library that wrote the file (VERSION)
  w.String(base::kVersion);
  w.Key("gpuprio");
  w.BeginObject();
  const std::pair<const char*, int64_t> fields[] = {
      {"version", kFormatVersion},
      {"pid", input.pid},
      {"dropped_records", static_cast<int64_t>(input.drops.cupti_records())},
      {"ops", c.ops},
      {"ops_linked_to_gpu", c.ops_linked_to_gpu},
      {"gpu_records", c.gpu_records},
      {"gpu_records_linked_to_client", c.gpu_records_linked_to_client},
      {"ops_on_caller", c.ops_on_caller},
      {"ops_issued", c.ops_issued},
      {"ops_missing_external_correlation", c.ops_missing_external_correlation},
      {"ops_missing_driver_call", c.ops_missing_driver_call},
      {"client_spans_synthesized", c.client_spans_synthesized},
      {"api_records", c.api_records},
      {"dropped_records_by_cupti", static_cast<int64_t>(input.drops.records_by_cupti)},
      {"dropped_records_over_cap", static_cast<int64_t>(input.drops.records_over_cap)},
      {"refused_buffers", static_cast<int64_t>(input.drops.buffers_refused)},
      {"dropped_op_events", static_cast<int64_t>(input.drops.op_events)},
      {"dropped_counter_samples", static_cast<int64_t>(input.drops.counter_samples)},
  };
  for (const auto& [key, value] : fields) {
    w.Key(key);
    w.Int(value);
  }
  // Which boot's clock the times are on (trace merge relates files of one boot only).
  const std::pair<const char*, const std::string*> identity[] = {{"boot_id", &input.boot_id},
                                                                 {"host", &input.host}};
  for (const auto& [key, value] : identity) {
    if (value->empty()) continue;
    w.Key(key);
    w.String(*value);
  }
  w.EndObject();
  w.EndObject();
  w.EndObject();
}

}  // namespace

std::string ChromeTraceJson(const TraceInput& input) {
  std::string out;
  JsonWriter w(&out);
  SerializeChromeTrace(input, w);
  // Misuse here would be a bug in this file; tests parse the output and would see it.
  w.Finish().IgnoreError();
  return out;
}

absl::Status WriteChromeTrace(const TraceInput& input, const std::string& path) {
  const auto write_json = [&input](std::FILE* file) {
    JsonWriter w(file);
    SerializeChromeTrace(input, w);
    return w.Finish();
  };
  if (!IsGzipTracePath(path)) return WriteFileReplacing(path, write_json);
  return WriteFileReplacing(path, [&write_json](std::FILE* file) {
    return WriteGzipped(file, kTraceGzipLevel, write_json);
  });
}

}  // namespace gpuprio::tracer
