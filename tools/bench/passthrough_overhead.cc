// What an intercepted call costs: times calls to cuLaunchKernel and cuStreamQuery, and
// cuCtxSynchronize with 64 more streams in use (a synchronisation looks at every stream the
// scheduler knows), obtained the way libcudart obtains them (dlopen, dlsym "cuGetProcAddress_v2",
// lookups through it), against tools/bench/null_driver, whose functions return at once. Run it
// natively and with libgpuprio.so preloaded (GPUPRIO_MODE=passthrough, or schedule: the fast path,
// or schedule with GPUPRIO_DIRECT_ISSUE=0: the client side of a deferred launch); the difference is
// gpuprio's cost. Prints one JSON line: best-of-rounds nanoseconds per call. With a second argument
// S it is a peer instead: one launch (so that gpuprio attaches to the GPU's coordination segment),
// then S seconds idle -- the other process of the two-process cost.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <thread>

namespace {

template <typename Fn>
double BestNsPerCall(Fn fn, int rounds, long calls) {
  double best = 1e30;
  for (int r = 0; r < rounds; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < calls; ++i) fn();
    const auto end = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double, std::nano>(end - start).count() / calls);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const long calls = argc > 1 ? std::atol(argv[1]) : 5000000;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (lib == nullptr) {
    std::fprintf(stderr, "passthrough_overhead: %s\n", dlerror());
    return 1;
  }
  auto gpa = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(lib, "cuGetProcAddress_v2"));
  void* launch_fn = nullptr;
  void* query_fn = nullptr;
  void* create_fn = nullptr;
  void* ctx_sync_fn = nullptr;
  CUdriverProcAddressQueryResult status;
  if (gpa == nullptr || gpa("cuLaunchKernel", &launch_fn, 12000, 0, &status) != CUDA_SUCCESS ||
      gpa("cuStreamQuery", &query_fn, 12000, 0, &status) != CUDA_SUCCESS ||
      gpa("cuStreamCreateWithPriority", &create_fn, 12000, 0, &status) != CUDA_SUCCESS ||
      gpa("cuCtxSynchronize", &ctx_sync_fn, 12000, 0, &status) != CUDA_SUCCESS) {
    std::fprintf(stderr, "passthrough_overhead: lookups failed\n");
    return 1;
  }
  auto launch = reinterpret_cast<PFN_cuLaunchKernel_v4000>(launch_fn);
  auto query = reinterpret_cast<PFN_cuStreamQuery_v2000>(query_fn);
  auto create = reinterpret_cast<PFN_cuStreamCreateWithPriority_v5050>(create_fn);
  auto ctx_sync = reinterpret_cast<PFN_cuCtxSynchronize_v2000>(ctx_sync_fn);
  Dl_info info;
  const bool wrapped = dladdr(launch_fn, &info) != 0 && info.dli_fname != nullptr &&
                       std::string_view(info.dli_fname).find("libgpuprio") != std::string_view::npos;
  volatile CUresult sink = CUDA_SUCCESS;
  if (argc > 2) {
    sink = launch(reinterpret_cast<CUfunction>(0x2000), 1, 1, 1, 1, 1, 1, 0,
                  reinterpret_cast<CUstream>(0x3000), nullptr, nullptr);
    std::this_thread::sleep_for(std::chrono::duration<double>(std::atof(argv[2])));
    return sink == CUDA_SUCCESS ? 0 : 1;
  }
  // A function and a created stream (any non-null handles: the null driver ignores them), so
  // schedule mode schedules the launches instead of running them inline.
  const auto function = reinterpret_cast<CUfunction>(0x2000);
  const auto stream = reinterpret_cast<CUstream>(0x3000);
  const double launch_ns = BestNsPerCall(
      [&] { sink = launch(function, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr); }, 7, calls);
  if (sink != CUDA_SUCCESS) {
    std::fprintf(stderr, "passthrough_overhead: a launch failed (%d)\n", static_cast<int>(sink));
    return 1;
  }
  // (With launches still queued in schedule mode a query answers CUDA_ERROR_NOT_READY: timed all
  // the same.)
  const double query_ns = BestNsPerCall([&] { sink = query(stream); }, 7, calls);
  // 64 more streams, each with a launch (so the scheduler knows them), as a PyTorch process has
  // (its pools hold 32 per priority per device); everything issued before the timing.
  constexpr int kStreams = 64;
  for (int i = 0; i < kStreams; ++i) {
    CUstream s = nullptr;
    if (create(&s, CU_STREAM_NON_BLOCKING, 0) != CUDA_SUCCESS ||
        launch(function, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr) != CUDA_SUCCESS) {
      std::fprintf(stderr, "passthrough_overhead: stream %d failed\n", i);
      return 1;
    }
  }
  sink = ctx_sync();
  const double ctx_sync_ns = BestNsPerCall([&] { sink = ctx_sync(); }, 7, calls / 10);
  if (sink != CUDA_SUCCESS) {
    std::fprintf(stderr, "passthrough_overhead: cuCtxSynchronize failed (%d)\n",
                 static_cast<int>(sink));
    return 1;
  }
  std::printf(
      "{\"wrapped\": %s, \"calls\": %ld, \"cuLaunchKernel_ns\": %.2f, "
      "\"cuStreamQuery_ns\": %.2f, \"cuCtxSynchronize_ns\": %.2f}\n",
      wrapped ? "true" : "false", calls, launch_ns, query_ns, ctx_sync_ns);
  return 0;
}
