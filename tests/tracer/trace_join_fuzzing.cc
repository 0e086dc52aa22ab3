// The join's fuzz cases and checks of trace_join_fuzzing.h.
#include "tests/tracer/trace_join_fuzzing.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

#include "cupti_tracer/chrome_trace_writer.h"
#include "nlohmann/json.hpp"
#include "tests/tracer/synthetic_trace.h"

namespace gpuprio_test {

using gpuprio::tracer::ApiCall;
using gpuprio::tracer::ClientSpan;
using gpuprio::tracer::CounterSample;
using gpuprio::tracer::ExternalCorrelation;
using gpuprio::tracer::GpuActivity;
using gpuprio::tracer::JoinedOp;
using gpuprio::tracer::JoinedTrace;
using gpuprio::tracer::OpIssued;
using gpuprio::tracer::OpSubmitted;
using gpuprio::tracer::Overhead;
using gpuprio::tracer::Synchronization;
using gpuprio::tracer::ThreadName;
using gpuprio::tracer::TraceInput;

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr uint64_t kMaxTracerOpId = uint64_t{1} << 63;

// a - b, exactly, clamped to int64_t: what a duration or delay should be.
int64_t ClampedDifference(int64_t a, int64_t b) {
  const __int128 d = static_cast<__int128>(a) - b;
  return d > kMax ? kMax : d < kMin ? kMin : static_cast<int64_t>(d);
}

class Generator {
 public:
  Generator(Choices& c, const RandomTraceOptions& options) : c_(c), options_(options) {}

  int64_t Time() {
    if (c_.OneIn(8)) {
      if (options_.tracer_output_only) return c_.Pick<int64_t>({0, 1, kMax, kMax - 1});
      return c_.Pick<int64_t>({0, 1, -1, kMax, kMax - 1, kMin, kMin + 1});
    }
    // 100 us in 250 ns steps: calls nest and overlap, ops fall inside and outside them.
    return kBaseNs + static_cast<int64_t>(c_.Below(400)) * 250;
  }
  int64_t EndFor(int64_t start) {
    switch (c_.Below(6)) {
      case 0:
        return Bounded(ClampedDifference(start, static_cast<int64_t>(c_.Below(2000))));
      case 1:
        return start;
      case 2:
        return Time();
      default:
        return Bounded(ClampedDifference(start, -static_cast<int64_t>(c_.Below(20000))));
    }
  }
  uint32_t Tid() {
    return c_.Pick<uint32_t>(
        {kClientHigh, kClientLow, kCallerClient, kDispatcher, 202, 0, 0xffffffff});
  }
  uint32_t Correlation() {
    if (c_.OneIn(6)) return c_.Pick<uint32_t>({0, 0xffffffff});
    return 1 + static_cast<uint32_t>(c_.Below(24));
  }
  uint64_t OpId() {
    if (c_.OneIn(8)) {
      if (options_.tracer_output_only) return c_.Pick<uint64_t>({0, kMaxTracerOpId - 1});
      return c_.Pick<uint64_t>({0, ~0ull, ~0ull - 1, kMaxTracerOpId});
    }
    return 1 + c_.Below(16);
  }
  uint32_t ExternalKind() {
    return c_.OneIn(4) ? c_.Pick<uint32_t>({0, 3, 4, 0xffffffff})
                       : gpuprio::tracer::kExternalCorrelationKindGpuprio;
  }
  std::string Name() {
    return c_.Pick<const char*>({"cudaLaunchKernel", "cuLaunchKernel", "", "cuMemcpyHtoDAsync_v2",
                                 "quote\" back\\slash \n\x01", "\xff\xfe not utf-8 \xe2\x82"});
  }

