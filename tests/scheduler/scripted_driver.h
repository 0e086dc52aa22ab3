// Driver functions for in-process Dispatcher and Scheduler tests, without any libcuda: one
// context (kScriptedContext) on device 0, stream handles whose low bit says blocking (1) or
// CU_STREAM_NON_BLOCKING (0), numbered events, and a GPU that completes work only on request.
// ScriptedDriverWithGreenContexts adds spatial isolation on devices 0 to kScriptedDevices - 1
// (dispatchers of several devices): an H100's 132 SMs each, split in groups of 8, and green
// contexts whose streams (the dispatcher's twins) are numbered too.
#ifndef GPUPRIO_TESTS_SCHEDULER_SCRIPTED_DRIVER_H_
#define GPUPRIO_TESTS_SCHEDULER_SCRIPTED_DRIVER_H_

#include <atomic>
#include <cstdint>

#include "scheduler/driver_functions.h"

namespace gpuprio_test {

inline constexpr uintptr_t kScriptedContext = 0x1000;
inline constexpr int kScriptedDevices = 4;

// Completion events report done only while this is set: a stalled GPU keeps in-flight work in
// flight, so the budget holds lower-priority work back.
extern std::atomic<bool> g_gpu_progresses;
// Events created and not destroyed (the dispatcher pools and frees its completion events).
extern std::atomic<int> g_events_live;
// What every elapsed-time measurement between two events returns.
extern std::atomic<float> g_elapsed_ms;
// Event records so far (completion marks, start events, links).
extern std::atomic<int> g_event_records;

// Green-context streams created so far (twins; ScriptedDriverWithGreenContexts).
extern std::atomic<int> g_green_streams_created;

// No green contexts: spatial isolation is off whatever the options say.
gpuprio::scheduler::DriverFunctions ScriptedDriver();
// The same, with the driver calls of spatial isolation (DriverFunctions::HasGreenContexts).
gpuprio::scheduler::DriverFunctions ScriptedDriverWithGreenContexts();

}  // namespace gpuprio_test

#endif  // GPUPRIO_TESTS_SCHEDULER_SCRIPTED_DRIVER_H_
