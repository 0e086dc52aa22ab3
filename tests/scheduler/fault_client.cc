// A -lcuda client for fault-injection tests of gpuprio's scheduler: one real driver call that
// gpuprio's dispatcher or client paths make fails (fakecuda_fail_calls) while two threads work:
// a "deferring" thread at low priority (its work always waits in gpuprio's queues) and a "direct"
// thread at normal priority (its work is issued by the thread itself when the fast path allows).
// Usage: fault_client FAULT TARGET, TARGET being whose call fails: `dispatcher` (gpuprio's
// dispatcher thread), `direct_thread`, `deferring_thread` or `any` thread.
//
// Each thread runs units of work on its own stream (and a second stream it makes wait on an
// event); every unit appends to the thread's append log, so lost, repeated or reordered work
// shows, and most also move a value that is checked afterwards. The injection fails one call of
// this first phase. Then each thread synchronizes its streams twice and, once both have, runs a
// few more units and synchronizes again. Prints key=value counts: how often the injection fired,
// where the injected error surfaced (a call returning it at once, the first synchronize, the
// second, the later one), the append log's verdict, wrong data, and the driver calls received
// against those made; then `fault_client: FAULT ok`. The test decides what is right for each
// fault. A watchdog ends a stalled run with exit code 3.
//
// Special faults with their own workload:
//   ctx_set_current     two contexts, one thread each, launching on their legacy streams, so the
//                       dispatcher switches contexts between ops; one switch fails. Also prints
//                       wrong_context: launches the driver ran in the other context.
//   gpa_app             the application's own cuGetProcAddress fails once.
//   gpa_resolve_all     every cuGetProcAddress(_v2) fails from the start (gpuprio's resolution).
//   gpa_resolve_first   the first one fails.
#include <cuda.h>
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/fake_cuda/clients/client_check.h"
#include "tests/fake_cuda/fake_cuda_control.h"
#include "tests/scheduler/append_log.h"
#include "tests/scheduler/client_support.h"

using fake_client::Check;
using fake_client::CheckCu;
using fake_client::Fail;
using sched_client::AppendLog;

