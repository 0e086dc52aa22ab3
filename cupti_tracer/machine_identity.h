// Which machine and which boot wrote a trace: CUPTI's clock is one machine's, counted since its
// boot, so `gpuprio trace merge` relates two files' times only when their boot ids agree.
#ifndef GPUPRIO_CUPTI_TRACER_MACHINE_IDENTITY_H_
#define GPUPRIO_CUPTI_TRACER_MACHINE_IDENTITY_H_

#include <string>

namespace gpuprio::tracer {

// The kernel's boot id (/proc/sys/kernel/random/boot_id: the same in every container of one
// boot), lower-case hex and dashes; empty if it cannot be read or is not of that form.
std::string BootIdFromProc(const char* path = "/proc/sys/kernel/random/boot_id");

// The host name (gethostname: a container's own in a UTS namespace), for people reading the
// trace; empty if unavailable.
std::string HostName();

}  // namespace gpuprio::tracer

#endif  // GPUPRIO_CUPTI_TRACER_MACHINE_IDENTITY_H_
