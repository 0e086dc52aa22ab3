// C control and query API of the fake libcuda.so.1 (tests/fake_cuda). Every name is a plain C
// symbol exported by the fake, so a test may call it directly or through dlsym on the library.
//
// Contents:
//   fakecuda_reset                 clear logs, injected errors and kernel durations
//   fakecuda_set_kernel_duration_ns, fakecuda_set_device_paused, fakecuda_wait_idle
//   fakecuda_fail_kernel, fakecuda_fail_next_call, fakecuda_fail_calls   error injection
//   fakecuda_call_*                the log of every driver call received (in arrival order)
//   fakecuda_set_call_logging      turns both logs off (long runs) and on
//   fakecuda_exec_*                what the virtual device executed (in execution order)
#ifndef GPUPRIO_TESTS_FAKE_CUDA_FAKE_CUDA_CONTROL_H_
#define GPUPRIO_TESTS_FAKE_CUDA_FAKE_CUDA_CONTROL_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Kinds of stream a call or an execution resolved to.
enum {
  FAKECUDA_STREAM_NONE = 0,        // the call names no stream
  FAKECUDA_STREAM_USER = 1,        // created with cuStreamCreate*: `stream` is its CUstream
  FAKECUDA_STREAM_LEGACY = 2,      // the context's legacy NULL stream
  FAKECUDA_STREAM_PER_THREAD = 3,  // a thread's per-thread default stream
};

// One driver call as received. `stream` is the resolved stream's handle (for the legacy and
// per-thread streams an internal handle unique per context and thread, never 0/1/2).
typedef struct fakecuda_call_record {
  uint64_t order;         // global arrival order == index in the log
  char api[64];           // exported name as called, e.g. "cuLaunchKernel_ptsz"
  int64_t tid;            // gettid() of the calling thread
  uint64_t stream;        // resolved stream, 0 if none
  int32_t stream_kind;    // FAKECUDA_STREAM_*
  int32_t stream_priority;
  uint64_t stream_owner_tid;  // thread owning a per-thread stream, else 0
  char function[64];      // kernel name for launches, "" otherwise
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t shared_mem_bytes;
  uint32_t param_bytes;   // size of the parameter bytes (fakecuda_get_call_params)
  int32_t result;         // CUresult returned (valid once completed != 0)
  int32_t completed;      // 0 while the call is still running (a blocked sync)
  int32_t injected;       // 1: `result` was injected (fakecuda_fail_calls); the call did nothing
  uint64_t start_ns;      // CLOCK_MONOTONIC at entry
  uint64_t end_ns;        // CLOCK_MONOTONIC at return
} fakecuda_call_record;

// One unit of stream work executed by a virtual device.
typedef struct fakecuda_exec_record {
  uint64_t order;          // execution order == index in the log
  uint64_t call_order;     // order of the call that enqueued it (a graph launch for replays)
  char what[64];           // kernel name, or "memcpy", "memset", "event_record", "host_func", ...
  uint64_t stream;         // as in fakecuda_call_record
  int32_t stream_kind;
  int32_t priority;        // effective priority it was scheduled with (lower = higher)
  int32_t device;
  int32_t result;          // CUresult it completed with (fakecuda_fail_kernel)
  uint64_t start_ns;
  uint64_t end_ns;
  int32_t sm_count;        // SMs the op's context may use: fewer than the device's in a green one
  int32_t green;           // 1: it ran on a stream of a green context
} fakecuda_exec_record;

// Clears the call and execution logs, injected errors, per-kernel durations and pauses.
// Handles (contexts, streams, ...) stay valid; waits until the devices are idle first.
void fakecuda_reset(void);

// Execution time of a kernel on the virtual device (default 2000 ns; sleep_ns uses its parameter).
void fakecuda_set_kernel_duration_ns(const char* kernel_name, uint64_t ns);

// While paused, a device starts no new work (what is queued stays queued): lets a test queue
// work on several streams and then observe the executor's choice.
void fakecuda_set_device_paused(int device, int paused);

// Blocks until every device has no queued or running work (paused devices are not waited for).
void fakecuda_wait_idle(void);

// Every later execution of `kernel_name` fails with `result` (a CUresult); the stream's next
// cuStreamSynchronize/cuStreamQuery and the context's next cuCtxSynchronize report it once.
// result 0 (CUDA_SUCCESS) removes the injection.
void fakecuda_fail_kernel(const char* kernel_name, int result);

// The next call of the exported API `api_name` (exact name, e.g. "cuMemcpyHtoD_v2") returns
// `result` at once without doing anything. Same as fakecuda_fail_calls(api_name, result, 1, 1, 0).
void fakecuda_fail_next_call(const char* api_name, int result);

// Fails calls of the exported API `api_name` (the name of the function that was called, however
// it was found: cuGetProcAddress hands out the same functions). A call matches when `tid` is 0 or
// equals the calling thread's gettid() (e.g. only a scheduler's dispatcher thread, found from the
// tid of a call it made). From the `nth` matching call on (1: the next one), `count` matching
// calls (0: all later ones) return `result` at once without doing anything; they are logged with
// `injected` set. Replaces any injection armed for the same API; result 0 (CUDA_SUCCESS) removes
// it, and fakecuda_reset removes them all.
void fakecuda_fail_calls(const char* api_name, int result, uint64_t nth, uint64_t count,
                         int64_t tid);

// Every later call of the exported API `api_name` first sleeps `ns`, outside every lock of the
// fake (other threads, and fork(), go on meanwhile): widens a race window on purpose. 0 removes
// the delay; fakecuda_reset removes them all, and a forked child starts with none.
void fakecuda_set_call_delay_ns(const char* api_name, uint64_t ns);

// Green contexts (cuDeviceGetDevResource, cuDevSmResourceSplitByCount, cuGreenCtxCreate, ...) are
// supported by default, as on an H100 with CUDA 12.4+ (132 SMs, split in groups of 8). With 0,
// cuDeviceGetDevResource fails with CUDA_ERROR_NOT_SUPPORTED, as an older GPU's driver does.
void fakecuda_set_green_contexts(int enabled);

// On by default. While off, calls and executions are not logged (fakecuda_call_* and
// fakecuda_exec_* see nothing new), so a long run's memory does not grow with the log; injections
// still apply.
void fakecuda_set_call_logging(int enabled);

uint64_t fakecuda_call_count(void);
// Copies record `index` into *out; returns 0, or -1 if index is out of range.
int fakecuda_get_call(uint64_t index, fakecuda_call_record* out);
// Copies up to `capacity` parameter bytes of call `index` (kernel parameters as they were at
// call time, laid out as the kernel's parameter space; for event records and waits the event
// handle, for copies destination, source and size, as 8-byte words); returns the full size.
uint64_t fakecuda_get_call_params(uint64_t index, void* buffer, uint64_t capacity);
// Number of logged calls whose api equals `api_name`.
uint64_t fakecuda_count_calls(const char* api_name);

uint64_t fakecuda_exec_count(void);
int fakecuda_get_exec(uint64_t index, fakecuda_exec_record* out);

// CUDA_MPS_CLIENT_PRIORITY as the process's first successful cuInit found it: copied into `out`
// (NUL-terminated, truncated to `capacity`); returns 1, or 0 when it was unset or cuInit has not
// run.
int fakecuda_mps_client_priority_at_init(char* out, uint64_t capacity);

// dlsym(dlopen("libcuda.so.1", RTLD_NOLOAD), name) called from inside the fake driver.
void* fakecuda_self_dlsym(const char* name);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // GPUPRIO_TESTS_FAKE_CUDA_FAKE_CUDA_CONTROL_H_
