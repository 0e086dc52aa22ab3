// A process for trace_on_signal_test: installs FinishOnTerminatingSignals with a `finish` and an
// `abandon` that append a word to the file argv[2], then signals itself. Scenarios (argv[1]):
//   sigterm / sigint  finish returns at once; the signal is raised.
//   hang              finish never returns; bound 200 ms.
//   second            finish sends the process SIGTERM again, then never returns (bound 60 s).
//   ignored           SIGTERM is ignored before the call: not taken; raising it changes nothing.
//   app_first         the program's SIGTERM handler is installed before the call: it runs.
//   fork              the child of a fork raises SIGTERM; the parent prints child_signal=<n>.
// Prints taken=<signals> after the call; "survived" (exit 2) if a signal that should have ended
// the process did not within 30 s; "<scenario> ok" (exit 0) where the process should live.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "cupti_tracer/trace_on_signal.h"

namespace {

const char* g_marker = nullptr;

// Async-signal-safe: abandon may run in the handler.
void Append(const char* word) {
  const int fd = open(g_marker, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  ssize_t ignored = write(fd, word, std::strlen(word));
  (void)ignored;
  close(fd);
}

void FinishAtOnce() { Append("finished\n"); }
void FinishNever() {
  Append("finish started\n");
  for (;;) pause();
}
void FinishAfterSecondSignal() {
  Append("finish started\n");
  kill(getpid(), SIGTERM);
  for (;;) pause();
}
void Abandon() { Append("abandoned\n"); }

volatile sig_atomic_t g_app_handler_ran = 0;
void AppHandler(int) { g_app_handler_ran = 1; }

void WaitToDie() {
  for (int i = 0; i < 300; ++i) usleep(100 * 1000);
  std::printf("survived\n");
  std::fflush(stdout);
  _exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return 64;
  const std::string scenario = argv[1];
  g_marker = argv[2];
  void (*finish)() = &FinishAtOnce;
  absl::Duration bound = absl::Seconds(60);
  if (scenario == "hang") {
    finish = &FinishNever;
    bound = absl::Milliseconds(200);
  } else if (scenario == "second") {
    finish = &FinishAfterSecondSignal;
  } else if (scenario == "ignored") {
    signal(SIGTERM, SIG_IGN);
  } else if (scenario == "app_first") {
    signal(SIGTERM, &AppHandler);
  }
  const std::vector<int> taken =
      gpuprio::tracer::FinishOnTerminatingSignals(finish, &Abandon, bound);
  std::string names;
  for (int signo : taken) names += signo == SIGTERM ? "SIGTERM," : "SIGINT,";
  std::printf("taken=%s\n", names.empty() ? "none" : names.c_str());
  std::fflush(stdout);

  if (scenario == "sigint") {
    raise(SIGINT);
    WaitToDie();
  }
  if (scenario == "fork") {
    const pid_t child = fork();
    if (child == 0) {
      raise(SIGTERM);
      usleep(30 * 1000 * 1000);
      _exit(2);
    }
    int status = 0;
    if (waitpid(child, &status, 0) != child) return 1;
    std::printf("child_signal=%d\nfork ok\n", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    return 0;
  }
  raise(SIGTERM);
  if (scenario == "ignored") {
    std::printf("ignored ok\n");
    return 0;
  }
  if (scenario == "app_first") {
    for (int i = 0; i < 300 && !g_app_handler_ran; ++i) usleep(10 * 1000);
    std::printf("app_handler_ran=%d\napp_first ok\n", static_cast<int>(g_app_handler_ran));
    return 0;
  }
  WaitToDie();
}
