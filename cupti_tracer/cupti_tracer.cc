#include "cupti_tracer/cupti_tracer.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <utility>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "cupti_tracer/activity_decoder.h"
#include "cupti_tracer/capture_window.h"
#include "cupti_tracer/chrome_trace_writer.h"
#include "cupti_tracer/counter_throttle.h"
#include "cupti_tracer/external_id_carrier.h"
#include "cupti_tracer/machine_identity.h"
#include "cupti_tracer/memory_budget.h"
#include "cupti_tracer/thread_event_log.h"
#include "cupti_tracer/trace_assembly.h"
#include "cupti_tracer/traced_apis.h"
#include "scheduler/base/clock.h"
#include "scheduler/base/logging.h"
#include "scheduler/stream_state.h"
#include "scheduler/base/tls.h"

namespace gpuprio::tracer {

// Thread-locals live in internal_* namespaces, never anonymous ones (scheduler/base/tls.h).
namespace internal_cupti_tracer {
// Correlation id of the runtime API call this thread is inside (0: none), kept by the
// runtime-API callback and read by OnSubmit.
GPUPRIO_THREAD_LOCAL uint32_t t_runtime_correlation_id = 0;
// Issue begin time on a dispatcher thread (OnIssueBegin and OnIssueEnd bracket one call).
GPUPRIO_THREAD_LOCAL int64_t t_issue_begin_ns = 0;
}  // namespace internal_cupti_tracer

using internal_cupti_tracer::t_issue_begin_ns;
using internal_cupti_tracer::t_runtime_correlation_id;

namespace internal {
namespace {

// Size of each activity buffer handed to CUPTI. CUPTI 13 keeps one per thread that makes CUDA
// calls; a full buffer is delivered and a new one requested.
constexpr size_t kActivityBufferBytes = size_t{1} << 20;
// Completed buffers kept for reuse instead of freed.
constexpr size_t kPooledBuffers = 8;

// RUNTIME and DRIVER are enabled whole, then every API outside traced_apis.h is switched off
// again where CUPTI allows it (enabling single APIs without the kind gave no records at all on
// the H100 machine, CUPTI 13.0; disabling after the kind is the documented direction).
constexpr CUpti_ActivityKind kActivityKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET,            CUPTI_ACTIVITY_KIND_RUNTIME,
    CUPTI_ACTIVITY_KIND_DRIVER,            CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_OVERHEAD,
};
// Without these the trace cannot join ops to GPU work: failing to enable one is an error.
bool Essential(CUpti_ActivityKind kind) {
  return kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || kind == CUPTI_ACTIVITY_KIND_DRIVER ||
         kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
}



}  // namespace

// Everything CUPTI's callbacks reach. Leaked once started (CUPTI may call back until exit).
class TracerCore {
 public:
  TracerCore(const CuptiApi& api, CuptiTracerOptions options)
      : api_(api),
        options_(std::move(options)),
        owner_pid_(getpid()),
        budget_(options_.max_bytes),
        events_(&budget_),
        carrier_(ExternalIdFunctions{api.activity_push_external_correlation_id,
                                     api.activity_pop_external_correlation_id}) {}

  absl::Status Start();
  // Once per process, by whichever caller comes first; a concurrent caller waits until the trace
  // is written. Does nothing in a forked child, and writes nothing if recording never started.
  absl::Status Finish();
  // cuProfilerStart / cuProfilerStop (GPUPRIO_TRACE_RANGE=profiler_api).
  void OnProfilerStart();
  void OnProfilerStop();

  // C callbacks (trampolines below) land here.
  void OnBufferRequested(uint8_t** buffer, size_t* size, size_t* max_records);
  void OnBufferCompleted(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t size,
                         size_t valid_size);

  void OnSubmit(scheduler::Op& op);
  void OnCallerIssue(const char* api, int priority, CUstream stream, int64_t begin_ns,
                     int64_t end_ns);
  void OnDispatcherStart(int device);
  void OnIssueBegin(const scheduler::Op& op);
  void OnIssueEnd(const scheduler::Op& op, CUresult result);
  void OnQueueState(int device, int priority, int64_t pending, uint64_t budget_in_use_ns);

