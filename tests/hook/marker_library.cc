// A shared library whose only effect is to prove it was loaded: its constructor creates
// "<its own path>.loaded". The secure-execution test names it as GPUPRIO_CUPTI_LIBRARY.
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <string>

namespace {

__attribute__((constructor)) void WriteMarker() {
  Dl_info self;
  if (dladdr(reinterpret_cast<const void*>(&WriteMarker), &self) == 0 ||
      self.dli_fname == nullptr) {
    return;
  }
  const std::string marker = std::string(self.dli_fname) + ".loaded";
  const int fd = open(marker.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) close(fd);
}

}  // namespace
