#include "tests/fake_cuda/fake_state.h"

#include <pthread.h>

#include <cstdlib>

#include "absl/base/call_once.h"
#include "absl/base/const_init.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "scheduler/base/abseil_fork_safety.h"
#include "tests/fake_cuda/call_log.h"
#include "tests/fake_cuda/fake_cuda_control.h"

namespace fakecuda {
namespace {

ABSL_CONST_INIT absl::Mutex first_mu(absl::kConstInit);
// Replaced only in a forked child, where a single thread runs.
absl::Mutex* state_mu = &first_mu;
State* state = nullptr;  // leaked: executor threads outlive static destructors

// The calling thread's context stack; stale after a fork (generation differs).
struct ThreadContexts {
  uint64_t generation = 0;
  std::vector<Context*> stack;
};
thread_local ThreadContexts thread_contexts;

std::vector<Context*>& ContextStack() ABSL_EXCLUSIVE_LOCKS_REQUIRED(Mu()) {
  if (thread_contexts.generation != S().generation) {
    thread_contexts.stack.clear();
    thread_contexts.generation = S().generation;
  }
  return thread_contexts.stack;
}

State* NewState(uint64_t generation) {
  auto* s = new State;
  s->generation = generation;
  if (const char* env = std::getenv("FAKECUDA_DEVICES")) {
    const int n = std::atoi(env);
    if (n >= 1 && n <= 64) s->device_count = n;
  }
  if (const char* env = std::getenv("FAKECUDA_VISIBLE_DEVICES")) {
    for (absl::string_view id : absl::StrSplit(env, ',', absl::SkipEmpty())) {
      int physical = 0;
      if (absl::SimpleAtoi(id, &physical) && physical >= 0 && physical < 64 &&
          s->physical.size() < 64) {
        s->physical.push_back(physical);
      }
    }
    if (!s->physical.empty()) s->device_count = static_cast<int>(s->physical.size());
  }
  if (s->physical.empty()) {
    for (int d = 0; d < s->device_count; ++d) s->physical.push_back(d);
  }
  s->devices.resize(s->device_count);
  s->primary.resize(s->device_count, nullptr);
  return s;
}

void PrepareFork() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  state_mu->Lock();
  LockLogsForFork();
}

void ParentAfterFork() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  UnlockLogsForFork();
  state_mu->Unlock();
}

// The child starts from a driver that was never initialised, as a fresh process would: the
// parent's executor threads do not exist here, so its contexts and queues are abandoned (leaked).
void ChildAfterFork() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  const uint64_t generation = state == nullptr ? 1 : state->generation + 1;
  state = NewState(generation);
  state_mu = new absl::Mutex;
  ResetLogsAfterFork();
}

}  // namespace

absl::Mutex& Mu() { return *state_mu; }

State& S() {
  if (state == nullptr) state = NewState(0);
  return *state;
}

// Like a real driver, the fake must leave a forked child usable whatever its threads were doing.
__attribute__((constructor)) void InitializeFake() { gpuprio::base::InitializeAbseilLazyState(); }

void EnsureForkHandlers() {
  static absl::once_flag once;
  absl::call_once(once, [] { pthread_atfork(PrepareFork, ParentAfterFork, ChildAfterFork); });
}

void Register(const void* handle, Kind kind) { S().handles[handle] = kind; }
void Unregister(const void* handle) { S().handles.erase(handle); }

CUresult CheckInit() {
  return S().initialized ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

Context* CurrentContext() {
  std::vector<Context*>& stack = ContextStack();
  if (stack.empty()) return nullptr;
  return Lookup<Context>(stack.back(), Kind::kContext);
}

void SetCurrentContext(Context* ctx) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  std::vector<Context*>& stack = ContextStack();
  if (stack.empty()) {
    if (ctx != nullptr) stack.push_back(ctx);
  } else if (ctx == nullptr) {
    stack.pop_back();
  } else {
    stack.back() = ctx;
  }
}

void PushCurrentContext(Context* ctx) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  ContextStack().push_back(ctx);
}

Context* PopCurrentContext() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  std::vector<Context*>& stack = ContextStack();
  if (stack.empty()) return nullptr;
  Context* ctx = stack.back();
  stack.pop_back();
  return ctx;
}

Context* NewContext(int device, unsigned flags) {
  auto* ctx = new Context;
  ctx->device = device;
  ctx->flags = flags;
  Register(ctx, Kind::kContext);
  ctx->legacy = NewStream(ctx, 0, 0, StreamRole::kLegacy);
  return ctx;
}

Stream* NewStream(Context* ctx, unsigned flags, int priority, StreamRole role) {
  auto* stream = new Stream;
  stream->id = S().next_stream_id++;
  stream->ctx = ctx;
  stream->flags = flags;
  stream->priority = priority;
  stream->role = role;
  ctx->streams.push_back(stream);
  S().devices[ctx->device].streams.push_back(stream);
  Register(stream, Kind::kStream);
  return stream;
}

void DestroyStream(Stream* stream) {
  // Queued work still runs (as CUDA does); the object is leaked so its ops keep a valid owner.
  Unregister(stream);
  auto erase = [stream](std::vector<Stream*>& v) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (*it == stream) {
        v.erase(it);
        return;
      }
    }
  };
  erase(stream->ctx->streams);
  if (stream->queue.empty()) erase(S().devices[stream->ctx->device].streams);
}

CUresult ResolveStream(CUstream handle, bool per_thread_entry, Stream** out) {
  if (CUresult r = CheckInit(); r != CUDA_SUCCESS) return r;
  const bool per_thread = handle == CU_STREAM_PER_THREAD || (handle == nullptr && per_thread_entry);
  if (handle == nullptr || handle == CU_STREAM_LEGACY || handle == CU_STREAM_PER_THREAD) {
    Context* ctx = CurrentContext();
    if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
    if (!per_thread) {
      *out = ctx->legacy;
      return CUDA_SUCCESS;
    }
    const pid_t tid = static_cast<pid_t>(Gettid());
    Stream*& stream = ctx->per_thread[tid];
    if (stream == nullptr) {
      stream = NewStream(ctx, 0, 0, StreamRole::kPerThread);
      stream->owner_tid = tid;
    }
    *out = stream;
    return CUDA_SUCCESS;
  }
  Stream* stream = Lookup<Stream>(handle, Kind::kStream);
  if (stream == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  *out = stream;
  return CUDA_SUCCESS;
}

uint64_t StreamLogId(const Stream* stream) {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(stream));
}

int StreamLogKind(const Stream* stream) {
  switch (stream->role) {
    case StreamRole::kUser: return FAKECUDA_STREAM_USER;
    case StreamRole::kLegacy: return FAKECUDA_STREAM_LEGACY;
    case StreamRole::kPerThread: return FAKECUDA_STREAM_PER_THREAD;
  }
  return FAKECUDA_STREAM_NONE;
}

const Allocation* FindAllocation(uintptr_t ptr, size_t size, uintptr_t* base) {
  auto it = S().memory.upper_bound(ptr);
  if (it == S().memory.begin()) return nullptr;
  --it;
  if (ptr + size > it->first + it->second.size) return nullptr;
  if (base != nullptr) *base = it->first;
  return &it->second;
}

}  // namespace fakecuda