 private:
  int64_t CuptiNow() const {
    uint64_t t = 0;
    api_.get_timestamp(&t);
    return static_cast<int64_t>(t);
  }
  // `steady_ns` (steady_clock, as the scheduler measures) on CUPTI's clock, given CUPTI's now.
  static int64_t ToCupti(int64_t steady_ns, int64_t cupti_now) {
    if (steady_ns == 0) return cupti_now;
    return cupti_now - (base::SteadyNowNs() - steady_ns);
  }
  absl::Status Check(CUptiResult result, const char* call) const {
    if (result == CUPTI_SUCCESS) return absl::OkStatus();
    return absl::UnavailableError(absl::StrCat(call, " failed: ", api_.ErrorString(result)));
  }
  // Flushes CUPTI, assembles the trace, writes it and logs the outcome (Finish's work).
  absl::Status WriteTrace();
  // Enables the activity kinds (and, per API, switches the untraced APIs off again): recording
  // starts. Essential kinds that fail are an error; optional ones a warning.
  absl::Status EnableActivities(bool per_api);
  // The capture window's actions (capture_window.h), on its thread.
  void OpenWindow();
  void CloseWindow();
  std::string DescribeWindow() const;
  void FillApiNames();
  // Runtime callbacks for the APIs of traced_apis.h only (the whole domain if none took).
  absl::Status EnableTracedApiCallbacks();
  // After RUNTIME and DRIVER are enabled: API records off for every API outside traced_apis.h.
  void DisableUntracedApiRecords();

  uint8_t* AcquireBuffer() ABSL_LOCKS_EXCLUDED(pool_mu_);
  void ReleaseBuffer(uint8_t* buffer) ABSL_LOCKS_EXCLUDED(pool_mu_);

  const CuptiApi api_;
  const CuptiTracerOptions options_;
  // The process that started tracing. A forked child inherits a copy of its events, which are
  // its parent's: only this process writes the trace.
  const pid_t owner_pid_;
  MemoryBudget budget_;
  EventRegistry events_;
  ExternalIdCarrier carrier_;
  CUpti_SubscriberHandle subscriber_ = nullptr;  // written in Start, before any callback
  ApiNameTable names_;  // filled in Start before activities are enabled; read-only afterwards
  std::atomic<uint64_t> next_op_id_{1};
  std::atomic<bool> finished_{false};
  // Notified when the Finish() that took finished_ returns: a second caller (the exit path while
  // a signal's write is under way, or the reverse) waits for it instead of letting the process
  // end in the middle of the write.
  absl::Notification finish_done_;
  std::atomic<bool> fork_noted_{false};

  // Recording: gpuprio's own events are kept only while this is set (one relaxed load per op).
  std::atomic<bool> capturing_{false};
  bool per_api_ = false;  // set in Start, before any window opens
  // Leaked with the core; null for the whole run. Set in Start after g_core (a profiler call in
  // between is noted by CaptureWindow::NoteEarlyProfilerStart).
  std::atomic<CaptureWindow*> window_{nullptr};
  // Orders OpenWindow against Finish: a window never opens once the trace was written.
  absl::Mutex window_mu_;
  bool window_opened_ ABSL_GUARDED_BY(window_mu_) = false;

  // Records CUPTI reported dropped (cuptiActivityGetNumDroppedRecords, summed), records decoded
  // but dropped for the memory cap, buffers refused for the cap (CUPTI counts their records as
  // its own drops), and counter samples dropped for the cap. gpuprio's op events dropped for the
  // cap are counted by events_.
  std::atomic<uint64_t> cupti_dropped_{0};
  std::atomic<uint64_t> cap_dropped_records_{0};
  std::atomic<uint64_t> refused_buffers_{0};
  std::atomic<uint64_t> dropped_counter_samples_{0};

