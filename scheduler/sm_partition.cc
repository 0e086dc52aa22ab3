#include "scheduler/sm_partition.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "scheduler/base/logging.h"

namespace gpuprio::scheduler {

int ConfinedSmCount(int device_sms, int reserved, int granularity) {
  if (granularity <= 0 || device_sms < 2 * granularity) return 0;
  const int wanted = std::max(0, device_sms - std::max(0, reserved));
  const int rounded = wanted / granularity * granularity;
  return std::max(granularity, rounded);
}

absl::StatusOr<std::unique_ptr<SmPartition>> SmPartition::Create(const DriverFunctions& driver,
                                                                  CUdevice device,
                                                                  int reserved_sms) {
  if (!driver.HasGreenContexts()) {
    return absl::UnavailableError("the driver has no green contexts (a CUDA 12.5 or later driver needed)");
  }
  CUdevResource all{};
  CUresult r = driver.device_get_dev_resource(device, &all, CU_DEV_RESOURCE_TYPE_SM);
  if (r != CUDA_SUCCESS) {
    return absl::UnavailableError(
        absl::StrFormat("the device's SMs cannot be partitioned (cuDeviceGetDevResource: CUDA "
                        "error %d)", static_cast<int>(r)));
  }
  const int device_sms = static_cast<int>(all.sm.smCount);
  // The split granularity: sm_90 splits in groups of 8 (smCoscheduledAlignment); older drivers
  // report only the minimum partition size.
  int granularity = static_cast<int>(std::max(all.sm.smCoscheduledAlignment,
                                              all.sm.minSmPartitionSize));
  if (granularity <= 0) granularity = 1;
  const int confined = ConfinedSmCount(device_sms, reserved_sms, granularity);
  if (confined == 0 || confined >= device_sms) {
    return absl::UnavailableError(absl::StrFormat(
        "a device of %d SMs cannot keep %d free in groups of %d", device_sms, reserved_sms,
        granularity));
  }
  if (device_sms - confined != reserved_sms) {
    Logf(LogLevel::kInfo,
         "isolation: GPUPRIO_RESERVED_SMS=%d rounded to %d (this device of %d SMs splits in "
         "groups of %d)",
         reserved_sms, device_sms - confined, device_sms, granularity);
  }
  CUdevResource group{};
  CUdevResource rest{};
  unsigned int groups = 1;
  r = driver.dev_sm_resource_split_by_count(&group, &groups, &all, &rest, 0,
                                            static_cast<unsigned int>(confined));
  if (r != CUDA_SUCCESS || groups != 1) {
    return absl::UnavailableError(absl::StrFormat(
        "splitting %d of %d SMs failed (cuDevSmResourceSplitByCount: CUDA error %d)", confined,
        device_sms, static_cast<int>(r)));
  }
  CUdevResourceDesc desc = nullptr;
  r = driver.dev_resource_generate_desc(&desc, &group, 1);
  if (r != CUDA_SUCCESS) {
    return absl::UnavailableError(
        absl::StrFormat("cuDevResourceGenerateDesc failed: CUDA error %d", static_cast<int>(r)));
  }
  CUgreenCtx context = nullptr;
  r = driver.green_ctx_create(&context, desc, device, CU_GREEN_CTX_DEFAULT_STREAM);
  if (r != CUDA_SUCCESS) {
    return absl::UnavailableError(
        absl::StrFormat("cuGreenCtxCreate failed: CUDA error %d", static_cast<int>(r)));
  }
  return std::unique_ptr<SmPartition>(
      new SmPartition(driver, context, static_cast<int>(group.sm.smCount), device_sms));
}

SmPartition::~SmPartition() {
  // Never at exit (the dispatcher's partition lives as long as the process): only tests and a
  // failed start destroy one, while the driver is certainly alive.
  driver_.green_ctx_destroy(context_);
}

absl::StatusOr<CUstream> SmPartition::CreateTwin(unsigned int flags, int priority) {
  CUstream twin = nullptr;
  const CUresult r = driver_.green_ctx_stream_create(&twin, context_, flags, priority);
  if (r != CUDA_SUCCESS) {
    return absl::UnavailableError(
        absl::StrFormat("cuGreenCtxStreamCreate failed: CUDA error %d", static_cast<int>(r)));
  }
  return twin;
}

void SmPartition::DestroyTwin(CUstream twin) { driver_.stream_destroy(twin); }

}  // namespace gpuprio::scheduler
