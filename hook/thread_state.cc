#include "hook/thread_state.h"

namespace gpuprio::hook {

GPUPRIO_THREAD_LOCAL ThreadState t_thread_state = {0, 0};

}  // namespace gpuprio::hook