  // Lock order: none of these is held while calling into CUPTI, and none is taken while
  // another is held. CUPTI calls OnBufferCompleted holding its own lock; were mu_ held across
  // a CUPTI call (cuptiActivityFlushAll) that needs that lock, the two threads would deadlock.
  absl::Mutex mu_;
  DecodedActivity decoded_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint32_t, std::string> dispatcher_names_ ABSL_GUARDED_BY(mu_);

  absl::Mutex counters_mu_;
  CounterThrottle throttle_ ABSL_GUARDED_BY(counters_mu_);
  std::vector<CounterThrottle::Sample> counter_samples_ ABSL_GUARDED_BY(counters_mu_);

  absl::Mutex pool_mu_;
  std::vector<uint8_t*> free_buffers_ ABSL_GUARDED_BY(pool_mu_);
};

// The started tracer; null before Start and if it failed. Never freed.
ABSL_CONST_INIT std::atomic<TracerCore*> g_core{nullptr};

namespace {

void CUPTIAPI BufferRequestedTrampoline(uint8_t** buffer, size_t* size, size_t* max_records) {
  if (TracerCore* core = g_core.load(std::memory_order_acquire)) {
    core->OnBufferRequested(buffer, size, max_records);
    return;
  }
  *buffer = nullptr;
  *size = 0;
  *max_records = 0;
}

void CUPTIAPI BufferCompletedTrampoline(CUcontext context, uint32_t stream_id, uint8_t* buffer,
                                        size_t size, size_t valid_size) {
  if (TracerCore* core = g_core.load(std::memory_order_acquire)) {
    core->OnBufferCompleted(context, stream_id, buffer, size, valid_size);
    return;
  }
  std::free(buffer);
}

// Runtime-API callback: trivial on purpose (it runs inside every cuda* call). Keeps the id of the
// innermost runtime call on this thread; the caller's previous id rides in correlationData.
void CUPTIAPI RuntimeApiCallback(void* /*userdata*/, CUpti_CallbackDomain domain,
                                 CUpti_CallbackId /*cbid*/, const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API || data == nullptr) return;
  const auto* info = static_cast<const CUpti_CallbackData*>(data);
  if (info->callbackSite == CUPTI_API_ENTER) {
    if (info->correlationData != nullptr) *info->correlationData = t_runtime_correlation_id;
    t_runtime_correlation_id = info->correlationId;
  } else {
    t_runtime_correlation_id =
        info->correlationData != nullptr ? static_cast<uint32_t>(*info->correlationData) : 0;
  }
}

}  // namespace

absl::Status TracerCore::EnableTracedApiCallbacks() {
  const char* name = nullptr;
  int enabled = 0;
  for (uint32_t cbid = 1; cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE; ++cbid) {
    if (api_.get_callback_name(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &name) != CUPTI_SUCCESS ||
        name == nullptr || !IsTracedRuntimeApi(name)) {
      continue;
    }
    // The callback tags the client's ops with the runtime call's correlation id; without it the
    // join falls back to time containment.
    enabled += api_.enable_callback(1, subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API, cbid) ==
               CUPTI_SUCCESS;
  }
  if (enabled == 0) {
    return Check(api_.enable_domain(1, subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API),
                 "cuptiEnableDomain");
  }
  return absl::OkStatus();
}

void TracerCore::DisableUntracedApiRecords() {
  const char* name = nullptr;
  int runtime = 0, driver = 0;
  for (uint32_t cbid = 1; cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE; ++cbid) {
    if (api_.get_callback_name(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &name) == CUPTI_SUCCESS &&
        name != nullptr && !IsTracedRuntimeApi(name)) {
      runtime += api_.activity_enable_runtime_api(cbid, 0) == CUPTI_SUCCESS;
    }
  }
  for (uint32_t cbid = 1; cbid < CUPTI_DRIVER_TRACE_CBID_SIZE; ++cbid) {
    if (api_.get_callback_name(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &name) == CUPTI_SUCCESS &&
        name != nullptr && !IsTracedDriverApi(name)) {
      driver += api_.activity_enable_driver_api(cbid, 0) == CUPTI_SUCCESS;
    }
  }
  Log(LogLevel::kDebug, absl::StrFormat("trace: API records off for %d runtime and %d driver "
                                        "APIs outside stream work and synchronisation",
                                        runtime, driver));
}