  ApiCall Call() {
    ApiCall call;
    call.kind = c_.OneIn(2) ? ApiCall::Kind::kRuntime : ApiCall::Kind::kDriver;
    call.name = Name();
    call.cbid = static_cast<uint32_t>(c_.Below(400));
    call.correlation_id = Correlation();
    call.pid = kPid;
    call.tid = Tid();
    call.start_ns = Time();
    call.end_ns = EndFor(call.start_ns);
    return call;
  }
  GpuActivity Gpu() {
    GpuActivity gpu;
    gpu.kind = c_.Pick(
        {GpuActivity::Kind::kKernel, GpuActivity::Kind::kMemcpy, GpuActivity::Kind::kMemset});
    gpu.correlation_id = Correlation();
    gpu.device_id = c_.Pick<uint32_t>({0, 1, 0xffffffff});
    gpu.context_id = c_.Pick<uint32_t>({1, 0});
    gpu.stream_id = c_.Pick<uint32_t>({7, 13, 0, 0xffffffff});
    gpu.start_ns = Time();
    gpu.end_ns = EndFor(gpu.start_ns);
    gpu.name = Name();
    gpu.bytes = c_.Pick<uint64_t>({0, 4096, ~0ull});
    return gpu;
  }
  ExternalCorrelation External() {
    return ExternalCorrelation{ExternalKind(), OpId(), Correlation()};
  }
  OpSubmitted Submitted() {
    OpSubmitted op;
    op.op_id = OpId();
    op.client_tid = Tid();
    op.api = Name();
    op.priority =
        c_.Pick<int>({0, 1, -1, std::numeric_limits<int>::min(), std::numeric_limits<int>::max()});
    op.stream = c_.Pick<uint64_t>({0, 0x7000, ~0ull});
    op.submit_ns = Time();
    op.return_ns = EndFor(op.submit_ns);
    op.client_correlation_id = c_.OneIn(2) ? 0 : Correlation();
    op.on_caller = c_.OneIn(4);
    return op;
  }
  OpIssued Issued() {
    OpIssued op;
    op.op_id = OpId();
    op.dispatcher_tid = Tid();
    op.begin_ns = Time();
    op.end_ns = EndFor(op.begin_ns);
    op.result = c_.Pick<int>({0, 1, 999, -1});
    return op;
  }

  TraceInput MadeUp() {
    TraceInput in;
    in.pid = c_.Pick<uint32_t>({kPid, 0, 0xffffffff});
    in.process_name = c_.OneIn(2) ? "" : Name();
    const auto count = [&] { return c_.Below(static_cast<uint64_t>(options_.max_records) + 1); };
    for (uint64_t n = count(); n > 0; --n) in.api_calls.push_back(Call());
    for (uint64_t n = count(); n > 0; --n) in.gpu_activities.push_back(Gpu());
    for (uint64_t n = count(); n > 0; --n) in.external_correlations.push_back(External());
    for (uint64_t n = count() / 2; n > 0; --n) in.ops_submitted.push_back(Submitted());
    for (uint64_t n = count() / 2; n > 0; --n) in.ops_issued.push_back(Issued());
    for (uint64_t n = c_.Below(4); n > 0; --n) {
      in.synchronizations.push_back(Synchronization{Correlation(), 13, "stream", Time(), Time()});
      in.overheads.push_back(Overhead{"CUPTI buffer flush", Tid(), Time(), Time()});
    }
    for (uint64_t n = c_.Below(4); n > 0; --n) {
      in.counters.push_back(CounterSample{
          Name(), c_.OneIn(2) ? "" : "p=1", Time(),
          c_.Pick<double>({0.0, 12.5, -1.0, 1e300, std::numeric_limits<double>::quiet_NaN(),
                           std::numeric_limits<double>::infinity()})});
    }
    for (uint64_t n = c_.Below(3); n > 0; --n) in.thread_names.push_back(ThreadName{Tid(), Name()});
    return in;
  }

  TraceInput Altered() {
    ScenarioOptions options;
    options.deferred_ops = static_cast<int>(c_.Below(10));
    options.with_on_caller_ops = !c_.OneIn(4);
    options.with_unrelated_work = !c_.OneIn(4);
    const auto some_op = [&] { return c_.OneIn(2) ? 0 : c_.Below(12); };
    options.drop_external_correlation_of = some_op();
    options.drop_kernel_of = some_op();
    options.drop_dispatcher_record_of = some_op();
    options.drop_client_record_of = some_op();
    options.drop_issued_of = some_op();
    TraceInput in = Scenario(options);
    for (uint64_t n = c_.Below(12); n > 0; --n) Alter(in);
    ShuffleRecords(in, static_cast<uint32_t>(c_.Below(1u << 16)));
    return in;
  }

 private:
  int64_t Bounded(int64_t t) const {
    return options_.tracer_output_only ? std::max<int64_t>(0, t) : t;
  }

