// A client process running in the background for the coordinator's multi-process tests: its
// stdout and stderr in files under the test's temporary directory, waited for with a bound (a
// hang fails the test instead of stalling it), and killed (continued, if stopped) and reaped
// whatever ends the test.
#ifndef GPUPRIO_TESTS_COORDINATOR_SPAWNED_CLIENT_H_
#define GPUPRIO_TESTS_COORDINATOR_SPAWNED_CLIENT_H_

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "catch2/catch.hpp"
#include "tests/client_env.h"

namespace gpuprio_test {

inline std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class SpawnedClient {
 public:
  SpawnedClient(const std::vector<std::string>& argv, const Env& extra_env) {
    static int counter = 0;
    const std::string base = absl::StrCat(TempDir(), "/client_", getpid(), "_", ++counter);
    out_ = base + ".out";
    err_ = base + ".err";
    const std::vector<std::string> env = ChildEnvironment(extra_env);
    std::vector<char*> cargv, cenv;
    for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    for (const std::string& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
    cenv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&actions, 2, err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int spawned = posix_spawn(&pid_, cargv[0], &actions, nullptr, cargv.data(), cenv.data());
    posix_spawn_file_actions_destroy(&actions);
    REQUIRE(spawned == 0);
    spawned_ = pid_;
  }
  ~SpawnedClient() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      kill(pid_, SIGCONT);
      waitpid(pid_, nullptr, 0);
    }
    unlink(out_.c_str());
    unlink(err_.c_str());
  }
  SpawnedClient(const SpawnedClient&) = delete;
  SpawnedClient& operator=(const SpawnedClient&) = delete;

  // The pid it was started with (also once reaped).
  pid_t pid() const { return spawned_; }
  void Signal(int signal) const {
    if (pid_ > 0) kill(pid_, signal);
  }
  void Kill() const { Signal(SIGKILL); }
  // Whether the process is stopped (state T in /proc/<pid>/stat).
  bool Stopped() const {
    const std::string stat = ReadFile(absl::StrCat("/proc/", spawned_, "/stat"));
    const size_t paren = stat.rfind(')');
    return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'T';
  }
  // Waits (bounded) and returns the exit code, or 128 + signal.
  int Wait(int timeout_s = 120) {
    int status = 0;
    for (int i = 0; i < timeout_s * 100; ++i) {
      const pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      usleep(10'000);
    }
    FAIL("client " << pid_ << " hung; stderr:\n" << Err());
    return -1;
  }
  std::string Out() const { return ReadFile(out_); }
  std::string Err() const { return ReadFile(err_); }

 private:
  pid_t pid_ = -1;  // -1 once reaped
  pid_t spawned_ = -1;
  std::string out_, err_;
};

}  // namespace gpuprio_test

#endif  // GPUPRIO_TESTS_COORDINATOR_SPAWNED_CLIENT_H_
