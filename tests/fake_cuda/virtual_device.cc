#include "tests/fake_cuda/virtual_device.h"

#include <cstdlib>
#include <cstring>
#include <thread>

#include "absl/base/call_once.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/fake_cuda/call_log.h"

namespace fakecuda {
namespace {

constexpr int64_t kDefaultKernelNs = 2000;

bool Blocking(const Stream* s) { return (s->flags & CU_STREAM_NON_BLOCKING) == 0; }

bool Pending(const OpPtr& op) { return op != nullptr && !op->done; }

bool Ready(const Op& op) {
  for (const OpPtr& dep : op.deps) {
    if (!dep->done) return false;
  }
  return !op.ready || op.ready();
}

// The ready stream head to run next on `device`: lowest priority value, then submission order.
OpPtr PickReady(int device) ABSL_EXCLUSIVE_LOCKS_REQUIRED(Mu()) {
  Device& dev = S().devices[device];
  if (dev.paused) return nullptr;
  OpPtr best;
  for (Stream* stream : dev.streams) {
    if (stream->queue.empty()) continue;
    const OpPtr& head = stream->queue.front();
    if (head->running || !Ready(*head)) continue;
    if (best == nullptr || head->priority < best->priority ||
        (head->priority == best->priority && head->seq < best->seq)) {
      best = head;
    }
  }
  return best;
}

bool HasReady(int* device) ABSL_NO_THREAD_SAFETY_ANALYSIS { return PickReady(*device) != nullptr; }

// Stream-wait-value heads can be released by host writes, which nobody signals: poll those.
bool HasPolledHead(int device) ABSL_EXCLUSIVE_LOCKS_REQUIRED(Mu()) {
  for (Stream* stream : S().devices[device].streams) {
    if (!stream->queue.empty() && stream->queue.front()->ready) return true;
  }
  return false;
}

int64_t DurationNs(const Op& op, const uint8_t* params) ABSL_EXCLUSIVE_LOCKS_REQUIRED(Mu()) {
  if (op.sleep_ns >= 0) return op.sleep_ns;
  if (op.kernel == nullptr) return 0;
  auto it = S().kernel_duration_ns.find(op.kernel->name);
  (void)params;
  return it == S().kernel_duration_ns.end() ? kDefaultKernelNs : it->second;
}

void ExecutorLoop(int device) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  absl::Mutex& mu = Mu();
  mu.Lock();
  for (;;) {
    OpPtr op = PickReady(device);
    if (op == nullptr) {
      const absl::Duration timeout =
          HasPolledHead(device) ? absl::Microseconds(100) : absl::InfiniteDuration();
      mu.AwaitWithTimeout(absl::Condition(&HasReady, &device), timeout);
      continue;
    }
    op->running = true;
    Stream* stream = op->stream;
    fakecuda_exec_record rec{};
    std::strncpy(rec.what, op->what.c_str(), sizeof(rec.what) - 1);
    rec.call_order = op->call_order;
    rec.stream = StreamLogId(stream);
    rec.stream_kind = StreamLogKind(stream);
    rec.priority = op->priority;
    rec.device = device;
    rec.sm_count = static_cast<int32_t>(stream->ctx->sm_count);
    rec.green = stream->ctx->green ? 1 : 0;
    CUresult injected = CUDA_SUCCESS;
    if (op->kernel != nullptr) {
      auto it = S().kernel_failure.find(op->kernel->name);
      if (it != S().kernel_failure.end()) injected = it->second;
    }
    const int64_t duration = DurationNs(*op, nullptr);
    mu.Unlock();

    rec.start_ns = NowNs();
    CUresult result = injected;
    if (result == CUDA_SUCCESS && op->body) result = op->body();
    if (duration > 0) absl::SleepFor(absl::Nanoseconds(duration));
    rec.end_ns = NowNs();
    rec.result = result;
    AppendExec(rec);

    mu.Lock();
    op->done = true;
    op->end_ns = rec.end_ns;
    op->body = nullptr;  // releases captured buffers
    op->deps.clear();
    stream->queue.pop_front();
    --S().devices[device].busy;
    if (result != CUDA_SUCCESS) {
      if (stream->pending_error == CUDA_SUCCESS) stream->pending_error = result;
      if (stream->ctx->pending_error == CUDA_SUCCESS) stream->ctx->pending_error = result;
    }
    if (stream->queue.empty() && S().handles.find(stream) == S().handles.end()) {
      // A destroyed stream leaves the device once its last op ran.
      auto& streams = S().devices[device].streams;
      for (auto it = streams.begin(); it != streams.end(); ++it) {
        if (*it == stream) {
          streams.erase(it);
          break;
        }
      }
    }
  }
}

bool AllIdle(State* state) {
  for (const Device& dev : state->devices) {
    if (!dev.paused && dev.busy != 0) return false;
  }
  return true;
}

}  // namespace

bool OpDone(Op* op) { return op->done; }

OpPtr MakeOp(const char* what, uint64_t call_order, std::function<CUresult()> body) {
  auto op = std::make_shared<Op>();
  op->what = what;
  op->call_order = call_order;
  op->body = std::move(body);
  return op;
}

void Enqueue(Stream* stream, OpPtr op) {
  if (stream->capture != nullptr) {
    stream->capture->ops.push_back(
        OpTemplate{op->what, op->kernel, op->sleep_ns, op->ready, op->body});
    return;
  }
  State& s = S();
  Context* ctx = stream->ctx;
  op->seq = s.next_seq++;
  op->stream = stream;
  if (!op->has_priority) op->priority = stream->priority;
  if (stream->role == StreamRole::kLegacy) {
    for (Stream* other : ctx->streams) {
      if (other != stream && Blocking(other) && Pending(other->last)) {
        op->deps.push_back(other->last);
      }
    }
  } else if (Blocking(stream) && Pending(ctx->legacy->last)) {
    op->deps.push_back(ctx->legacy->last);
  }
  stream->queue.push_back(op);
  stream->last = op;
  Device& dev = s.devices[ctx->device];
  ++dev.busy;
  if (!dev.executor_started) {
    dev.executor_started = true;
    EnsureForkHandlers();
    std::thread(ExecutorLoop, ctx->device).detach();
  }
}

// By value: the caller's reference (a stream's `last`) may be replaced, dropping the op, while
// Await releases the mutex.
void WaitDone(OpPtr op) {
  if (op == nullptr) return;
  Mu().Await(absl::Condition(&OpDone, op.get()));
}

CUresult SyncStream(Stream* stream) {
  WaitDone(stream->last);
  const CUresult r = stream->pending_error;
  stream->pending_error = CUDA_SUCCESS;
  return r;
}

CUresult SyncContext(Context* ctx) {
  std::vector<OpPtr> lasts;
  for (Stream* stream : ctx->streams) lasts.push_back(stream->last);
  for (const OpPtr& op : lasts) WaitDone(op);
  const CUresult r = ctx->pending_error;
  ctx->pending_error = CUDA_SUCCESS;
  for (Stream* stream : ctx->streams) stream->pending_error = CUDA_SUCCESS;
  return r;
}

void WaitAllIdle() { Mu().Await(absl::Condition(&AllIdle, &S())); }

bool WaitAllIdleFor(absl::Duration timeout) {
  return Mu().AwaitWithTimeout(absl::Condition(&AllIdle, &S()), timeout);
}

void FinishWorkAtExit() {
  static absl::once_flag once;
  absl::call_once(once, [] {
    std::atexit([]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      absl::MutexLock lock(&Mu());
      WaitAllIdleFor(absl::Seconds(20));
    });
  });
}

}  // namespace fakecuda
