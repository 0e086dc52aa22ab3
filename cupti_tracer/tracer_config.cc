#include "cupti_tracer/tracer_config.h"

#include <cstdint>

#include "scheduler/base/logging.h"

namespace gpuprio::tracer {

ParsedEnv<TracerConfig> ParseTracerConfig(GetenvFunction getenv) {
  EnvReader env(getenv);
  TracerConfig config;
  if (const auto path = env.Get("GPUPRIO_TRACE")) config.path = std::string(*path);
  if (const auto library = env.Get("GPUPRIO_CUPTI_LIBRARY")) {
    config.cupti_library = std::string(*library);
  }
  int64_t max_mb = static_cast<int64_t>(config.max_bytes >> 20);
  env.ReadInteger(env_var::GPUPRIO_TRACE_MAX_MB, "an integer number of MiB", &max_mb);
  config.max_bytes = static_cast<size_t>(max_mb) << 20;
  env.ReadChoice<bool>("GPUPRIO_TRACE_ALL_APIS", {{"0", false}, {"1", true}},
                       UsingTheDefault(env_var::GPUPRIO_TRACE_ALL_APIS), &config.all_apis);
  // Whole seconds, as nsys's --delay and --duration, in the table's range (a year at most).
  const KnownEnvVar& delay = env_var::GPUPRIO_TRACE_DELAY_S;
  int64_t delay_s = IntegerDefault(delay);
  env.ReadInteger("GPUPRIO_TRACE_DELAY_S", delay.min, delay.max, "an integer number of seconds",
                  "recording from the start", &delay_s);
  const KnownEnvVar& duration = env_var::GPUPRIO_TRACE_DURATION_S;
  int64_t duration_s = IntegerDefault(duration);
  // 0: until exit.
  if (env.ReadInteger("GPUPRIO_TRACE_DURATION_S", duration.min, duration.max,
                      "an integer number of seconds", "recording until exit", &duration_s) &&
      duration_s > 0) {
    config.window.duration = absl::Seconds(duration_s);
  }
  env.ReadChoice<CaptureRange>(
      "GPUPRIO_TRACE_RANGE",
      {{"whole", CaptureRange::kWholeRun}, {"profiler_api", CaptureRange::kProfilerApi}},
      "recording the whole run", &config.window.range);
  if (config.window.range == CaptureRange::kProfilerApi && delay_s > 0) {
    env.Reject("GPUPRIO_TRACE_DELAY_S", "unset or 0 with GPUPRIO_TRACE_RANGE=profiler_api",
               "ignored: cuProfilerStart starts the recording");
    delay_s = 0;
  }
  config.window.delay = absl::Seconds(delay_s);
  return {config, env.TakeProblems()};
}

TracerConfig ReadTracerConfig(GetenvFunction getenv) {
  ParsedEnv<TracerConfig> parsed = ParseTracerConfig(getenv);
  for (const std::string& problem : parsed.problems) Log(LogLevel::kError, problem);
  return std::move(parsed.config);
}

}  // namespace gpuprio::tracer
