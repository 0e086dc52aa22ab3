// How a trace reaches its file (GPUPRIO_TRACE): never through a link (in any component of its
// path), never over anything but a regular file, never half-written, and no temporary file left
// behind.
//
// Contents:
//   CheckTraceFileTarget()     may `path` receive a trace? (called when tracing starts and again
//                              just before the file is replaced)
//   WriteFileReplacing()       Preferred entry: writes into a new temporary beside `path`, then
//                              renames it onto `path`.
//   RemovePendingTemporary()   async-signal-safe: removes the temporary of a write in progress
//                              (for a process about to die before the write ends).
//
// Decisions (docs/user_guide.md): `path` must be a regular file or a name that does not exist yet
// in an existing directory; a symbolic link, device, FIFO, socket or directory there is refused,
// not written through. No directory in `path` may be a symbolic link either
// (docs/decisions/2026-11-27-trace-path-symlinks.md): the path comes from the environment of a
// process that may be privileged, and a link in a directory someone else can write would send
// the trace, and its rename over an existing file, anywhere. The directory is opened once, one
// component at a time with O_NOFOLLOW, and the checks, the temporary and the rename all happen in
// it, so a directory swapped for a link during the write does not redirect it. An existing file
// keeps its permission bits; a new one gets 0644 minus the umask. The temporary is created with
// O_CREAT|O_EXCL|O_NOFOLLOW under an unpredictable name (".<name>.gpuprio-<random>"); over an
// existing file it stays 0600 until it is complete (the old file may be private). No fsync: exit
// stays fast, and a trace is diagnostic output (a machine crash right after exit may lose it).
#ifndef GPUPRIO_CUPTI_TRACER_TRACE_FILE_H_
#define GPUPRIO_CUPTI_TRACER_TRACE_FILE_H_

#include <cstdio>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"

namespace gpuprio::tracer {

// OkStatus if `path` is an existing regular file, or does not exist and its directory does and
// is writable, and no component of `path` is a symbolic link. FailedPrecondition otherwise, with a
// message that names `path` and what is wrong with it (a link: which component, and its target).
absl::Status CheckTraceFileTarget(const std::string& path);

// Creates the temporary, calls `write` on it (a FILE* opened for writing; `write` must not
// close it), and renames it onto `path` if `write` and every write to the file succeeded and
// `path` still passes CheckTraceFileTarget. On any error the temporary is removed and `path` is
// untouched. The error names the file and the failing call.
absl::Status WriteFileReplacing(const std::string& path,
                                absl::FunctionRef<absl::Status(std::FILE*)> write);

// Unlinks the temporary of a WriteFileReplacing in progress in this process, if any. Safe in a
// signal handler and from any thread; the write in progress then fails to rename and `path` is
// untouched. (One write at a time is tracked: a trace is written once per process.)
void RemovePendingTemporary();

}  // namespace gpuprio::tracer

#endif  // GPUPRIO_CUPTI_TRACER_TRACE_FILE_H_
