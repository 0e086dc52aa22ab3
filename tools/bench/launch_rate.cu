// Empty-kernel launch benchmark (docs/benchmarks.md, section 2).
//
// Each of --threads N threads gets its own stream (cuStreamCreate for --api driver,
// cudaStreamCreateWithFlags for --api runtime, both non-blocking) and launches an empty <<<1,1>>>
// kernel --launches K times: `--api driver` calls the exported cuLaunchKernel (linked with -lcuda)
// on the CUfunction that cudaGetFuncBySymbol gives for the kernel, `--api runtime` uses <<<>>>.
// Measured:
//  (a) client-side time per launch call: the steady clock is read around each batch of --batch B
//      calls (default 32; --batch 1 times every call); each batch gives a mean per call, and mean,
//      p50, p99 and max are taken over all batches of all threads;
//  (b) the launch rate: N*K / (time from releasing the threads until every thread has launched
//      and synchronized its stream).
// Prints one JSON line on stdout; exit 0 on success, 1 on any CUDA error.
//
// Usage: launch_rate [--threads N] [--api driver|runtime] [--launches K] [--batch B] [--warmup W]

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.h"

__global__ void gp_empty_kernel() {}

namespace {

using gp_bench::percentile;
using gp_bench::rt_error;
using Clock = std::chrono::steady_clock;

struct Options {
  int threads = 1;
  std::string api = "driver";
  long launches = 100000;
  int batch = 32;
  long warmup = 2000;
};

struct ThreadResult {
  std::vector<double> batch_ns_per_call;  // one entry per batch
  double call_ns_total = 0;               // sum of the timed batches
  std::string error;                      // empty when all went well
};

std::string cu_error(const char* what, CUresult r) {
  const char* name = nullptr;
  cuGetErrorName(r, &name);
  return std::string(what) + " failed: " + (name ? name : "?") + " (" + std::to_string((int)r) + ")";
}

void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--threads N] [--api driver|runtime] [--launches K] [--batch B] "
               "[--warmup W]\n",
               argv0);
  std::exit(2);
}

// Spin barrier: all threads check in, the main thread releases them at once.
struct StartGate {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
};

