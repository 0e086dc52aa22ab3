// The fake driver's objects (contexts, streams, events, modules, graphs, memory) and the one
// lock that guards them all. It is a fake: one lock keeps every invariant easy to see.
//
// Handles given to the application are pointers to these objects; every handle is registered
// with its kind, so a stale or foreign handle yields CUDA_ERROR_INVALID_HANDLE instead of a crash.
#ifndef GPUPRIO_TESTS_FAKE_CUDA_FAKE_STATE_H_
#define GPUPRIO_TESTS_FAKE_CUDA_FAKE_STATE_H_

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "tests/fake_cuda/builtin_kernels.h"
#include "tests/fake_cuda/driver_abi.h"
#include "tests/fake_cuda/sm_resource.h"  // kDeviceSms, kSmGroup

namespace fakecuda {

// Guards everything below. Never held while an op's body runs or while logging. A forked child
// gets a fresh mutex (threads of the parent may be queued on the old one).
absl::Mutex& Mu();

enum class Kind : uint8_t { kContext, kStream, kEvent, kModule, kFunction, kLibrary, kKernel,
                            kGraph, kGraphExec, kGreenContext, kResourceDesc };

enum class StreamRole : uint8_t { kUser, kLegacy, kPerThread };

struct Context;
struct Stream;

// One unit of stream work. Copies of what it needs live in `body`'s captures.
struct Op {
  uint64_t seq = 0;          // global submission order
  uint64_t call_order = 0;   // the call that enqueued it
  std::string what;          // kernel name or op kind
  const BuiltinKernel* kernel = nullptr;
  int64_t sleep_ns = -1;     // >= 0 overrides the kernel's configured duration
  int priority = 0;
  bool has_priority = false;  // set by a launch attribute; otherwise the stream's priority
  Stream* stream = nullptr;
  std::vector<std::shared_ptr<Op>> deps;  // must be done before this op may start
  std::function<bool()> ready;            // extra readiness test (stream wait value), may be empty
  std::function<CUresult()> body;         // runs on the executor, without the lock
  bool running = false;
  bool done = false;
  uint64_t end_ns = 0;
};
using OpPtr = std::shared_ptr<Op>;

// What a captured op keeps: enough to make a fresh Op at each graph launch.
struct OpTemplate {
  std::string what;
  const BuiltinKernel* kernel = nullptr;
  int64_t sleep_ns = -1;
  std::function<bool()> ready;
  std::function<CUresult()> body;
};

struct Stream {
  uint64_t id = 0;
  Context* ctx = nullptr;
  unsigned flags = 0;
  int priority = 0;
  StreamRole role = StreamRole::kUser;
  pid_t owner_tid = 0;
  std::deque<OpPtr> queue;      // queued and running ops, head first
  OpPtr last;                   // last op enqueued (may be done)
  CUresult pending_error = CUDA_SUCCESS;
  struct Graph* capture = nullptr;  // non-null while capturing
  uint64_t capture_id = 0;
};

struct Context {
  int device = 0;
  unsigned flags = 0;
  bool primary = false;
  int primary_refs = 0;
  Stream* legacy = nullptr;
  absl::flat_hash_map<pid_t, Stream*> per_thread;
  std::vector<Stream*> streams;  // every stream of the context, legacy and per-thread included
  CUresult pending_error = CUDA_SUCCESS;
  // A green context's: the SMs its work may use (kDeviceSms for an ordinary context).
  unsigned sm_count = kDeviceSms;
  bool green = false;
  struct GreenContext* green_handle = nullptr;
};

// cuGreenCtxCreate's handle; its work runs in `ctx` (what cuCtxFromGreenCtx returns).
struct GreenContext { Context* ctx = nullptr; };
struct ResourceDesc { unsigned sm_count = 0; };

struct Event {
  Context* ctx = nullptr;
  unsigned flags = 0;
  OpPtr last_record;
};

// A module belongs to the context it was loaded in: its functions launch only on streams of that
// context's device (CUDA_ERROR_INVALID_HANDLE elsewhere, as on the real driver).
struct Module {
  Context* ctx = nullptr;
  std::vector<struct Function*> functions;
};
// The most dynamic shared memory a launch may use until cuFuncSetAttribute /
// cuKernelSetAttribute raises it (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES); a launch above
// it fails with CUDA_ERROR_INVALID_VALUE, as on a GPU.
inline constexpr int kDefaultMaxDynamicSharedBytes = 49152;
struct Function {
  const BuiltinKernel* kernel = nullptr;
  Module* module = nullptr;
  int max_dynamic_shared = kDefaultMaxDynamicSharedBytes;
};
// A library is context-independent: its kernels (CUkernel) launch on any device. The CUfunction
// cuKernelGetFunction returns is the kernel's in the current context, from a module the library
// loads there on first use.
struct Library {
  std::vector<struct Kernel*> kernels;
  absl::flat_hash_map<Context*, Module*> modules;
};
struct Kernel {
  const BuiltinKernel* kernel = nullptr;
  Library* library = nullptr;
  int max_dynamic_shared = kDefaultMaxDynamicSharedBytes;
};
struct Graph { std::vector<OpTemplate> ops; };
struct GraphExec { std::vector<OpTemplate> ops; };

enum class MemKind : uint8_t { kDevice, kPinnedHost, kRegisteredHost };
struct Allocation {
  size_t size;
  MemKind kind;
  int device = 0;  // the current context's device when it was allocated or registered
};

struct Device {
  bool executor_started = false;
  bool paused = false;
  uint64_t busy = 0;            // queued + running ops
  std::vector<Stream*> streams;
};

struct State {
  bool initialized = false;
  // CUDA_MPS_CLIENT_PRIORITY as the first successful cuInit found it, as the real driver reads it
  // when it connects to an MPS server (fakecuda_mps_client_priority_at_init).
  bool mps_client_priority_set_at_init = false;
  std::string mps_client_priority_at_init;
  bool green_contexts = true;  // fakecuda_set_green_contexts
  int device_count = 1;
  // The physical card behind each device ordinal: FAKECUDA_VISIBLE_DEVICES (a comma-separated
  // list, as CUDA_VISIBLE_DEVICES renumbers real GPUs), else the identity. A card's UUID is its
  // physical number's, so processes that number the cards differently still name each alike.
  std::vector<int> physical;
  uint64_t next_seq = 1;
  uint64_t next_stream_id = 1;
  uint64_t next_capture_id = 1;
  std::vector<Device> devices;
  std::vector<Context*> primary;  // per device, created on first retain
  absl::flat_hash_map<const void*, Kind> handles;
  std::map<uintptr_t, Allocation> memory;
  absl::flat_hash_map<std::string, int64_t> kernel_duration_ns;
  absl::flat_hash_map<std::string, CUresult> kernel_failure;
  uint64_t generation = 0;      // bumped in a forked child: thread-local context stacks reset
};

// The state; created on first use. Requires Mu().
State& S() ABSL_EXCLUSIVE_LOCKS_REQUIRED(Mu());
// Registers the fork handlers once (safe to call before constructors ran).
void EnsureForkHandlers();

template <typename T>
T* Lookup(const void* handle, Kind kind) ABSL_EXCLUSIVE_LOCKS_REQUIRED(Mu()) {
  auto it = S().handles.find(handle);
  if (it == S().handles.end() || it->second != kind) return nullptr;
  return static_cast<T*>(const_cast<void*>(handle));
}
void Register(const void* handle, Kind kind) ABSL_EXCLUSIVE_LOCKS_REQUIRED(Mu());
void Unregister(const void* handle) ABSL_EXCLUSIVE_LOCKS_REQUIRED(Mu());

// CUDA_SUCCESS if cuInit ran, else CUDA_ERROR_NOT_INITIALIZED.
CUresult CheckInit() ABSL_EXCLUSIVE_LOCKS_REQUIRED(Mu());
// The calling thread's current context (validated), or nullptr.
Context* CurrentContext() ABSL_EXCLUSIVE_LOCKS_REQUIRED(Mu());
void SetCurrentContext(Context* ctx);
void PushCurrentContext(Context* ctx);
Context* PopCurrentContext();

Context* NewContext(int device, unsigned flags) ABSL_EXCLUSIVE_LOCKS_REQUIRED(Mu());
Stream* NewStream(Context* ctx, unsigned flags, int priority, StreamRole role)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(Mu());
void DestroyStream(Stream* stream) ABSL_EXCLUSIVE_LOCKS_REQUIRED(Mu());

// Resolves a stream argument as the driver does: 0 means the per-thread stream through a
// _ptsz/_ptds entry point and the legacy stream otherwise; CU_STREAM_LEGACY / _PER_THREAD name
// those streams explicitly. Returns CUDA_SUCCESS and sets *out, or the error to return.
CUresult ResolveStream(CUstream handle, bool per_thread_entry, Stream** out)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(Mu());

uint64_t StreamLogId(const Stream* stream);
int StreamLogKind(const Stream* stream);

// Finds the allocation containing [ptr, ptr+size), or nullptr.
const Allocation* FindAllocation(uintptr_t ptr, size_t size, uintptr_t* base = nullptr)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(Mu());

}  // namespace fakecuda

#endif  // GPUPRIO_TESTS_FAKE_CUDA_FAKE_STATE_H_
