// JoinTrace: index the records once, then link in order of confidence: client spans, links by
// external correlation id, then links guessed from time for what is still unlinked.
#include "cupti_tracer/trace_join.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"

namespace gpuprio::tracer {
namespace {

// Backward scans over a thread's calls stop after this many records: calls on one thread nest
// a few levels deep at most, so a longer scan only costs time on a huge trace.
constexpr int kMaxScan = 256;

// a - b, clamped to int64_t: timestamps are data (zero, garbage, any order), and their plain
// difference can overflow.
int64_t ClampedDifference(int64_t a, int64_t b) {
  int64_t difference;
  if (!__builtin_sub_overflow(a, b, &difference)) return difference;
  return b < 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}

bool Overlaps(const ApiCall& call, int64_t begin_ns, int64_t end_ns) {
  return call.start_ns <= end_ns && call.end_ns >= begin_ns;
}

class Joiner {
 public:
  explicit Joiner(const TraceInput& input) : input_(input) {}

  JoinedTrace Run() {
    Index();
    for (JoinedOp& op : result_.ops) FindClientSpan(op);
    for (JoinedOp& op : result_.ops) LinkByExternalCorrelation(op);
    for (JoinedOp& op : result_.ops) {
      if (!op.gpu.empty()) continue;
      if (op.submitted->on_caller) {
        LinkOnCallerOp(op);
      } else {
        LinkIssuedOpByTime(op);
      }
    }
    for (JoinedOp& op : result_.ops) Finish(op);
    CollectUnlinked();
    return std::move(result_);
  }

 private:
  void Index() {
    JoinCounts& counts = result_.counts;
    counts.api_records = static_cast<int64_t>(input_.api_calls.size());
    counts.gpu_records = static_cast<int64_t>(input_.gpu_activities.size());

    absl::flat_hash_map<uint64_t, const OpSubmitted*> submitted;
    for (const OpSubmitted& op : input_.ops_submitted) {
      if (op.op_id == 0) continue;  // 0: an op that was not traced
      if (!submitted.emplace(op.op_id, &op).second) ++counts.duplicate_op_records;
    }
    absl::flat_hash_map<uint64_t, const OpIssued*> issued;
    for (const OpIssued& op : input_.ops_issued) {
      if (!issued.emplace(op.op_id, &op).second) ++counts.duplicate_op_records;
    }
    for (const auto& [op_id, op] : issued) {
      if (!submitted.contains(op_id)) ++counts.orphan_ops_issued;
    }
    result_.ops.reserve(submitted.size());
    for (const auto& [op_id, op] : submitted) {
      JoinedOp joined;
      joined.submitted = op;
      if (auto it = issued.find(op_id); it != issued.end()) joined.issued = it->second;
      result_.ops.push_back(std::move(joined));
    }
    std::sort(result_.ops.begin(), result_.ops.end(), [](const JoinedOp& a, const JoinedOp& b) {
      return a.submitted->op_id < b.submitted->op_id;
    });

    for (const ExternalCorrelation& ec : input_.external_correlations) {
      if (ec.kind != kExternalCorrelationKindGpuprio) continue;  // Kineto's CUSTOM0/1, OpenACC
      std::vector<uint32_t>& ids = correlations_by_op_[ec.external_id];
      if (std::find(ids.begin(), ids.end(), ec.correlation_id) == ids.end()) {
        ids.push_back(ec.correlation_id);
      }
    }
    for (const ApiCall& call : input_.api_calls) {
      api_by_correlation_[call.correlation_id].push_back(&call);
      api_by_tid_[call.tid].push_back(&call);
    }
    // By start; at equal starts the longer (outer) call first, so later entries are inner.
    for (auto& [tid, calls] : api_by_tid_) {
      std::sort(calls.begin(), calls.end(), [](const ApiCall* a, const ApiCall* b) {
        if (a->start_ns != b->start_ns) return a->start_ns < b->start_ns;
        return a->end_ns > b->end_ns;
      });
    }
    for (size_t i = 0; i < input_.gpu_activities.size(); ++i) {
      gpu_by_correlation_[input_.gpu_activities[i].correlation_id].push_back(i);
    }
    gpu_claimed_.assign(input_.gpu_activities.size(), false);
  }