  // Removes, repeats or changes one record of a random kind.
  void Alter(TraceInput& in) {
    switch (c_.Below(5)) {
      case 0:
        AlterOne(in.api_calls, [&](ApiCall& r) { AlterCall(r); });
        break;
      case 1:
        AlterOne(in.gpu_activities, [&](GpuActivity& r) { AlterGpu(r); });
        break;
      case 2:
        AlterOne(in.external_correlations, [&](ExternalCorrelation& r) {
          if (c_.OneIn(2)) r.external_id = OpId();
          if (c_.OneIn(2)) r.correlation_id = Correlation();
          if (c_.OneIn(4)) r.kind = ExternalKind();
        });
        break;
      case 3:
        AlterOne(in.ops_submitted, [&](OpSubmitted& r) { AlterSubmitted(r); });
        break;
      default:
        AlterOne(in.ops_issued, [&](OpIssued& r) {
          if (c_.OneIn(2)) r.op_id = OpId();
          if (c_.OneIn(2)) r.dispatcher_tid = Tid();
          if (c_.OneIn(2)) std::swap(r.begin_ns, r.end_ns);
          if (c_.OneIn(3)) r.begin_ns = Time();
        });
        break;
    }
  }
  template <typename T, typename Change>
  void AlterOne(std::vector<T>& records, Change change) {
    if (records.empty()) return;
    const size_t i = c_.Below(records.size());
    switch (c_.Below(3)) {
      case 0:
        records.erase(records.begin() + static_cast<ptrdiff_t>(i));
        break;
      case 1:
        records.push_back(records[i]);
        break;
      default:
        change(records[i]);
        break;
    }
  }
  void AlterCall(ApiCall& r) {
    if (c_.OneIn(2)) r.correlation_id = Correlation();
    if (c_.OneIn(3)) r.tid = Tid();
    if (c_.OneIn(3)) std::swap(r.start_ns, r.end_ns);
    if (c_.OneIn(3)) r.start_ns = Time();
    if (c_.OneIn(4)) {
      r.kind = r.kind == ApiCall::Kind::kDriver ? ApiCall::Kind::kRuntime : ApiCall::Kind::kDriver;
    }
  }
  void AlterGpu(GpuActivity& r) {
    if (c_.OneIn(2)) r.correlation_id = Correlation();
    if (c_.OneIn(3)) std::swap(r.start_ns, r.end_ns);
    if (c_.OneIn(3)) r.start_ns = Time();
    if (c_.OneIn(4)) r.device_id = c_.Pick<uint32_t>({1, 0xffffffff});
  }
  void AlterSubmitted(OpSubmitted& r) {
    if (c_.OneIn(2)) r.op_id = OpId();
    if (c_.OneIn(3)) r.client_tid = Tid();
    if (c_.OneIn(3)) r.client_correlation_id = Correlation();
    if (c_.OneIn(3)) std::swap(r.submit_ns, r.return_ns);
    if (c_.OneIn(3)) r.submit_ns = Time();
    if (c_.OneIn(4)) r.on_caller = !r.on_caller;
  }

  Choices& c_;
  const RandomTraceOptions& options_;
};

// Index of `p` in `records`, or -1 if it does not point at one of them.
template <typename T>
int64_t IndexIn(const std::vector<T>& records, const T* p) {
  if (p == nullptr || records.empty()) return -1;
  const T* begin = records.data();
  if (std::less<const T*>()(p, begin) || !std::less<const T*>()(p, begin + records.size())) {
    return -1;
  }
  return p - begin;
}

std::string OpName(const JoinedOp& op) { return "op " + std::to_string(op.submitted->op_id); }

}  // namespace

TraceInput RandomTrace(Choices& choices, const RandomTraceOptions& options) {
  Generator generate(choices, options);
  return choices.OneIn(2) ? generate.Altered() : generate.MadeUp();
}

