// The few real driver entry points the scheduler itself calls (context switches, completion
// events, stream properties), generated from scheduler/driver_functions.def. hook/ fills this in
// with the real driver's pointers; tests may fill it with the fake driver's. The scheduler never
// links or dlopens a driver.
#ifndef GPUPRIO_SCHEDULER_DRIVER_FUNCTIONS_H_
#define GPUPRIO_SCHEDULER_DRIVER_FUNCTIONS_H_

#include <cuda.h>
#include <cudaTypedefs.h>

namespace gpuprio::scheduler {

// What the scheduler does without a function (driver_functions.def's `group` column).
enum class DriverFunctionGroup { kRequired, kOptional, kGreenContexts };

struct DriverFunctions {
#define GPUPRIO_DRIVER_FUNCTION(field, group, reach, name, version, pfn) pfn field = nullptr;
#include "scheduler/driver_functions.def"
#undef GPUPRIO_DRIVER_FUNCTION

  // Called first on every dispatcher thread: the hook marks the thread as the driver's own, so
  // calls the real driver makes into exported cu* names are never intercepted there.
  void (*on_dispatcher_thread_start)() = nullptr;

  // True when every function of `group` is there.
  bool HasAll(DriverFunctionGroup group) const {
    bool all = true;
#define GPUPRIO_DRIVER_FUNCTION(field, row_group, reach, name, version, pfn) \
  if (DriverFunctionGroup::row_group == group) all = all && field != nullptr;
#include "scheduler/driver_functions.def"
#undef GPUPRIO_DRIVER_FUNCTION
    return all;
  }
  // The scheduler can run.
  bool Complete() const { return HasAll(DriverFunctionGroup::kRequired); }
  // Spatial isolation can be on.
  bool HasGreenContexts() const { return HasAll(DriverFunctionGroup::kGreenContexts); }
};

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_DRIVER_FUNCTIONS_H_