  void FindClientSpan(JoinedOp& op) {
    const OpSubmitted& s = *op.submitted;
    ClientSpan& span = op.client;
    span.tid = s.client_tid;
    const ApiCall* call = nullptr;
    if (s.client_correlation_id != 0) {
      // cudart's launch yields a RUNTIME and a DRIVER record; the runtime one is what the
      // application called. Only the client's own thread counts: ids may collide elsewhere.
      call = Preferred(api_by_correlation_, s.client_correlation_id, s.client_tid);
      if (call != nullptr) span.source = ClientSpan::Source::kCorrelationId;
    }
    if (call == nullptr) {
      call = InnermostContaining(s.client_tid, s.submit_ns);
      if (call != nullptr) span.source = ClientSpan::Source::kContainment;
    }
    if (call != nullptr) {
      span.call = call;
      span.start_ns = call->start_ns;
      span.end_ns = call->end_ns;
      client_span_calls_.insert(call);
    } else {
      span.source = ClientSpan::Source::kSynthesized;
      span.start_ns = s.submit_ns;
      span.end_ns = std::max(s.submit_ns, s.return_ns);
    }
    switch (span.source) {
      case ClientSpan::Source::kCorrelationId: ++result_.counts.client_spans_by_correlation_id;
        break;
      case ClientSpan::Source::kContainment: ++result_.counts.client_spans_by_containment; break;
      case ClientSpan::Source::kSynthesized: ++result_.counts.client_spans_synthesized; break;
    }
  }

  // The record with `correlation_id` on `tid`, the RUNTIME one if there are both.
  static const ApiCall* Preferred(
      const absl::flat_hash_map<uint32_t, std::vector<const ApiCall*>>& by_correlation,
      uint32_t correlation_id, uint32_t tid) {
    auto it = by_correlation.find(correlation_id);
    if (it == by_correlation.end()) return nullptr;
    const ApiCall* best = nullptr;
    for (const ApiCall* call : it->second) {
      if (call->tid != tid) continue;
      if (best == nullptr ||
          (call->kind == ApiCall::Kind::kRuntime && best->kind != ApiCall::Kind::kRuntime)) {
        best = call;
      }
    }
    return best;
  }

  // The innermost RUNTIME record on `tid` containing `ts`, else the innermost DRIVER record.
  const ApiCall* InnermostContaining(uint32_t tid, int64_t ts) const {
    auto it = api_by_tid_.find(tid);
    if (it == api_by_tid_.end()) return nullptr;
    const std::vector<const ApiCall*>& calls = it->second;
    auto upper = std::upper_bound(calls.begin(), calls.end(), ts,
                                  [](int64_t t, const ApiCall* c) { return t < c->start_ns; });
    const ApiCall* driver = nullptr;
    int scanned = 0;
    for (auto rit = std::make_reverse_iterator(upper); rit != calls.rend() && scanned < kMaxScan;
         ++rit, ++scanned) {
      const ApiCall* call = *rit;
      if (call->end_ns < ts) continue;
      if (call->kind == ApiCall::Kind::kRuntime) return call;
      if (driver == nullptr) driver = call;
    }
    return driver;
  }

  // Claims the unclaimed GPU activities of `correlation_id` for `op`; true if any.
  bool ClaimGpu(JoinedOp& op, uint32_t correlation_id) {
    auto it = gpu_by_correlation_.find(correlation_id);
    if (it == gpu_by_correlation_.end()) return false;
    bool any = false;
    for (size_t index : it->second) {
      if (gpu_claimed_[index]) continue;
      gpu_claimed_[index] = true;
      op.gpu.push_back(&input_.gpu_activities[index]);
      any = true;
    }
    return any;
  }

