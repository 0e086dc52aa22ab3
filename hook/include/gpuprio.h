/* gpuprio's public C API: per-thread priority and per-priority statistics.
 *
 * Every function is exported by libgpuprio.so. To keep a program working without the library,
 * look them up at run time: dlsym(RTLD_DEFAULT, "gpuprio_set_thread_priority") returns NULL when
 * gpuprio is not loaded. No gpuprio type crosses this boundary except the plain structs below.
 *
 * Priorities: larger is more important. GPUPRIO_PRIORITY_LOW/NORMAL/HIGH are -1/0/1; any int in
 * [GPUPRIO_PRIORITY_MIN, GPUPRIO_PRIORITY_MAX] is accepted. A thread's setting beats its stream's
 * (cuStreamCreateWithPriority), which beats the process default (GPUPRIO_PRIORITY).
 */
#ifndef GPUPRIO_H_
#define GPUPRIO_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPUPRIO_PRIORITY_LOW (-1)
#define GPUPRIO_PRIORITY_NORMAL 0
#define GPUPRIO_PRIORITY_HIGH 1
#define GPUPRIO_PRIORITY_MIN (-100)
#define GPUPRIO_PRIORITY_MAX 100
/* "No thread setting": the stream's priority or the process default applies. */
#define GPUPRIO_PRIORITY_UNSET (-1000)

/* Sets the calling thread's priority for the work it submits from now on. Returns 0, or -1 if
 * `priority` is neither GPUPRIO_PRIORITY_UNSET nor within [MIN, MAX]. */
int gpuprio_set_thread_priority(int priority);

/* The calling thread's setting, or GPUPRIO_PRIORITY_UNSET. */
int gpuprio_get_thread_priority(void);

/* The process default priority (GPUPRIO_PRIORITY, default NORMAL). */
int gpuprio_get_default_priority(void);

/* "schedule", "passthrough" or "off". */
const char* gpuprio_mode(void);

/* The library's version, "MAJOR.MINOR.PATCH" (semantic versioning; before 1.0.0 the API may still
 * change between minor versions). A static string: never free it. */
const char* gpuprio_version(void);

typedef struct gpuprio_priority_stats {
  int32_t priority;
  uint32_t reserved;
  uint64_t ops_submitted;      /* stream ops the scheduler accepted at this priority */
  uint64_t ops_issued;         /* of those, issued to the driver */
  uint64_t ops_on_caller;      /* stream ops run on the calling thread (the fast path, capture, ...) */
  uint64_t queue_delay_ns_sum; /* sum over issued ops of (issue time - submit time) */
  uint64_t queue_delay_ns_max;
  uint64_t in_flight_ops;      /* issued, completion not yet observed */
  uint64_t in_flight_estimated_ns; /* estimated GPU time of those */
} gpuprio_priority_stats;

/* Fills up to `capacity` entries, one per priority level seen so far, highest first; returns the
 * number of levels (which may exceed `capacity`), or -1 if `out` is NULL and capacity > 0. */
int gpuprio_get_stats(gpuprio_priority_stats* out, int capacity);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* GPUPRIO_H_ */