void TracerCore::FillApiNames() {
  const char* name = nullptr;
  for (uint32_t cbid = 1; cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE; ++cbid) {
    if (api_.get_callback_name(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &name) == CUPTI_SUCCESS) {
      names_.Set(ApiCall::Kind::kRuntime, cbid, name);
    }
  }
  for (uint32_t cbid = 1; cbid < CUPTI_DRIVER_TRACE_CBID_SIZE; ++cbid) {
    if (api_.get_callback_name(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &name) == CUPTI_SUCCESS) {
      names_.Set(ApiCall::Kind::kDriver, cbid, name);
    }
  }
}

absl::Status TracerCore::Start() {
  // Thread ids in records must be gettid() values, as gpuprio records them.
  if (absl::Status s = Check(api_.set_thread_id_type(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM),
                             "cuptiSetThreadIdType(SYSTEM)");
      !s.ok()) {
    return s;
  }
  const CUptiResult subscribed = api_.subscribe(&subscriber_, &RuntimeApiCallback, nullptr);
  if (subscribed == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    return absl::AlreadyExistsError(
        "CUPTI already has a subscriber (nsys, ncu or torch.profiler?)");
  }
  if (absl::Status s = Check(subscribed, "cuptiSubscribe"); !s.ok()) return s;

  FillApiNames();
  const bool per_api = !options_.all_apis && api_.activity_enable_runtime_api != nullptr &&
                       api_.activity_enable_driver_api != nullptr &&
                       api_.enable_callback != nullptr;
  absl::Status status = per_api ? EnableTracedApiCallbacks()
                                : Check(api_.enable_domain(1, subscriber_,
                                                           CUPTI_CB_DOMAIN_RUNTIME_API),
                                        "cuptiEnableDomain");
  // The singleton must be visible before CUPTI can call a buffer callback.
  g_core.store(this, std::memory_order_release);
  if (status.ok()) {
    status = Check(
        api_.activity_register_callbacks(&BufferRequestedTrampoline, &BufferCompletedTrampoline),
        "cuptiActivityRegisterCallbacks");
  }
  per_api_ = per_api;
  // A window records from when it opens: nothing is enabled before (CUPTI then records nothing).
  const bool whole_run = options_.window.WholeRun();
  if (status.ok() && whole_run) status = EnableActivities(per_api);
  if (!status.ok()) {
    api_.unsubscribe(subscriber_);
    // A callback that already loaded the pointer still finds this (leaked) core.
    g_core.store(nullptr, std::memory_order_release);
    return status;
  }
  if (whole_run) {
    absl::MutexLock lock(&window_mu_);
    window_opened_ = true;
    capturing_.store(true, std::memory_order_relaxed);
    return absl::OkStatus();
  }
  auto* window = new CaptureWindow(options_.window, [this] { OpenWindow(); },
                                   [this] { CloseWindow(); });
  window_.store(window, std::memory_order_release);
  if (!window->Start()) {
    Log(LogLevel::kError, "trace: no thread for the capture window; nothing will be recorded");
  }
  return absl::OkStatus();
}

absl::Status TracerCore::EnableActivities(bool per_api) {
  absl::Status status;
  std::vector<std::string> optional_failures;
  for (CUpti_ActivityKind kind : kActivityKinds) {
    const CUptiResult r = api_.activity_enable(kind);
    if (r == CUPTI_SUCCESS) continue;
    if (Essential(kind)) {
      status = Check(r, absl::StrFormat("cuptiActivityEnable(%d)", kind).c_str());
      break;
    }
    optional_failures.push_back(absl::StrFormat("%d (%s)", kind, api_.ErrorString(r)));
  }
  if (!status.ok()) {
    for (CUpti_ActivityKind kind : kActivityKinds) api_.activity_disable(kind);
    return status;
  }
  if (per_api) DisableUntracedApiRecords();
  if (!optional_failures.empty()) {
    Log(LogLevel::kWarning, absl::StrCat("trace: CUPTI did not enable activity kinds ",
                                         absl::StrJoin(optional_failures, ", "),
                                         "; the trace will lack them"));
  }
  return absl::OkStatus();
}

