// A -lcuda client for the multi-GPU tests (multi_gpu_test.cc), run against the fake driver with
// two or more devices (FAKECUDA_DEVICES), natively and with libgpuprio.so preloaded. It uses
// device 0 and the last device ("device 1" below: 1 with two devices, 2 with three), each through
// its primary context. Each scenario (argv[1]) exits 0 only if every check holds and prints
// `multi_gpu_client: <scenario> ok` (plus key=value facts) last, except where it says otherwise.
//
// The cross-device scenarios share one shape, run for kIterations with a new value each time:
// device 0 runs a 3 ms kernel on a high-priority stream (the "occupant": with gpuprio, device 0's
// default- and low-priority work then waits in its dispatcher for a while, held back by the
// policy or by a twin stream's bounded queue), then the producer fills slot i of a device-0 buffer
// with ValueOf(i) (a slow kernel) and records an event; device 1's consumer stream waits on the
// event and reads slot i. A consumer whose wait reached the driver before its producer's record
// binds to an earlier record or none, and reads the slot's old contents (0).
//   event_streams     created streams: fill -> record -> wait -> cuMemcpyAsync into device-1 memory
//                     (unified addressing: a device-to-device copy across devices) -> add 1; every
//                     slot read back must be value + 1.
//   event_legacy      the same on each context's legacy NULL stream, switching the current context.
//   event_per_thread  the same on each device's per-thread default stream (CU_STREAM_PER_THREAD).
//   peer_copy         the same with cuMemcpyPeerAsync as the consumer's copy; then one synchronous
//                     cuMemcpyPeer of a freshly produced slot, which must see it at once.
//   host_func         the consumer is cuLaunchHostFunc / cuStreamAddCallback (alternately): the
//                     callback reads the device-0 slot itself and must see the value.
//   graph_other_device  a graph captured on a device-0 stream (copy_u32 then add_u32) is launched
//                     on a device-1 stream after the wait, then its result copied out; device 0
//                     waits for that copy before the next fill (an event the other way).
//   ctx_switch        one thread alternates cuCtxSetCurrent and cuCtxPushCurrent/PopCurrent
//                     between the devices, appending on each device's created (blocking) stream
//                     and legacy stream: every append of a device lands in submission order, and
//                     every one executed on its own device (fakecuda_get_exec's device).
//   stream_other_ctx  launches on a device-1 stream with a CUkernel (cuLibraryLoadData /
//                     cuLibraryGetKernel) while device 0's context is current, interleaved with
//                     launches on it with device 1's context current, behind a device-1 occupant:
//                     the stream's FIFO order holds and all of its work ran on device 1.
//   two_devices_one_thread  one thread, its priority switched through gpuprio_set_thread_priority,
//                     queues low-priority sleeps and high-priority appends on both devices and
//                     waits for the appends: all land in order on their own device; prints the
//                     high appends' worst latency.
//   green             kernels on both devices' created and legacy streams (device 1's also with
//                     device 0's context current): every fill_u32 (device 0's) ran on device 0,
//                     every add_u32 (device 1's) on device 1; with GPUPRIO_ISOLATION=force under
//                     gpuprio, every one of them in a green context.
//   exit_queued       on each device, a 100 ms high-priority kernel, then low-priority 20 ms
//                     kernels and a host function printing `exit_queued: device N done`; main
//                     returns without synchronising (`ok` is printed first, the device lines at
//                     exit).
//   fork_queued       work queued on both devices (low priority, behind a high kernel), then
//                     fork(): the child initialises its own driver, appends on both devices and
//                     copies across them, and exits 0 if all landed; the parent then synchronises
//                     and checks its own appends.
//   collective        a high-priority thread queues 3000 kernels of 1 ms on device 0 (~3 s of
//                     work); 0.2 s in, a low-priority thread launches rendezvous_u32 on device 0
//                     (on a stream of CUDA's high priority, so natively it runs next) and a
//                     high-priority thread its partner on device 1; both must complete. Prints
//                     collective_ms (launch to both ranks done) and chain_ms.
//   top               launches on both devices, then runs `$MULTI_GPU_TOP_CLI top --json` for its
//                     own GPUPRIO_DOMAIN: under gpuprio every GPU the process used lists it (one
//                     slot per GPU, each under its own UUID), with the process's priority.
#include <cuda.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
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
using sched_client::NowNs;
using sched_client::SetThreadPriority;

