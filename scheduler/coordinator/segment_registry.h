// Every shared segment this process maps, in a fixed table that a signal handler and a forked
// child can use: a SIGBUS inside a segment (another member of its group truncated the file) is
// survived -- the range becomes private zero pages and the segment is marked lost, which ends
// coordination on that GPU, never the program -- and a forked child lets go of the descriptors
// and mappings it inherited, so the slot locks that say a process is alive stay its parent's.
#ifndef GPUPRIO_SCHEDULER_COORDINATOR_SEGMENT_REGISTRY_H_
#define GPUPRIO_SCHEDULER_COORDINATOR_SEGMENT_REGISTRY_H_

#include <cstddef>

namespace gpuprio::coordinator {

inline constexpr int kMaxRegisteredSegments = 64;

// Registers the mapping [base, base + size) of the segment open as `fd`, and installs the SIGBUS
// handler on first use (the handler that was installed before is called for every other fault).
// Returns the entry, or -1 when the table is full.
int RegisterSegment(void* base, size_t size, int fd);

// Whether a SIGBUS hit the entry's range: its memory is private zeros from then on.
bool SegmentLost(int entry);

// Forgets the entry and replaces its range with an inaccessible reservation that is never
// unmapped: a fault handler running on another thread at that moment can only ever remap this
// process's own reservation, not whatever a later mmap would have put at that address. Closes the
// descriptor.
void ReleaseSegment(int entry);

// In a forked child, before anything else: closes every inherited descriptor and replaces every
// inherited mapping with private zeros (either would keep the parent's slot lock alive: the lock
// belongs to the open file, which a mapping holds too). Async-signal-safe.
void CloseInheritedSegments();

}  // namespace gpuprio::coordinator

#endif  // GPUPRIO_SCHEDULER_COORDINATOR_SEGMENT_REGISTRY_H_
