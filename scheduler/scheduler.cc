#include "scheduler/scheduler.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_format.h"
#include "scheduler/coordinator/segment_name.h"
#include "scheduler/base/clock.h"
#include "scheduler/base/logging.h"
#include "scheduler/base/tls.h"
#include "scheduler/op_pool.h"

namespace gpuprio::scheduler {

using base::CoarseNowNs;
using base::SteadyNowNs;

// Thread-locals live in internal_* namespaces, never anonymous ones (scheduler/base/tls.h).
namespace internal_scheduler {

// A few recently used streams per thread: most threads launch on one or two streams.
struct StreamCacheEntry {
  const Scheduler* owner;
  uint64_t epoch;
  CUcontext context;
  CUstream stream;
  StreamState* state;
};
constexpr int kStreamCacheSize = 4;

struct SchedulerThreadState {
  int priority;
  int stream_cache_next;
  StreamCacheEntry stream_cache[kStreamCacheSize];
};

GPUPRIO_THREAD_LOCAL SchedulerThreadState t_scheduler_thread = {kPriorityUnset, 0, {}};

}  // namespace internal_scheduler

namespace {

using internal_scheduler::kStreamCacheSize;
using internal_scheduler::t_scheduler_thread;

// CUDA: lower is more urgent, 0 is the default. gpuprio: higher is more important.
int FromCudaStreamPriority(int cuda_priority) {
  return cuda_priority < 0 ? ClampPriority(-cuda_priority) : kPriorityUnset;
}

}  // namespace

Scheduler::Scheduler(const SchedulerOptions& options, const DriverFunctions& driver,
                     OpObserver* observer)
    : options_(options),
      driver_(driver),
      observer_(observer),
      timing_observer_(observer != nullptr && observer->WantsTimings() ? observer : nullptr),
      times_caller_calls_(timing_observer_ != nullptr || options_.time_calls) {}

Scheduler::~Scheduler() { StopDispatchers(); }

void Scheduler::SetThreadPriority(int priority) { t_scheduler_thread.priority = priority; }
int Scheduler::ThreadPriority() { return t_scheduler_thread.priority; }

int Scheduler::EffectivePriority(const StreamState* stream) const {
  const int thread_priority = t_scheduler_thread.priority;
  if (thread_priority != kPriorityUnset) return thread_priority;
  if (stream != nullptr && stream->priority != kPriorityUnset) return stream->priority;
  return options_.default_priority;
}

StreamState* Scheduler::Resolve(CUstream stream, bool per_thread_entry) {
  if (stream == CU_STREAM_PER_THREAD || (stream == nullptr && per_thread_entry)) return nullptr;
  if (stopped_.load(std::memory_order_acquire)) return nullptr;
  const bool legacy = stream == nullptr || stream == CU_STREAM_LEGACY;
  CUcontext context = nullptr;
  if (driver_.ctx_get_current(&context) != CUDA_SUCCESS) {
    // The thread's context is unknown, but a created stream's handle is unique across contexts:
    // found by it, the call keeps its place behind the stream's queued work (run inline, it would
    // overtake it). The legacy stream cannot be found (its caller runs inline after every legacy
    // queue).
    return legacy ? nullptr : FindByHandle(stream);
  }
  if (context == nullptr) return nullptr;
  const CUstream key_stream = legacy ? nullptr : stream;
  const uint64_t epoch = stream_epoch_.load(std::memory_order_acquire);
  for (const auto& e : t_scheduler_thread.stream_cache) {
    if (e.owner == this && e.epoch == epoch && e.context == context && e.stream == key_stream) {
      return e.state;
    }
  }
  StreamState* state = ResolveSlow(context, key_stream, legacy);
  if (state != nullptr) {
    int& next = t_scheduler_thread.stream_cache_next;
    t_scheduler_thread.stream_cache[next] = {this, epoch, context, key_stream, state};
    next = (next + 1) % kStreamCacheSize;
  }
  return state;
}

StreamState* Scheduler::FindByHandle(CUstream stream) {
  absl::ReaderMutexLock lock(&mu_);
  auto it = streams_.find(Key{nullptr, stream});
  return it != streams_.end() ? it->second : nullptr;
}

Dispatcher* Scheduler::DispatcherFor(CUdevice device) {
  auto it = dispatchers_.find(device);
  if (it != dispatchers_.end()) return it->second.get();
  auto dispatcher = std::make_unique<Dispatcher>(device, driver_, options_, &levels_, observer_,
                                                 AttachCoordinator(device), &directory_);
  Dispatcher* raw = dispatcher.get();
  dispatchers_.emplace(device, std::move(dispatcher));
  directory_.Add(device, raw);
  return raw;
}

std::unique_ptr<coordinator::GpuCoordinator> Scheduler::AttachCoordinator(CUdevice device) {
  if (!options_.coordinate) return nullptr;
  CUuuid uuid;
  if (driver_.device_get_uuid == nullptr || driver_.device_get_uuid(&uuid, device) != CUDA_SUCCESS) {
    Logf(LogLevel::kWarning,
         "cannot read the UUID of GPU %d: no coordination with other processes on it; this "
         "process schedules its own work only",
         static_cast<int>(device));
    return nullptr;
  }
  uint8_t bytes[16];
  static_assert(sizeof(bytes) == sizeof(uuid.bytes));
  std::memcpy(bytes, uuid.bytes, sizeof(bytes));
  absl::StatusOr<std::unique_ptr<coordinator::GpuCoordinator>> c =
      coordinator::GpuCoordinator::Attach(options_.segment, bytes, options_.default_priority);
  if (!c.ok()) {
    Logf(LogLevel::kWarning,
         "no coordination with other processes on GPU %d (%s): %s; this process schedules its "
         "own work only",
         static_cast<int>(device), coordinator::UuidString(bytes).c_str(),
         std::string(c.status().message()).c_str());
    return nullptr;
  }
  Logf(LogLevel::kInfo, "GPU %d: slot %u of %s", static_cast<int>(device),
       (*c)->slot_index(), (*c)->segment().path().c_str());
  return *std::move(c);
}

StreamState* Scheduler::ResolveSlow(CUcontext context, CUstream stream, bool legacy) {
  // A created stream is known by its handle alone (handles are unique across contexts): a thread
  // may name another device's stream while its own context is current, and the stream's work
  // must still go to one queue, in the stream's own context, on the stream's own device.
  const Key key{legacy ? context : nullptr, stream};
  {
    absl::ReaderMutexLock lock(&mu_);
    auto it = streams_.find(key);
    if (it != streams_.end()) return it->second;
  }
  // Stream properties are read once, from the driver, so streams created before gpuprio saw
  // them (or through paths it does not intercept) are described correctly.
  bool blocking = true;
  int priority = kPriorityUnset;
  bool known_device = false;
  CUdevice device = 0;
  if (!legacy) {
    unsigned int flags = 0;
    if (driver_.stream_get_flags(stream, &flags) != CUDA_SUCCESS) return nullptr;
    blocking = (flags & CU_STREAM_NON_BLOCKING) == 0;
    int cuda_priority = 0;
    if (driver_.stream_get_priority(stream, &cuda_priority) == CUDA_SUCCESS) {
      priority = FromCudaStreamPriority(cuda_priority);
    }
    CUcontext own = nullptr;
    if (driver_.stream_get_ctx != nullptr && driver_.stream_get_ctx(stream, &own) == CUDA_SUCCESS &&
        own != nullptr) {
      context = own;
    }
    known_device = driver_.stream_get_device != nullptr &&
                   driver_.stream_get_device(stream, &device) == CUDA_SUCCESS;
  }
  if (!known_device && driver_.ctx_get_device(&device) != CUDA_SUCCESS) return nullptr;
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(key);
  if (it != streams_.end()) return it->second;
  Dispatcher* dispatcher = DispatcherFor(device);
  // A destroyed stream's state, once its dispatcher let go of it, serves the next stream of the
  // same device: memory stays bounded by the most streams alive at once.
  StreamState* raw = dispatcher->TakeRecycledStream();
  if (raw == nullptr) {
    stream_storage_.push_back(std::make_unique<StreamState>());
    raw = stream_storage_.back().get();
    raw->dispatcher = dispatcher;
  }
  raw->context = context;
  raw->stream = stream;
  raw->legacy = legacy;
  raw->blocking = blocking;
  raw->priority = priority;
  raw->deferred_error.store(CUDA_SUCCESS, std::memory_order_relaxed);
  raw->destroyed.store(false, std::memory_order_relaxed);
  raw->direct_priority.store(kPriorityUnset, std::memory_order_relaxed);
  raw->direct_next = nullptr;
  streams_.emplace(key, raw);
  return raw;
}

void Scheduler::Submit(Op* op) {
  if (op->submit_ns == 0) op->submit_ns = SteadyNowNs();
  if (observer_ != nullptr) observer_->OnSubmit(*op);
  const int priority = op->priority;
  const int64_t submit_ns = op->submit_ns;
  if (op->cost_key != nullptr) {  // a kernel launch
    op->launch_counter = queued_launches_.CounterFor(op->cost_key);
    op->launch_counter->fetch_add(1, std::memory_order_acq_rel);
  }
  HostYield::NoteOwnLaunch(priority);
  const bool launch = op->cost_key != nullptr;
  op->stream->dispatcher->Submit(op);  // `op` belongs to the dispatcher from here on
  // Only after kernel launches: an event record or a copy may be made under a lock of the
  // application's (the caching allocator records events under its own), which a wait would hold.
  if (launch) host_yield_.AfterQueued(priority, submit_ns);
}

bool Scheduler::MayIssueDirect(const StreamState* stream, int priority, bool may_pass_queued) {
  // What the client sees, read as the policy asks for it: a few atomic loads, the clock only
  // below a level that was ever seen above this one.
  struct ClientView {
    const Scheduler* scheduler;
    const StreamState* stream;
    int op_priority;
    bool may_pass_queued;
    int priority() const { return op_priority; }
    bool NothingMoreImportantQueued() const {
      return stream->dispatcher->Idle() ||
             (may_pass_queued && scheduler->OnlyLessImportantQueued(stream, op_priority));
    }
    bool AwayWorkOrders() const { return stream->dispatcher->AwayWorkOrders(stream); }
    // The device's levels: a level busy on another GPU puts none of this one's work on a budget.
    int MaxSeen() const { return stream->dispatcher->levels_here().MaxSeen(); }
    int LocalCeiling() const {
      return stream->dispatcher->levels_here().Ceiling(
          scheduler->levels_, scheduler->options_.unbudgeted_priority, CoarseNowNs(),
          scheduler->options_.ceiling_window_ns);
    }
    bool PeersAllowDirect() const {
      const coordinator::GpuCoordinator* c = stream->dispatcher->coordinator();
      return c == nullptr ||
             c->PeersAllowDirect(op_priority, scheduler->options_.ceiling_window_ns,
                                 scheduler->options_.unbudgeted_priority);
    }
  };
  if (!DirectIssueAllowed(ClientView{this, stream, priority, may_pass_queued}, options_)) {
    return false;
  }
  if (stream->dispatcher->coordinator() != nullptr) stream->dispatcher->PublishDirect(priority);
  return true;
}

bool Scheduler::OnlyLessImportantQueued(const StreamState* stream, int priority) const {
  // The dispatcher holds work back (less important work beyond its budget, or beyond what a twin
  // stream may queue) most of the time a batch job runs beside a server: waiting behind it would
  // send every one of the server's ops through the dispatcher, a wake-up and a hand-off each
  // (~0.1 ms a kernel on the H100). Passing it keeps every order CUDA gives: this stream has
  // nothing queued (its own FIFO); it is neither the legacy stream nor a blocking one (no
  // implicit order against other streams); nothing queued is as important as this op, and so
  // the dispatcher would issue this op first anyway. An event wait passes only when its record
  // is issued (the caller's steps), and event records never pass: a queued wait on the event
  // must bind to the record before it.
  if (stream->legacy || stream->blocking) return false;
  if (stream->issued.load(std::memory_order_seq_cst) !=
      stream->submitted.load(std::memory_order_seq_cst)) {
    return false;
  }
  for (int p = levels_.MaxSeen(); p >= priority; --p) {
    if (levels_.At(p).ops_unissued.load(std::memory_order_seq_cst) != 0) return false;
  }
  return true;
}

void Scheduler::NoteWholeDeviceWork(const StreamState* stream) {
  if (stream == nullptr || stream->dispatcher == nullptr) return;
  stream->dispatcher->NoteWholeDevice(EffectivePriority(stream), CoarseNowNs());
}

void Scheduler::NoteDirect(StreamState* stream, int priority) {
  PriorityLevelStats& level = levels_.At(priority);
  level.ops_on_caller.fetch_add(1, std::memory_order_relaxed);
  HostYield::NoteOwnLaunch(priority);
  // Keeps this level's ceiling window alive: lower levels stay on their budget while it runs.
  const int64_t now = CoarseNowNs();
  levels_.NoteSubmit(priority, now);
  stream->dispatcher->NoteDirect(stream, priority, now);
}

void Scheduler::WaitStream(StreamState* stream) {
  const uint64_t target = stream->submitted.load(std::memory_order_acquire);
  if (stream->issued.load(std::memory_order_acquire) < target) {
    stream->dispatcher->WaitIssued(stream, target);
  }
  BringHome(stream);
}

namespace {
CUresult IssueNothing(Op&) { return CUDA_SUCCESS; }
}  // namespace

void Scheduler::BringHome(StreamState* stream) {
  if (!stream->away.load(std::memory_order_acquire)) return;
  // The dispatcher moves the stream's work home (and links what the legacy stream's order needs)
  // when it takes this op; while it is stopped everything is home already.
  if (stopped_.load(std::memory_order_acquire)) return;
  Op* op = OpPool::ForThisThread().Take();
  op->issue = &IssueNothing;
  op->name = "gpuprio: return from twin";
  op->stream = stream;
  op->priority = EffectivePriority(stream);
  op->home_only = true;
  op->submit_ns = SteadyNowNs();
  HostYield::NoteOwnLaunch(op->priority);
  stream->dispatcher->Submit(op);  // not observed: it issues nothing
  const uint64_t target = stream->submitted.load(std::memory_order_acquire);
  stream->dispatcher->WaitIssued(stream, target, /*unless_stopping=*/true);
}

std::vector<Dispatcher::Activity> Scheduler::DispatcherActivity() {
  std::vector<Dispatcher::Activity> out;
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [device, d] : dispatchers_) out.push_back(d->activity());
  std::sort(out.begin(), out.end(),
            [](const Dispatcher::Activity& a, const Dispatcher::Activity& b) {
              return a.device < b.device;
            });
  return out;
}

