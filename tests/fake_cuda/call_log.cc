#include "tests/fake_cuda/call_log.h"

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <deque>

#include "absl/base/const_init.h"
#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
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

struct Logs {
  std::deque<LoggedCall> calls;
  std::deque<fakecuda_exec_record> execs;
  absl::flat_hash_map<std::string, CUresult> fail_next;
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
  absl::MutexLock lock(&LogMu());
  Logs& l = GetLogs();
  auto it = l.fail_next.find(api);
  if (it != l.fail_next.end()) {
    injected_ = true;
    injected_result_ = it->second;
    l.fail_next.erase(it);
  }
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
  GetLogs().fail_next.clear();
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
  absl::MutexLock lock(&fakecuda::LogMu());
  fakecuda::GetLogs().fail_next[api_name] = static_cast<CUresult>(result);
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
