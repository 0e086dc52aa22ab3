// libFuzzer entry point for the configuration readers (hook/config, cupti_tracer/tracer_config,
// scheduler/env_vars). Built outside Bazel by tools/fuzz/build_config_fuzzer.sh (clang's
// -fsanitize=fuzzer); the seeded fuzzer that runs in CI is tests/hook/config_fuzz_test.cc.
//
// Input: NUL-separated chunks; a chunk's first byte picks the variable (the library's ten, or a
// misspelt one), the rest is its value. Any broken invariant traps, so libFuzzer reports it. The
// messages are logged too (the line assembly is fuzzed with them): run with -close_fd_mask=2.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cupti_tracer/tracer_config.h"
#include "hook/config.h"
#include "scheduler/base/env_vars.h"
#include "scheduler/base/logging.h"

namespace {

const char* const kNames[] = {
    "GPUPRIO_MODE",         "GPUPRIO_PRIORITY",      "GPUPRIO_BUDGET_US",
    "GPUPRIO_MAX_QUEUED",   "GPUPRIO_DIRECT_ISSUE",  "GPUPRIO_LOG",
    "GPUPRIO_TRACE",        "GPUPRIO_TRACE_MAX_MB",  "GPUPRIO_TRACE_ALL_APIS",
    "GPUPRIO_CUPTI_LIBRARY", "GPUPRIO_PRIORTY",      "gpuprio_mode"};

void Require(bool condition) {
  if (!condition) __builtin_trap();
}

bool Clean(const std::string& text) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::map<std::string, std::string> env;
  size_t at = 0;
  while (at < size) {
    size_t end = at;
    while (end < size && data[end] != 0) ++end;
    if (end > at) {
      const char* name = kNames[data[at] % (sizeof(kNames) / sizeof(kNames[0]))];
      env[name] = std::string(reinterpret_cast<const char*>(data) + at + 1, end - at - 1);
    }
    at = end + 1;
  }
  auto getenv = [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  const auto config = gpuprio::hook::ParseConfig(getenv);
  const auto tracer = gpuprio::tracer::ParseTracerConfig(getenv);
  Require(config.config.default_priority >= -100 && config.config.default_priority <= 100);
  Require(config.config.budget_ns >= 1000 && config.config.budget_ns <= 10'000'000'000ull);
  Require(config.config.max_queued >= 2 && config.config.max_queued <= 1'000'000);
  Require(tracer.config.max_bytes >= (size_t{1} << 20) && tracer.config.max_bytes <= (size_t{1} << 40));
  for (const auto* problems : {&config.problems, &tracer.problems}) {
    for (const std::string& problem : *problems) {
      Require(Clean(problem));
      gpuprio::Log(gpuprio::LogLevel::kError, problem);
    }
  }
  std::vector<std::string> entries;
  for (const auto& [name, value] : env) entries.push_back(name + "=" + value);
  std::vector<const char*> environment;
  for (const std::string& entry : entries) environment.push_back(entry.c_str());
  for (const std::string& warning : gpuprio::EnvironmentWarnings(environment, size % 2 == 0)) {
    Require(Clean(warning));
  }
  return 0;
}