namespace {

constexpr int kIterations = 24;
constexpr uint64_t kOccupantNs = 3'000'000;  // device 0's high-priority kernel, per iteration
constexpr uint64_t kFillNs = 2'000'000;      // the slow producer
constexpr int kHighCudaPriority = -5;        // gpuprio priority 5
constexpr int kPriorityUnset = -1000;        // GPUPRIO_PRIORITY_UNSET
constexpr int kWatchdogSeconds = 120;

// Device 0 and device 1 (the last device), their primary contexts and a module loaded in each.
struct Devices {
  int ordinal[2] = {0, 1};
  CUcontext ctx[2] = {};
  CUmodule module[2] = {};
};
Devices g;

void Use(int d) { CheckCu(cuCtxSetCurrent(g.ctx[d]), "cuCtxSetCurrent"); }

void Init() {
  CheckCu(cuInit(0), "cuInit");
  int count = 0;
  CheckCu(cuDeviceGetCount(&count), "cuDeviceGetCount");
  Check(count >= 2, "at least two devices (FAKECUDA_DEVICES)");
  g.ordinal[1] = count - 1;
  static const char kImage[] = "fake module image";
  for (int d = 0; d < 2; ++d) {
    CUdevice dev;
    CheckCu(cuDeviceGet(&dev, g.ordinal[d]), "cuDeviceGet");
    CheckCu(cuDevicePrimaryCtxRetain(&g.ctx[d], dev), "cuDevicePrimaryCtxRetain");
    Use(d);
    CheckCu(cuModuleLoadData(&g.module[d], kImage), "cuModuleLoadData");
  }
  Use(0);
}

// A kernel of device d's module (it launches only on device d's streams).
CUfunction Fn(int d, const char* name) { return sched_client::Function(g.module[d], name); }

// Zeroed device memory of device d.
CUdeviceptr AllocOn(int d, size_t bytes) {
  Use(d);
  return sched_client::Alloc(bytes);
}

CUstream StreamOn(int d, unsigned flags, int cuda_priority = 0) {
  Use(d);
  CUstream s;
  CheckCu(cuStreamCreateWithPriority(&s, flags, cuda_priority), "cuStreamCreateWithPriority");
  return s;
}

void Launch(CUfunction f, CUstream s, void** args, const char* what) {
  CheckCu(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr), what);
}

void LaunchSleep(int d, CUstream s, uint64_t ns) {
  void* args[] = {&ns};
  Launch(Fn(d, "sleep_ns"), s, args, "sleep_ns launch");
}

uint32_t HostRead(CUdeviceptr p) {
  return __atomic_load_n(reinterpret_cast<const uint32_t*>(p), __ATOMIC_ACQUIRE);
}

uint32_t ValueOf(int i) { return 1000 + 7 * static_cast<uint32_t>(i); }

void StartWatchdog() {
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::seconds(kWatchdogSeconds));
    std::fprintf(stderr, "multi_gpu_client: %s FAILED: stalled for %d s\n", fake_client::g_scenario,
                 kWatchdogSeconds);
    std::fflush(stderr);
    _exit(3);
  }).detach();
}

// Every slot of `got` must be expected(i); names the first that is not.
template <typename Expected>
void CheckSlots(const std::vector<uint32_t>& got, Expected expected, const char* what) {
  int bad = 0;
  std::string first;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == expected(static_cast<int>(i))) continue;
    if (++bad == 1) {
      first = "iteration " + std::to_string(i) + ": " + what + " " + std::to_string(got[i]) +
              ", expected " + std::to_string(expected(static_cast<int>(i)));
    }
  }
  std::printf("stale=%d of %zu\n", bad, got.size());
  if (bad != 0) {
    // Old contents: the consumer ran before the producer it waited for; a later value: the next
    // iteration's producer ran before it (a wait the other way did not hold).
    Fail((std::to_string(bad) + " of " + std::to_string(got.size()) +
          " consumers saw other data than their producer's; first: " + first)
             .c_str());
  }
}

// --- The cross-device producer/consumer scenarios ---------------------------------------------

// Where one side's work goes: a device, and a stream of it (a created one, nullptr for the legacy
// stream, or CU_STREAM_PER_THREAD).
struct Side {
  int device;
  CUstream stream;
};