void worker(const Options& opt, CUcontext ctx, CUfunction fn, StartGate& gate, ThreadResult& res) {
  const bool driver = opt.api == "driver";
  CUstream cs = nullptr;
  cudaStream_t rs = nullptr;
  bool setup_ok = true;
  if (driver) {
    CUresult r = cuCtxSetCurrent(ctx);
    if (r == CUDA_SUCCESS) r = cuStreamCreate(&cs, CU_STREAM_NON_BLOCKING);
    if (r != CUDA_SUCCESS) { res.error = cu_error("cuCtxSetCurrent/cuStreamCreate", r); setup_ok = false; }
  } else {
    cudaError_t e = cudaSetDevice(0);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&rs, cudaStreamNonBlocking);
    if (e != cudaSuccess) { res.error = rt_error("cudaSetDevice/cudaStreamCreateWithFlags", e); setup_ok = false; }
  }

  auto launch = [&]() -> bool {
    if (driver) {
      CUresult r = cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, cs, nullptr, nullptr);
      if (r != CUDA_SUCCESS) { res.error = cu_error("cuLaunchKernel", r); return false; }
    } else {
      gp_empty_kernel<<<1, 1, 0, rs>>>();
    }
    return true;
  };
  auto sync = [&]() -> bool {
    if (driver) {
      CUresult r = cuStreamSynchronize(cs);
      if (r != CUDA_SUCCESS) { res.error = cu_error("cuStreamSynchronize", r); return false; }
    } else {
      cudaError_t e = cudaGetLastError();
      if (e == cudaSuccess) e = cudaStreamSynchronize(rs);
      if (e != cudaSuccess) { res.error = rt_error("launch/cudaStreamSynchronize", e); return false; }
    }
    return true;
  };

  // Warm-up outside the measurement, then wait at the gate.
  if (setup_ok) {
    for (long i = 0; i < opt.warmup && setup_ok; ++i) setup_ok = launch();
    if (setup_ok) setup_ok = sync();
  }
  gate.ready.fetch_add(1);
  while (!gate.go.load(std::memory_order_acquire)) {
  }

  if (setup_ok) {
    const long nb = (opt.launches + opt.batch - 1) / opt.batch;
    res.batch_ns_per_call.reserve(nb);
    bool ok = true;
    for (long done = 0; done < opt.launches && ok;) {
      const long m = std::min<long>(opt.batch, opt.launches - done);
      const auto t0 = Clock::now();
      for (long j = 0; j < m && ok; ++j) ok = launch();
      const auto t1 = Clock::now();
      const double ns = (double)std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
      res.call_ns_total += ns;
      res.batch_ns_per_call.push_back(ns / (double)m);
      done += m;
    }
    if (ok) sync();
  }
  if (driver && cs) cuStreamDestroy(cs);
  if (!driver && rs) cudaStreamDestroy(rs);
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  gp_bench::Args args(argc, argv, usage);
  while (args.next()) {
    if (args.is("--threads")) opt.threads = (int)args.integer();
    else if (args.is("--api")) opt.api = args.str();
    else if (args.is("--launches")) opt.launches = args.integer();
    else if (args.is("--batch")) opt.batch = (int)args.integer();
    else if (args.is("--warmup")) opt.warmup = args.integer();
    else args.bad();
  }
  if (opt.threads < 1 || opt.launches < 1 || opt.batch < 1 || opt.warmup < 0 ||
      (opt.api != "driver" && opt.api != "runtime"))
    usage(argv[0]);

  std::string error;
  CUcontext ctx = nullptr;
  CUfunction fn = nullptr;
  // The runtime creates and makes current the primary context; the driver threads reuse it.
  cudaError_t e = cudaSetDevice(0);
  if (e == cudaSuccess) e = cudaFree(nullptr);
  if (e != cudaSuccess) error = rt_error("cudaSetDevice/cudaFree(0)", e);
  if (error.empty()) {
    CUresult r = cuCtxGetCurrent(&ctx);
    if (r != CUDA_SUCCESS || ctx == nullptr) error = cu_error("cuCtxGetCurrent", r);
  }
  if (error.empty() && opt.api == "driver") {
    cudaFunction_t f = nullptr;
    e = cudaGetFuncBySymbol(&f, (const void*)gp_empty_kernel);
    if (e != cudaSuccess) error = rt_error("cudaGetFuncBySymbol", e);
    fn = reinterpret_cast<CUfunction>(f);
  }

  char device[256] = "";
  if (error.empty()) {
    CUdevice dev;
    if (cuCtxGetDevice(&dev) != CUDA_SUCCESS || cuDeviceGetName(device, sizeof device, dev) != CUDA_SUCCESS)
      device[0] = 0;
  }

  // Cost of one steady-clock read, to put --batch 1 numbers in perspective.
  double clock_ns = 0;
  {
    const int reps = 100000;
    auto t0 = Clock::now();
    for (int i = 0; i < reps; ++i) {
      volatile auto t = Clock::now();
      (void)t;
    }
    clock_ns = (double)std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count() / reps;
  }

  std::vector<ThreadResult> results(opt.threads);
  double wall_s = 0;
  if (error.empty()) {
    StartGate gate;
    std::vector<std::thread> threads;
    for (int t = 0; t < opt.threads; ++t)
      threads.emplace_back(worker, std::cref(opt), ctx, fn, std::ref(gate), std::ref(results[t]));
    while (gate.ready.load() < opt.threads) std::this_thread::yield();
    const auto t0 = Clock::now();
    gate.go.store(true, std::memory_order_release);
    for (auto& th : threads) th.join();
    const auto t1 = Clock::now();
    wall_s = std::chrono::duration<double>(t1 - t0).count();
    for (auto& r : results)
      if (!r.error.empty() && error.empty()) error = r.error;
  }

  std::vector<double> per_batch;
  double total_ns = 0;
  for (auto& r : results) {
    per_batch.insert(per_batch.end(), r.batch_ns_per_call.begin(), r.batch_ns_per_call.end());
    total_ns += r.call_ns_total;
  }
  const double total = (double)opt.threads * (double)opt.launches;
  const double mean_us = total > 0 ? total_ns / total / 1000.0 : 0;
  const double p50 = percentile(per_batch, 0.50) / 1000.0;
  const double p99 = percentile(per_batch, 0.99) / 1000.0;
  const double mx = per_batch.empty() ? 0 : *std::max_element(per_batch.begin(), per_batch.end()) / 1000.0;
  const gp_bench::GpuprioEnv env = gp_bench::gpuprio_env();

  std::printf(
      "{\"bench\":\"launch_rate\",\"ok\":%s,\"api\":\"%s\",\"threads\":%d,\"launches_per_thread\":%ld,"
      "\"batch\":%d,\"warmup\":%ld,\"total_launches\":%.0f,\"wall_s\":%.6f,\"launches_per_s\":%.1f,"
      "\"call_us_mean\":%.4f,\"call_us_p50\":%.4f,\"call_us_p99\":%.4f,\"call_us_max_batch\":%.4f,"
      "\"clock_read_ns\":%.1f,\"device\":\"%s\",\"preloaded\":%s,\"gpuprio_mode\":\"%s\",\"error\":\"%s\"}\n",
      error.empty() ? "true" : "false", opt.api.c_str(), opt.threads, opt.launches, opt.batch,
      opt.warmup, total, wall_s, wall_s > 0 ? total / wall_s : 0.0, mean_us, p50, p99, mx, clock_ns,
      gp_bench::json_escape(device).c_str(), env.preloaded ? "true" : "false", gp_bench::json_escape(env.mode).c_str(),
      gp_bench::json_escape(error).c_str());
  std::fflush(stdout);
  return error.empty() ? 0 : 1;
}