std::string TracerCore::DescribeWindow() const {
  const CaptureWindowOptions& w = options_.window;
  std::string text = w.range == CaptureRange::kProfilerApi
                         ? "GPUPRIO_TRACE_RANGE=profiler_api"
                         : absl::StrCat("GPUPRIO_TRACE_DELAY_S=", absl::ToInt64Seconds(w.delay));
  if (w.duration.has_value()) {
    absl::StrAppend(&text, ", GPUPRIO_TRACE_DURATION_S=", absl::ToInt64Seconds(*w.duration));
  }
  return text;
}

void TracerCore::OpenWindow() {
  absl::MutexLock lock(&window_mu_);
  if (finished_.load(std::memory_order_acquire)) return;  // the process is writing or ended
  if (absl::Status s = EnableActivities(per_api_); !s.ok()) {
    Log(LogLevel::kError, absl::StrCat("trace: recording could not start (", DescribeWindow(),
                                       "): ", s.message(), "; no trace will be written"));
    return;
  }
  window_opened_ = true;
  capturing_.store(true, std::memory_order_release);
  Log(LogLevel::kInfo, absl::StrCat("trace: recording started (", DescribeWindow(), ")"));
}

void TracerCore::CloseWindow() {
  capturing_.store(false, std::memory_order_release);
  Log(LogLevel::kInfo, absl::StrCat("trace: recording ended (", DescribeWindow(),
                                    "); writing the trace, the program goes on"));
  // Finish logs the outcome; the program is not told.
  (void)Finish();
}

void TracerCore::OnProfilerStart() {
  if (CaptureWindow* window = window_.load(std::memory_order_acquire)) {
    window->OnProfilerStart();
  } else {
    CaptureWindow::NoteEarlyProfilerStart();
  }
}

void TracerCore::OnProfilerStop() {
  if (CaptureWindow* window = window_.load(std::memory_order_acquire)) window->OnProfilerStop();
}

uint8_t* TracerCore::AcquireBuffer() {
  {
    absl::MutexLock lock(&pool_mu_);
    if (!free_buffers_.empty()) {
      uint8_t* buffer = free_buffers_.back();
      free_buffers_.pop_back();
      return buffer;
    }
  }
  if (!budget_.TryReserve(kActivityBufferBytes)) return nullptr;
  // malloc's 16-byte alignment satisfies CUPTI's ACTIVITY_RECORD_ALIGNMENT (8).
  auto* buffer = static_cast<uint8_t*>(std::malloc(kActivityBufferBytes));
  if (buffer == nullptr) budget_.Release(kActivityBufferBytes);
  return buffer;
}

void TracerCore::ReleaseBuffer(uint8_t* buffer) {
  {
    absl::MutexLock lock(&pool_mu_);
    if (free_buffers_.size() < kPooledBuffers) {
      free_buffers_.push_back(buffer);
      return;
    }
  }
  std::free(buffer);
  budget_.Release(kActivityBufferBytes);
}

void TracerCore::OnBufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *max_records = 0;  // as many as fit
  *buffer = AcquireBuffer();
  *size = *buffer != nullptr ? kActivityBufferBytes : 0;
  // A refused buffer makes CUPTI drop records, which it counts (cuptiActivityGetNumDroppedRecords).
  if (*buffer == nullptr) refused_buffers_.fetch_add(1, std::memory_order_relaxed);
}

