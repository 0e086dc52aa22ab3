#include "hook/process_start.h"

#include <pthread.h>
#include <unistd.h>

#include <optional>
#include <string>

#include "absl/base/attributes.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "cupti_tracer/trace_path_pattern.h"
#include "hook/config.h"
#include "hook/lifecycle.h"
#include "hook/mps_client_priority.h"
#include "hook/thread_state.h"
#include "scheduler/base/abseil_fork_safety.h"
#include "scheduler/base/env_reader.h"
#include "scheduler/base/env_vars.h"
#include "scheduler/base/logging.h"
#include "scheduler/base/tls.h"
#include "scheduler/base/version.h"

namespace gpuprio::hook {

namespace internal_process_start {
ABSL_CONST_INIT std::atomic<bool> g_cuda_used{false};
}  // namespace internal_process_start

// Set on the thread that runs the start: anything in it that reached a use of CUDA again (a
// name-service module's lookups) must not wait for the start it is part of. External linkage, as
// every thread-local of gpuprio's (scheduler/base/tls.h says why).
GPUPRIO_THREAD_LOCAL bool t_starting = false;

namespace {

using internal_process_start::g_cuda_used;

// Held by the thread that starts gpuprio, and by a forking thread from its prepare handler to its
// parent or child handler: a fork never copies a half-done start (Abseil's own onces would stay
// "running" for ever in the child). A pthread mutex, not an absl::Mutex: it guards the
// initialisation of the state a contended absl::Mutex itself uses, and the forking thread unlocks
// it in the child, the pthread_atfork idiom. Taken outside any once for the same reason: a once
// entered but not finished at the fork would hang the child's first use.
pthread_mutex_t g_fork_gate = PTHREAD_MUTEX_INITIALIZER;

// Written under the gate; read without it on the fast path.
ABSL_CONST_INIT std::atomic<bool> g_started{false};
// GPUPRIO_ANNOUNCE, read by the start (so a bad value is reported once per process image).
bool g_announce = false;

void ReadAnnounce() {
  EnvReader env(GpuprioGetenv);
  env.ReadChoice<bool>("GPUPRIO_ANNOUNCE", {{"0", false}, {"1", true}}, "not announcing",
                       &g_announce);
  for (const std::string& problem : env.TakeProblems()) Log(LogLevel::kError, problem);
}

void RunStart() {
  HookScope in_hook;  // gpuprio's own dlsym lookups made meanwhile pass straight through
  base::InitializeAbseilLazyState();  // before any thread of gpuprio's can race a fork with it
  // Abseil's debug-build deadlock detector takes one global spinlock inside every blocking Mutex
  // operation; a fork while another thread holds it leaves it held in the child, whose first
  // Mutex operation then never returns (about 1 fork in 200 under load in the fork-while-working
  // test). Optimised builds (NDEBUG) have no detector; debug and sanitizer builds now behave the
  // same way.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  GetConfig();  // a bad GPUPRIO_* value is reported now, once, and GPUPRIO_LOG applies from here
  // A setting not honoured is reported at the level of a bad value, whatever GPUPRIO_LOG says.
  for (const std::string& warning : ProcessEnvironmentWarnings()) Log(LogLevel::kError, warning);
  ReadAnnounce();
  ApplyMpsClientPriority(GetConfig());  // before any call reaches the real driver
}

// The line saying how gpuprio runs in this process: at GPUPRIO_LOG=info, or whatever the level
// with GPUPRIO_ANNOUNCE=1 (`gpuprio run` sets it, so its user sees that gpuprio is in each
// process that uses the GPU, while a plain LD_PRELOAD stays quiet).
void Announce() {
  if (!g_announce && !LogEnabled(LogLevel::kInfo)) return;
  const Config& config = GetConfig();
  const char* priority_name = config.default_priority == 1    ? "high"
                              : config.default_priority == 0  ? "normal"
                              : config.default_priority == -1 ? "low"
                                                              : nullptr;
  const std::string priority =
      priority_name != nullptr ? priority_name : std::to_string(config.default_priority);
  // The file this process's tracer will write: the pattern expanded as the tracer expands it, so
  // each process of a multi-process job names its own file. The tracer reports any placeholder
  // that did not expand when it starts; saying it here too would say it twice.
  const EnvReader env(GpuprioGetenv);
  const std::optional<absl::string_view> pattern = env.Get("GPUPRIO_TRACE");
  const std::string trace =
      pattern.has_value()
          ? tracer::ExpandTracePath(*pattern, tracer::CurrentTracePathContext(), GpuprioGetenv)
                .path
          : "none";
  LogUnfiltered(LogLevel::kInfo,
                absl::StrFormat("pid %d mode=%s priority=%s budget=%dus trace=%s version=%s",
                                getpid(), ModeName(config.mode), priority,
                                config.budget_ns / 1000, Escaped(trace), base::kVersion));
}

}  // namespace

void StartGpuprio() {
  if (g_started.load(std::memory_order_acquire) || t_starting) return;
  // Before the gate: the fork handlers take it, and registering them waits for a fork under way.
  RegisterProcessHandlers();
  pthread_mutex_lock(&g_fork_gate);
  if (!g_started.load(std::memory_order_relaxed)) {
    t_starting = true;
    RunStart();
    t_starting = false;
    g_started.store(true, std::memory_order_release);
  }
  pthread_mutex_unlock(&g_fork_gate);
}

bool GpuprioStarted() { return g_started.load(std::memory_order_acquire); }

namespace internal_process_start {

void NoteCudaUseSlow() {
  StartGpuprio();
  if (t_starting) return;  // a use from inside the start: the start's own caller says the line
  // The first thread to get here says the line; the others go on at once.
  if (g_cuda_used.exchange(true, std::memory_order_acq_rel)) return;
  Announce();
}

}  // namespace internal_process_start

bool CudaUsedInThisProcess() { return g_cuda_used.load(std::memory_order_acquire); }

void LockStartForFork() { pthread_mutex_lock(&g_fork_gate); }

void UnlockStartInParent() { pthread_mutex_unlock(&g_fork_gate); }

void UnlockStartInChild() {
  // A process of its own: its start line and exit summary wait for its own first use of CUDA.
  g_cuda_used.store(false, std::memory_order_relaxed);
  pthread_mutex_unlock(&g_fork_gate);
}

}  // namespace gpuprio::hook