std::vector<std::string> JoinViolations(const TraceInput& in, const JoinedTrace& joined) {
  std::vector<std::string> broken;
  const auto fail = [&](const std::string& what) { broken.push_back(what); };
  const auto& counts = joined.counts;

  // Ops: one per distinct non-zero id, by id, each the first record of its id.
  std::map<uint64_t, const OpSubmitted*> first_submitted;
  int64_t duplicates = 0;
  for (const OpSubmitted& s : in.ops_submitted) {
    if (s.op_id == 0) continue;
    if (!first_submitted.emplace(s.op_id, &s).second) ++duplicates;
  }
  std::map<uint64_t, const OpIssued*> first_issued;
  for (const OpIssued& i : in.ops_issued) {
    if (!first_issued.emplace(i.op_id, &i).second) ++duplicates;
  }
  int64_t orphans = 0;
  for (const auto& [id, issued] : first_issued) orphans += first_submitted.count(id) == 0;
  if (joined.ops.size() != first_submitted.size()) {
    fail("ops " + std::to_string(joined.ops.size()) + ", distinct ids " +
         std::to_string(first_submitted.size()));
  }
  if (counts.duplicate_op_records != duplicates) fail("duplicate_op_records miscounted");
  if (counts.orphan_ops_issued != orphans) fail("orphan_ops_issued miscounted");
  if (counts.ops != static_cast<int64_t>(joined.ops.size())) fail("counts.ops != ops.size()");
  if (counts.api_records != static_cast<int64_t>(in.api_calls.size())) fail("api_records");
  if (counts.gpu_records != static_cast<int64_t>(in.gpu_activities.size())) fail("gpu_records");

  std::map<uint64_t, std::set<uint32_t>> external_ids;  // op id -> correlation ids
  for (const ExternalCorrelation& ec : in.external_correlations) {
    if (ec.kind == gpuprio::tracer::kExternalCorrelationKindGpuprio) {
      external_ids[ec.external_id].insert(ec.correlation_id);
    }
  }

  std::set<const ApiCall*> client_calls;
  for (const JoinedOp& op : joined.ops) {
    if (op.client.call != nullptr) client_calls.insert(op.client.call);
  }

  std::vector<int> gpu_owners(in.gpu_activities.size(), 0);
  std::set<const ApiCall*> used_calls = client_calls;
  int64_t linked_gpu = 0, linked_ops = 0, on_caller_ops = 0, issued_ops = 0, missing_external = 0,
          missing_driver = 0, by_id = 0, by_containment = 0, synthesized = 0;
  uint64_t previous_id = 0;
  for (size_t n = 0; n < joined.ops.size(); ++n) {
    const JoinedOp& op = joined.ops[n];
    const int64_t s_index = IndexIn(in.ops_submitted, op.submitted);
    if (s_index < 0) {
      fail("an op's submitted record is not an input record");
      continue;
    }
    const OpSubmitted& s = *op.submitted;
    const std::string name = OpName(op);
    if (n > 0 && s.op_id <= previous_id) fail(name + ": ops not by increasing id");
    previous_id = s.op_id;
    auto first = first_submitted.find(s.op_id);
    if (first == first_submitted.end() || first->second != op.submitted) {
      fail(name + ": not the first record of its id");
    }
    auto issued = first_issued.find(s.op_id);
    const OpIssued* expected_issued = issued != first_issued.end() ? issued->second : nullptr;
    if (op.issued != expected_issued) fail(name + ": issued record is not the first of its id");

    // The client span.
    const ClientSpan& span = op.client;
    if (span.tid != s.client_tid) fail(name + ": client span on another thread");
    switch (span.source) {
      case ClientSpan::Source::kCorrelationId:
        ++by_id;
        if (span.call == nullptr || span.call->correlation_id != s.client_correlation_id ||
            s.client_correlation_id == 0) {
          fail(name + ": client span by id without that id");
        }
        break;
      case ClientSpan::Source::kContainment:
        ++by_containment;
        if (span.call == nullptr || span.call->start_ns > s.submit_ns ||
            span.call->end_ns < s.submit_ns) {
          fail(name + ": client span by containment does not contain the submit time");
        }
        break;
      case ClientSpan::Source::kSynthesized:
        ++synthesized;
        if (span.call != nullptr || span.start_ns != s.submit_ns ||
            span.end_ns != std::max(s.submit_ns, s.return_ns)) {
          fail(name + ": synthesized client span is not [submit, max(submit, return)]");
        }
        break;
    }
    if (span.call != nullptr) {
      if (IndexIn(in.api_calls, span.call) < 0)
        fail(name + ": client call not an input record");
      else if (span.call->tid != s.client_tid || span.start_ns != span.call->start_ns ||
               span.end_ns != span.call->end_ns) {
        fail(name + ": client span is not its call");
      }
    }

    // Correlation ids: exactly those the gpuprio-kind external records name for this op.
    const std::set<uint32_t> ids(op.correlation_ids.begin(), op.correlation_ids.end());
    if (ids.size() != op.correlation_ids.size()) fail(name + ": correlation id listed twice");
    auto ext = external_ids.find(s.op_id);
    if (ids != (ext != external_ids.end() ? ext->second : std::set<uint32_t>{})) {
      fail(name + ": correlation ids differ from the external records");
    }

    // The driver call.
    if (op.driver_call != nullptr) {
      if (IndexIn(in.api_calls, op.driver_call) < 0) {
        fail(name + ": driver call not an input record");
      } else if (client_calls.count(op.driver_call) != 0 &&
                 !(s.on_caller && op.driver_call == span.call)) {
        fail(name + ": driver call is another op's client span");
      } else if (!s.on_caller) {
        used_calls.insert(op.driver_call);
        if (op.issued != nullptr && op.driver_call->tid != op.issued->dispatcher_tid) {
          fail(name + ": driver call not on the dispatcher that issued the op");
        }
      } else if (op.issued == nullptr && op.driver_call->tid != s.client_tid) {
        fail(name + ": on-caller op's driver call not on its client thread");
      }
    }

    // GPU work: each activity to one op, by an id the op is linked through, earliest first.
    for (size_t g = 0; g < op.gpu.size(); ++g) {
      const int64_t index = IndexIn(in.gpu_activities, op.gpu[g]);
      if (index < 0) {
        fail(name + ": GPU activity not an input record");
        continue;
      }
      ++gpu_owners[static_cast<size_t>(index)];
      const uint32_t id = op.gpu[g]->correlation_id;
      const bool by_external = ids.count(id) != 0;
      const bool by_driver = op.driver_call != nullptr && op.driver_call->correlation_id == id;
      const bool by_client =
          s.on_caller && op.client.call != nullptr && op.client.call->correlation_id == id;
      if (!by_external && !by_driver && !by_client) {
        fail(name + ": GPU activity linked without a shared correlation id");
      }
      if (g > 0 && op.gpu[g - 1]->start_ns > op.gpu[g]->start_ns) {
        fail(name + ": GPU work not earliest first");
      }
    }
    linked_gpu += static_cast<int64_t>(op.gpu.size());
    linked_ops += !op.gpu.empty();

    // Derived times.
    std::optional<int64_t> issue_begin;
    if (s.on_caller) {
      ++on_caller_ops;
      issue_begin = span.start_ns;
      if (op.queue_delay_ns) fail(name + ": on-caller op has a queueing delay");
    } else {
      if (op.issued != nullptr) {
        ++issued_ops;
        missing_external += op.correlation_ids.empty();
        issue_begin = op.issued->begin_ns;
      } else if (op.driver_call != nullptr) {
        issue_begin = op.driver_call->start_ns;
      }
      missing_driver += op.driver_call == nullptr;
      const std::optional<int64_t> delay =
          issue_begin ? std::optional<int64_t>(ClampedDifference(*issue_begin, s.submit_ns))
                      : std::nullopt;
      if (op.queue_delay_ns != delay) fail(name + ": queue delay is not issue - submit");
    }
    if (op.issue_begin_ns != issue_begin) fail(name + ": wrong issue begin");
    const std::optional<int64_t> to_start =
        issue_begin && !op.gpu.empty()
            ? std::optional<int64_t>(ClampedDifference(op.gpu.front()->start_ns, *issue_begin))
            : std::nullopt;
    if (op.issue_to_start_ns != to_start) fail(name + ": issue-to-start is not start - issue");
  }

  // Linked + unlinked GPU activities: every input record exactly once.
  for (const GpuActivity* gpu : joined.unlinked_gpu) {
    const int64_t index = IndexIn(in.gpu_activities, gpu);
    if (index < 0)
      fail("an unlinked GPU activity is not an input record");
    else
      ++gpu_owners[static_cast<size_t>(index)];
  }
  for (size_t i = 0; i < gpu_owners.size(); ++i) {
    if (gpu_owners[i] != 1) {
      fail("GPU activity " + std::to_string(i) + " appears " + std::to_string(gpu_owners[i]) +
           " times");
    }
  }
  if (linked_gpu + static_cast<int64_t>(joined.unlinked_gpu.size()) !=
      static_cast<int64_t>(in.gpu_activities.size())) {
    fail("linked + unlinked GPU activities != input GPU activities");
  }
  if (counts.gpu_records_linked_to_client != linked_gpu) fail("gpu_records_linked_to_client");
  if (counts.ops_linked_to_gpu != linked_ops) fail("ops_linked_to_gpu");
  if (counts.ops_on_caller != on_caller_ops) fail("ops_on_caller");
  if (counts.ops_issued != issued_ops) fail("ops_issued");
  if (counts.ops_missing_external_correlation != missing_external) {
    fail("ops_missing_external_correlation");
  }
  if (counts.ops_missing_driver_call != missing_driver) fail("ops_missing_driver_call");
  if (counts.client_spans_by_correlation_id != by_id ||
      counts.client_spans_by_containment != by_containment ||
      counts.client_spans_synthesized != synthesized) {
    fail("client span counts");
  }

  // Other API calls: every call that is neither a client span nor a deferred op's driver call.
  std::set<const ApiCall*> others;
  for (size_t i = 0; i < joined.other_api_calls.size(); ++i) {
    const ApiCall* call = joined.other_api_calls[i];
    if (IndexIn(in.api_calls, call) < 0) fail("an other API call is not an input record");
    if (!others.insert(call).second) fail("an other API call listed twice");
    if (used_calls.count(call) != 0) fail("an other API call is also an op's");
    if (i > 0 && joined.other_api_calls[i - 1]->start_ns > call->start_ns) {
      fail("other API calls not by start");
    }
  }
  if (others.size() + used_calls.size() != in.api_calls.size()) {
    fail("other API calls + the ops' calls != input API calls");
  }
  for (size_t i = 1; i < joined.unlinked_gpu.size(); ++i) {
    if (joined.unlinked_gpu[i - 1]->start_ns > joined.unlinked_gpu[i]->start_ns) {
      fail("unlinked GPU activities not by start");
    }
  }
  return broken;
}

