// Every Interceptor and ScheduledHandler specialisation, so each translation unit that
// instantiates wrappers sees the same set (one definition rule).
#ifndef GPUPRIO_HOOK_ALL_INTERCEPTORS_H_
#define GPUPRIO_HOOK_ALL_INTERCEPTORS_H_

#include "hook/interceptor.h"
#include "hook/proc_address_hook.h"
#include "hook/profiler_calls.h"
#include "hook/scheduled_calls.h"
#include "hook/scheduled_launch_calls.h"
#include "hook/scheduled_stream_calls.h"

#endif  // GPUPRIO_HOOK_ALL_INTERCEPTORS_H_