  bool HasUnclaimedGpu(uint32_t correlation_id) const {
    auto it = gpu_by_correlation_.find(correlation_id);
    if (it == gpu_by_correlation_.end()) return false;
    for (size_t index : it->second) {
      if (!gpu_claimed_[index]) return true;
    }
    return false;
  }

  // May `call` be `op`'s driver call? Not if it is some op's client span (a runtime call on the
  // client thread), unless it is this on-caller op's own span: then the real call was the span.
  bool MayBeDriverCall(const JoinedOp& op, const ApiCall* call) const {
    if (!client_span_calls_.contains(call)) return true;
    return op.submitted->on_caller && op.client.call == call;
  }

  void LinkByExternalCorrelation(JoinedOp& op) {
    auto it = correlations_by_op_.find(op.submitted->op_id);
    if (it == correlations_by_op_.end()) return;
    op.correlation_ids = it->second;
    // The thread the real call ran on, when known: a record elsewhere is not this op's call.
    const bool tid_known = op.issued != nullptr || op.submitted->on_caller;
    const uint32_t tid =
        op.issued != nullptr ? op.issued->dispatcher_tid : op.submitted->client_tid;
    int best_score = -1;
    for (uint32_t correlation_id : op.correlation_ids) {
      auto calls = api_by_correlation_.find(correlation_id);
      if (calls != api_by_correlation_.end()) {
        for (const ApiCall* call : calls->second) {
          if (!MayBeDriverCall(op, call) || (tid_known && call->tid != tid)) continue;
          // Ids are unique per process in CUPTI, but a bad record must not win over a good one.
          int score = (call->kind == ApiCall::Kind::kDriver ? 2 : 0) +
                      (op.issued != nullptr &&
                               Overlaps(*call, op.issued->begin_ns, op.issued->end_ns)
                           ? 1
                           : 0);
          if (score > best_score) {
            best_score = score;
            op.driver_call = call;
          }
        }
      }
      ClaimGpu(op, correlation_id);
    }
  }

  // The DRIVER record on `tid` overlapping [begin, end] that has unclaimed GPU work, the one
  // overlapping most if several.
  const ApiCall* DriverCallWithGpuWork(const JoinedOp& op, uint32_t tid, int64_t begin_ns,
                                       int64_t end_ns) const {
    auto it = api_by_tid_.find(tid);
    if (it == api_by_tid_.end()) return nullptr;
    const std::vector<const ApiCall*>& calls = it->second;
    auto upper = std::upper_bound(calls.begin(), calls.end(), end_ns,
                                  [](int64_t t, const ApiCall* c) { return t < c->start_ns; });
    const ApiCall* best = nullptr;
    int64_t best_overlap = -1;
    int scanned = 0;
    for (auto rit = std::make_reverse_iterator(upper); rit != calls.rend() && scanned < kMaxScan;
         ++rit, ++scanned) {
      const ApiCall* call = *rit;
      if (call->kind != ApiCall::Kind::kDriver || call->end_ns < begin_ns) continue;
      if (!MayBeDriverCall(op, call) || !HasUnclaimedGpu(call->correlation_id)) continue;
      const int64_t overlap =
          ClampedDifference(std::min(call->end_ns, end_ns), std::max(call->start_ns, begin_ns));
      if (overlap > best_overlap) {
        best_overlap = overlap;
        best = call;
      }
    }
    return best;
  }

  // An on-caller op's real call ran on the client thread, without an external id: its GPU work
  // carries the client's own correlation id, or that of the driver call it made.
  void LinkOnCallerOp(JoinedOp& op) {
    const OpSubmitted& s = *op.submitted;
    if (op.client.call != nullptr && ClaimGpu(op, op.client.call->correlation_id)) {
      if (op.client.call->kind == ApiCall::Kind::kDriver) op.driver_call = op.client.call;
      return;
    }
    const ApiCall* call = DriverCallWithGpuWork(op, s.client_tid, s.submit_ns,
                                                std::max(s.submit_ns, s.return_ns));
    if (call == nullptr) return;
    op.driver_call = call;
    ClaimGpu(op, call->correlation_id);
  }

