#include "cupti_tracer/trace_on_signal.h"

#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/base/attributes.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "scheduler/base/logging.h"

namespace gpuprio::tracer {
namespace {

constexpr int kTerminatingSignals[] = {SIGTERM, SIGINT};

struct Actions {
  void (*finish)();
  void (*abandon)();
  absl::Duration bound;
};

// What the handler reads: plain values and lock-free atomics only.
ABSL_CONST_INIT std::atomic<bool> g_installed{false};
ABSL_CONST_INIT std::atomic<pid_t> g_owner_pid{0};     // the process whose thread waits
ABSL_CONST_INIT std::atomic<int> g_received{0};        // the first signal; 0 until one came
ABSL_CONST_INIT std::atomic<void (*)()> g_abandon{nullptr};
sem_t g_wake;  // initialised before any handler is installed; never destroyed

const char* SignalName(int signo) { return signo == SIGTERM ? "SIGTERM" : "SIGINT"; }

// Default disposition, then the signal again. In a handler the signal is blocked until the
// handler returns, so it is delivered then; the default action ends the process.
void RaiseWithDefaultAction(int signo) {
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(signo, &dfl, nullptr);
  raise(signo);
}

void OnTerminatingSignal(int signo) {
  const int saved_errno = errno;
  int none = 0;
  if (getpid() != g_owner_pid.load(std::memory_order_relaxed)) {
    RaiseWithDefaultAction(signo);  // a forked child: nobody there would write
  } else if (!g_received.compare_exchange_strong(none, signo, std::memory_order_acq_rel)) {
    // A second signal while the first one's trace is written: the user insists.
    if (void (*abandon)() = g_abandon.load(std::memory_order_acquire)) abandon();
    RaiseWithDefaultAction(signo);
  } else {
    sem_post(&g_wake);
  }
  errno = saved_errno;
}

struct FinishRun {
  void (*finish)();
  absl::Notification done;
};

void* RunFinish(void* arg) {
  auto* run = static_cast<FinishRun*>(arg);
  run->finish();
  run->done.Notify();
  return nullptr;
}

void* WaitForSignal(void* arg) {
  const Actions actions = *static_cast<Actions*>(arg);
  delete static_cast<Actions*>(arg);
  // The program's signals go to the program's threads; this one only re-raises, below.
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  while (sem_wait(&g_wake) != 0) {
    if (errno != EINTR) return nullptr;
  }
  const int signo = g_received.load(std::memory_order_acquire);
  Log(LogLevel::kInfo,
      absl::StrFormat("trace: %s: writing the trace before the process ends", SignalName(signo)));
  // Leaked: a helper that overruns the bound still owns it when the process ends.
  auto* run = new FinishRun{actions.finish, {}};
  pthread_t helper;
  bool finished_in_time = true;
  if (pthread_create(&helper, nullptr, &RunFinish, run) == 0) {
    pthread_detach(helper);
    finished_in_time = run->done.WaitForNotificationWithTimeout(actions.bound);
  } else {
    RunFinish(run);  // no thread to spare: unbounded, but the trace is still written
  }
  if (!finished_in_time) {
    Log(LogLevel::kError,
        absl::StrFormat("trace: the trace was not written within %s of %s; the process ends "
                        "without it",
                        absl::FormatDuration(actions.bound), SignalName(signo)));
    actions.abandon();
  }
  // Still ours: back to the default action, which ends the whole process when this thread takes
  // the signal. A handler the program installed meanwhile is left in place and runs instead.
  struct sigaction current;
  if (sigaction(signo, nullptr, &current) == 0 && !(current.sa_flags & SA_SIGINFO) &&
      current.sa_handler == &OnTerminatingSignal) {
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(signo, &dfl, nullptr);
  }
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, signo);
  pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  raise(signo);
  return nullptr;
}

}  // namespace

std::vector<int> FinishOnTerminatingSignals(void (*finish)(), void (*abandon)(),
                                            absl::Duration bound) {
  if (g_installed.exchange(true, std::memory_order_acq_rel)) return {};
  std::vector<int> taken;
  for (int signo : kTerminatingSignals) {
    struct sigaction current;
    if (sigaction(signo, nullptr, &current) == 0 && !(current.sa_flags & SA_SIGINFO) &&
        current.sa_handler == SIG_DFL) {
      taken.push_back(signo);
    }
  }
  if (taken.empty()) return taken;

  sem_init(&g_wake, /*pshared=*/0, 0);
  g_owner_pid.store(getpid(), std::memory_order_relaxed);
  g_abandon.store(abandon, std::memory_order_release);
  auto* actions = new Actions{finish, abandon, bound};
  pthread_t watcher;
  if (const int error = pthread_create(&watcher, nullptr, &WaitForSignal, actions); error != 0) {
    delete actions;
    Log(LogLevel::kWarning,
        absl::StrFormat("trace: no thread to write the trace on SIGTERM/SIGINT (%s); the trace "
                        "is written only at exit",
                        std::strerror(error)));
    return {};
  }
  pthread_setname_np(watcher, "gpuprio trace");  // what the program's thread list shows
  pthread_detach(watcher);

  struct sigaction ours;
  std::memset(&ours, 0, sizeof(ours));
  ours.sa_handler = &OnTerminatingSignal;
  sigemptyset(&ours.sa_mask);
  // SA_RESTART: the program's system calls did not expect these signals to interrupt them.
  ours.sa_flags = SA_RESTART;
  for (int signo : taken) sigaction(signo, &ours, nullptr);
  return taken;
}

}  // namespace gpuprio::tracer