std::string JoinDigest(const TraceInput& in, const JoinedTrace& joined) {
  std::ostringstream s;
  const auto opt = [&](const std::optional<int64_t>& v) {
    if (v)
      s << *v;
    else
      s << '-';
  };
  for (const JoinedOp& op : joined.ops) {
    s << "op " << IndexIn(in.ops_submitted, op.submitted) << " issued "
      << IndexIn(in.ops_issued, op.issued) << " client " << static_cast<int>(op.client.source)
      << ':' << IndexIn(in.api_calls, op.client.call) << ':' << op.client.start_ns << ':'
      << op.client.end_ns << " driver " << IndexIn(in.api_calls, op.driver_call) << " ids";
    for (uint32_t id : op.correlation_ids) s << ' ' << id;
    s << " gpu";
    for (const GpuActivity* gpu : op.gpu) s << ' ' << IndexIn(in.gpu_activities, gpu);
    s << " times ";
    opt(op.issue_begin_ns);
    s << ' ';
    opt(op.queue_delay_ns);
    s << ' ';
    opt(op.issue_to_start_ns);
    s << '\n';
  }
  s << "other";
  for (const ApiCall* call : joined.other_api_calls) s << ' ' << IndexIn(in.api_calls, call);
  s << "\nunlinked";
  for (const GpuActivity* gpu : joined.unlinked_gpu) s << ' ' << IndexIn(in.gpu_activities, gpu);
  const auto& c = joined.counts;
  s << "\ncounts " << c.ops << ' ' << c.ops_on_caller << ' ' << c.ops_issued << ' '
    << c.ops_missing_external_correlation << ' ' << c.ops_missing_driver_call << ' '
    << c.ops_linked_to_gpu << ' ' << c.client_spans_by_correlation_id << ' '
    << c.client_spans_by_containment << ' ' << c.client_spans_synthesized << ' '
    << c.duplicate_op_records << ' ' << c.orphan_ops_issued << ' ' << c.gpu_records << ' '
    << c.gpu_records_linked_to_client << ' ' << c.api_records << '\n';
  return s.str();
}