void TracerCore::OnBufferCompleted(CUcontext context, uint32_t stream_id, uint8_t* buffer,
                                   size_t /*size*/, size_t valid_size) {
  // Ownership: CUPTI hands the buffer back here; it is decoded at once (kernel names copied) and
  // returned to the pool, so no raw CUPTI memory outlives this call.
  DecodedActivity local;
  DecodeActivityBuffer(buffer, valid_size, api_.activity_get_next_record, names_, &local);
  size_t dropped = 0;
  if (api_.activity_get_num_dropped_records(context, stream_id, &dropped) == CUPTI_SUCCESS) {
    cupti_dropped_.fetch_add(dropped, std::memory_order_relaxed);
  }
  if (buffer != nullptr) ReleaseBuffer(buffer);
  if (local.records == 0) return;
  if (!budget_.TryReserve(local.ApproximateBytes())) {
    cap_dropped_records_.fetch_add(local.records - local.unknown_records,
                                   std::memory_order_relaxed);
    return;
  }
  absl::MutexLock lock(&mu_);
  decoded_.Append(std::move(local));
}

void TracerCore::OnSubmit(scheduler::Op& op) {
  carrier_.Capture(op.trace);
  // Outside the capture window the op keeps id 0: nothing of it is recorded, at issue either.
  if (!capturing_.load(std::memory_order_relaxed)) return;
  op.trace.op_id = next_op_id_.fetch_add(1, std::memory_order_relaxed);
  const int64_t now = CuptiNow();
  SubmitRecord r;
  r.op_id = op.trace.op_id;
  r.api = op.name;
  r.priority = op.priority;
  r.stream = op.stream != nullptr ? reinterpret_cast<uintptr_t>(op.stream->stream) : 0;
  r.submit_ns = ToCupti(op.submit_ns, now);
  r.return_ns = now;  // OnSubmit runs just before the op is queued and the wrapper returns
  r.client_correlation_id = t_runtime_correlation_id;
  events_.RecordSubmit(r);
}

void TracerCore::OnCallerIssue(const char* api, int priority, CUstream stream,
                               int64_t begin_ns, int64_t end_ns) {
  if (!capturing_.load(std::memory_order_relaxed)) return;
  const int64_t now = CuptiNow();
  SubmitRecord r;
  r.op_id = next_op_id_.fetch_add(1, std::memory_order_relaxed);
  r.api = api;
  r.priority = priority;
  r.stream = reinterpret_cast<uintptr_t>(stream);
  r.submit_ns = ToCupti(begin_ns, now);
  r.return_ns = ToCupti(end_ns, now);
  r.client_correlation_id = t_runtime_correlation_id;
  r.on_caller = true;
  events_.RecordSubmit(r);
}

void TracerCore::OnDispatcherStart(int device) {
  const uint32_t tid = CurrentTid();
  (void)events_.Log();  // register the dispatcher's log now, off the issue path
  absl::MutexLock lock(&mu_);
  dispatcher_names_[tid] = absl::StrFormat("gpuprio dispatcher (GPU %d)", device);
}

void TracerCore::OnIssueBegin(const scheduler::Op& op) {
  if (op.trace.op_id != 0) {
    api_.activity_push_external_correlation_id(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2,
                                               op.trace.op_id);
  }
  carrier_.Push(op.trace);
  t_issue_begin_ns = CuptiNow();
}

void TracerCore::OnIssueEnd(const scheduler::Op& op, CUresult result) {
  const int64_t end = CuptiNow();
  carrier_.Pop(op.trace);
  if (op.trace.op_id == 0) return;
  uint64_t ignored = 0;
  api_.activity_pop_external_correlation_id(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, &ignored);
  events_.RecordIssue(IssueRecord{op.trace.op_id, t_issue_begin_ns, end, static_cast<int>(result)});
}

