// How the fakes describe an H100's SMs to green contexts (sm_90: 132 SMs, split in groups of 8),
// for the fake libcuda and the scheduler tests' scripted driver functions alike.
#ifndef GPUPRIO_TESTS_FAKE_CUDA_SM_RESOURCE_H_
#define GPUPRIO_TESTS_FAKE_CUDA_SM_RESOURCE_H_

#include <cuda.h>

#include <algorithm>
#include <cstring>

namespace fakecuda {

inline constexpr unsigned kDeviceSms = 132;
inline constexpr unsigned kSmGroup = 8;

// An SM resource of `count` SMs, as the driver describes one on sm_90.
inline CUdevResource SmResource(unsigned count) {
  CUdevResource r;
  std::memset(&r, 0, sizeof(r));
  r.type = CU_DEV_RESOURCE_TYPE_SM;
  r.sm.smCount = count;
  r.sm.minSmPartitionSize = kSmGroup;
  r.sm.smCoscheduledAlignment = kSmGroup;
  return r;
}

// The size of each group cuDevSmResourceSplitByCount makes for `min_count`: whole groups of
// kSmGroup, at least one.
inline unsigned SmGroupSize(unsigned min_count) {
  return (std::max(min_count, kSmGroup) + kSmGroup - 1) / kSmGroup * kSmGroup;
}

}  // namespace fakecuda

#endif  // GPUPRIO_TESTS_FAKE_CUDA_SM_RESOURCE_H_
