#include "cupti_tracer/tracer_config.h"

#include <cstdint>

#include "scheduler/base/logging.h"

namespace gpuprio::tracer {

ParsedEnv<TracerConfig> ParseTracerConfig(GetenvFunction getenv) {
  constexpr int64_t kMaxTraceMb = 1 << 20;
  EnvReader env(getenv);
  TracerConfig config;
  if (const auto path = env.Get("GPUPRIO_TRACE")) config.path = std::string(*path);
  if (const auto library = env.Get("GPUPRIO_CUPTI_LIBRARY")) {
    config.cupti_library = std::string(*library);
  }
  int64_t max_mb = static_cast<int64_t>(config.max_bytes >> 20);
  env.ReadInteger("GPUPRIO_TRACE_MAX_MB", 1, kMaxTraceMb, "an integer number of MiB",
                  "using the default (512)", &max_mb);
  config.max_bytes = static_cast<size_t>(max_mb) << 20;
  env.ReadChoice<bool>("GPUPRIO_TRACE_ALL_APIS", {{"0", false}, {"1", true}},
                       "using the default (0)", &config.all_apis);
  return {config, env.TakeProblems()};
}

TracerConfig ReadTracerConfig(GetenvFunction getenv) {
  ParsedEnv<TracerConfig> parsed = ParseTracerConfig(getenv);
  for (const std::string& problem : parsed.problems) Log(LogLevel::kError, problem);
  return std::move(parsed.config);
}

}  // namespace gpuprio::tracer
