#include "cupti_tracer/kernel_name.h"

#include <cxxabi.h>

#include <cstdlib>

#include "absl/strings/match.h"

namespace gpuprio::tracer {

std::string DemangledKernelName(absl::string_view name) {
  // Only "_Z..." is an Itanium-mangled name: __cxa_demangle would also "demangle" a plain word
  // as a type ("i" -> "int").
  if (!absl::StartsWith(name, "_Z")) return std::string(name);
  const std::string mangled(name);
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  if (status != 0 || demangled == nullptr) {
    std::free(demangled);
    return mangled;
  }
  std::string out(demangled);
  std::free(demangled);
  return out;
}

}  // namespace gpuprio::tracer
