// The fake driver's record of every call it received and of every op its virtual devices ran,
// plus the "fail calls of X" injection (fakecuda_fail_calls) checked on entry to each exported API.
#ifndef GPUPRIO_TESTS_FAKE_CUDA_CALL_LOG_H_
#define GPUPRIO_TESTS_FAKE_CUDA_CALL_LOG_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "tests/fake_cuda/driver_abi.h"
#include "tests/fake_cuda/fake_cuda_control.h"

namespace fakecuda {

struct Stream;

uint64_t NowNs();
int64_t Gettid();

// `values` as 8-byte words: what an event call (its event handle) or a copy (destination, source,
// size) logs as its parameter bytes, so a test can tell which event or buffers a call named.
std::vector<uint8_t> PointerParams(std::initializer_list<uint64_t> values);

// What an exported function fills in while it runs; appended to the log when it returns.
class CallScope {
 public:
  explicit CallScope(const char* api);
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

  // The result injected with fakecuda_fail_calls for this API and thread, if any (consumed).
  bool injected() const { return injected_; }
  CUresult injected_result() const { return injected_result_; }
  uint64_t order() const { return record_.order; }

  void SetStream(const Stream* stream);  // requires the state lock (reads the stream)
  void SetLaunch(const char* function, const unsigned grid[3], const unsigned block[3],
                 unsigned shared_mem);
  void SetParams(const std::vector<uint8_t>& bytes) { params_ = bytes; }

  // Writes the record with `result` into the log and returns `result`.
  CUresult Finish(CUresult result);

 private:
  // Consumes an injection, takes the log slot and reads the call's delay, under the log lock.
  void Enter(const char* api, uint64_t* delay_ns);

  fakecuda_call_record record_{};
  std::vector<uint8_t> params_;
  bool logged_ = false;  // fakecuda_set_call_logging was on when the call began
  bool injected_ = false;
  CUresult injected_result_ = CUDA_SUCCESS;
};

// Runs `body(CallScope&)` as the exported API `api`: honours injected failures and logs the call.
template <typename Body>
CUresult RunApi(const char* api, Body&& body) {
  CallScope scope(api);
  if (scope.injected()) return scope.Finish(scope.injected_result());
  return scope.Finish(body(scope));
}

void AppendExec(const fakecuda_exec_record& record);  // assigns record.order
void ClearLogs();
void ClearInjections();
// Child side of fork: the logs and their lock are reset to empty.
void ResetLogsAfterFork();
void LockLogsForFork();
void UnlockLogsForFork();

}  // namespace fakecuda

#endif  // GPUPRIO_TESTS_FAKE_CUDA_CALL_LOG_H_