  // No external correlation reached GPU work (the record was lost): the real call is the driver
  // record on the dispatcher thread inside the issue window.
  void LinkIssuedOpByTime(JoinedOp& op) {
    if (op.issued == nullptr) return;
    if (op.driver_call != nullptr) {
      ClaimGpu(op, op.driver_call->correlation_id);  // colliding ids: the id linked no work
      return;
    }
    const ApiCall* call =
        DriverCallWithGpuWork(op, op.issued->dispatcher_tid, op.issued->begin_ns,
                              op.issued->end_ns);
    if (call == nullptr) return;
    op.driver_call = call;
    ClaimGpu(op, call->correlation_id);
  }

  void Finish(JoinedOp& op) {
    JoinCounts& counts = result_.counts;
    const OpSubmitted& s = *op.submitted;
    ++counts.ops;
    std::sort(op.gpu.begin(), op.gpu.end(), [](const GpuActivity* a, const GpuActivity* b) {
      return a->start_ns < b->start_ns;
    });
    if (s.on_caller) {
      ++counts.ops_on_caller;
      op.issue_begin_ns = op.client.start_ns;
    } else {
      if (op.issued != nullptr) {
        ++counts.ops_issued;
        if (op.correlation_ids.empty()) ++counts.ops_missing_external_correlation;
        op.issue_begin_ns = op.issued->begin_ns;
      } else if (op.driver_call != nullptr) {
        op.issue_begin_ns = op.driver_call->start_ns;
      }
      if (op.driver_call == nullptr) ++counts.ops_missing_driver_call;
      if (op.issue_begin_ns) op.queue_delay_ns = ClampedDifference(*op.issue_begin_ns, s.submit_ns);
    }
    if (!op.gpu.empty()) {
      ++counts.ops_linked_to_gpu;
      counts.gpu_records_linked_to_client += static_cast<int64_t>(op.gpu.size());
      if (op.issue_begin_ns) {
        op.issue_to_start_ns = ClampedDifference(op.gpu.front()->start_ns, *op.issue_begin_ns);
      }
    }
  }

  void CollectUnlinked() {
    absl::flat_hash_set<const ApiCall*> used = client_span_calls_;
    for (const JoinedOp& op : result_.ops) {
      if (op.driver_call != nullptr && !op.submitted->on_caller) used.insert(op.driver_call);
    }
    for (const ApiCall& call : input_.api_calls) {
      if (!used.contains(&call)) result_.other_api_calls.push_back(&call);
    }
    for (size_t i = 0; i < input_.gpu_activities.size(); ++i) {
      if (!gpu_claimed_[i]) result_.unlinked_gpu.push_back(&input_.gpu_activities[i]);
    }
    std::stable_sort(result_.other_api_calls.begin(), result_.other_api_calls.end(),
                     [](const ApiCall* a, const ApiCall* b) { return a->start_ns < b->start_ns; });
    std::stable_sort(result_.unlinked_gpu.begin(), result_.unlinked_gpu.end(),
                     [](const GpuActivity* a, const GpuActivity* b) {
                       return a->start_ns < b->start_ns;
                     });
  }

  const TraceInput& input_;
  JoinedTrace result_;
  absl::flat_hash_map<uint64_t, std::vector<uint32_t>> correlations_by_op_;
  absl::flat_hash_map<uint32_t, std::vector<const ApiCall*>> api_by_correlation_;
  absl::flat_hash_map<uint32_t, std::vector<const ApiCall*>> api_by_tid_;
  absl::flat_hash_map<uint32_t, std::vector<size_t>> gpu_by_correlation_;
  std::vector<bool> gpu_claimed_;  // by index in input_.gpu_activities
  absl::flat_hash_set<const ApiCall*> client_span_calls_;
};

}  // namespace

JoinedTrace JoinTrace(const TraceInput& input) { return Joiner(input).Run(); }

}  // namespace gpuprio::tracer
