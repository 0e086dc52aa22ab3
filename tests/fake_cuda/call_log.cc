#include "tests/fake_cuda/call_log.h"

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <deque>

#include "absl/base/const_init.h"
#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "tests/fake_cuda/fake_state.h"

namespace fakecuda {
namespace {

struct LoggedCall {
  fakecuda_call_record record;
  std::vector<uint8_t> params;
};

// Separate from the state lock so logging never waits behind a blocked sync call.
ABSL_CONST_INIT absl::Mutex first_log_mu(absl::kConstInit);
// Replaced only in a forked child (single-threaded there): the parent's waiters stay behind.
absl::Mutex* log_mu_ptr = &first_log_mu;
absl::Mutex& LogMu() { return *log_mu_ptr; }

// An armed fakecuda_fail_calls injection.
struct Injection {
  CUresult result;
  uint64_t skip;       // matching calls still to let through
  uint64_t remaining;  // matching calls still to fail (UINT64_MAX: all)
  int64_t tid;         // only calls from this thread match; 0: any thread
};

struct Logs {
  std::deque<LoggedCall> calls;
  std::deque<fakecuda_exec_record> execs;
  absl::flat_hash_map<std::string, Injection> injections;
  absl::flat_hash_map<std::string, uint64_t> delays_ns;  // fakecuda_set_call_delay_ns
  bool logging = true;
};
// Leaked: the executor threads may still log during exit.
Logs* logs ABSL_GUARDED_BY(LogMu()) = nullptr;

Logs& GetLogs() ABSL_EXCLUSIVE_LOCKS_REQUIRED(LogMu()) {
  if (logs == nullptr) logs = new Logs;
  return *logs;
}

void CopyName(char (&dst)[64], const char* src) {
  std::strncpy(dst, src, sizeof(dst) - 1);
  dst[sizeof(dst) - 1] = '\0';
}

}  // namespace

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

int64_t Gettid() { return static_cast<int64_t>(syscall(SYS_gettid)); }

CallScope::CallScope(const char* api) {
  CopyName(record_.api, api);
  record_.tid = Gettid();
  record_.start_ns = NowNs();
  uint64_t delay_ns = 0;
  Enter(api, &delay_ns);
  // Outside every lock of the fake: other threads, and fork(), go on while this call waits.
  if (delay_ns > 0) {
    const timespec ts{static_cast<time_t>(delay_ns / 1000000000u),
                      static_cast<long>(delay_ns % 1000000000u)};
    nanosleep(&ts, nullptr);
  }
}

std::vector<uint8_t> PointerParams(std::initializer_list<uint64_t> values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(uint64_t));
  size_t offset = 0;
  for (uint64_t v : values) {
    std::memcpy(bytes.data() + offset, &v, sizeof(v));
    offset += sizeof(v);
  }
  return bytes;
}

void CallScope::Enter(const char* api, uint64_t* delay_ns) {
  absl::MutexLock lock(&LogMu());
  Logs& l = GetLogs();
  if (auto delay = l.delays_ns.find(absl::string_view(api)); delay != l.delays_ns.end()) {
    *delay_ns = delay->second;
  }
  auto it = l.injections.find(absl::string_view(api));
  if (it != l.injections.end() && (it->second.tid == 0 || it->second.tid == record_.tid)) {
    Injection& injection = it->second;
    if (injection.skip > 0) {
      --injection.skip;
    } else {
      injected_ = true;
      injected_result_ = injection.result;
      record_.injected = 1;
      if (injection.remaining != UINT64_MAX && --injection.remaining == 0) l.injections.erase(it);
    }
  }
  logged_ = l.logging;
  if (!logged_) return;
  // The slot is taken on entry so that `order` is the arrival order even for blocking calls.
  record_.order = l.calls.size();
  l.calls.push_back(LoggedCall{record_, {}});
}

void CallScope::SetStream(const Stream* stream) {
  if (stream == nullptr) return;
  record_.stream = StreamLogId(stream);
  record_.stream_kind = StreamLogKind(stream);
  record_.stream_priority = stream->priority;
  record_.stream_owner_tid = static_cast<uint64_t>(stream->owner_tid);
}

void CallScope::SetLaunch(const char* function, const unsigned grid[3], const unsigned block[3],
                          unsigned shared_mem) {
  CopyName(record_.function, function);
  for (int i = 0; i < 3; ++i) {
    record_.grid[i] = grid[i];
    record_.block[i] = block[i];
  }
  record_.shared_mem_bytes = shared_mem;
}

