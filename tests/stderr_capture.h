// Test helper: everything written to file descriptor 2 while a StderrCapture lives, for tests of
// code that logs with write(2).
#ifndef GPUPRIO_TESTS_STDERR_CAPTURE_H_
#define GPUPRIO_TESTS_STDERR_CAPTURE_H_

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace gpuprio_test {

class StderrCapture {
 public:
  StderrCapture() {
    std::fflush(stderr);
    saved_ = dup(STDERR_FILENO);
    file_ = memfd_create("stderr_capture", 0);
    // Appending writes: some kernels (gVisor among them) do not serialise the shared file offset,
    // so concurrent write(2)s without O_APPEND can land on the same offset and a line is lost.
    fcntl(file_, F_SETFL, O_APPEND);
    dup2(file_, STDERR_FILENO);
  }
  ~StderrCapture() { Restore(); }
  StderrCapture(const StderrCapture&) = delete;
  StderrCapture& operator=(const StderrCapture&) = delete;

  // Stops capturing (if still capturing) and returns all that was written.
  std::string Text() {
    Restore();
    std::string text;
    char buffer[4096];
    lseek(file_, 0, SEEK_SET);
    for (ssize_t n; (n = read(file_, buffer, sizeof(buffer))) > 0;) text.append(buffer, n);
    return text;
  }

 private:
  void Restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    dup2(saved_, STDERR_FILENO);
    close(saved_);
    saved_ = -1;
  }

  int saved_ = -1;
  int file_ = -1;
};

}  // namespace gpuprio_test

#endif  // GPUPRIO_TESTS_STDERR_CAPTURE_H_