std::vector<StreamState*> Scheduler::Streams(CUcontext context, bool legacy_only) {
  std::vector<StreamState*> out;
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [key, state] : streams_) {
    if (context != nullptr && state->context != context) continue;
    if (legacy_only && !state->legacy) continue;
    out.push_back(state);
  }
  return out;
}

void Scheduler::WaitContext(CUcontext context) {
  if (NothingToWaitFor()) return;
  for (StreamState* s : Streams(context, /*legacy_only=*/false)) WaitStream(s);
}

bool Scheduler::NothingToWaitFor() const {
  return directory_.AllOf([](const Dispatcher& d) { return d.NothingToWaitFor(); });
}

void Scheduler::WaitAll() {
  if (NothingToWaitFor()) return;
  for (StreamState* s : Streams(nullptr, /*legacy_only=*/false)) WaitStream(s);
}

void Scheduler::WaitLaunchesOf(const void* function) {
  if (queued_launches_.AnyQueued(function)) WaitAll();
}

void Scheduler::WaitLegacy(CUcontext context) {
  if (NothingToWaitFor()) return;
  for (StreamState* s : Streams(context, /*legacy_only=*/true)) WaitStream(s);
}

void Scheduler::WaitBeforeInline(StreamState* stream) {
  if (stream == nullptr) {
    WaitLegacy(nullptr);
    return;
  }
  WaitStream(stream);
  if (stream->legacy) {
    WaitContext(stream->context);
  } else if (stream->blocking) {
    WaitLegacy(stream->context);
  }
}