// What the scenarios share: the occupant, the producer's buffer and two events used in turn
// (re-recording an event is the common pattern).
struct Chain {
  explicit Chain(Side producer_side, Side consumer_side)
      : producer(producer_side), consumer(consumer_side) {
    fakecuda_set_kernel_duration_ns("fill_u32", kFillNs);
    occupant = StreamOn(0, CU_STREAM_NON_BLOCKING, kHighCudaPriority);
    src = AllocOn(0, kIterations * 4 + 4);
    Use(0);
    for (CUevent& e : events) CheckCu(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  }

  // Device 0: the occupant, fill slot i with ValueOf(i), record; then device 1's stream waits.
  CUevent ProduceAndWait(int i) {
    Use(0);
    LaunchSleep(0, occupant, kOccupantNs);
    CUdeviceptr slot = src + 4 * i;
    uint32_t value = ValueOf(i), one = 1;
    void* args[] = {&slot, &value, &one};
    Use(producer.device);
    Launch(Fn(producer.device, "fill_u32"), producer.stream, args, "producer fill");
    CUevent event = events[i % 2];
    CheckCu(cuEventRecord(event, producer.stream), "cuEventRecord");
    Use(consumer.device);
    CheckCu(cuStreamWaitEvent(consumer.stream, event, 0), "cuStreamWaitEvent");
    return event;
  }

  void AddOne(CUdeviceptr p) {
    uint32_t delta = 1, one = 1;
    void* args[] = {&p, &delta, &one};
    Launch(Fn(consumer.device, "add_u32"), consumer.stream, args, "consumer add");
  }

  void SyncBoth() {
    Use(consumer.device);
    CheckCu(cuStreamSynchronize(consumer.stream), "consumer sync");
    Use(0);
    CheckCu(cuCtxSynchronize(), "device 0 sync");
  }

  Side producer, consumer;
  CUstream occupant = nullptr;
  CUdeviceptr src = 0;
  CUevent events[2] = {};
};

// fill -> record -> wait -> cuMemcpyAsync (or cuMemcpyPeerAsync) -> add, kIterations times.
int CopyChain(Side producer, Side consumer, bool peer) {
  Chain chain(producer, consumer);
  const CUdeviceptr dst = AllocOn(1, kIterations * 4);
  for (int i = 0; i < kIterations; ++i) {
    chain.ProduceAndWait(i);
    const CUdeviceptr to = dst + 4 * i, from = chain.src + 4 * i;
    if (peer) {
      CheckCu(cuMemcpyPeerAsync(to, g.ctx[1], from, g.ctx[0], 4, consumer.stream),
              "cuMemcpyPeerAsync");
    } else {
      CheckCu(cuMemcpyAsync(to, from, 4, consumer.stream), "cuMemcpyAsync (device 0 to 1)");
    }
    chain.AddOne(to);
  }
  chain.SyncBoth();
  Use(1);
  CheckSlots(
      sched_client::ReadBack(dst, kIterations), [](int i) { return ValueOf(i) + 1; },
      "device 1 read");
  if (peer) {
    // A synchronous peer copy is ordered after the source context's queued work.
    Use(0);
    LaunchSleep(0, chain.occupant, kOccupantNs);
    CUdeviceptr slot = chain.src + 4 * kIterations;
    uint32_t value = 4242, one = 1;
    void* args[] = {&slot, &value, &one};
    Launch(Fn(0, "fill_u32"), producer.stream, args, "last fill");
    Use(1);
    CheckCu(cuMemcpyPeer(dst, g.ctx[1], slot, g.ctx[0], 4), "cuMemcpyPeer");
    const uint32_t got = HostRead(dst);
    std::printf("sync_peer_copy=%u\n", got);
    Check(got == value, "cuMemcpyPeer saw the fill queued before it on device 0");
  }
  return fake_client::Succeed();
}

int EventStreams(bool peer) {
  const CUstream s0 = StreamOn(0, 0);
  const CUstream s1 = StreamOn(1, 0);
  return CopyChain({0, s0}, {1, s1}, peer);
}

int EventLegacy() { return CopyChain({0, nullptr}, {1, nullptr}, false); }

int EventPerThread() {
  return CopyChain({0, CU_STREAM_PER_THREAD}, {1, CU_STREAM_PER_THREAD}, false);
}

struct Seen {
  CUdeviceptr slot;
  uint32_t value;
};

void ReadSlot(void* data) {
  auto* seen = static_cast<Seen*>(data);
  seen->value = HostRead(seen->slot);
}

void CUDA_CB ReadSlotCallback(CUstream, CUresult status, void* data) {
  if (status == CUDA_SUCCESS) ReadSlot(data);
}

int HostFunc() {
  const CUstream s0 = StreamOn(0, 0);
  const CUstream s1 = StreamOn(1, 0);
  Chain chain({0, s0}, {1, s1});
  std::vector<Seen> seen(kIterations);
  for (int i = 0; i < kIterations; ++i) {
    chain.ProduceAndWait(i);
    seen[i] = {chain.src + 4 * i, 0};
    if (i % 2 == 0) {
      CheckCu(cuLaunchHostFunc(s1, ReadSlot, &seen[i]), "cuLaunchHostFunc");
    } else {
      CheckCu(cuStreamAddCallback(s1, ReadSlotCallback, &seen[i], 0), "cuStreamAddCallback");
    }
  }
  chain.SyncBoth();
  std::vector<uint32_t> got;
  for (const Seen& s : seen) got.push_back(s.value);
  CheckSlots(got, ValueOf, "the host function read");
  return fake_client::Succeed();
}

int GraphOtherDevice() {
  const CUstream s0 = StreamOn(0, 0);
  const CUstream s1 = StreamOn(1, 0);
  Chain chain({0, s0}, {1, s1});
  // The graph reads slot 0 of the producer's buffer into device-1 memory and adds 1 there.
  CUdeviceptr slot = chain.src;
  CUdeviceptr result = AllocOn(1, 4);
  const CUdeviceptr out = AllocOn(1, kIterations * 4);
  const CUstream capture = StreamOn(0, CU_STREAM_NON_BLOCKING);
  CheckCu(cuStreamBeginCapture(capture, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
  uint32_t one = 1;
  void* copy_args[] = {&result, &slot, &one};
  Launch(Fn(0, "copy_u32"), capture, copy_args, "captured copy");
  void* add_args[] = {&result, &one, &one};
  Launch(Fn(0, "add_u32"), capture, add_args, "captured add");
  CUgraph graph;
  CheckCu(cuStreamEndCapture(capture, &graph), "cuStreamEndCapture");
  CUgraphExec exec;
  CheckCu(cuGraphInstantiateWithFlags(&exec, graph, 0), "cuGraphInstantiateWithFlags");
  CUevent back;
  Use(1);
  CheckCu(cuEventCreate(&back, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  for (int i = 0; i < kIterations; ++i) {
    // Every iteration fills slot 0: it must wait until the graph of the last one has read it.
    Use(0);
    if (i > 0) CheckCu(cuStreamWaitEvent(s0, back, 0), "cuStreamWaitEvent (device 0)");
    LaunchSleep(0, chain.occupant, kOccupantNs);
    uint32_t value = ValueOf(i);
    void* fill_args[] = {&slot, &value, &one};
    Launch(Fn(0, "fill_u32"), s0, fill_args, "producer fill");
    CheckCu(cuEventRecord(chain.events[i % 2], s0), "cuEventRecord");
    Use(1);
    CheckCu(cuStreamWaitEvent(s1, chain.events[i % 2], 0), "cuStreamWaitEvent (device 1)");
    CheckCu(cuGraphLaunch(exec, s1), "cuGraphLaunch");
    CheckCu(cuMemcpyAsync(out + 4 * i, result, 4, s1), "cuMemcpyAsync (result)");
    CheckCu(cuEventRecord(back, s1), "cuEventRecord (device 1)");
  }
  chain.SyncBoth();
  Use(1);
  CheckSlots(
      sched_client::ReadBack(out, kIterations), [](int i) { return ValueOf(i) + 1; },
      "the graph computed");
  CheckCu(cuGraphExecDestroy(exec), "cuGraphExecDestroy");
  CheckCu(cuGraphDestroy(graph), "cuGraphDestroy");
  return fake_client::Succeed();
}

// --- Streams and contexts ---------------------------------------------------------------------

// The device field of every exec record of `kernel` from record `from` on, counted per ordinal.
std::vector<int> ExecDevices(const char* kernel, uint64_t from, std::vector<int>* green = nullptr) {
  std::vector<int> count(64, 0);
  if (green != nullptr) green->assign(64, 0);
  for (uint64_t i = from, n = fakecuda_exec_count(); i < n; ++i) {
    fakecuda_exec_record e;
    fakecuda_get_exec(i, &e);
    if (std::strcmp(e.what, kernel) != 0 || e.device < 0 || e.device >= 64) continue;
    ++count[e.device];
    if (green != nullptr && e.green) ++(*green)[e.device];
  }
  return count;
}

void CheckLog(const AppendLog& log, uint32_t launched, const char* what) {
  const AppendLog::Verdict v = log.Check({launched}, 0);
  std::printf("%s_entries=%lu\n", what, static_cast<unsigned long>(v.entries));
  if (!v.ok()) Fail((std::string(what) + ": " + v.first_problem).c_str());
}

int CtxSwitch() {
  constexpr int kOps = 400;
  CUstream stream[2];
  AppendLog logs[2];
  for (int d = 0; d < 2; ++d) {
    stream[d] = StreamOn(d, 0);  // blocking: ordered with the legacy stream
    logs[d] = AppendLog(kOps);
  }
  fakecuda_set_kernel_duration_ns("append_u32", 20'000);
  const uint64_t from = fakecuda_exec_count();
  Use(0);
  std::mt19937 rng(7);
  uint32_t launched[2] = {0, 0};
  for (int k = 0; k < kOps; ++k) {
    const int d = static_cast<int>(rng() % 2);
    const bool push = (k / 8) % 2 == 1;  // runs of each way of switching
    if (push) {
      CheckCu(cuCtxPushCurrent(g.ctx[d]), "cuCtxPushCurrent");
    } else {
      Use(d);
    }
    const CUstream s = rng() % 2 ? stream[d] : nullptr;
    CheckCu(logs[d].Append(Fn(d, "append_u32"), s, AppendLog::Encode(0, 0, launched[d]++)),
            "append");
    if (push) {
      CUcontext popped = nullptr;
      CheckCu(cuCtxPopCurrent(&popped), "cuCtxPopCurrent");
      Check(popped == g.ctx[d], "cuCtxPopCurrent returned the pushed context");
    }
  }
  for (int d = 0; d < 2; ++d) {
    Use(d);
    CheckCu(cuCtxSynchronize(), "cuCtxSynchronize");
  }
  for (int d = 0; d < 2; ++d) {
    Use(d);
    CheckLog(logs[d], launched[d], d == 0 ? "device0" : "device1");
  }
  const std::vector<int> ran = ExecDevices("append_u32", from);
  std::printf("ran_device0=%d ran_device1=%d\n", ran[g.ordinal[0]], ran[g.ordinal[1]]);
  Check(ran[g.ordinal[0]] == static_cast<int>(launched[0]) &&
            ran[g.ordinal[1]] == static_cast<int>(launched[1]),
        "every append executed on its own device");
  return fake_client::Succeed();
}

CUkernel LibraryKernel(const char* name) {
  static CUlibrary lib = [] {
    CUlibrary l;
    static const char kImage[] = "fake library image";
    CheckCu(cuLibraryLoadData(&l, kImage, nullptr, nullptr, 0, nullptr, nullptr, 0),
            "cuLibraryLoadData");
    return l;
  }();
  CUkernel k;
  CheckCu(cuLibraryGetKernel(&k, lib, name), "cuLibraryGetKernel");
  return k;
}

int StreamOtherCtx() {
  constexpr int kRounds = 20;
  const CUstream s = StreamOn(1, CU_STREAM_NON_BLOCKING);
  const CUstream occupant = StreamOn(1, CU_STREAM_NON_BLOCKING, kHighCudaPriority);
  const CUfunction append_kernel = reinterpret_cast<CUfunction>(LibraryKernel("append_u32"));
  Use(1);
  const AppendLog log(kRounds * 4);
  const uint64_t from = fakecuda_exec_count();
  uint32_t seq = 0;
  for (int r = 0; r < kRounds; ++r) {
    Use(1);
    LaunchSleep(1, occupant, kOccupantNs);
    CheckCu(log.Append(Fn(1, "append_u32"), s, AppendLog::Encode(0, 0, seq++)),
            "append (device 1 current)");
    Use(0);
    for (int k = 0; k < 2; ++k) {
      CheckCu(log.Append(append_kernel, s, AppendLog::Encode(0, 0, seq++)),
              "append of a CUkernel (device 0 current)");
    }
    Use(1);
    CheckCu(log.Append(Fn(1, "append_u32"), s, AppendLog::Encode(0, 0, seq++)),
            "append (device 1 current)");
  }
  Use(1);
  CheckCu(cuStreamSynchronize(s), "cuStreamSynchronize");
  CheckCu(cuCtxSynchronize(), "cuCtxSynchronize");
  CheckLog(log, seq, "stream");
  const std::vector<int> ran = ExecDevices("append_u32", from);
  std::printf("ran_device0=%d ran_device1=%d\n", ran[g.ordinal[0]], ran[g.ordinal[1]]);
  Check(ran[g.ordinal[1]] == static_cast<int>(seq), "every append of the stream ran on device 1");
  return fake_client::Succeed();
}

int TwoDevicesOneThread() {
  constexpr int kRounds = 10;
  CUstream low[2], high[2];
  AppendLog logs[2];
  for (int d = 0; d < 2; ++d) {
    low[d] = StreamOn(d, CU_STREAM_NON_BLOCKING);
    high[d] = StreamOn(d, CU_STREAM_NON_BLOCKING);
    logs[d] = AppendLog(kRounds);
  }
  const uint64_t from = fakecuda_exec_count();
  uint32_t launched[2] = {0, 0};
  int64_t worst_us = 0;
  for (int r = 0; r < kRounds; ++r) {
    SetThreadPriority(-1);
    for (int d = 0; d < 2; ++d) {
      Use(d);
      for (int k = 0; k < 3; ++k) LaunchSleep(d, low[d], 1'000'000);
    }
    SetThreadPriority(1);
    const int64_t begin = NowNs();
    for (int d = 0; d < 2; ++d) {
      Use(d);
      CheckCu(logs[d].Append(Fn(d, "append_u32"), high[d], AppendLog::Encode(0, 0, launched[d]++)),
              "high append");
    }
    for (int d = 0; d < 2; ++d) {
      Use(d);
      CheckCu(cuStreamSynchronize(high[d]), "high sync");
    }
    worst_us = std::max(worst_us, (NowNs() - begin) / 1000);
  }
  SetThreadPriority(kPriorityUnset);
  for (int d = 0; d < 2; ++d) {
    Use(d);
    CheckCu(cuCtxSynchronize(), "cuCtxSynchronize");
    CheckLog(logs[d], launched[d], d == 0 ? "device0" : "device1");
  }
  const std::vector<int> appends = ExecDevices("append_u32", from);
  const std::vector<int> sleeps = ExecDevices("sleep_ns", from);
  std::printf("high_worst_us=%ld\n", static_cast<long>(worst_us));
  Check(appends[g.ordinal[0]] == kRounds && appends[g.ordinal[1]] == kRounds,
        "every append ran on its own device");
  Check(sleeps[g.ordinal[0]] == 3 * kRounds && sleeps[g.ordinal[1]] == 3 * kRounds,
        "every low kernel ran on its own device");
  return fake_client::Succeed();
}

// Whether this run is one where every kernel must run in a green context: gpuprio loaded in
// schedule mode with GPUPRIO_ISOLATION=force.
bool ExpectGreen() {
  using ModeFn = const char* (*)();
  const auto mode = sched_client::FakeControl<ModeFn>("gpuprio_mode");
  const char* isolation = std::getenv("GPUPRIO_ISOLATION");
  return mode != nullptr && std::strcmp(mode(), "schedule") == 0 && isolation != nullptr &&
         std::strcmp(isolation, "force") == 0;
}

int Green() {
  constexpr int kRounds = 30;
  const bool expect_green = ExpectGreen();
  CUstream stream[2];
  // Blocking streams: ordered with their legacy stream, so the last fill is the last to run.
  for (int d = 0; d < 2; ++d) stream[d] = StreamOn(d, 0);
  CUdeviceptr buf[2] = {AllocOn(0, 4), AllocOn(1, 4)};
  const CUfunction add_kernel = reinterpret_cast<CUfunction>(LibraryKernel("add_u32"));
  const uint64_t from = fakecuda_exec_count();
  uint32_t one = 1, adds = 0;
  uint32_t fill_value = 0;
  for (int r = 0; r < kRounds; ++r) {
    // Device 0: fill_u32 on its created and legacy streams.
    Use(0);
    fill_value = 100 + r;
    void* fill_args[] = {&buf[0], &fill_value, &one};
    Launch(Fn(0, "fill_u32"), r % 2 ? stream[0] : nullptr, fill_args, "fill (device 0)");
    // Device 1: add_u32 on its created stream with device 0's context current (a CUkernel), and
    // on its created and legacy streams with its own context current.
    void* add_args[] = {&buf[1], &one, &one};
    Launch(add_kernel, stream[1], add_args, "add (device 1's stream, device 0 current)");
    ++adds;
    Use(1);
    Launch(Fn(1, "add_u32"), r % 2 ? stream[1] : nullptr, add_args, "add (device 1)");
    ++adds;
  }
  for (int d = 0; d < 2; ++d) {
    Use(d);
    CheckCu(cuCtxSynchronize(), "cuCtxSynchronize");
  }
  Check(HostRead(buf[0]) == fill_value, "device 0's last fill landed");
  Check(HostRead(buf[1]) == adds, "every add of device 1 landed once");
  std::vector<int> fill_green, add_green;
  const std::vector<int> fills = ExecDevices("fill_u32", from, &fill_green);
  const std::vector<int> add_ran = ExecDevices("add_u32", from, &add_green);
  const int d0 = g.ordinal[0], d1 = g.ordinal[1];
  std::printf(
      "fills_device0=%d fills_device1=%d adds_device0=%d adds_device1=%d "
      "green_fills=%d green_adds=%d expect_green=%d\n",
      fills[d0], fills[d1], add_ran[d0], add_ran[d1], fill_green[d0], add_green[d1],
      expect_green ? 1 : 0);
  Check(fills[d0] == kRounds && fills[d1] == 0, "every fill_u32 (device 0's) ran on device 0");
  Check(add_ran[d1] == static_cast<int>(adds) && add_ran[d0] == 0,
        "every add_u32 (device 1's) ran on device 1");
  if (expect_green) {
    Check(fill_green[d0] == kRounds, "every kernel of device 0 ran in a green context");
    Check(add_green[d1] == static_cast<int>(adds),
          "every kernel of device 1 ran in a green context");
  }
  return fake_client::Succeed();
}

int Top() {
  uint32_t one = 1;
  for (int d = 0; d < 2; ++d) {
    Use(d);
    CUdeviceptr buf = AllocOn(d, 4);
    void* args[] = {&buf, &one, &one};
    Launch(Fn(d, "add_u32"), nullptr, args, "add");
    CheckCu(cuCtxSynchronize(), "cuCtxSynchronize");
  }
  const char* cli = std::getenv("MULTI_GPU_TOP_CLI");
  const char* domain = std::getenv("GPUPRIO_DOMAIN");
  if (cli == nullptr || domain == nullptr) Fail("MULTI_GPU_TOP_CLI and GPUPRIO_DOMAIN must be set");
  const std::string command =
      std::string(cli) + " top --json --interval 0.1 --domain " + domain + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) Fail("popen gpuprio top");
  std::string out;
  char chunk[4096];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof(chunk), pipe)) > 0) out.append(chunk, n);
  const int status = pclose(pipe);
  std::printf("%s\n", out.c_str());
  Check(status == 0, "gpuprio top exits 0");
  auto count = [&](const std::string& needle) {
    int found = 0;
    for (size_t at = out.find(needle); at != std::string::npos; at = out.find(needle, at + 1)) {
      ++found;
    }
    return found;
  };
  // json.dumps(sort_keys=True): `"pid": N, ` inside each process entry, one per GPU it uses.
  const std::string pid = "\"pid\": " + std::to_string(getpid()) + ",";
  std::printf("gpus=%d own_slots=%d\n", count("\"uuid\": \"GPU-"), count(pid));
  // Other GPUs of the test's domain may be listed too (segments of earlier scenarios).
  Check(count(pid) == 2, "this process listed on both GPUs (one slot each)");
  return fake_client::Succeed();
}

// --- Process lifetime --------------------------------------------------------------------------

const char* const kDeviceDone[2] = {"exit_queued: device 0 done\n", "exit_queued: device 1 done\n"};

void PrintDone(void* data) {
  std::fputs(static_cast<const char*>(data), stdout);
  std::fflush(stdout);
}

int ExitQueued() {
  for (int d = 0; d < 2; ++d) {
    const CUstream high = StreamOn(d, CU_STREAM_NON_BLOCKING, kHighCudaPriority);
    const CUstream low = StreamOn(d, CU_STREAM_NON_BLOCKING);
    SetThreadPriority(kPriorityUnset);
    LaunchSleep(d, high, 100'000'000);
    SetThreadPriority(-1);
    for (int k = 0; k < 5; ++k) LaunchSleep(d, low, 20'000'000);
    CheckCu(cuLaunchHostFunc(low, PrintDone, const_cast<char*>(kDeviceDone[d])),
            "cuLaunchHostFunc");
  }
  // No synchronisation: what is queued must still run, and print, before the process ends.
  return fake_client::Succeed();
}

// The child's own two-device check on a fresh driver: appends on each device, then a copy of
// device 0's log into device-1 memory on device 1 (after a synchronize: cross-device events are
// the event scenarios' business). 0 if all holds, else a code saying what did not.
int ChildCheck() {
  fake_client::g_scenario = "fork_queued (child)";
  Init();
  CUstream s[2];
  AppendLog logs[2];
  for (int d = 0; d < 2; ++d) {
    s[d] = StreamOn(d, 0);
    logs[d] = AppendLog(8);
    for (uint32_t k = 0; k < 8; ++k) {
      if (logs[d].Append(Fn(d, "append_u32"), s[d], AppendLog::Encode(0, 0, k)) != CUDA_SUCCESS) {
        return 10 + d;
      }
    }
  }
  Use(0);
  if (cuStreamSynchronize(s[0]) != CUDA_SUCCESS) return 12;
  const CUdeviceptr copy = AllocOn(1, 9 * 4);
  if (cuMemcpyAsync(copy, logs[0].device(), 9 * 4, s[1]) != CUDA_SUCCESS) return 13;
  if (cuStreamSynchronize(s[1]) != CUDA_SUCCESS) return 14;
  for (int d = 0; d < 2; ++d) {
    Use(d);
    if (!logs[d].Check({8}, 0).ok()) return 15 + d;
  }
  if (HostRead(copy) != 8 || HostRead(copy + 4 * 8) != AppendLog::Encode(0, 0, 7)) return 17;
  return 0;
}

int ForkQueued() {
  constexpr int kAppends = 50;
  CUstream high[2], low[2];
  AppendLog logs[2];
  for (int d = 0; d < 2; ++d) {
    high[d] = StreamOn(d, CU_STREAM_NON_BLOCKING, kHighCudaPriority);
    low[d] = StreamOn(d, CU_STREAM_NON_BLOCKING);
    logs[d] = AppendLog(kAppends);
  }
  for (int d = 0; d < 2; ++d) {
    Use(d);
    LaunchSleep(d, high[d], 50'000'000);
  }
  SetThreadPriority(-1);
  for (int k = 0; k < kAppends; ++k) {
    for (int d = 0; d < 2; ++d) {
      Use(d);
      CheckCu(logs[d].Append(Fn(d, "append_u32"), low[d], AppendLog::Encode(0, 0, k)), "append");
    }
  }
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  Check(pid >= 0, "fork");
  if (pid == 0) std::_Exit(ChildCheck());
  int status = 0;
  const int64_t deadline = NowNs() + 60'000'000'000;
  pid_t done = 0;
  while ((done = waitpid(pid, &status, WNOHANG)) == 0 && NowNs() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    Fail("the child hung");
  }
  std::printf("child_exit=%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  Check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's two-device check passed");
  for (int d = 0; d < 2; ++d) {
    Use(d);
    CheckCu(cuCtxSynchronize(), "cuCtxSynchronize");
    CheckLog(logs[d], kAppends, d == 0 ? "device0" : "device1");
  }
  return fake_client::Succeed();
}

// --- Collectives -------------------------------------------------------------------------------

int Collective() {
  constexpr int kChainKernels = 3000;
  constexpr uint64_t kChainKernelNs = 1'000'000;
  const CUstream chain_stream = StreamOn(0, CU_STREAM_NON_BLOCKING);
  // The rank's stream has CUDA's high priority, as NCCL's may: natively the device runs the rank
  // as soon as the chain's current kernel ends, whatever is queued behind it. gpuprio sees the
  // rank's thread priority (low), which beats the stream's.
  const CUstream rank0 = StreamOn(0, CU_STREAM_NON_BLOCKING, kHighCudaPriority);
  const CUstream rank1 = StreamOn(1, CU_STREAM_NON_BLOCKING);
  const CUdeviceptr flags = AllocOn(0, 8);
  std::atomic<bool> chain_launched{false};
  int64_t chain_ns = 0;
  std::thread chain([&] {
    Use(0);
    SetThreadPriority(1);
    const int64_t begin = NowNs();
    for (int k = 0; k < kChainKernels; ++k) {
      LaunchSleep(0, chain_stream, kChainKernelNs);
      if (k == 100) chain_launched = true;
    }
    CheckCu(cuStreamSynchronize(chain_stream), "chain sync");
    chain_ns = NowNs() - begin;
  });
  while (!chain_launched) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const int64_t begin = NowNs();
  CUresult results[2] = {CUDA_ERROR_UNKNOWN, CUDA_ERROR_UNKNOWN};
  int64_t done_ns[2] = {0, 0};
  auto rank = [&](int d, int priority, CUstream s) {
    Use(d);
    SetThreadPriority(priority);
    CUdeviceptr mine = flags + 4 * d, peer = flags + 4 * (1 - d);
    void* args[] = {&mine, &peer};
    Launch(Fn(d, "rendezvous_u32"), s, args, "rendezvous launch");
    results[d] = cuStreamSynchronize(s);
    done_ns[d] = NowNs();
  };
  std::thread low_rank(rank, 0, -1, rank0);
  std::thread high_rank(rank, 1, 1, rank1);
  low_rank.join();
  high_rank.join();
  const int64_t collective_ms = (std::max(done_ns[0], done_ns[1]) - begin) / 1'000'000;
  chain.join();
  std::printf("collective_ms=%ld rank0_ms=%ld rank1_ms=%ld chain_ms=%ld\n",
              static_cast<long>(collective_ms), static_cast<long>((done_ns[0] - begin) / 1'000'000),
              static_cast<long>((done_ns[1] - begin) / 1'000'000),
              static_cast<long>(chain_ns / 1'000'000));
  CheckCu(results[0], "the rendezvous on device 0 (its stream's synchronize)");
  CheckCu(results[1], "the rendezvous on device 1 (its stream's synchronize)");
  return fake_client::Succeed();
}

}  // namespace

int main(int argc, char** argv) {
  fake_client::g_client_name = "multi_gpu_client";
  if (argc < 2) Fail("usage: multi_gpu_client <scenario> (see the file's header)");
  fake_client::g_scenario = argv[1];
  const std::string scenario = argv[1];
  StartWatchdog();
  Init();
  if (scenario == "event_streams") return EventStreams(/*peer=*/false);
  if (scenario == "event_legacy") return EventLegacy();
  if (scenario == "event_per_thread") return EventPerThread();
  if (scenario == "peer_copy") return EventStreams(/*peer=*/true);
  if (scenario == "host_func") return HostFunc();
  if (scenario == "graph_other_device") return GraphOtherDevice();
  if (scenario == "ctx_switch") return CtxSwitch();
  if (scenario == "stream_other_ctx") return StreamOtherCtx();
  if (scenario == "two_devices_one_thread") return TwoDevicesOneThread();
  if (scenario == "green") return Green();
  if (scenario == "exit_queued") return ExitQueued();
  if (scenario == "fork_queued") return ForkQueued();
  if (scenario == "collective") return Collective();
  if (scenario == "top") return Top();
  Fail("unknown scenario");
}
