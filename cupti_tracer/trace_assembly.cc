#include "cupti_tracer/trace_assembly.h"

#include <algorithm>
#include <fstream>

#include "absl/container/btree_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gpuprio::tracer {
namespace {

constexpr int64_t kBudgetBit = int64_t{1} << 32;

}  // namespace

int64_t QueueDepthCounterKey(int device, int priority) {
  return (static_cast<int64_t>(device) << 33) | static_cast<uint32_t>(priority);
}

int64_t BudgetCounterKey(int device) { return (static_cast<int64_t>(device) << 33) | kBudgetBit; }

std::pair<std::string, std::string> CounterNameAndSeries(int64_t key) {
  const int device = static_cast<int>(key >> 33);
  if (key & kBudgetBit) return {absl::StrCat("budget in use GPU ", device), "us"};
  const int priority = static_cast<int32_t>(static_cast<uint32_t>(key & 0xffffffff));
  return {absl::StrCat("queue depth GPU ", device), absl::StrCat("p=", priority)};
}

void AppendThreadEvents(const EventRegistry& events, TraceInput* out) {
  events.ForEachLog([out](const ThreadEventLog& log) {
    log.submits().ForEach([&](const SubmitRecord& r) {
      OpSubmitted s;
      s.op_id = r.op_id;
      s.client_tid = log.tid();
      s.api = r.api != nullptr ? r.api : "";
      s.priority = r.priority;
      s.stream = r.stream;
      s.submit_ns = r.submit_ns;
      s.return_ns = r.return_ns;
      s.client_correlation_id = r.client_correlation_id;
      s.on_caller = r.on_caller;
      out->ops_submitted.push_back(std::move(s));
    });
    log.issues().ForEach([&](const IssueRecord& r) {
      out->ops_issued.push_back(OpIssued{r.op_id, log.tid(), r.begin_ns, r.end_ns, r.result});
    });
  });
}

void AppendCounters(const std::vector<CounterThrottle::Sample>& samples, TraceInput* out) {
  absl::flat_hash_map<int64_t, std::pair<std::string, std::string>> names;
  for (const CounterThrottle::Sample& s : samples) {
    auto [it, inserted] = names.try_emplace(s.key);
    if (inserted) it->second = CounterNameAndSeries(s.key);
    out->counters.push_back(CounterSample{it->second.first, it->second.second, s.ts_ns, s.value});
  }
}

std::string ThreadNameFromProc(uint32_t tid) {
  std::ifstream comm(absl::StrFormat("/proc/self/task/%u/comm", tid));
  std::string name;
  if (!comm || !std::getline(comm, name)) return "";
  return name;
}

void AddThreadNames(const absl::flat_hash_map<uint32_t, std::string>& fixed,
                    std::string (*lookup)(uint32_t), TraceInput* out) {
  absl::btree_set<uint32_t> tids;
  for (const auto& e : out->api_calls) tids.insert(e.tid);
  for (const auto& e : out->overheads) tids.insert(e.tid);
  for (const auto& e : out->ops_submitted) tids.insert(e.client_tid);
  for (const auto& e : out->ops_issued) tids.insert(e.dispatcher_tid);
  for (const auto& [tid, name] : fixed) tids.insert(tid);
  tids.erase(0);
  for (uint32_t tid : tids) {
    if (auto it = fixed.find(tid); it != fixed.end()) {
      out->thread_names.push_back(ThreadName{tid, it->second});
      continue;
    }
    std::string name = lookup != nullptr ? lookup(tid) : std::string();
    if (!name.empty()) out->thread_names.push_back(ThreadName{tid, std::move(name)});
  }
}

}  // namespace gpuprio::tracer
