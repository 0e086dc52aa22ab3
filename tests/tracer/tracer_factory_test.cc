#include "cupti_tracer/tracer_factory.h"

#include <map>
#include <string>

#include "catch2/catch.hpp"
#include "cupti_tracer/cupti_library.h"
#include "cupti_tracer/nvtx_annotator.h"

namespace gpuprio::tracer {
namespace {

ParsedEnv<TracerConfig> ParseFrom(const std::map<std::string, std::string>& env) {
  return ParseTracerConfig([&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST_CASE("ParseTracerConfig reads the trace variables", "[tracer]") {
  const auto defaults = ParseFrom({});
  CHECK(defaults.problems.empty());
  CHECK(defaults.config.path.empty());
  CHECK(defaults.config.max_bytes == size_t{512} << 20);
  CHECK(defaults.config.cupti_library.empty());
  const auto set = ParseFrom({{"GPUPRIO_TRACE", "/tmp/t.json"},
                              {"GPUPRIO_TRACE_MAX_MB", "64"},
                              {"GPUPRIO_CUPTI_LIBRARY", "/opt/libcupti.so.13"}});
  CHECK(set.problems.empty());
  CHECK(set.config.path == "/tmp/t.json");
  CHECK(set.config.max_bytes == size_t{64} << 20);
  CHECK(set.config.cupti_library == "/opt/libcupti.so.13");
}

TEST_CASE("ParseTracerConfig reads the capture window", "[tracer]") {
  const auto defaults = ParseFrom({});
  CHECK(defaults.config.window.WholeRun());
  const auto set = ParseFrom({{"GPUPRIO_TRACE_DELAY_S", "30"}, {"GPUPRIO_TRACE_DURATION_S", "5"}});
  CHECK(set.problems.empty());
  CHECK(set.config.window.delay == absl::Seconds(30));
  CHECK(set.config.window.duration == absl::Seconds(5));
  CHECK(set.config.window.range == CaptureRange::kWholeRun);
  CHECK(ParseFrom({{"GPUPRIO_TRACE_DURATION_S", "0"}}).config.window.WholeRun());
  const auto range = ParseFrom({{"GPUPRIO_TRACE_RANGE", "Profiler_API"}});
  CHECK(range.problems.empty());
  CHECK(range.config.window.range == CaptureRange::kProfilerApi);

  const auto bad = ParseFrom({{"GPUPRIO_TRACE_DELAY_S", "1.5"},
                              {"GPUPRIO_TRACE_DURATION_S", "-1"},
                              {"GPUPRIO_TRACE_RANGE", "nvtx"}});
  REQUIRE(bad.problems.size() == 3);
  CHECK(bad.problems[0].rfind("GPUPRIO_TRACE_DELAY_S=\"1.5\" is not valid (accepted: an integer "
                              "number of seconds",
                              0) == 0);
  CHECK(bad.problems[0].find("; recording from the start") != std::string::npos);
  CHECK(bad.problems[1].find("GPUPRIO_TRACE_DURATION_S=\"-1\"") != std::string::npos);
  CHECK(bad.problems[2] ==
        "GPUPRIO_TRACE_RANGE=\"nvtx\" is not valid (accepted: whole, profiler_api); recording "
        "the whole run");
  CHECK(bad.config.window.WholeRun());

  const auto both = ParseFrom({{"GPUPRIO_TRACE_RANGE", "profiler_api"},
                               {"GPUPRIO_TRACE_DELAY_S", "10"}});
  REQUIRE(both.problems.size() == 1);
  CHECK(both.problems[0].find("ignored: cuProfilerStart starts the recording") !=
        std::string::npos);
  CHECK(both.config.window.delay == absl::ZeroDuration());
  CHECK(both.config.window.range == CaptureRange::kProfilerApi);
}

TEST_CASE("A bad GPUPRIO_TRACE_MAX_MB is named, and tracing goes on with the default cap",
          "[tracer]") {
  for (const char* bad : {"0", "-3", "lots", "99999999"}) {
    const auto parsed = ParseFrom({{"GPUPRIO_TRACE_MAX_MB", bad}});
    REQUIRE(parsed.problems.size() == 1);
    CHECK(parsed.config.max_bytes == size_t{512} << 20);
    const std::string& message = parsed.problems[0];
    CHECK(message.find("GPUPRIO_TRACE_MAX_MB") != std::string::npos);
    CHECK(message.find(bad) != std::string::npos);
  }
  const TracerConfig config = ReadTracerConfig([](const char* name) -> const char* {
    if (std::string(name) == "GPUPRIO_TRACE_MAX_MB") return "lots";
    if (std::string(name) == "GPUPRIO_TRACE") return "/tmp/x.json";
    return nullptr;
  });
  CHECK(config.path == "/tmp/x.json");
  CHECK(config.max_bytes == size_t{512} << 20);
}

TEST_CASE("A bad tracer value falls back for its own variable only", "[tracer]") {
  const std::map<std::string, std::string> all_set = {{"GPUPRIO_TRACE", "/tmp/t.json"},
                                                      {"GPUPRIO_TRACE_MAX_MB", "64"},
                                                      {"GPUPRIO_TRACE_ALL_APIS", "1"},
                                                      {"GPUPRIO_CUPTI_LIBRARY", "/x/cupti.so"}};
  auto bad_all_apis = all_set;
  bad_all_apis["GPUPRIO_TRACE_ALL_APIS"] = "yes";
  const auto parsed = ParseFrom(bad_all_apis);
  REQUIRE(parsed.problems.size() == 1);
  CHECK(parsed.problems[0] ==
        "GPUPRIO_TRACE_ALL_APIS=\"yes\" is not valid (accepted: 0, 1); using the default (0)");
  CHECK_FALSE(parsed.config.all_apis);
  CHECK(parsed.config.max_bytes == size_t{64} << 20);
  CHECK(parsed.config.path == "/tmp/t.json");
  CHECK(parsed.config.cupti_library == "/x/cupti.so");

  auto bad_max = all_set;
  bad_max["GPUPRIO_TRACE_MAX_MB"] = "lots";
  const auto capped = ParseFrom(bad_max);
  REQUIRE(capped.problems.size() == 1);
  CHECK(capped.config.max_bytes == size_t{512} << 20);
  CHECK(capped.config.all_apis);
}

TEST_CASE("Every tracer variable ignores leading and trailing whitespace", "[tracer]") {
  for (const char* pad : {" ", "\t", "\n", " \t\r\n\v\f"}) {
    INFO("pad [" << pad << "]");
    const std::string p = pad;
    const auto parsed = ParseFrom({{"GPUPRIO_TRACE", p + "/tmp/my trace.json" + p},
                                   {"GPUPRIO_TRACE_MAX_MB", p + "64" + p},
                                   {"GPUPRIO_TRACE_ALL_APIS", p + "1" + p},
                                   {"GPUPRIO_CUPTI_LIBRARY", p + "libcupti.so.13" + p}});
    CHECK(parsed.problems.empty());
    CHECK(parsed.config.path == "/tmp/my trace.json");
    CHECK(parsed.config.max_bytes == size_t{64} << 20);
    CHECK(parsed.config.all_apis);
    CHECK(parsed.config.cupti_library == "libcupti.so.13");
  }
  const auto blank = ParseFrom({{"GPUPRIO_TRACE", " \n"}, {"GPUPRIO_CUPTI_LIBRARY", "\t"}});
  CHECK(blank.problems.empty());
  CHECK(blank.config.path.empty());
  CHECK(blank.config.cupti_library.empty());
}

TEST_CASE("libcupti is searched in the documented order", "[tracer]") {
  const auto defaults = CuptiSearchPaths("");
  REQUIRE(defaults.size() == 3);
  CHECK(defaults[0] == "libcupti.so.13");
  CHECK(defaults[1] == "/usr/local/cuda/lib64/libcupti.so.13");
  CHECK(defaults[2] == "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13");
  CHECK(CuptiSearchPaths("/x/libcupti.so") == std::vector<std::string>{"/x/libcupti.so"});
}

TEST_CASE("A libcupti that cannot be loaded gives a clear error and the NVTX fallback",
          "[tracer]") {
  const std::string missing = "/nonexistent/gpuprio/libcupti.so.13";
  const auto api = LoadCuptiLibrary(missing);
  REQUIRE_FALSE(api.ok());
  CHECK(api.status().code() == absl::StatusCode::kNotFound);
  CHECK(std::string(api.status().message()).find(missing) != std::string::npos);

  TracerConfig config;
  config.path = "/tmp/gpuprio_factory_test_trace.json";
  config.cupti_library = missing;
  std::unique_ptr<scheduler::OpObserver> observer = MakeTracer(config);
  REQUIRE(observer != nullptr);
  CHECK(dynamic_cast<NvtxAnnotator*>(observer.get()) != nullptr);
  // No CuptiTracer started: finishing is a no-op, not a crash.
  FinishTracerAtExit();
}

TEST_CASE("A library that is not CUPTI is refused by name", "[tracer]") {
  const auto api = LoadCuptiLibrary("libm.so.6");
  REQUIRE_FALSE(api.ok());
  CHECK(api.status().code() == absl::StatusCode::kUnavailable);
  CHECK(std::string(api.status().message()).find("cupti") != std::string::npos);
}

TEST_CASE("Without a trace or a loaded libcupti there is no observer at all", "[tracer]") {
  REQUIRE_FALSE(FindLoadedCupti().ok());  // this test binary never loads libcupti
  CHECK(MakeTracer(TracerConfig{}) == nullptr);
}

}  // namespace
}  // namespace gpuprio::tracer