void TracerCore::OnQueueState(int device, int priority, int64_t pending,
                              uint64_t budget_in_use_ns) {
  if (!capturing_.load(std::memory_order_relaxed)) return;
  const int64_t now = CuptiNow();
  absl::MutexLock lock(&counters_mu_);
  const size_t before = counter_samples_.size();
  throttle_.Offer(QueueDepthCounterKey(device, priority), now, static_cast<double>(pending),
                  &counter_samples_);
  throttle_.Offer(BudgetCounterKey(device), now, static_cast<double>(budget_in_use_ns) / 1000.0,
                  &counter_samples_);
  const size_t added = counter_samples_.size() - before;
  if (added > 0 && !budget_.TryReserve(added * sizeof(CounterThrottle::Sample))) {
    counter_samples_.resize(before);
    dropped_counter_samples_.fetch_add(added, std::memory_order_relaxed);
  }
}

absl::Status TracerCore::Finish() {
  if (getpid() != owner_pid_) {
    // A forked child: its copy of the events is its parent's (and CUPTI does not trace across
    // fork). Checked first: a write the parent had under way when it forked never ends here.
    if (!fork_noted_.exchange(true, std::memory_order_relaxed)) {
      Log(LogLevel::kInfo,
          absl::StrFormat("trace: process %d is a fork of %d, which writes %s; this process "
                          "writes no trace",
                          getpid(), owner_pid_, options_.path));
    }
    return absl::OkStatus();
  }
  if (finished_.exchange(true, std::memory_order_acq_rel)) {
    finish_done_.WaitForNotification();
    return absl::OkStatus();
  }
  bool opened;
  {
    // Waits for an OpenWindow under way; none opens afterwards (it sees finished_).
    absl::MutexLock lock(&window_mu_);
    opened = window_opened_;
  }
  capturing_.store(false, std::memory_order_release);
  if (!opened) {
    Log(LogLevel::kWarning,
        absl::StrFormat("trace: recording never started (%s); no trace written to %s",
                        DescribeWindow(), options_.path));
    finish_done_.Notify();
    return absl::OkStatus();
  }
  absl::Status status = WriteTrace();
  finish_done_.Notify();
  return status;
}

absl::Status TracerCore::WriteTrace() {
  // No lock of ours is held across these CUPTI calls: the flush calls OnBufferCompleted (here
  // and on CUPTI's worker thread) under CUPTI's lock, and OnBufferCompleted takes mu_.
  for (CUpti_ActivityKind kind : kActivityKinds) api_.activity_disable(kind);
  const CUptiResult flushed = api_.activity_flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (flushed != CUPTI_SUCCESS) {
    Log(LogLevel::kWarning,
        absl::StrCat("trace: cuptiActivityFlushAll failed: ", api_.ErrorString(flushed),
                     "; the trace may miss the last records"));
  }
  // Records CUPTI dropped after the last buffer it completed (every buffer refused at the cap:
  // then no completion ever read the count) are read from the global queue now.
  size_t dropped_since_last_buffer = 0;
  if (api_.activity_get_num_dropped_records(nullptr, 0, &dropped_since_last_buffer) ==
      CUPTI_SUCCESS) {
    cupti_dropped_.fetch_add(dropped_since_last_buffer, std::memory_order_relaxed);
  }

  TraceInput input;
  input.pid = static_cast<uint32_t>(getpid());
  input.process_name = ThreadNameFromProc(input.pid);
  input.boot_id = BootIdFromProc();
  input.host = HostName();
  absl::flat_hash_map<uint32_t, std::string> dispatcher_names;
  {
    DecodedActivity decoded;
    absl::MutexLock lock(&mu_);
    decoded = std::move(decoded_);
    decoded_.Clear();
    dispatcher_names = dispatcher_names_;
    input.api_calls = std::move(decoded.api_calls);
    input.gpu_activities = std::move(decoded.gpu_activities);
    input.external_correlations = std::move(decoded.external_correlations);
    input.synchronizations = std::move(decoded.synchronizations);
    input.overheads = std::move(decoded.overheads);
  }
  AppendThreadEvents(events_, &input);
  {
    absl::MutexLock lock(&counters_mu_);
    throttle_.Flush(&counter_samples_);
    AppendCounters(counter_samples_, &input);
  }
  AddThreadNames(dispatcher_names, &ThreadNameFromProc, &input);
  input.base_ns = EarliestTimestamp(input);
  TraceDrops& drops = input.drops;
  drops.records_by_cupti = cupti_dropped_.load(std::memory_order_relaxed);
  drops.records_over_cap = cap_dropped_records_.load(std::memory_order_relaxed);
  drops.buffers_refused = refused_buffers_.load(std::memory_order_relaxed);
  drops.op_events = events_.dropped();
  drops.counter_samples = dropped_counter_samples_.load(std::memory_order_relaxed);

  const absl::Status written = WriteChromeTrace(input, options_.path);
  // The same counts as the file's otherData (taken once, above), in one line.
  std::string line = absl::StrFormat(
      "trace: %s %s (%d ops, %d GPU records, %d API records); dropped: %d CUPTI records "
      "(%d by CUPTI, %d over GPUPRIO_TRACE_MAX_MB=%d, %d buffers refused), %d op events, "
      "%d counter samples",
      written.ok() ? "wrote" : "could not write", options_.path, input.ops_submitted.size(),
      input.gpu_activities.size(), input.api_calls.size(), drops.cupti_records(),
      drops.records_by_cupti, drops.records_over_cap, options_.max_bytes >> 20,
      drops.buffers_refused, drops.op_events, drops.counter_samples);
  if (!written.ok()) absl::StrAppend(&line, ": ", written.message());
  // Whatever GPUPRIO_LOG says: where the trace went is what the user asked for (GPUPRIO_TRACE).
  // A report, not a problem, so it reads as info.
  if (written.ok()) {
    LogUnfiltered(LogLevel::kInfo, line);
  } else {
    Log(LogLevel::kError, line);
  }
  return written;
}

}  // namespace internal

