#include "tests/runfiles.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

extern char** environ;

namespace gpuprio_test {

absl::StatusOr<std::string> Runfile(absl::string_view path) {
  for (const char* var : {"TEST_SRCDIR", "RUNFILES_DIR"}) {
    const char* root = std::getenv(var);
    if (root == nullptr || *root == '\0') continue;
    std::string full = absl::StrCat(root, "/gpuprio/", path);
    struct stat st;
    if (stat(full.c_str(), &st) == 0) return full;
  }
  return absl::NotFoundError(absl::StrCat("runfile not found: ", path));
}

absl::StatusOr<std::string> RunfileText(absl::string_view path) {
  absl::StatusOr<std::string> full = Runfile(path);
  if (!full.ok()) return full.status();
  std::ifstream in(*full);
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad() || !in.is_open()) return absl::UnavailableError(absl::StrCat("cannot read ", *full));
  return text.str();
}

std::string Dirname(absl::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == absl::string_view::npos ? "." : std::string(path.substr(0, slash));
}

namespace {

// Reads both pipes until EOF; poll keeps a child that fills one pipe from blocking on it.
void Drain(int out_fd, int err_fd, std::string* out, std::string* err) {
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  std::string* sinks[2] = {out, err};
  int open_fds = 2;
  char buf[4096];
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t n = read(fds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
}

}  // namespace

std::vector<std::string> ChildEnvironment(
    const std::vector<std::pair<std::string, std::string>>& extra_env) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    absl::string_view entry(*e);
    bool replaced = false;
    for (const auto& [name, value] : extra_env) {
      if (entry.size() > name.size() && entry.substr(0, name.size()) == name &&
          entry[name.size()] == '=') {
        replaced = true;
      }
    }
    if (!replaced) env.emplace_back(entry);
  }
  for (const auto& [name, value] : extra_env) env.push_back(absl::StrCat(name, "=", value));
  return env;
}

absl::StatusOr<ProcessResult> RunProcess(
    const std::vector<std::string>& argv,
    const std::vector<std::pair<std::string, std::string>>& extra_env) {
  if (argv.empty()) return absl::InvalidArgumentError("empty argv");
  const std::vector<std::string> env = ChildEnvironment(extra_env);

  std::vector<char*> cargv, cenv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const std::string& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);

  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    return absl::InternalError("pipe failed");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, cargv[0], &actions, nullptr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (rc != 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    return absl::InternalError(absl::StrFormat("posix_spawn %s: %s", argv[0], std::strerror(rc)));
  }
  ProcessResult result;
  Drain(out_pipe[0], err_pipe[0], &result.stdout_text, &result.stderr_text);
  close(out_pipe[0]);
  close(err_pipe[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return absl::InternalError("waitpid failed");
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.exit_code = 128 + WTERMSIG(status);
  }
  return result;
}

}  // namespace gpuprio_test