void Scheduler::WaitBeforeSync(StreamState* stream) {
  if (stream == nullptr) {
    WaitLegacy(nullptr);
    return;
  }
  WaitStream(stream);
  if (stream->legacy) WaitContext(stream->context);
}

CUresult Scheduler::TakeDeferredError(StreamState* stream) {
  if (stream->deferred_error.load(std::memory_order_acquire) == CUDA_SUCCESS) return CUDA_SUCCESS;
  return static_cast<CUresult>(
      stream->deferred_error.exchange(CUDA_SUCCESS, std::memory_order_acq_rel));
}

CUresult Scheduler::TakeDeferredError(CUcontext context) {
  // Called after the context's synchronisation waited for its ops to be issued; an op that
  // failed marks its dispatcher before it is counted issued.
  if (directory_.AllOf([](const Dispatcher& d) { return !d.ReportedFailure(); })) {
    return CUDA_SUCCESS;
  }
  CUresult first = CUDA_SUCCESS;
  for (StreamState* s : Streams(context, /*legacy_only=*/false)) {
    const CUresult e = TakeDeferredError(s);
    if (first == CUDA_SUCCESS) first = e;
  }
  return first;
}

void Scheduler::ForgetStream(CUstream stream) {
  absl::MutexLock lock(&mu_);
  for (auto it = streams_.begin(); it != streams_.end();) {
    if (it->first.stream == stream && stream != nullptr) {
      it->second->dispatcher->ReleaseStream(it->second);
      streams_.erase(it++);
    } else {
      ++it;
    }
  }
  stream_epoch_.fetch_add(1, std::memory_order_acq_rel);
}

