// A -lcuda client for rule 4 per device, end to end on two devices of the fake driver: low work on
// a device where a more important level launched a CUDA graph runs unconfined while the other
// device's stays confined, and a level busy on one device confines nothing on the other. Prints
// `whole_device_client: SCENARIO ok` if all checks hold.
#include <cuda.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "tests/fake_cuda/clients/client_check.h"
#include "tests/fake_cuda/fake_cuda_control.h"
#include "tests/scheduler/append_log.h"
#include "tests/scheduler/client_support.h"
#include "tests/scheduler/repeating_activity.h"

using fake_client::Check;
using fake_client::CheckCu;
using fake_client::Fail;
using sched_client::AppendLog;
using sched_client::SetThreadPriority;

namespace {

constexpr int kDevices = 2;
constexpr int kAppendsPerDevice = 20;
constexpr uint64_t kHighKernelNs = 20'000;

struct Device {
  CUcontext ctx = nullptr;
  CUmodule module = nullptr;
  CUstream high = nullptr;
  CUstream low = nullptr;
};

void Use(const Device& d) { CheckCu(cuCtxSetCurrent(d.ctx), "cuCtxSetCurrent"); }

// What the fake executed of `kernel` on `device` from exec record `from` on.
struct Ran {
  int total = 0;
  int green = 0;
};

Ran RanSince(uint64_t from, const char* kernel, int device) {
  Ran r;
  for (uint64_t i = from, n = fakecuda_exec_count(); i < n; ++i) {
    fakecuda_exec_record e;
    fakecuda_get_exec(i, &e);
    if (std::strcmp(e.what, kernel) != 0) continue;
    if (e.device != device) continue;
    ++r.total;
    if (e.green) ++r.green;
  }
  return r;
}

// A graph of one fill_u32 kernel, captured on a stream of device 0. Its kernel is named only
// here, so the exec log tells the graph's replays apart from every other kernel.
CUgraphExec CaptureGraph(const Device& d0) {
  Use(d0);
  const CUdeviceptr word = sched_client::Alloc(sizeof(uint32_t));
  const CUfunction fill = sched_client::Function(d0.module, "fill_u32");
  CUstream capture;
  CheckCu(cuStreamCreate(&capture, CU_STREAM_NON_BLOCKING), "capture stream");
  CheckCu(cuStreamBeginCapture(capture, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
  CUdeviceptr ptr = word;
  uint32_t value = 7, count = 1;
  void* args[] = {&ptr, &value, &count};
  CheckCu(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, capture, args, nullptr), "captured fill");
  CUgraph graph;
  CheckCu(cuStreamEndCapture(capture, &graph), "cuStreamEndCapture");
  CUgraphExec exec;
  CheckCu(cuGraphInstantiateWithFlags(&exec, graph, 0), "cuGraphInstantiateWithFlags");
  CheckCu(cuGraphDestroy(graph), "cuGraphDestroy");  // the instance keeps what it needs
  CheckCu(cuStreamDestroy(capture), "cuStreamDestroy (capture)");
  return exec;
}

// The more important level's rounds: a high-priority thread launches on the devices used (device
// 0, or both) at once and then every 50 ms (device 0: the graph, or a kernel without one). The
// first round is synchronised before the RepeatingActivity's constructor returns, so the low
// thread starts after a graph launch (or a plain one) on each device.
sched_client::RepeatingActivity::Steps HighSteps(const Device* devices, int devices_used,
                                                 CUgraphExec graph) {
  auto sleep = std::make_shared<std::array<CUfunction, kDevices>>();
  sched_client::RepeatingActivity::Steps steps;
  steps.setup = [devices, sleep] {
    SetThreadPriority(1);
    for (int d = 0; d < kDevices; ++d) {
      (*sleep)[d] = sched_client::Function(devices[d].module, "sleep_ns");
    }
  };
  steps.round = [devices, devices_used, graph, sleep] {
    for (int d = 0; d < devices_used; ++d) {
      Use(devices[d]);
      if (d == 0 && graph != nullptr) {
        CheckCu(cuGraphLaunch(graph, devices[d].high), "high cuGraphLaunch");
      } else {
        uint64_t ns = kHighKernelNs;
        void* args[] = {&ns};
        CheckCu(cuLaunchKernel((*sleep)[d], 1, 1, 1, 1, 1, 1, 0, devices[d].high, args, nullptr),
                "high kernel");
      }
    }
  };
  steps.after_first = [devices, devices_used] {
    for (int d = 0; d < devices_used; ++d) {
      CheckCu(cuStreamSynchronize(devices[d].high), "high sync");
    }
  };
  steps.finish = [devices, devices_used] {
    for (int d = 0; d < devices_used; ++d) {
      CheckCu(cuStreamSynchronize(devices[d].high), "high final sync");
    }
  };
  return steps;
}

// Scenario `graph` (with_graph) or `plain`. A high-priority thread launches, every 50 ms, work on
// device 0 (a captured graph through cuGraphLaunch, or a kernel) and a kernel on device 1, so its
// level and its graph stamp stay within the activity window (0.5 s) however slowly a loaded
// machine runs the low thread. The low thread appends to one log per device, alternating the
// devices. Checked from the fake's exec log and the logs read back: every low append ran once, in
// order, on its own device; with a graph none of device 0's ran on a green context and all of
// device 1's did (the rule is per device); without one, all of both devices' did (the control:
// were the rule gone, the graph run would look like this one). The high work ran on the whole GPU.
// Scenario `one_device`: as `plain`, but the high thread launches on device 0 only: device 1's
// low work is not confined, since nothing more important uses device 1's SMs.
int Run(bool with_graph, bool one_device) {
  CheckCu(cuInit(0), "cuInit");
  int count = 0;
  CheckCu(cuDeviceGetCount(&count), "cuDeviceGetCount");
  Check(count == kDevices, "two devices (FAKECUDA_DEVICES=2)");
  Device devices[kDevices];
  std::vector<AppendLog> logs;
  std::vector<CUfunction> append;
  static const char kImage[] = "fake module image";
  for (int d = 0; d < kDevices; ++d) {
    CUdevice dev;
    CheckCu(cuDeviceGet(&dev, d), "cuDeviceGet");
    CheckCu(cuDevicePrimaryCtxRetain(&devices[d].ctx, dev), "cuDevicePrimaryCtxRetain");
    Use(devices[d]);
    CheckCu(cuModuleLoadData(&devices[d].module, kImage), "cuModuleLoadData");
    CheckCu(cuStreamCreate(&devices[d].high, CU_STREAM_NON_BLOCKING), "high stream");
    CheckCu(cuStreamCreate(&devices[d].low, CU_STREAM_NON_BLOCKING), "low stream");
    logs.emplace_back(kAppendsPerDevice);
    append.push_back(sched_client::Function(devices[d].module, "append_u32"));
  }
  const CUgraphExec graph = with_graph ? CaptureGraph(devices[0]) : nullptr;

  const uint64_t from = fakecuda_exec_count();
  {
    sched_client::RepeatingActivity high(HighSteps(devices, one_device ? 1 : kDevices, graph),
                                         absl::Milliseconds(50));
    std::thread low([&] {
      SetThreadPriority(-1);
      for (int i = 0; i < kAppendsPerDevice; ++i) {
        for (int d = 0; d < kDevices; ++d) {
          Use(devices[d]);
          CheckCu(logs[d].Append(append[d], devices[d].low, AppendLog::Encode(0, 1, i)),
                  "low append");
        }
      }
      for (int d = 0; d < kDevices; ++d) {
        Use(devices[d]);
        CheckCu(cuStreamSynchronize(devices[d].low), "low sync");
      }
    });
    low.join();
  }

  Ran low_ran[kDevices];
  for (int d = 0; d < kDevices; ++d) {
    Use(devices[d]);
    const AppendLog::Verdict v = logs[d].Check({kAppendsPerDevice}, 1);
    if (!v.ok()) Fail(("device " + std::to_string(d) + "'s log: " + v.first_problem).c_str());
    low_ran[d] = RanSince(from, "append_u32", d);
    // Both devices run append_u32: an append on the wrong device shows as one too many there.
    Check(low_ran[d].total == kAppendsPerDevice,
          ("every low append ran once, on its own device (device " + std::to_string(d) + " ran " +
           std::to_string(low_ran[d].total) + ")")
              .c_str());
  }
  const Ran graph_ran = RanSince(from, "fill_u32", 0);
  const Ran high0 = RanSince(from, "sleep_ns", 0);
  const Ran high1 = RanSince(from, "sleep_ns", 1);
  if (with_graph) {
    Check(graph_ran.total >= 1 && graph_ran.green == 0,
          "the high graph ran on device 0's whole GPU");
    Check(high0.total == 0, "no high kernel on device 0 besides the graph");
  } else {
    Check(graph_ran.total == 0, "no graph ran");
    Check(high0.total >= 1 && high0.green == 0, "the high kernels ran on device 0's whole GPU");
  }
  if (one_device) {
    Check(high1.total == 0, "no high kernel on device 1");
  } else {
    Check(high1.total >= 1 && high1.green == 0, "the high kernels ran on device 1's whole GPU");
  }
  std::printf("low_green_device0=%d low_green_device1=%d graph_launches=%lu\n", low_ran[0].green,
              low_ran[1].green, static_cast<unsigned long>(fakecuda_count_calls("cuGraphLaunch")));
  if (with_graph) {
    Check(low_ran[0].green == 0,
          "below a graph of a more important level, device 0's low work was not confined");
  } else {
    Check(low_ran[0].green == kAppendsPerDevice,
          "below a more important level's kernels, device 0's low work was confined");
  }
  if (one_device) {
    Check(low_ran[1].green == 0,
          "device 1, where nothing more important ran, did not confine its low work");
  } else {
    Check(low_ran[1].green == kAppendsPerDevice,
          "device 1 (no graph there) still confined its low work");
  }
  if (graph != nullptr) CheckCu(cuGraphExecDestroy(graph), "cuGraphExecDestroy");
  return fake_client::Succeed();
}

}  // namespace

int main(int argc, char** argv) {
  fake_client::g_client_name = "whole_device_client";
  if (argc < 2 || (std::strcmp(argv[1], "graph") != 0 && std::strcmp(argv[1], "plain") != 0 &&
                   std::strcmp(argv[1], "one_device") != 0)) {
    Fail("usage: whole_device_client graph|plain|one_device");
  }
  fake_client::g_scenario = argv[1];
  return Run(std::strcmp(argv[1], "graph") == 0, std::strcmp(argv[1], "one_device") == 0);
}