std::vector<std::string> ChromeTraceViolations(const TraceInput& input, const std::string& json) {
  std::vector<std::string> broken;
  const auto fail = [&](const std::string& what) { broken.push_back(what); };
  nlohmann::json trace;
  try {
    trace = nlohmann::json::parse(json);
  } catch (const nlohmann::json::exception& e) {
    fail(std::string("not JSON: ") + e.what());
    return broken;
  }
  if (!trace.contains("traceEvents") || !trace["traceEvents"].is_array()) {
    fail("no traceEvents array");
    return broken;
  }
  using Key = std::tuple<uint64_t, uint64_t, double>;  // pid, tid, ts
  std::map<Key, int> slices;                           // 'X' events at each place
  std::map<Key, int> linked_gpu;                       // GPU slices of an op at each place
  std::map<Key, int> flow_ends_at;                     // 'f' steps at each place
  struct Flow {
    int starts = 0, middles = 0, ends = 0;
  };
  std::map<uint64_t, Flow> flows;
  std::vector<std::pair<Key, uint64_t>> steps;
  int64_t gpu_slices = 0, gpu_slices_linked = 0;
  try {
    for (const nlohmann::json& e : trace["traceEvents"]) {
      const std::string ph = e.at("ph").get<std::string>();
      if (ph == "M") continue;
      const Key key{e.at("pid").get<uint64_t>(), e.value("tid", uint64_t{0}),
                    e.at("ts").get<double>()};
      if (ph == "X") {
        ++slices[key];
        if (e.at("dur").get<double>() < 0) fail("slice with negative dur");
        const std::string cat = e.value("cat", "");
        if (cat == "kernel" || cat == "memcpy" || cat == "memset") {
          ++gpu_slices;
          if (e.at("args").at("op_id").get<uint64_t>() != 0) {
            ++gpu_slices_linked;
            ++linked_gpu[key];
          }
        }
      } else if (ph == "s" || ph == "t" || ph == "f") {
        const uint64_t id = e.at("id").get<uint64_t>();
        Flow& flow = flows[id];
        (ph == "s" ? flow.starts : ph == "t" ? flow.middles : flow.ends) += 1;
        if (ph == "f") ++flow_ends_at[key];
        steps.emplace_back(key, id);
      }
    }
    for (const auto& [id, flow] : flows) {
      if (flow.starts != 1 || flow.ends != 1 || flow.middles > 1) {
        fail("flow " + std::to_string(id) + ": " + std::to_string(flow.starts) + " starts, " +
             std::to_string(flow.middles) + " middle steps, " + std::to_string(flow.ends) +
             " ends");
      }
    }
    for (const auto& [key, id] : steps) {
      if (slices.count(key) == 0) {
        fail("flow " + std::to_string(id) + " has a step on no slice (pid " +
             std::to_string(std::get<0>(key)) + ", tid " + std::to_string(std::get<1>(key)) + ")");
      }
    }
    for (const auto& [key, n] : linked_gpu) {
      auto it = flow_ends_at.find(key);
      if (it == flow_ends_at.end() || it->second < n) {
        fail("a GPU slice of an op is the end of no flow");
      }
    }
    const nlohmann::json& gpuprio = trace.at("otherData").at("gpuprio");
    if (gpuprio.at("gpu_records").get<int64_t>() != gpu_slices ||
        gpu_slices != static_cast<int64_t>(input.gpu_activities.size())) {
      fail("gpu_records " + gpuprio.at("gpu_records").dump() + ", GPU slices " +
           std::to_string(gpu_slices) + ", input " + std::to_string(input.gpu_activities.size()));
    }
    if (gpuprio.at("gpu_records_linked_to_client").get<int64_t>() != gpu_slices_linked) {
      fail("gpu_records_linked_to_client " + gpuprio.at("gpu_records_linked_to_client").dump() +
           ", GPU slices of an op " + std::to_string(gpu_slices_linked));
    }
  } catch (const nlohmann::json::exception& e) {
    fail(std::string("malformed event: ") + e.what());
  }
  return broken;
}

std::vector<std::string> FuzzJoinOnce(Choices& choices) {
  RandomTraceOptions options;
  options.tracer_output_only = choices.OneIn(2);
  const TraceInput input = RandomTrace(choices, options);
  const JoinedTrace joined = gpuprio::tracer::JoinTrace(input);
  std::vector<std::string> broken = JoinViolations(input, joined);
  const TraceInput copy = input;
  if (JoinDigest(copy, gpuprio::tracer::JoinTrace(copy)) != JoinDigest(input, joined)) {
    broken.push_back("joining the same records twice gave two results");
  }
  if (options.tracer_output_only) {
    const std::string json = gpuprio::tracer::ChromeTraceJson(input);
    for (std::string& b : ChromeTraceViolations(input, json)) broken.push_back(std::move(b));
    if (gpuprio::tracer::ChromeTraceJson(copy) != json) {
      broken.push_back("writing the same records twice gave two traces");
    }
  }
  return broken;
}

}  // namespace gpuprio_test
