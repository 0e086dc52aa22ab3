// The configuration rules end to end: env_probe runs with libgpuprio.so preloaded against the fake
// driver, and what gpuprio reports (C API) and writes (stderr) is checked.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "catch2/catch.hpp"
#include "tests/client_env.h"
#include "tests/runfiles.h"

namespace {

using gpuprio_test::Env;

struct ProbeResult {
  std::map<std::string, std::string> values;
  std::vector<std::string> gpuprio_lines;  // stderr lines starting "gpuprio: "
  std::string stderr_text;
};

ProbeResult Probe(const std::string& mode, Env extra = {},
                  const std::string& probe_mode = "schedule") {
  auto libcuda = gpuprio_test::Runfile("tests/fake_cuda/libcuda.so.1");
  auto probe = gpuprio_test::Runfile("tests/hook/env_probe");
  REQUIRE(libcuda.ok());
  REQUIRE(probe.ok());
  auto env = gpuprio_test::ClientEnv(mode, std::move(extra));
  REQUIRE(env.ok());
  auto result = gpuprio_test::RunProcess({*probe, *libcuda, probe_mode}, *env);
  REQUIRE(result.ok());
  INFO("stdout:\n" << result->stdout_text << "\nstderr:\n" << result->stderr_text);
  REQUIRE(result->exit_code == 0);
  ProbeResult probe_result;
  probe_result.values = gpuprio_test::StringValues(result->stdout_text);
  REQUIRE(probe_result.values["done"] == "yes");
  for (absl::string_view line : absl::StrSplit(result->stderr_text, '\n')) {
    if (absl::StartsWith(line, "gpuprio: ")) probe_result.gpuprio_lines.emplace_back(line);
  }
  probe_result.stderr_text = result->stderr_text;
  return probe_result;
}

TEST_CASE("A bad GPUPRIO_LOG is reported once and scheduling stays on", "[hook][config]") {
  const ProbeResult r = Probe("schedule", {{"GPUPRIO_LOG", "loud"}, {"GPUPRIO_PRIORITY", "high"}});
  INFO(r.stderr_text);
  CHECK(r.values.at("gpuprio_mode") == "schedule");
  CHECK(r.values.at("default_priority") == "1");
  CHECK(r.values.at("scheduled_call") == "ok");
  REQUIRE(r.gpuprio_lines.size() == 1);
  CHECK(r.gpuprio_lines[0] ==
        "gpuprio: error: GPUPRIO_LOG=\"loud\" is not valid (accepted: error, warning, info, debug, "
        "warn); using the default (warning)");
}

TEST_CASE("Surrounding whitespace is ignored in the real environment too", "[hook][config]") {
  const ProbeResult r = Probe(" passthrough\n", {{"GPUPRIO_PRIORITY", "\tlow "}});
  INFO(r.stderr_text);
  CHECK(r.values.at("gpuprio_mode") == "passthrough");
  CHECK(r.values.at("default_priority") == "-1");
  CHECK(r.gpuprio_lines.empty());
}

TEST_CASE("A 5000-byte bad value is reported in one line that keeps its end", "[hook][config]") {
  const ProbeResult r = Probe(std::string(5000, 'z'));
  INFO(r.stderr_text);
  CHECK(r.values.at("gpuprio_mode") == "passthrough");
  REQUIRE(r.gpuprio_lines.size() == 1);
  const std::string& line = r.gpuprio_lines[0];
  CHECK(absl::StartsWith(line, "gpuprio: error: GPUPRIO_MODE=\"zzz"));
  CHECK(absl::EndsWith(line, "\" is not valid (accepted: schedule, passthrough, off); "
                             "running unscheduled (passthrough)"));
  CHECK(line.size() < 4096);
}

TEST_CASE("Control characters in a value are echoed escaped, never raw", "[hook][config]") {
  const ProbeResult r = Probe("fast\ngpuprio: forged line\x1b[2J");
  INFO(r.stderr_text);
  REQUIRE(r.gpuprio_lines.size() == 1);
  CHECK(absl::StartsWith(r.gpuprio_lines[0],
                         "gpuprio: error: GPUPRIO_MODE=\"fast\\ngpuprio: forged line\\x1b[2J\" is not "
                         "valid"));
  CHECK_FALSE(absl::StrContains(r.stderr_text, "\x1b"));
}

TEST_CASE("A misspelt GPUPRIO_ variable is named once with the closest known one, even when "
          "only errors are shown", "[hook][config]") {
  const ProbeResult r = Probe("schedule", {{"GPUPRIO_PRIORTY", "high"}, {"GPUPRIO_LOG", "error"}});
  INFO(r.stderr_text);
  CHECK(r.values.at("default_priority") == "0");
  REQUIRE(r.gpuprio_lines.size() == 1);
  CHECK(r.gpuprio_lines[0] ==
        "gpuprio: error: GPUPRIO_PRIORTY is not a gpuprio variable and is ignored (the closest known "
        "one is GPUPRIO_PRIORITY)");
}

TEST_CASE("A low process reaches the driver as a below-normal MPS client; others as they were",
          "[hook][config][mps]") {
  // The CUDA call comes first: nothing else starts gpuprio before its dlsym lookup of cuInit.
  const auto at_init = [](const std::string& mode, Env extra) {
    const ProbeResult r = Probe(mode, std::move(extra), "cuda-first");
    INFO(r.stderr_text);
    CHECK(r.values.at("scheduled_call") == "ok");
    return r;
  };
  {
    // Through gpuprio's dlsym on the driver's handle, as libcudart finds cuInit.
    const ProbeResult r =
        at_init("schedule", {{"GPUPRIO_PRIORITY", "low"}, {"GPUPRIO_LOG", "info"}});
    CHECK(r.values.at("mps_client_priority_at_init") == "1");
    CHECK(absl::StrContains(r.stderr_text, "calls api=cuInit total=1 dlsym=1 "));
  }
  CHECK(
      at_init("schedule", {{"GPUPRIO_PRIORITY", "-7"}}).values.at("mps_client_priority_at_init") ==
      "1");
  for (const char* priority : {"normal", "high"}) {
    const ProbeResult r = at_init("schedule", {{"GPUPRIO_PRIORITY", priority}});
    CHECK(r.values.at("mps_client_priority_at_init") == "unset");
    CHECK(r.gpuprio_lines.empty());
  }
  // The user's value wins; off and passthrough change nothing.
  CHECK(at_init("schedule", {{"GPUPRIO_PRIORITY", "low"}, {"CUDA_MPS_CLIENT_PRIORITY", "0"}})
            .values.at("mps_client_priority_at_init") == "0");
  CHECK(at_init("schedule", {{"GPUPRIO_PRIORITY", "low"}, {"GPUPRIO_MPS_CLIENT_PRIORITY", "off"}})
            .values.at("mps_client_priority_at_init") == "unset");
  CHECK(at_init("passthrough", {{"GPUPRIO_PRIORITY", "low"}})
            .values.at("mps_client_priority_at_init") == "unset");
  // Set but blank is no choice: the driver would read nothing from it.
  CHECK(at_init("schedule", {{"GPUPRIO_PRIORITY", "low"}, {"CUDA_MPS_CLIENT_PRIORITY", " "}})
            .values.at("mps_client_priority_at_init") == "1");
}

// `settings` plus what a process started by a low launcher under gpuprio inherits: gpuprio's
// below-normal MPS client priority and its mark.
Env InheritedFromGpuprio(Env settings) {
  settings.emplace_back("CUDA_MPS_CLIENT_PRIORITY", "1");
  settings.emplace_back("GPUPRIO_MPS_CLIENT_PRIORITY_SET", "1");
  return settings;
}

TEST_CASE("The MPS client priority is in the environment before main, with gpuprio's mark",
          "[hook][config][mps]") {
  // Set by the library's constructor, while the process has one thread: no thread of the
  // program can be reading the environment at that moment.
  const ProbeResult low =
      Probe("schedule", {{"GPUPRIO_PRIORITY", "low"}, {"GPUPRIO_LOG", "info"}}, "cuda-first");
  INFO(low.stderr_text);
  CHECK(low.values.at("mps_client_priority_at_main") == "1");
  CHECK(low.values.at("mps_client_priority_mark_at_main") == "1");
  CHECK(low.values.at("mps_client_priority_at_init") == "1");
  CHECK(absl::StrContains(low.stderr_text,
                          "gpuprio: info: CUDA_MPS_CLIENT_PRIORITY=1: a "
                          "below-normal MPS client (priority -1)"));
  // Passthrough, off and normal processes: untouched before main too.
  for (const auto& [mode, priority] : {std::pair<const char*, const char*>{"passthrough", "low"},
                                       {"off", "low"},
                                       {"schedule", "normal"}}) {
    const ProbeResult r = Probe(mode, {{"GPUPRIO_PRIORITY", priority}});
    INFO(mode << " " << priority << "\n" << r.stderr_text);
    CHECK(r.values.at("mps_client_priority_at_main") == "unset");
    CHECK(r.values.at("mps_client_priority_mark_at_main") == "unset");
  }
}

TEST_CASE("gpuprio's value inherited by a normal or high process is withdrawn, silently",
          "[hook][config][mps]") {
  // A server started by a low launcher's script inherits the launcher's value and mark.
  for (const char* priority : {"high", "normal"}) {
    const ProbeResult r =
        Probe("schedule", InheritedFromGpuprio({{"GPUPRIO_PRIORITY", priority}}), "cuda-first");
    INFO(priority << "\n" << r.stderr_text);
    CHECK(r.values.at("mps_client_priority_at_main") == "unset");
    CHECK(r.values.at("mps_client_priority_mark_at_main") == "unset");
    CHECK(r.values.at("mps_client_priority_at_init") == "unset");
    CHECK(r.gpuprio_lines.empty());
  }
  // Not scheduling, or the setting off: gpuprio would not set it there, so its value goes too.
  for (const auto& [mode, setting] : {std::pair<const char*, const char*>{"passthrough", "auto"},
                                      {"off", "auto"},
                                      {"schedule", "off"}}) {
    const ProbeResult r =
        Probe(mode, InheritedFromGpuprio(
                        {{"GPUPRIO_PRIORITY", "low"}, {"GPUPRIO_MPS_CLIENT_PRIORITY", setting}}));
    INFO(mode << " " << setting << "\n" << r.stderr_text);
    CHECK(r.values.at("mps_client_priority_at_main") == "unset");
    CHECK(r.values.at("mps_client_priority_mark_at_main") == "unset");
  }
  // Said at info, with how to keep it.
  const ProbeResult said = Probe(
      "schedule", InheritedFromGpuprio({{"GPUPRIO_PRIORITY", "high"}, {"GPUPRIO_LOG", "info"}}),
      "cuda-first");
  CHECK(absl::StrContains(said.stderr_text,
                          "gpuprio: info: removed CUDA_MPS_CLIENT_PRIORITY=1 set by gpuprio in a "
                          "parent process: this process (priority 1, mode schedule) runs as a "
                          "normal MPS client; unset GPUPRIO_MPS_CLIENT_PRIORITY_SET to keep the "
                          "value"));
  // A low child keeps it as it is.
  const ProbeResult low =
      Probe("schedule", InheritedFromGpuprio({{"GPUPRIO_PRIORITY", "low"}}), "cuda-first");
  CHECK(low.values.at("mps_client_priority_at_init") == "1");
  CHECK(low.gpuprio_lines.empty());
}

TEST_CASE("A program that changes its priority before its first CUDA call gets its choice",
          "[hook][config][mps]") {
  // The load decided on the priority the environment had then; the start decides again.
  const ProbeResult lowered = Probe(
      "schedule", {{"GPUPRIO_PRIORITY", "normal"}, {"ENV_PROBE_SET_PRIORITY", "low"}}, "schedule");
  INFO(lowered.stderr_text);
  CHECK(lowered.values.at("mps_client_priority_at_main") == "unset");
  CHECK(lowered.values.at("default_priority") == "-1");
  CHECK(lowered.values.at("mps_client_priority_at_init") == "1");
  const ProbeResult raised = Probe(
      "schedule", {{"GPUPRIO_PRIORITY", "low"}, {"ENV_PROBE_SET_PRIORITY", "high"}}, "schedule");
  INFO(raised.stderr_text);
  CHECK(raised.values.at("mps_client_priority_at_main") == "1");
  CHECK(raised.values.at("default_priority") == "1");
  CHECK(raised.values.at("mps_client_priority_at_init") == "unset");
  CHECK(raised.gpuprio_lines.empty());
}

TEST_CASE("A normal or high process that inherited a below-normal MPS priority is told once",
          "[hook][config][mps]") {
  for (const char* priority : {"high", "normal"}) {
    const ProbeResult r =
        Probe("schedule", {{"GPUPRIO_PRIORITY", priority}, {"CUDA_MPS_CLIENT_PRIORITY", "1"}},
              "cuda-first");
    INFO(r.stderr_text);
    CHECK(r.values.at("mps_client_priority_at_init") == "1");
    REQUIRE(r.gpuprio_lines.size() == 1);
    CHECK(absl::StartsWith(
        r.gpuprio_lines[0],
        absl::StrCat("gpuprio: warning: CUDA_MPS_CLIENT_PRIORITY=1 (a below-normal "
                     "MPS client) in a process of priority ",
                     std::string(priority) == "high" ? "1" : "0")));
  }
}

}  // namespace
