// The SMs that confined work may use on one device: a green context of all SMs but a reserve,
// and the twin streams created in it. Created lazily by the device's dispatcher, the first time
// work is to be confined; whether it can exist at all is decided once (older driver or GPU,
// MIG, a failed split: isolation is off on that device and the reason is logged once).
#ifndef GPUPRIO_SCHEDULER_SM_PARTITION_H_
#define GPUPRIO_SCHEDULER_SM_PARTITION_H_

#include <cuda.h>

#include <memory>

#include "absl/status/statusor.h"
#include "scheduler/driver_functions.h"

namespace gpuprio::scheduler {

// How many SMs confined work gets when `reserved` are asked to stay free on a device of
// `device_sms`, in groups of `granularity`: the largest multiple of the granularity that leaves
// at least `reserved` free, but at least one group. 0 when the device cannot be split at all.
int ConfinedSmCount(int device_sms, int reserved, int granularity);

class SmPartition {
 public:
  // Splits `device` so that at least `reserved_sms` SMs stay free of confined work (rounded to
  // the split granularity; logged once at info when that changes the number).
  static absl::StatusOr<std::unique_ptr<SmPartition>> Create(const DriverFunctions& driver,
                                                             CUdevice device, int reserved_sms);
  ~SmPartition();
  SmPartition(const SmPartition&) = delete;
  SmPartition& operator=(const SmPartition&) = delete;

  int confined_sms() const { return confined_sms_; }
  int device_sms() const { return device_sms_; }

  // A stream in the partition with the given CUDA stream flags and priority, or the driver's
  // error. The caller destroys it with DestroyTwin.
  absl::StatusOr<CUstream> CreateTwin(unsigned int flags, int priority);
  void DestroyTwin(CUstream twin);

 private:
  SmPartition(const DriverFunctions& driver, CUgreenCtx context, int confined_sms,
              int device_sms)
      : driver_(driver),
        context_(context),
        confined_sms_(confined_sms),
        device_sms_(device_sms) {}

  const DriverFunctions driver_;
  const CUgreenCtx context_;
  const int confined_sms_;
  const int device_sms_;
};

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_SM_PARTITION_H_