namespace {

constexpr int kUnits = 120;       // per thread
constexpr int kExtraUnits = 400;  // the direct thread's, until its injection fired
constexpr int kLaterUnits = 8;
constexpr int kMaxUnits = kUnits + kExtraUnits + kLaterUnits;
constexpr CUresult kInjected = CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
constexpr int kDeferring = 0;
constexpr int kDirect = 1;

enum class Unit { kAppend, kAppendEx, kEventCopy, kEventQuery, kEventSync, kHtoD, kDtoH, kDtoD,
                  kMemset };

struct Fault {
  const char* name;
  const char* api;  // the exported driver function that fails
  Unit unit;
  uint64_t nth;     // which matching call fails
  // Armed before the driver is first used, for every thread, `count` calls (0: all); otherwise
  // armed for the target thread once the workload's threads exist, for one call.
  bool before_start = false;
  uint64_t count = 1;
};

// An application's event record is cuEventRecordWithFlags here: the dispatcher's own completion
// marks are cuEventRecord, so an injection names one or the other (both go through the same
// interceptor in gpuprio).
constexpr Fault kFaults[] = {
    {"launch", "cuLaunchKernel", Unit::kAppend, 5},
    {"launch_ex", "cuLaunchKernelEx", Unit::kAppendEx, 5},
    {"event_record", "cuEventRecordWithFlags", Unit::kEventCopy, 3},
    {"event_record_mark", "cuEventRecord", Unit::kEventCopy, 3},
    {"event_query", "cuEventQuery", Unit::kEventQuery, 3},
    {"event_sync", "cuEventSynchronize", Unit::kEventSync, 3},
    {"stream_wait", "cuStreamWaitEvent", Unit::kEventCopy, 3},
    {"copy_htod", "cuMemcpyHtoDAsync_v2", Unit::kHtoD, 3},
    {"copy_dtoh", "cuMemcpyDtoHAsync_v2", Unit::kDtoH, 3},
    {"copy_dtod", "cuMemcpyDtoDAsync_v2", Unit::kDtoD, 3},
    {"memset", "cuMemsetD32Async", Unit::kMemset, 3},
    {"event_create", "cuEventCreate", Unit::kAppend, 1},
    {"event_elapsed", "cuEventElapsedTime", Unit::kAppend, 1},
    {"ctx_get_current", "cuCtxGetCurrent", Unit::kAppend, 3},
    {"stream_get_flags", "cuStreamGetFlags", Unit::kAppend, 1},
    {"param_info", "cuFuncGetParamInfo", Unit::kAppend, 2},
    {"pointer_attribute", "cuPointerGetAttribute", Unit::kHtoD, 1},
    // gpuprio resolves the driver's entry points through cuGetProcAddress_v2 at first use.
    {"gpa_resolve_all", "cuGetProcAddress_v2", Unit::kAppend, 1, true, 0},
    {"gpa_resolve_first", "cuGetProcAddress_v2", Unit::kAppend, 1, true, 1},
};

void StartWatchdog(int seconds) {
  std::thread([seconds] {
    std::this_thread::sleep_for(std::chrono::seconds(seconds));
    std::fprintf(stderr, "fault_client: %s stalled for %d s\n", fake_client::g_scenario, seconds);
    std::fflush(stderr);
    _exit(3);
  }).detach();
}

// Injected calls of `api` made by `tid` (0: any thread), from the fake's call log.
int InjectedCalls(const char* api, int64_t tid) {
  int n = 0;
  for (uint64_t i = 0, end = fakecuda_call_count(); i < end; ++i) {
    fakecuda_call_record c;
    fakecuda_get_call(i, &c);
    n += c.injected != 0 && std::strcmp(c.api, api) == 0 && (tid == 0 || c.tid == tid);
  }
  return n;
}

// The values a unit moves: nonzero and distinct per thread and unit.
uint32_t ValueOf(int worker, int unit) { return 0x1000000u | uint32_t(worker) << 16 | uint32_t(unit); }

// One working thread's streams, memory and what it saw.
struct Worker {
  int index = 0;
  int priority = 0;
  int64_t tid = 0;
  CUstream own = nullptr;     // its units' stream
  CUstream waiter = nullptr;  // made to wait on `event` (kEventCopy)
  CUevent event = nullptr;
  AppendLog log;
  CUdeviceptr produced = 0, consumed = 0;  // device, kMaxUnits u32 each
  uint32_t* host_src = nullptr;            // pinned
  uint32_t* host_dst = nullptr;            // pinned
  uint32_t units = 0;
  std::vector<uint32_t> appended;  // append values launched, in order
  // Where the injected error came back.
  int immediate = 0, first_sync = 0, second_sync = 0, later_sync = 0;
  int other_errors = 0;
  std::string other_error;
  uint64_t app_calls = 0;  // calls this thread made of the faulted API
};

class FaultRun {
 public:
  FaultRun(const Fault& fault, const std::string& target) : fault_(fault), target_(target) {}
  int Run();

 private:
  void Setup();
  void Work(Worker& w);
  void RunUnit(Worker& w, int i);
  // Counts the application's call of `api` and where an error came back.
  void Note(Worker& w, const char* api, CUresult r, bool query = false);
  CUresult Sync(Worker& w);
  bool Fired() const { return InjectedCalls(fault_.api, armed_tid_) > 0; }

