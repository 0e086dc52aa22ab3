// Prints what `gpuprio run` handed its child, one "NAME=VALUE" line each: LD_PRELOAD, every
// GPUPRIO_* variable (sorted), and what the C API answers when the library is loaded (found
// through dlsym(RTLD_DEFAULT), as applications should): "gpuprio_get_thread_priority=absent" etc.
// otherwise. Exits with argv[1] when given, so tests can check that exit codes pass through.
// With ENV_DUMP_LIBCUDA=PATH (a driver, the fake one in tests) it then makes one CUDA call, cuInit
// looked up with dlsym on the driver's handle as the CUDA runtime does, and prints "cuda_call=N"
// (its CUresult): a process that uses CUDA, for what gpuprio says only then.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace {

using IntFn = int (*)();
using StringFn = const char* (*)();

template <typename Fn>
Fn Lookup(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

void PrintInt(const char* name) {
  const IntFn fn = Lookup<IntFn>(name);
  if (fn == nullptr) {
    std::printf("%s=absent\n", name);
  } else {
    std::printf("%s=%d\n", name, fn());
  }
}

}  // namespace

int main(int argc, char** argv) {
  const char* preload = std::getenv("LD_PRELOAD");
  std::printf("LD_PRELOAD=%s\n", preload != nullptr ? preload : "(unset)");
  std::printf("pid=%d\n", static_cast<int>(getpid()));
  std::vector<std::string> gpuprio_vars;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "GPUPRIO_", 8) == 0) gpuprio_vars.emplace_back(*e);
  }
  std::sort(gpuprio_vars.begin(), gpuprio_vars.end());
  for (const std::string& var : gpuprio_vars) std::printf("%s\n", var.c_str());

  PrintInt("gpuprio_get_thread_priority");
  PrintInt("gpuprio_get_default_priority");
  const StringFn mode = Lookup<StringFn>("gpuprio_mode");
  std::printf("gpuprio_mode=%s\n", mode == nullptr ? "absent" : mode());
  const StringFn version = Lookup<StringFn>("gpuprio_version");
  std::printf("gpuprio_version=%s\n", version == nullptr ? "absent" : version());
  if (const char* libcuda = std::getenv("ENV_DUMP_LIBCUDA")) {
    void* driver = dlopen(libcuda, RTLD_NOW | RTLD_GLOBAL);
    using InitFn = int (*)(unsigned);
    const auto init =
        driver != nullptr ? reinterpret_cast<InitFn>(dlsym(driver, "cuInit")) : nullptr;
    std::printf("cuda_call=%d\n", init != nullptr ? init(0) : -1);
  }
  return argc > 1 ? std::atoi(argv[1]) : 0;
}
