// Interception end to end against the fake driver: the probe and the fake clients run as
// subprocesses, natively and with libgpuprio.so preloaded, and their reports are compared.
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "catch2/catch.hpp"
#include "tests/client_env.h"
#include "tests/runfiles.h"

namespace {

using gpuprio_test::Env;

std::string Path(const char* runfile) {
  auto path = gpuprio_test::Runfile(runfile);
  REQUIRE(path.ok());
  return *path;
}

gpuprio_test::ProcessResult Run(const std::vector<std::string>& argv, const std::string& mode,
                                Env extra = {}) {
  auto env = gpuprio_test::ClientEnv(mode, std::move(extra));
  REQUIRE(env.ok());
  auto result = gpuprio_test::RunProcess(argv, *env);
  REQUIRE(result.ok());
  INFO(argv[0] << " (mode '" << mode << "')\nstdout:\n"
               << result->stdout_text << "\nstderr:\n" << result->stderr_text);
  REQUIRE(result->exit_code == 0);
  return *result;
}

// The probe's report: key -> first word of its value.
std::map<std::string, std::string> Probe(const std::string& mode, Env extra = {}) {
  std::map<std::string, std::string> report;
  const auto r = Run({Path("tests/hook/lookup_probe")}, mode, std::move(extra));
  for (absl::string_view line : absl::StrSplit(r.stdout_text, '\n')) {
    std::vector<std::string> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
    if (kv.size() == 2) report[kv[0]] = kv[1];
  }
  REQUIRE(report["done"] == "yes");
  return report;
}

// `calls api=X total=.. dlsym=.. gpa=.. gpa_ptsz=.. exported=..` lines from the exit summary.
std::map<std::string, std::map<std::string, long>> CallSummary(const std::string& stderr_text) {
  std::map<std::string, std::map<std::string, long>> summary;
  for (absl::string_view line : absl::StrSplit(stderr_text, '\n')) {
    if (!absl::StartsWith(line, "gpuprio: info: calls ")) continue;
    const auto values = gpuprio_test::IntValues(std::string(line));
    const auto names = gpuprio_test::StringValues(std::string(line));
    summary[names.at("api")] = values;
  }
  return summary;
}

TEST_CASE("Lookups of intercepted ABIs land in libgpuprio on every path", "[hook]") {
  auto report = Probe("passthrough");
  for (const char* key : {"dlsym.cuGetProcAddress_v2", "dlsym.cuLaunchKernel",
                          "dlsym.cuLaunchKernel_ptsz", "gpa.cuGetProcAddress@11030",
                          "gpa.cuGetProcAddress@12000", "gpa_v1.cuStreamSynchronize"}) {
    INFO(key << " = " << report[key]);
    CHECK(absl::StartsWith(report[key], "libgpuprio"));
  }
  for (const char* key : {"gpa.cuLaunchKernel", "gpa.cuLaunchKernel.ptsz", "gpa.cuLaunchKernelEx",
                          "gpa.cuCtxSynchronize@12000", "gpa.cuCtxSynchronize@13000"}) {
    INFO(key << " = " << report[key]);
    CHECK(absl::StartsWith(report[key], "libgpuprio result=0 status=0"));
  }
  CHECK(report["launch.dlsym"] == "ok");
}

TEST_CASE("Lookups gpuprio does not intercept return exactly what the driver returns",
          "[hook]") {
  const auto native = Probe("");
  const auto preloaded = Probe("passthrough");
  // Unknown driver symbols, failing lookups, the "" probe and symbolStatus values.
  for (const char* key :
       {"dlsym.cuDeviceGetName", "dlsym.cuNoSuchFunction", "dlsym.fakecuda_call_count",
        "gpa.cuDeviceGetName", "gpa.cuLaunchKernelEx@11000", "gpa.cuNoSuchFunction",
        "probe.result", "probe.status", "probe.pfn"}) {
    INFO(key);
    CHECK(preloaded.at(key) == native.at(key));
  }
  CHECK(absl::StartsWith(preloaded.at("gpa.cuDeviceGetName"), "libcuda"));
  // Other names, RTLD_DEFAULT and RTLD_NEXT lookups are left alone and do not recurse.
  CHECK(preloaded.at("dlsym.default.strlen") == native.at("dlsym.default.strlen"));
  CHECK(preloaded.at("dlsym.next.malloc") == native.at("dlsym.next.malloc"));
  CHECK(preloaded.at("dlsym.next.strlen_matches_default") == "yes");
  // libcuda's own lookups get libcuda's own symbols.
  CHECK(preloaded.at("driver_self_dlsym.cuLaunchKernel") == "libcuda");
  // A forked child keeps working through the wrappers.
  CHECK(preloaded.at("fork.child_exit") == "0");
}

TEST_CASE("GPUPRIO_MODE=off hands out the driver's own pointers", "[hook]") {
  const auto report = Probe("off");
  for (const char* key : {"dlsym.cuGetProcAddress_v2", "dlsym.cuLaunchKernel",
                          "gpa.cuGetProcAddress@12000", "gpa.cuLaunchKernel"}) {
    INFO(key << " = " << report.at(key));
    CHECK(absl::StartsWith(report.at(key), "libcuda"));
  }
}

TEST_CASE("A bad GPUPRIO_MODE gives one message and the program runs on unscheduled",
          "[hook]") {
  const auto r = Run({Path("tests/fake_cuda/clients/lcuda_client"), "launch_forms"}, "fastest");
  CHECK(r.stdout_text.find("launch_forms ok") != std::string::npos);
  const std::string message = "GPUPRIO_MODE=\"fastest\" is not valid";
  const size_t first = r.stderr_text.find(message);
  REQUIRE(first != std::string::npos);
  CHECK(r.stderr_text.find(message, first + 1) == std::string::npos);
}

TEST_CASE("A -lcuda program's own cuInit starts gpuprio before the driver initialises",
          "[hook][mps]") {
  // The exported cuInit is gpuprio's: a low process reaches the driver as a below-normal MPS
  // client even when its first CUDA call is cuInit itself.
  const auto r = Run({Path("tests/fake_cuda/clients/lcuda_client"), "init"}, "schedule",
                     {{"GPUPRIO_PRIORITY", "low"}});
  INFO(r.stdout_text << r.stderr_text);
  CHECK(r.exit_code == 0);
  CHECK(r.stdout_text.find("mps_client_priority_at_init=1\n") != std::string::npos);
}

TEST_CASE("A library that uses CUDA in its constructor, before gpuprio's own, is scheduled",
          "[hook]") {
  // The loader runs the program's dependencies' constructors before a preloaded library's, so
  // gpuprio starts, creates its scheduler and takes the library's launch before its own
  // constructor has run: nothing may depend on that constructor, the exit handlers are
  // registered once (one exit summary), and in their order: the summary after the dispatchers
  // have stopped (a dispatcher's CPU time is added when its thread ends; with every op sent
  // through the dispatcher, 1000 ops make it far from 0).
  const auto r =
      Run({Path("tests/fake_cuda/clients/cuda_in_constructor_client")}, "schedule",
          {{"GPUPRIO_LOG", "info"}, {"GPUPRIO_DIRECT_ISSUE", "0"}, {"LD_DEBUG", "libs"}});
  INFO(r.stdout_text << r.stderr_text);
  CHECK(r.stdout_text.find("after_constructor ok") != std::string::npos);
  // The premise: the library's constructor ran before libgpuprio's.
  const size_t library_init = r.stderr_text.find("calling init: ");
  const size_t library = r.stderr_text.find("libcuda_in_constructor.so", library_init);
  const size_t gpuprio = r.stderr_text.find("libgpuprio.so", library_init);
  REQUIRE(library != std::string::npos);
  REQUIRE(gpuprio != std::string::npos);
  CHECK(r.stderr_text.rfind("calling init: ", library) <
        r.stderr_text.rfind("calling init: ", gpuprio));
  const size_t summary = r.stderr_text.find("gpuprio: info: call summary:");
  REQUIRE(summary != std::string::npos);
  CHECK(r.stderr_text.find("gpuprio: info: call summary:", summary + 1) == std::string::npos);
  const auto calls = CallSummary(r.stderr_text);
  REQUIRE(calls.count("cuLaunchKernel") == 1);
  CHECK(calls.at("cuLaunchKernel").at("exported") == 1001);
  // The library's launch went through the scheduler with the program's: 1001 ops of one level.
  CHECK(r.stderr_text.find("gpuprio: info: priority=0 (normal) ops=1001 ") != std::string::npos);
  const size_t dispatcher = r.stderr_text.find("gpuprio: info: dispatcher device=0 cpu_ms=");
  REQUIRE(dispatcher != std::string::npos);
  CHECK(r.stderr_text.compare(
            dispatcher + std::strlen("gpuprio: info: dispatcher device=0 cpu_ms="), 5, "0.00 ") !=
        0);
}

TEST_CASE("The exit summary counts every launch form by the path that delivered it", "[hook]") {
  const Env info = {{"GPUPRIO_LOG", "info"}};
  SECTION("like libcudart: cuGetProcAddress, legacy and per-thread") {
    const auto r = Run({Path("tests/fake_cuda/clients/cudart_like_client"), "launch_forms"},
                       "passthrough", info);
    const auto summary = CallSummary(r.stderr_text);
    for (const char* api : {"cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel"}) {
      INFO(api << "\n" << r.stderr_text);
      REQUIRE(summary.count(api) == 1);
      CHECK(summary.at(api).at("gpa") > 0);
      CHECK(summary.at(api).at("gpa_ptsz") > 0);
      CHECK(summary.at(api).at("total") ==
            summary.at(api).at("gpa") + summary.at(api).at("gpa_ptsz"));
    }
  }
  SECTION("linked with -lcuda: the exported symbols") {
    const auto r = Run({Path("tests/fake_cuda/clients/lcuda_client"), "launch_forms"},
                       "passthrough", info);
    const auto summary = CallSummary(r.stderr_text);
    for (const char* api : {"cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel"}) {
      INFO(api << "\n" << r.stderr_text);
      REQUIRE(summary.count(api) == 1);
      CHECK(summary.at(api).at("exported") > 0);
      CHECK(summary.at(api).at("exported") == summary.at(api).at("total"));
    }
  }
  SECTION("through dlsym on the libcuda handle") {
    const auto r = Run({Path("tests/hook/lookup_probe")}, "passthrough", info);
    const auto summary = CallSummary(r.stderr_text);
    REQUIRE(summary.count("cuLaunchKernel") == 1);
    CHECK(summary.at("cuLaunchKernel").at("dlsym") == 3);
  }
}

}  // namespace
