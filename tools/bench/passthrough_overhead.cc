// What an intercepted call costs: times calls to cuLaunchKernel and cuStreamQuery obtained the
// way libcudart obtains them (dlopen, dlsym "cuGetProcAddress_v2", lookups through it), against
// tools/bench/null_driver, whose functions return at once. Run it natively and with
// libgpuprio.so preloaded (GPUPRIO_MODE=passthrough); the difference is the wrapper's cost.
// Prints one JSON line: best-of-rounds nanoseconds per call.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string_view>

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
  CUdriverProcAddressQueryResult status;
  if (gpa == nullptr || gpa("cuLaunchKernel", &launch_fn, 12000, 0, &status) != CUDA_SUCCESS ||
      gpa("cuStreamQuery", &query_fn, 12000, 0, &status) != CUDA_SUCCESS) {
    std::fprintf(stderr, "passthrough_overhead: lookups failed\n");
    return 1;
  }
  auto launch = reinterpret_cast<PFN_cuLaunchKernel_v4000>(launch_fn);
  auto query = reinterpret_cast<PFN_cuStreamQuery_v2000>(query_fn);
  Dl_info info;
  const bool wrapped = dladdr(launch_fn, &info) != 0 && info.dli_fname != nullptr &&
                       std::string_view(info.dli_fname).find("libgpuprio") != std::string_view::npos;
  volatile CUresult sink = CUDA_SUCCESS;
  const double launch_ns = BestNsPerCall(
      [&] { sink = launch(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr); }, 7, calls);
  const double query_ns = BestNsPerCall([&] { sink = query(nullptr); }, 7, calls);
  std::printf("{\"wrapped\": %s, \"calls\": %ld, \"cuLaunchKernel_ns\": %.2f, "
              "\"cuStreamQuery_ns\": %.2f}\n",
              wrapped ? "true" : "false", calls, launch_ns, query_ns);
  return 0;
}
