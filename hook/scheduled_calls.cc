#include "hook/scheduled_calls.h"

namespace gpuprio::hook {

void NoteCallerCall(scheduler::Scheduler* s, ApiId id, const scheduler::StreamState* stream,
                    int priority, int64_t begin_ns, int64_t end_ns) {
  if (s->options().time_calls) {
    s->NoteCallerDriverTime(priority, static_cast<uint64_t>(end_ns - begin_ns));
  }
  if (scheduler::OpObserver* observer = s->timing_observer()) {
    observer->OnCallerIssue(Info(id).symbol, priority,
                            stream != nullptr ? stream->stream : nullptr, begin_ns, end_ns);
  }
}

void NoteCallTimeSince(scheduler::Scheduler* s, int priority, int64_t begin_ns) {
  s->NoteCallTime(priority, static_cast<uint64_t>(base::SteadyNowNs() - begin_ns));
}

}  // namespace gpuprio::hook