void OnProfilerStart() {
  if (internal::TracerCore* core = internal::g_core.load(std::memory_order_acquire)) {
    core->OnProfilerStart();
  } else {
    CaptureWindow::NoteEarlyProfilerStart();
  }
}

void OnProfilerStop() {
  if (internal::TracerCore* core = internal::g_core.load(std::memory_order_acquire)) {
    core->OnProfilerStop();
  }
}

absl::StatusOr<std::unique_ptr<CuptiTracer>> CuptiTracer::Start(const CuptiApi& api,
                                                                 CuptiTracerOptions options) {
  ABSL_CONST_INIT static std::atomic<bool> started{false};
  if (started.exchange(true)) {
    return absl::FailedPreconditionError("a CUPTI tracer already runs in this process");
  }
  auto* core = new internal::TracerCore(api, std::move(options));
  if (absl::Status s = core->Start(); !s.ok()) {
    // CUPTI may have seen the core (g_core is set before callbacks are registered): leak it.
    started.store(false);
    return s;
  }
  return std::unique_ptr<CuptiTracer>(new CuptiTracer(core));
}

absl::Status CuptiTracer::Finish() { return core_->Finish(); }
absl::Status CuptiTracer::FinishActive() {
  internal::TracerCore* core = internal::g_core.load(std::memory_order_acquire);
  return core != nullptr ? core->Finish() : absl::OkStatus();
}
void CuptiTracer::OnSubmit(scheduler::Op& op) { core_->OnSubmit(op); }
void CuptiTracer::OnCallerIssue(const char* api, int priority, CUstream stream,
                                int64_t begin_ns, int64_t end_ns) {
  core_->OnCallerIssue(api, priority, stream, begin_ns, end_ns);
}
void CuptiTracer::OnDispatcherStart(int device) { core_->OnDispatcherStart(device); }
void CuptiTracer::OnIssueBegin(const scheduler::Op& op) { core_->OnIssueBegin(op); }
void CuptiTracer::OnIssueEnd(const scheduler::Op& op, CUresult result) {
  core_->OnIssueEnd(op, result);
}
void CuptiTracer::OnQueueState(int device, int priority, int64_t pending,
                               uint64_t budget_in_use_ns) {
  core_->OnQueueState(device, priority, pending, budget_in_use_ns);
}

}  // namespace gpuprio::tracer
