// What SM partitions green contexts give on GPU 0: the sizes cuDevSmResourceSplitByCount returns,
// whether a split's groups and its remainder form one partition, which SMs a partition's work lands
// on (plain and with thread-block clusters of 2, 8 and 16), and the rate of a thread-full
// multi-wave kernel on each against the whole device. The facts behind GPUPRIO_RESERVED_SMS's
// rounding and the partition's limits (docs/isolation.md).
//
//   .gpu/green_partitions   (built by tests/gpu/build_artifacts.sh; run on the GPU machine)
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <set>
#include <string>
#include <vector>

namespace {

const char* ErrorName(CUresult r) {
  const char* name = nullptr;
  cuGetErrorName(r, &name);
  return name != nullptr ? name : "unknown error";
}

bool Check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) std::printf("  %s: %s\n", what, ErrorName(r));
  return r == CUDA_SUCCESS;
}

__device__ unsigned SmId() {
  unsigned id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

// Each block records its SM and stays a while, so the blocks of one launch spread over every SM
// the launch may use.
__global__ void RecordSm(unsigned* sm_of_block, long long spin_cycles) {
  if (threadIdx.x == 0) sm_of_block[blockIdx.x] = SmId();
  const long long start = clock64();
  while (clock64() - start < spin_cycles) {
  }
}

// Thread-full arithmetic: 1024 threads a block, two blocks an SM.
__global__ void Burn(float* sink, int iterations) {
  float a = threadIdx.x * 1e-3f;
  for (int i = 0; i < iterations; ++i) a = a * 1.0001f + 1e-7f;
  if (a == 12345.f) sink[0] = a;
}

// Distinct SMs that `blocks` blocks of RecordSm ran on, launched on `stream` with clusters of
// `cluster` blocks (1: none); -1 when the launch or its completion failed (said why).
int DistinctSms(CUstream stream, CUfunction record, unsigned* sm_of_block, int blocks,
                unsigned cluster) {
  CUlaunchConfig config{};
  config.gridDimX = blocks;
  config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = 128;
  config.blockDimY = config.blockDimZ = 1;
  config.hStream = stream;
  CUlaunchAttribute attribute{};
  if (cluster > 1) {
    attribute.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attribute.value.clusterDim.x = cluster;
    attribute.value.clusterDim.y = attribute.value.clusterDim.z = 1;
    config.attrs = &attribute;
    config.numAttrs = 1;
  }
  if (cudaMemset(sm_of_block, 0xff, blocks * sizeof(unsigned)) != cudaSuccess ||
      cudaDeviceSynchronize() != cudaSuccess) {
    return -1;
  }
  long long spin_cycles = 200000;
  void* args[] = {&sm_of_block, &spin_cycles};
  const std::string what = "clusters of " + std::to_string(cluster);
  if (!Check(cuLaunchKernelEx(&config, record, args, nullptr), what.c_str()) ||
      !Check(cuStreamSynchronize(stream), what.c_str())) {
    return -1;
  }
  std::vector<unsigned> sms(blocks);
  if (cudaMemcpy(sms.data(), sm_of_block, blocks * sizeof(unsigned), cudaMemcpyDeviceToHost) !=
      cudaSuccess) {
    return -1;
  }
  return static_cast<int>(std::set<unsigned>(sms.begin(), sms.end()).size());
}

// Milliseconds per launch of `blocks` thread-full Burn blocks on `stream` (mean of `reps` after
// one warm-up launch); negative on an error.
double BurnMs(CUstream stream, CUfunction burn, float* sink, int blocks, int reps) {
  int iterations = 20000;
  void* args[] = {&sink, &iterations};
  CUevent start = nullptr, end = nullptr;
  if (!Check(cuEventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate") ||
      !Check(cuEventCreate(&end, CU_EVENT_DEFAULT), "cuEventCreate")) {
    return -1;
  }
  bool ok = Check(cuLaunchKernel(burn, blocks, 1, 1, 1024, 1, 1, 0, stream, args, nullptr),
                  "burn launch");
  ok = ok && Check(cuEventRecord(start, stream), "cuEventRecord");
  for (int i = 0; ok && i < reps; ++i) {
    ok = Check(cuLaunchKernel(burn, blocks, 1, 1, 1024, 1, 1, 0, stream, args, nullptr),
               "burn launch");
  }
  ok = ok && Check(cuEventRecord(end, stream), "cuEventRecord") &&
       Check(cuEventSynchronize(end), "cuEventSynchronize");
  float ms = -1;
  if (ok) cuEventElapsedTime(&ms, start, end);
  cuEventDestroy(start);
  cuEventDestroy(end);
  return ok ? ms / reps : -1;
}

struct Partition {
  std::string name;
  std::vector<CUdevResource> resources;  // outputs of one split
};

}  // namespace

int main() {
  if (cudaFree(nullptr) != cudaSuccess) {
    std::printf("no CUDA device\n");
    return 1;
  }
  CUdevice device;
  if (!Check(cuDeviceGet(&device, 0), "cuDeviceGet")) return 1;
  int driver_version = 0;
  cuDriverGetVersion(&driver_version);
  char name[256] = {};
  cuDeviceGetName(name, sizeof name, device);
  std::printf("device 0: %s, driver API %d\n", name, driver_version);
  CUdevResource all{};
  if (!Check(cuDeviceGetDevResource(device, &all, CU_DEV_RESOURCE_TYPE_SM),
             "cuDeviceGetDevResource")) {
    return 1;
  }
  const int device_sms = static_cast<int>(all.sm.smCount);
  std::printf("SMs %d, minSmPartitionSize %u, smCoscheduledAlignment %u\n", device_sms,
              all.sm.minSmPartitionSize, all.sm.smCoscheduledAlignment);

  CUfunction record = nullptr, burn = nullptr;
  if (cudaGetFuncBySymbol(reinterpret_cast<cudaFunction_t*>(&record),
                          reinterpret_cast<const void*>(RecordSm)) != cudaSuccess ||
      cudaGetFuncBySymbol(reinterpret_cast<cudaFunction_t*>(&burn),
                          reinterpret_cast<const void*>(Burn)) != cudaSuccess) {
    std::printf("cudaGetFuncBySymbol failed\n");
    return 1;
  }
  Check(cuFuncSetAttribute(record, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
        "allowing clusters of 16");

  std::vector<Partition> partitions;
  // One group of at least N SMs (how gpuprio splits), alone and with the split's remainder.
  for (int wanted : {device_sms - 20, device_sms - 16, device_sms - 12, device_sms - 4}) {
    CUdevResource group{}, remainder{};
    unsigned groups = 1;
    if (!Check(cuDevSmResourceSplitByCount(&group, &groups, &all, &remainder, 0, wanted),
               "cuDevSmResourceSplitByCount")) {
      continue;
    }
    std::printf("one group of at least %d: %u group(s) of %u SMs, remainder %u SMs\n", wanted,
                groups, group.sm.smCount, remainder.sm.smCount);
    const std::string base = "group " + std::to_string(group.sm.smCount);
    partitions.push_back({base, {group}});
    partitions.push_back(
        {base + " + remainder " + std::to_string(remainder.sm.smCount), {group, remainder}});
  }
  // Groups of the minimum size, then 14 or 15 of them with and without the remainder.
  unsigned count = 0;
  if (Check(
          cuDevSmResourceSplitByCount(nullptr, &count, &all, nullptr, 0, all.sm.minSmPartitionSize),
          "cuDevSmResourceSplitByCount (count)") &&
      count > 0) {
    std::vector<CUdevResource> groups(count);
    CUdevResource remainder{};
    if (Check(cuDevSmResourceSplitByCount(groups.data(), &count, &all, &remainder, 0,
                                          all.sm.minSmPartitionSize),
              "cuDevSmResourceSplitByCount")) {
      std::printf("groups of %u: %u groups, remainder %u SMs\n", all.sm.minSmPartitionSize, count,
                  remainder.sm.smCount);
      for (unsigned k : {count - 1, count}) {
        if (k == 0) continue;
        Partition p{std::to_string(k) + " groups of " + std::to_string(all.sm.minSmPartitionSize),
                    std::vector<CUdevResource>(groups.begin(), groups.begin() + k)};
        partitions.push_back(p);
        p.name += " + remainder " + std::to_string(remainder.sm.smCount);
        p.resources.push_back(remainder);
        partitions.push_back(p);
      }
    }
  }

  const int record_blocks = 8 * device_sms;
  const int burn_blocks = 8 * device_sms;  // 4 waves of two 1024-thread blocks an SM
  unsigned* sm_of_block = nullptr;
  float* sink = nullptr;
  if (cudaMalloc(&sm_of_block, record_blocks * sizeof(unsigned)) != cudaSuccess ||
      cudaMalloc(&sink, sizeof(float)) != cudaSuccess) {
    std::printf("cudaMalloc failed\n");
    return 1;
  }
  CUstream whole = nullptr;
  if (!Check(cuStreamCreate(&whole, CU_STREAM_NON_BLOCKING), "cuStreamCreate")) return 1;
  const double whole_ms = BurnMs(whole, burn, sink, burn_blocks, 5);
  std::printf(
      "%-32s SMs %3d: distinct SMs plain %3d, clusters of 2/8/16: %d/%d/%d; "
      "burn %.3f ms\n",
      "whole device", device_sms, DistinctSms(whole, record, sm_of_block, record_blocks, 1),
      DistinctSms(whole, record, sm_of_block, record_blocks, 2),
      DistinctSms(whole, record, sm_of_block, record_blocks, 8),
      DistinctSms(whole, record, sm_of_block, record_blocks, 16), whole_ms);
  for (Partition& p : partitions) {
    CUdevResourceDesc desc = nullptr;
    CUgreenCtx context = nullptr;
    std::printf("%s:\n", p.name.c_str());
    if (!Check(cuDevResourceGenerateDesc(&desc, p.resources.data(),
                                         static_cast<unsigned>(p.resources.size())),
               "cuDevResourceGenerateDesc") ||
        !Check(cuGreenCtxCreate(&context, desc, device, CU_GREEN_CTX_DEFAULT_STREAM),
               "cuGreenCtxCreate")) {
      continue;
    }
    CUdevResource got{};
    CUstream stream = nullptr;
    if (Check(cuGreenCtxGetDevResource(context, &got, CU_DEV_RESOURCE_TYPE_SM),
              "cuGreenCtxGetDevResource") &&
        Check(cuGreenCtxStreamCreate(&stream, context, CU_STREAM_NON_BLOCKING, 0),
              "cuGreenCtxStreamCreate")) {
      const int plain = DistinctSms(stream, record, sm_of_block, record_blocks, 1);
      const int c2 = DistinctSms(stream, record, sm_of_block, record_blocks, 2);
      const int c8 = DistinctSms(stream, record, sm_of_block, record_blocks, 8);
      const int c16 = DistinctSms(stream, record, sm_of_block, record_blocks, 16);
      const double ms = BurnMs(stream, burn, sink, burn_blocks, 5);
      std::printf(
          "%-32s SMs %3u (alignment %u): distinct SMs plain %3d, clusters of 2/8/16: "
          "%d/%d/%d; burn %.3f ms, rate %.3f of the whole device (SM share %.3f)\n",
          "", got.sm.smCount, got.sm.smCoscheduledAlignment, plain, c2, c8, c16, ms,
          ms > 0 ? whole_ms / ms : 0.0, static_cast<double>(got.sm.smCount) / device_sms);
      cuStreamDestroy(stream);
    }
    cuGreenCtxDestroy(context);
  }
  std::printf("(-1: the launch failed, reason above)\n");
  return 0;
}