CUresult CallScope::Finish(CUresult result) {
  if (!logged_) return result;
  record_.result = result;
  record_.completed = 1;
  record_.param_bytes = static_cast<uint32_t>(params_.size());
  record_.end_ns = NowNs();
  absl::MutexLock lock(&LogMu());
  Logs& l = GetLogs();
  // A reset while the call ran dropped its slot; the call then goes unlogged.
  if (record_.order < l.calls.size() &&
      std::strcmp(l.calls[record_.order].record.api, record_.api) == 0 &&
      l.calls[record_.order].record.start_ns == record_.start_ns) {
    l.calls[record_.order] = LoggedCall{record_, std::move(params_)};
  }
  return result;
}

void AppendExec(const fakecuda_exec_record& record) {
  absl::MutexLock lock(&LogMu());
  Logs& l = GetLogs();
  if (!l.logging) return;
  l.execs.push_back(record);
  l.execs.back().order = l.execs.size() - 1;
}

void ClearLogs() {
  absl::MutexLock lock(&LogMu());
  GetLogs().calls.clear();
  GetLogs().execs.clear();
}

void ClearInjections() {
  absl::MutexLock lock(&LogMu());
  GetLogs().injections.clear();
  GetLogs().delays_ns.clear();
}

void LockLogsForFork() ABSL_NO_THREAD_SAFETY_ANALYSIS { LogMu().Lock(); }
void UnlockLogsForFork() ABSL_NO_THREAD_SAFETY_ANALYSIS { LogMu().Unlock(); }

void ResetLogsAfterFork() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // The old mutex stays locked (prepare handler) and abandoned; the parent's records belong to it.
  logs = new Logs;
  log_mu_ptr = new absl::Mutex;
}

}  // namespace fakecuda

extern "C" {

void fakecuda_fail_next_call(const char* api_name, int result) {
  fakecuda_fail_calls(api_name, result, 1, 1, 0);
}

void fakecuda_fail_calls(const char* api_name, int result, uint64_t nth, uint64_t count,
                         int64_t tid) {
  if (api_name == nullptr || nth == 0) return;
  absl::MutexLock lock(&fakecuda::LogMu());
  if (result == CUDA_SUCCESS) {
    fakecuda::GetLogs().injections.erase(absl::string_view(api_name));
    return;
  }
  fakecuda::GetLogs().injections[api_name] = fakecuda::Injection{
      static_cast<CUresult>(result), nth - 1, count == 0 ? UINT64_MAX : count, tid};
}

void fakecuda_set_call_delay_ns(const char* api_name, uint64_t ns) {
  if (api_name == nullptr) return;
  absl::MutexLock lock(&fakecuda::LogMu());
  if (ns == 0) {
    fakecuda::GetLogs().delays_ns.erase(absl::string_view(api_name));
  } else {
    fakecuda::GetLogs().delays_ns[api_name] = ns;
  }
}

void fakecuda_set_call_logging(int enabled) {
  absl::MutexLock lock(&fakecuda::LogMu());
  fakecuda::GetLogs().logging = enabled != 0;
}

uint64_t fakecuda_call_count(void) {
  absl::MutexLock lock(&fakecuda::LogMu());
  return fakecuda::GetLogs().calls.size();
}

int fakecuda_get_call(uint64_t index, fakecuda_call_record* out) {
  absl::MutexLock lock(&fakecuda::LogMu());
  const auto& calls = fakecuda::GetLogs().calls;
  if (out == nullptr || index >= calls.size()) return -1;
  *out = calls[index].record;
  return 0;
}

uint64_t fakecuda_get_call_params(uint64_t index, void* buffer, uint64_t capacity) {
  absl::MutexLock lock(&fakecuda::LogMu());
  const auto& calls = fakecuda::GetLogs().calls;
  if (index >= calls.size()) return 0;
  const std::vector<uint8_t>& p = calls[index].params;
  if (buffer != nullptr && !p.empty()) {
    std::memcpy(buffer, p.data(), capacity < p.size() ? capacity : p.size());
  }
  return p.size();
}

uint64_t fakecuda_count_calls(const char* api_name) {
  absl::MutexLock lock(&fakecuda::LogMu());
  uint64_t n = 0;
  for (const auto& c : fakecuda::GetLogs().calls) {
    if (std::strcmp(c.record.api, api_name) == 0) ++n;
  }
  return n;
}

uint64_t fakecuda_exec_count(void) {
  absl::MutexLock lock(&fakecuda::LogMu());
  return fakecuda::GetLogs().execs.size();
}

int fakecuda_get_exec(uint64_t index, fakecuda_exec_record* out) {
  absl::MutexLock lock(&fakecuda::LogMu());
  const auto& execs = fakecuda::GetLogs().execs;
  if (out == nullptr || index >= execs.size()) return -1;
  *out = execs[index];
  return 0;
}

}  // extern "C"