Scheduler::EventState* Scheduler::Event(CUevent event) {
  EventShard& shard = ShardFor(event);
  absl::MutexLock lock(&shard.mu);
  EventState*& state = shard.events[event];
  // Event states are few (applications pool their events) and ops may still point at one after
  // the event is destroyed, so they are never freed; a destroyed handle's state is reset.
  if (state == nullptr) state = new EventState();
  return state;
}

void Scheduler::ForgetEvent(CUevent event) {
  EventShard& shard = ShardFor(event);
  absl::MutexLock lock(&shard.mu);
  auto it = shard.events.find(event);
  if (it != shard.events.end()) it->second->queued_record.store(nullptr, std::memory_order_release);
}

Scheduler::EventState* Scheduler::BeginRecord(CUevent event) {
  EventState* state = Event(event);
  // Rare: applications pool their events and re-record one only after its waits ran.
  if (state->queued_waits.load(std::memory_order_acquire) > 0) WaitAll();
  return state;
}

void Scheduler::EndRecord(EventState* event, StreamState* stream) {
  // Read after the record was queued: other threads' ops on the stream may be counted too, which
  // only makes a wait follow a little more of the stream.
  event->record_position.store(
      stream != nullptr ? stream->submitted.load(std::memory_order_acquire) : 0,
      std::memory_order_relaxed);
  event->queued_record.store(stream, std::memory_order_release);
}