  const Fault& fault_;
  const std::string target_;
  sched_client::Driver driver_;
  CUfunction append_ = nullptr, fill_ = nullptr, copy_ = nullptr;
  Worker workers_[2];
  int64_t dispatcher_tid_ = 0;
  int64_t armed_tid_ = 0;
  int fired_before_workload_ = 0;  // injected calls while the driver was first used
  std::atomic<int> units_done_{0}, synced_{0};  // threads past each phase
};

void FaultRun::Note(Worker& w, const char* api, CUresult r, bool query) {
  if (std::strcmp(api, fault_.api) == 0) ++w.app_calls;
  if (r == CUDA_SUCCESS || (query && r == CUDA_ERROR_NOT_READY)) return;
  if (r == kInjected) {
    ++w.immediate;
    return;
  }
  ++w.other_errors;
  if (w.other_error.empty()) w.other_error = std::string(api) + ":" + std::to_string(r);
}

void FaultRun::RunUnit(Worker& w, int i) {
  const uint32_t value = ValueOf(w.index, i);
  const uint32_t append_value =
      AppendLog::Encode(static_cast<uint32_t>(w.index), 0, static_cast<uint32_t>(w.appended.size()));
  CUdeviceptr slot_produced = w.produced + 4u * i, slot_consumed = w.consumed + 4u * i;
  uint32_t one = 1;
  uint32_t fill_value = value;
  void* fill_args[] = {&slot_produced, &fill_value, &one};
  void* copy_args[] = {&slot_consumed, &slot_produced, &one};
  if (fault_.unit == Unit::kAppendEx) {
    CUdeviceptr log = w.log.device();
    uint32_t v = append_value;
    void* args[] = {&log, &v};
    CUlaunchConfig config{};
    config.gridDimX = config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = config.blockDimY = config.blockDimZ = 1;
    config.hStream = w.own;
    Note(w, "cuLaunchKernelEx", cuLaunchKernelEx(&config, append_, args, nullptr));
    v = 0xdeadbeef;  // a deferred launch must own its copy of the parameters
  } else {
    Note(w, "cuLaunchKernel", w.log.Append(append_, w.own, append_value));
  }
  w.appended.push_back(append_value);
  switch (fault_.unit) {
    case Unit::kAppend:
    case Unit::kAppendEx:
      break;
    case Unit::kEventCopy:
      Note(w, "cuLaunchKernel",
           cuLaunchKernel(fill_, 1, 1, 1, 1, 1, 1, 0, w.own, fill_args, nullptr));
      Note(w, "cuEventRecordWithFlags", cuEventRecordWithFlags(w.event, w.own, 0));
      Note(w, "cuStreamWaitEvent", cuStreamWaitEvent(w.waiter, w.event, 0));
      Note(w, "cuLaunchKernel",
           cuLaunchKernel(copy_, 1, 1, 1, 1, 1, 1, 0, w.waiter, copy_args, nullptr));
      break;
    case Unit::kEventQuery:
      Note(w, "cuEventRecordWithFlags", cuEventRecordWithFlags(w.event, w.own, 0));
      Note(w, "cuEventQuery", cuEventQuery(w.event), /*query=*/true);
      break;
    case Unit::kEventSync:
      Note(w, "cuEventRecordWithFlags", cuEventRecordWithFlags(w.event, w.own, 0));
      Note(w, "cuEventSynchronize", cuEventSynchronize(w.event));
      break;
    case Unit::kHtoD:
      w.host_src[i] = value;
      Note(w, "cuMemcpyHtoDAsync_v2",
           cuMemcpyHtoDAsync(slot_consumed, &w.host_src[i], 4, w.own));
      break;
    case Unit::kDtoH:
      Note(w, "cuLaunchKernel",
           cuLaunchKernel(fill_, 1, 1, 1, 1, 1, 1, 0, w.own, fill_args, nullptr));
      Note(w, "cuMemcpyDtoHAsync_v2", cuMemcpyDtoHAsync(&w.host_dst[i], slot_produced, 4, w.own));
      break;
    case Unit::kDtoD:
      Note(w, "cuLaunchKernel",
           cuLaunchKernel(fill_, 1, 1, 1, 1, 1, 1, 0, w.own, fill_args, nullptr));
      Note(w, "cuMemcpyDtoDAsync_v2", cuMemcpyDtoDAsync(slot_consumed, slot_produced, 4, w.own));
      break;
    case Unit::kMemset:
      Note(w, "cuMemsetD32Async", cuMemsetD32Async(slot_consumed, value, 1, w.own));
      break;
  }
  fill_value = 0xdeadbeef;
  ++w.units;
}

CUresult FaultRun::Sync(Worker& w) {
  const CUresult own = cuStreamSynchronize(w.own);
  const CUresult waiter = cuStreamSynchronize(w.waiter);
  return own != CUDA_SUCCESS ? own : waiter;
}

void FaultRun::Work(Worker& w) {
  CheckCu(cuCtxSetCurrent(driver_.ctx), "cuCtxSetCurrent (worker)");
  sched_client::SetThreadPriority(w.priority);
  // Both threads finish a phase before either starts the next, so the injected failure (among
  // the first phase's calls) is reported by the first synchronize, whatever the threads' pace.
  auto barrier = [](std::atomic<int>& arrived) {
    ++arrived;
    while (arrived.load() < 2) std::this_thread::yield();
  };
  int i = 0;
  for (; i < kUnits; ++i) RunUnit(w, i);
  if (w.index == kDirect && target_ == "direct_thread") {
    // Its work is issued by the thread itself only while nothing waits in gpuprio's queues:
    // once the deferring thread's work is in, its next calls are.
    while (units_done_.load() < 1) std::this_thread::yield();
    for (int k = 0; k < kExtraUnits && !Fired(); ++k) RunUnit(w, i++);
  }
  barrier(units_done_);
  auto surfaced = [&](CUresult r, int* count) {
    if (r == kInjected) {
      ++*count;
    } else if (r != CUDA_SUCCESS) {
      Note(w, "cuStreamSynchronize", r);
    }
  };
  surfaced(Sync(w), &w.first_sync);
  surfaced(Sync(w), &w.second_sync);
  barrier(synced_);
  for (int k = 0; k < kLaterUnits; ++k) RunUnit(w, i++);
  surfaced(Sync(w), &w.later_sync);
}

void FaultRun::Setup() {
  driver_ = sched_client::InitDriver();
  append_ = sched_client::Function(driver_.module, "append_u32");
  fill_ = sched_client::Function(driver_.module, "fill_u32");
  copy_ = sched_client::Function(driver_.module, "copy_u32");
  for (int k = 0; k < 2; ++k) {
    Worker& w = workers_[k];
    w.index = k;
    w.priority = k == kDeferring ? -1 : 0;
    CheckCu(cuStreamCreate(&w.own, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    CheckCu(cuStreamCreate(&w.waiter, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    CheckCu(cuEventCreate(&w.event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    w.log = AppendLog(kMaxUnits);
    w.produced = sched_client::Alloc(kMaxUnits * 4);
    w.consumed = sched_client::Alloc(kMaxUnits * 4);
    void* p = nullptr;
    CheckCu(cuMemAllocHost(&p, kMaxUnits * 4), "cuMemAllocHost");
    w.host_src = static_cast<uint32_t*>(p);
    CheckCu(cuMemAllocHost(&p, kMaxUnits * 4), "cuMemAllocHost");
    w.host_dst = static_cast<uint32_t*>(p);
    std::memset(w.host_dst, 0, kMaxUnits * 4);
  }
  // The dispatcher's thread id: the thread that issues a low-priority launch (always queued). A
  // kernel without parameters, on a stream of its own, so the workload's first calls still read
  // append_u32's parameter layout and resolve the workload's streams.
  CUstream warm;
  CheckCu(cuStreamCreate(&warm, CU_STREAM_NON_BLOCKING), "cuStreamCreate (warm-up)");
  CUfunction empty = sched_client::Function(driver_.module, "empty");
  sched_client::SetThreadPriority(-1);
  const uint64_t before = fakecuda_call_count();
  CheckCu(cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, warm, nullptr, nullptr), "warm-up launch");
  CheckCu(cuStreamSynchronize(warm), "warm-up sync");
  sched_client::SetThreadPriority(-1000);
  for (uint64_t i = before, end = fakecuda_call_count(); i < end; ++i) {
    fakecuda_call_record c;
    fakecuda_get_call(i, &c);
    if (std::strcmp(c.api, "cuLaunchKernel") == 0) dispatcher_tid_ = c.tid;
  }
  // The logs count the workload's calls only; a fault armed before start stays armed.
  fired_before_workload_ = InjectedCalls(fault_.api, 0);
  fakecuda_reset();
  if (fault_.before_start && fault_.count == 0) {
    fakecuda_fail_calls(fault_.api, kInjected, 1, 0, 0);
    fakecuda_fail_calls("cuGetProcAddress", kInjected, 1, 0, 0);
  }
  fakecuda_set_kernel_duration_ns("fill_u32", 20000);  // a slow producer exposes early copies
}

int FaultRun::Run() {
  StartWatchdog(120);
  if (fault_.before_start) {
    fakecuda_fail_calls(fault_.api, kInjected, fault_.nth, fault_.count, 0);
    // The v1 ABI too: a driver's lookups through either fail.
    if (fault_.count == 0) fakecuda_fail_calls("cuGetProcAddress", kInjected, 1, 0, 0);
    Check(std::strcmp(fault_.api, "cuGetProcAddress_v2") == 0, "armed before start: lookups");
  }
  const int64_t main_tid = sched_client::Tid();
  Setup();
  // Workers start, say who they are, and wait until the injection is armed.
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (Worker& w : workers_) {
    threads.emplace_back([&, wp = &w] {
      wp->tid = sched_client::Tid();
      ++ready;
      while (!go.load()) std::this_thread::yield();
      Work(*wp);
    });
  }
  while (ready.load() < 2) std::this_thread::yield();
  if (fault_.before_start) {
    Check(target_ == "any", "a fault armed before start has TARGET any");
  } else if (target_ == "dispatcher") {
    armed_tid_ = dispatcher_tid_;
  } else if (target_ == "direct_thread") {
    armed_tid_ = workers_[kDirect].tid;
  } else if (target_ == "deferring_thread") {
    armed_tid_ = workers_[kDeferring].tid;
  } else if (target_ != "any") {
    Fail("TARGET must be dispatcher, direct_thread, deferring_thread or any");
  }
  if (!fault_.before_start) {
    Check(armed_tid_ != 0 || target_ == "any", "the target thread is known");
    fakecuda_fail_calls(fault_.api, kInjected, fault_.nth, 1, armed_tid_);
  }
  go = true;
  for (auto& t : threads) t.join();
  const CUresult final_sync = cuCtxSynchronize();

  // What reached the driver and ran.
  const int fired = fired_before_workload_ + InjectedCalls(fault_.api, 0);
  uint64_t driver_calls = 0;
  for (uint64_t i = 0, end = fakecuda_call_count(); i < end; ++i) {
    fakecuda_call_record c;
    fakecuda_get_call(i, &c);
    driver_calls += std::strcmp(c.api, fault_.api) == 0;
  }
  int immediate = 0, first = 0, second = 0, later = 0, other = 0;
  uint64_t app_calls = 0;
  std::string other_error, surfaced_on = "none";
  uint64_t missing = 0, duplicated = 0, out_of_order = 0, foreign = 0, data_wrong = 0;
  for (Worker& w : workers_) {
    immediate += w.immediate;
    first += w.first_sync;
    second += w.second_sync;
    later += w.later_sync;
    other += w.other_errors;
    app_calls += w.app_calls;
    if (other_error.empty()) other_error = w.other_error;
    if (w.immediate + w.first_sync + w.second_sync + w.later_sync > 0) {
      surfaced_on = w.index == kDeferring ? "deferring" : "direct";
    }
    std::vector<uint32_t> launched(2, 0);
    launched[w.index] = static_cast<uint32_t>(w.appended.size());
    const AppendLog::Verdict v = w.log.Check(launched, 0);
    missing += v.missing;
    duplicated += v.duplicated;
    out_of_order += v.out_of_order;
    foreign += v.foreign;
    if (!v.first_problem.empty()) {
      std::fprintf(stderr, "fault_client: %s thread: %s\n",
                   w.index == kDeferring ? "deferring" : "direct", v.first_problem.c_str());
    }
    const std::vector<uint32_t> consumed = sched_client::ReadBack(w.consumed, w.units);
    for (uint32_t i = 0; i < w.units; ++i) {
      const uint32_t expected = ValueOf(w.index, static_cast<int>(i));
      switch (fault_.unit) {
        case Unit::kEventCopy: case Unit::kHtoD: case Unit::kDtoD: case Unit::kMemset:
          data_wrong += consumed[i] != expected;
          break;
        case Unit::kDtoH:
          data_wrong += w.host_dst[i] != expected;
          break;
        default:
          break;
      }
    }
  }
  // Whether gpuprio scheduled at all: the warm-up's low-priority launch came from another thread.
  const bool scheduled = dispatcher_tid_ != 0 && dispatcher_tid_ != main_tid;
  std::printf("fault=%s api=%s target=%s fired=%d immediate=%d first_sync=%d second_sync=%d "
              "later_sync=%d final_ctx_sync=%d surfaced_on=%s other_errors=%d other_error=%s "
              "scheduled=%d\n",
              fault_.name, fault_.api, target_.c_str(), fired, immediate, first, second, later,
              static_cast<int>(final_sync), surfaced_on.c_str(), other,
              other_error.empty() ? "none" : other_error.c_str(), scheduled ? 1 : 0);
  std::printf("missing=%llu duplicated=%llu out_of_order=%llu foreign=%llu data_wrong=%llu "
              "app_calls=%llu driver_calls=%llu\n",
              static_cast<unsigned long long>(missing), static_cast<unsigned long long>(duplicated),
              static_cast<unsigned long long>(out_of_order),
              static_cast<unsigned long long>(foreign),
              static_cast<unsigned long long>(data_wrong),
              static_cast<unsigned long long>(app_calls),
              static_cast<unsigned long long>(driver_calls));
  return fake_client::Succeed();
}


// Two contexts, a thread in each launching appends on its context's legacy stream (everything
// deferred: run with GPUPRIO_DIRECT_ISSUE=0), so the dispatcher switches contexts between ops.
// While every context switch of the dispatcher fails, each thread runs its units and synchronizes
// twice; then switches work again and each runs a few more units.
int CtxSetCurrentFault() {
  StartWatchdog(120);
  sched_client::Driver a = sched_client::InitDriver();
  CUdevice dev;
  CheckCu(cuCtxGetDevice(&dev), "cuCtxGetDevice");
  CUcontext b;
  CheckCu(cuCtxCreate(&b, nullptr, 0, dev), "cuCtxCreate");
  CheckCu(cuCtxSetCurrent(a.ctx), "cuCtxSetCurrent");
  const CUfunction append = sched_client::Function(a.module, "append_u32");
  const CUcontext contexts[2] = {a.ctx, b};
  AppendLog logs[2] = {AppendLog(kMaxUnits), AppendLog(kMaxUnits)};
  uint32_t appended[2] = {0, 0};
  uint64_t legacy_stream[2] = {0, 0};  // the fake's id of each context's legacy stream
  // One append per context, one after the other: the dispatcher's thread, each legacy stream's
  // id, and (last switch) context b current on the dispatcher.
  for (int k = 0; k < 2; ++k) {
    std::thread([&, k] {
      CheckCu(cuCtxSetCurrent(contexts[k]), "cuCtxSetCurrent (thread)");
      CheckCu(logs[k].Append(append, nullptr, AppendLog::Encode(k, 0, appended[k]++)), "warm-up");
      CheckCu(cuStreamSynchronize(nullptr), "warm-up sync");
    }).join();
  }
  int64_t dispatcher_tid = 0;
  for (uint64_t i = 0, end = fakecuda_call_count(); i < end; ++i) {
    fakecuda_call_record c;
    fakecuda_get_call(i, &c);
    if (std::strcmp(c.api, "cuLaunchKernel") != 0) continue;
    CUdeviceptr log = 0;
    fakecuda_get_call_params(i, &log, sizeof(log));
    legacy_stream[log == logs[0].device() ? 0 : 1] = c.stream;
    dispatcher_tid = c.tid;
  }
  Check(legacy_stream[0] != 0 && legacy_stream[1] != 0 && legacy_stream[0] != legacy_stream[1],
        "each context's legacy stream is known");
  fakecuda_reset();
  fakecuda_fail_calls("cuCtxSetCurrent", kInjected, 1, 0, dispatcher_tid);
  std::atomic<int> synced{0};
  std::atomic<bool> disarmed{false};
  int first[2] = {}, second[2] = {}, later[2] = {}, immediate[2] = {}, other[2] = {};
  auto tally = [](CUresult r, int* injected, int* other_error) {
    if (r == kInjected) ++*injected;
    else if (r != CUDA_SUCCESS) ++*other_error;
  };
  std::vector<std::thread> threads;
  for (int k = 0; k < 2; ++k) {
    threads.emplace_back([&, k] {
      CheckCu(cuCtxSetCurrent(contexts[k]), "cuCtxSetCurrent (thread)");
      for (int i = 0; i < kUnits; ++i) {
        tally(logs[k].Append(append, nullptr, AppendLog::Encode(k, 0, appended[k]++)),
              &immediate[k], &other[k]);
      }
      tally(cuStreamSynchronize(nullptr), &first[k], &other[k]);
      tally(cuStreamSynchronize(nullptr), &second[k], &other[k]);
      ++synced;
      while (!disarmed.load()) std::this_thread::yield();
      for (int i = 0; i < kLaterUnits; ++i) {
        tally(logs[k].Append(append, nullptr, AppendLog::Encode(k, 0, appended[k]++)),
              &immediate[k], &other[k]);
      }
      tally(cuStreamSynchronize(nullptr), &later[k], &other[k]);
    });
  }
  while (synced.load() < 2) std::this_thread::yield();
  const int fired = InjectedCalls("cuCtxSetCurrent", dispatcher_tid);
  fakecuda_fail_calls("cuCtxSetCurrent", CUDA_SUCCESS, 1, 0, 0);
  disarmed = true;
  for (auto& t : threads) t.join();
  const CUresult final_sync = cuCtxSynchronize();
  // Launches the driver ran on the other context's legacy stream.
  int wrong_context = 0;
  for (uint64_t i = 0, end = fakecuda_call_count(); i < end; ++i) {
    fakecuda_call_record c;
    fakecuda_get_call(i, &c);
    if (std::strcmp(c.api, "cuLaunchKernel") != 0 || c.injected != 0 || c.result != 0) continue;
    CUdeviceptr log = 0;
    fakecuda_get_call_params(i, &log, sizeof(log));
    wrong_context += c.stream != legacy_stream[log == logs[0].device() ? 0 : 1];
  }
  uint64_t missing[2] = {}, duplicated = 0, out_of_order = 0, foreign = 0;
  for (int k = 0; k < 2; ++k) {
    std::vector<uint32_t> launched(2, 0);
    launched[k] = appended[k];
    const AppendLog::Verdict v = logs[k].Check(launched, 0);
    missing[k] = v.missing;
    duplicated += v.duplicated;
    out_of_order += v.out_of_order;
    foreign += v.foreign;
  }
  std::printf("fault=ctx_set_current api=cuCtxSetCurrent target=dispatcher fired=%d "
              "wrong_context=%d final_ctx_sync=%d\n",
              fired, wrong_context, static_cast<int>(final_sync));
  for (int k = 0; k < 2; ++k) {
    std::printf("ctx%d_immediate=%d ctx%d_first_sync=%d ctx%d_second_sync=%d ctx%d_later_sync=%d "
                "ctx%d_other_errors=%d ctx%d_missing=%llu\n",
                k, immediate[k], k, first[k], k, second[k], k, later[k], k, other[k], k,
                static_cast<unsigned long long>(missing[k]));
  }
  std::printf("duplicated=%llu out_of_order=%llu foreign=%llu units=%d\n",
              static_cast<unsigned long long>(duplicated),
              static_cast<unsigned long long>(out_of_order),
              static_cast<unsigned long long>(foreign), kUnits);
  return fake_client::Succeed();
}

// The application's own cuGetProcAddress fails once: gpuprio returns the driver's answer and
// leaves the pointer alone; the next lookup hands out gpuprio's wrapper, which works.
int GpaAppFault() {
  StartWatchdog(60);
  sched_client::Driver d = sched_client::InitDriver();
  const CUfunction append = sched_client::Function(d.module, "append_u32");
  CUstream stream;
  CheckCu(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  fakecuda_fail_calls("cuGetProcAddress_v2", kInjected, 1, 1, sched_client::Tid());
  void* const kUntouched = reinterpret_cast<void*>(0x1234);
  void* pfn = kUntouched;
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
  const CUresult first = cuGetProcAddress("cuLaunchKernel", &pfn, 12000, 0, &status);
  const bool untouched = pfn == kUntouched;
  const CUresult second = cuGetProcAddress("cuLaunchKernel", &pfn, 12000, 0, &status);
  Dl_info info{};
  const bool wrapped = second == CUDA_SUCCESS && dladdr(pfn, &info) != 0 &&
                       info.dli_fname != nullptr &&
                       std::strstr(info.dli_fname, "libgpuprio") != nullptr;
  AppendLog log(kUnits);
  int failed_launches = 0;
  if (second == CUDA_SUCCESS) {
    const auto launch = reinterpret_cast<CUresult (*)(CUfunction, unsigned, unsigned, unsigned,
                                                      unsigned, unsigned, unsigned, unsigned,
                                                      CUstream, void**, void**)>(pfn);
    for (uint32_t i = 0; i < kUnits; ++i) {
      CUdeviceptr p = log.device();
      uint32_t value = AppendLog::Encode(0, 0, i);
      void* args[] = {&p, &value};
      failed_launches += launch(append, 1, 1, 1, 1, 1, 1, 0, stream, args, nullptr) != 0;
    }
  }
  const CUresult sync = cuStreamSynchronize(stream);
  const AppendLog::Verdict v = log.Check({second == CUDA_SUCCESS ? kUnits : 0u}, 0);
  std::printf("fault=gpa_app api=cuGetProcAddress_v2 target=direct_thread fired=%d "
              "immediate=%d pointer_untouched=%d second_lookup=%d wrapped=%d failed_launches=%d "
              "first_sync=%d missing=%llu duplicated=%llu out_of_order=%llu\n",
              InjectedCalls("cuGetProcAddress_v2", 0), first == kInjected ? 1 : 0,
              untouched ? 1 : 0, static_cast<int>(second), wrapped ? 1 : 0, failed_launches,
              static_cast<int>(sync), static_cast<unsigned long long>(v.missing),
              static_cast<unsigned long long>(v.duplicated),
              static_cast<unsigned long long>(v.out_of_order));
  return fake_client::Succeed();
}

}  // namespace

int main(int argc, char** argv) {
  fake_client::g_client_name = "fault_client";
  if (argc < 3) Fail("usage: fault_client FAULT TARGET");
  fake_client::g_scenario = argv[1];
  const std::string name = argv[1];
  if (name == "ctx_set_current") return CtxSetCurrentFault();
  if (name == "gpa_app") return GpaAppFault();
  for (const Fault& f : kFaults) {
    if (name == f.name) return FaultRun(f, argv[2]).Run();
  }
  Fail("unknown fault");
}
