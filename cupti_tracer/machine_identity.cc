#include "cupti_tracer/machine_identity.h"

#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include <string>

namespace gpuprio::tracer {

std::string BootIdFromProc(const char* path) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  char buf[64];
  const ssize_t n = read(fd, buf, sizeof(buf));
  close(fd);
  if (n <= 0) return "";
  std::string id(buf, static_cast<size_t>(n));
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  // A UUID as the kernel prints it: 36 characters. Anything else is not trusted to name a boot.
  if (id.size() != 36) return "";
  for (size_t i = 0; i < id.size(); ++i) {
    const char c = id[i];
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return "";
  }
  return id;
}

std::string HostName() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "";
  return std::string(name);
}

}  // namespace gpuprio::tracer
