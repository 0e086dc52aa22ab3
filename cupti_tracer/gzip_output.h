// gzip output for traces named *.gz: the JSON is compressed as it is written (zlib, RFC 1952),
// so memory stays bounded (zlib's state, about 270 KiB at the level used, plus one 64 KiB buffer)
// however large the trace. libgpuprio.so links libz.so.1 for it.
#ifndef GPUPRIO_CUPTI_TRACER_GZIP_OUTPUT_H_
#define GPUPRIO_CUPTI_TRACER_GZIP_OUTPUT_H_

#include <cstdio>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gpuprio::tracer {

// zlib level for traces: 1 (fastest). Trace JSON is repetitive enough that level 1 keeps most of
// the gain (docs/trace_format.md has the numbers) at a fraction of level 6's time, and the trace
// is written while the process exits or a signal waits.
inline constexpr int kTraceGzipLevel = 1;

// True if `path` names a gzip trace (ends in ".gz").
bool IsGzipTracePath(absl::string_view path);

// Calls `write` with a FILE* whose bytes are gzip-compressed at `level` into `out` (not closed),
// then ends the gzip stream. Errors: `write`'s, or DataLoss/Internal naming what failed (a write
// to `out`, zlib).
absl::Status WriteGzipped(std::FILE* out, int level,
                          absl::FunctionRef<absl::Status(std::FILE*)> write);

}  // namespace gpuprio::tracer

#endif  // GPUPRIO_CUPTI_TRACER_GZIP_OUTPUT_H_