StreamState* Scheduler::RecordToFollow(const EventState* event) const {
  StreamState* recorder = event->queued_record.load(std::memory_order_acquire);
  if (recorder == nullptr) return nullptr;
  const uint64_t position = event->record_position.load(std::memory_order_relaxed);
  return recorder->issued.load(std::memory_order_acquire) < position ? recorder : nullptr;
}

void Scheduler::QueueWaitOn(EventState* event, StreamState* recorder, Op* op) {
  event->queued_waits.fetch_add(1, std::memory_order_acq_rel);
  op->issued_counter = &event->queued_waits;
  if (recorder != nullptr && recorder != op->stream) {
    op->depends_on = recorder;
    // Never past what the stream has queued (two threads recording one event at once may pair a
    // position with the other's stream): a wait can then never wait for ops that do not exist.
    op->depends_on_count =
        std::min(event->record_position.load(std::memory_order_relaxed),
                 recorder->submitted.load(std::memory_order_acquire));
  }
}

void Scheduler::WaitRecord(const EventState* event) {
  if (StreamState* recorder = event->queued_record.load(std::memory_order_acquire)) {
    WaitStream(recorder);
  }
}

void Scheduler::WaitEvent(CUevent event) {
  EventState* state = Event(event);
  WaitRecord(state);
  if (state->queued_waits.load(std::memory_order_acquire) > 0) WaitAll();
}

void Scheduler::EnterCapture() {
  if (active_captures_.fetch_add(1, std::memory_order_acq_rel) == 0) StopDispatchers();
}

void Scheduler::LeaveCapture() {
  int active = active_captures_.load(std::memory_order_acquire);
  while (active > 0 && !active_captures_.compare_exchange_weak(active, active - 1,
                                                               std::memory_order_acq_rel)) {
  }
  if (active == 1) StartDispatchers();
}

void Scheduler::StopDispatchers(bool bounded) {
  stopped_.store(true, std::memory_order_release);
  absl::MutexLock lock(&mu_);
  for (auto& [device, d] : dispatchers_) d->Stop(bounded);
}

void Scheduler::LeaveSharedSegments() {
  absl::MutexLock lock(&mu_);
  for (auto& [device, d] : dispatchers_) {
    if (d->coordinator() != nullptr) d->coordinator()->Release();
  }
}

void Scheduler::StartDispatchers() {
  absl::MutexLock lock(&mu_);
  for (auto& [device, d] : dispatchers_) d->Start();
  stopped_.store(false, std::memory_order_release);
}

}  // namespace gpuprio::scheduler
