// A fake libcupti.so.13: the CUPTI functions gpuprio's tracer resolves, enough to record a trace
// without a GPU (tests point GPUPRIO_CUPTI_LIBRARY, or LoadCuptiLibrary, at it).
//
// Behaviour:
//   - one subscriber at a time (cuptiSubscribe fails with MULTIPLE_SUBSCRIBERS like CUPTI 13);
//   - cuptiActivityFlushAll produces FAKE_CUPTI_FLUSH_RECORDS kernel records (default 8): it asks
//     the client for buffers, fills each with CUpti_ActivityKernel10 records and hands it back;
//     records that find no buffer (the client refused one) are dropped and counted, as CUPTI does;
//   - cuptiActivityGetNumDroppedRecords returns that count and resets it;
//   - FAKE_CUPTI_FLUSH_HANG=1: cuptiActivityFlushAll never returns (a wedged driver);
//   - as CUPTI, no kernel record unless CONCURRENT_KERNEL was enabled (by the flush: ever);
//   - FAKE_CUPTI_KERNEL_NAME: the records' kernel name (default "fake_cupti_kernel").
// Timestamps are CLOCK_MONOTONIC nanoseconds. The optional per-API functions are absent, so the
// tracer enables whole domains.
#include <cupti.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace {

std::mutex g_mu;
bool g_subscribed = false;                                     // guarded by g_mu
CUpti_BuffersCallbackRequestFunc g_request = nullptr;          // guarded by g_mu
CUpti_BuffersCallbackCompleteFunc g_complete = nullptr;        // guarded by g_mu
std::atomic<size_t> g_dropped{0};
std::atomic<bool> g_kernel_enabled{false};

constexpr char kKernelName[] = "fake_cupti_kernel";

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

size_t FlushRecords() {
  const char* raw = std::getenv("FAKE_CUPTI_FLUSH_RECORDS");
  return raw != nullptr ? std::strtoull(raw, nullptr, 10) : 8;
}

constexpr size_t kRecordBytes = (sizeof(CUpti_ActivityKernel10) + 7) & ~size_t{7};

}  // namespace

extern "C" {

CUptiResult cuptiGetResultString(CUptiResult result, const char** str) {
  *str = result == CUPTI_SUCCESS ? "CUPTI_SUCCESS" : "CUPTI_ERROR_FAKE";
  return CUPTI_SUCCESS;
}

CUptiResult cuptiGetTimestamp(uint64_t* timestamp) {
  *timestamp = NowNs();
  return CUPTI_SUCCESS;
}

CUptiResult cuptiSetThreadIdType(CUpti_ActivityThreadIdType) { return CUPTI_SUCCESS; }

CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc, void*) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_subscribed) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  g_subscribed = true;
  static int handle;
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&handle);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_subscribed = false;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiEnableDomain(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain) {
  return CUPTI_SUCCESS;
}

CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain, uint32_t, const char** name) {
  *name = nullptr;
  return CUPTI_ERROR_INVALID_PARAMETER;
}

CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
  if (kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) g_kernel_enabled = true;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityDisable(CUpti_ActivityKind) { return CUPTI_SUCCESS; }

CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                           CUpti_BuffersCallbackCompleteFunc complete) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_request = request;
  g_complete = complete;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid, CUpti_Activity** record) {
  size_t offset = 0;
  if (*record != nullptr) {
    offset = static_cast<size_t>(reinterpret_cast<uint8_t*>(*record) - buffer) + kRecordBytes;
  }
  if (offset + kRecordBytes > valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(buffer + offset);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  *dropped = g_dropped.exchange(0);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityFlushAll(uint32_t) {
  const char* hang = std::getenv("FAKE_CUPTI_FLUSH_HANG");
  if (hang != nullptr && std::strcmp(hang, "1") == 0) {
    for (;;) pause();
  }
  CUpti_BuffersCallbackRequestFunc request;
  CUpti_BuffersCallbackCompleteFunc complete;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    request = g_request;
    complete = g_complete;
  }
  if (request == nullptr || complete == nullptr) return CUPTI_ERROR_INVALID_OPERATION;
  size_t remaining = g_kernel_enabled ? FlushRecords() : 0;
  const char* name = std::getenv("FAKE_CUPTI_KERNEL_NAME");
  if (name == nullptr || *name == '\0') name = kKernelName;
  const uint64_t now = NowNs();
  while (remaining > 0) {
    uint8_t* buffer = nullptr;
    size_t size = 0, max_records = 0;
    request(&buffer, &size, &max_records);
    if (buffer == nullptr || size < kRecordBytes) {
      g_dropped += remaining;  // no buffer: CUPTI drops what it cannot store, and counts it
      break;
    }
    size_t fit = size / kRecordBytes;
    if (max_records != 0 && max_records < fit) fit = max_records;
    const size_t n = fit < remaining ? fit : remaining;
    for (size_t i = 0; i < n; ++i) {
      CUpti_ActivityKernel10 r;
      std::memset(&r, 0, sizeof(r));
      r.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
      r.start = now + i * 1000;
      r.end = r.start + 500;
      r.deviceId = 0;
      r.streamId = 7;
      r.name = name;
      std::memcpy(buffer + i * kRecordBytes, &r, sizeof(r));
    }
    complete(nullptr, 0, buffer, size, n * kRecordBytes);
    remaining -= n;
  }
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind, uint64_t) {
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind, uint64_t* id) {
  if (id != nullptr) *id = 0;
  return CUPTI_SUCCESS;
}

}  // extern "C"
