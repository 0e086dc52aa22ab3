// The trace end to end without a GPU: trace_client runs with libgpuprio.so preloaded in schedule
// mode against the fake driver, GPUPRIO_TRACE set and the fake libcupti (tests/fake_cupti) as
// GPUPRIO_CUPTI_LIBRARY. Checked: the file parses and holds the run, nothing else is left beside
// it, a forked child writes nothing, SIGTERM still writes it, and every drop is counted alike in
// the file and in the log line.
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "nlohmann/json.hpp"
#include "tests/client_env.h"
#include "tests/runfiles.h"
#include "tests/test_directory.h"

namespace {

using gpuprio_test::Env;
using nlohmann::json;

std::string Runfile(const char* path) {
  auto full = gpuprio_test::Runfile(path);
  REQUIRE(full.ok());
  return *full;
}

struct TracedRun {
  gpuprio_test::ProcessResult result;
  std::string dir;
  std::string path;  // dir + "/trace.json"
  std::map<std::string, long> values;  // key=value integers the client printed
};

// Runs trace_client `args` traced into a fresh directory; `extra` is added to the environment.
TracedRun Run(const std::vector<std::string>& args, Env extra = {}) {
  TracedRun run;
  run.dir = gpuprio_test::FreshDirectory("e2e");
  run.path = run.dir + "/trace.json";
  Env env = {{"GPUPRIO_TRACE", run.path},
             {"GPUPRIO_CUPTI_LIBRARY", Runfile("tests/fake_cupti/libcupti.so.13")},
             {"GPUPRIO_LOG", "info"}};
  for (auto& e : extra) {
    auto same = std::find_if(env.begin(), env.end(), [&](const auto& d) { return d.first == e.first; });
    if (same != env.end()) {
      same->second = std::move(e.second);
    } else {
      env.push_back(std::move(e));
    }
  }
  auto client_env = gpuprio_test::ClientEnv("schedule", std::move(env));
  REQUIRE(client_env.ok());
  std::vector<std::string> argv = {Runfile("tests/tracer/trace_client")};
  argv.insert(argv.end(), args.begin(), args.end());
  auto result = gpuprio_test::RunProcess(argv, *client_env);
  REQUIRE(result.ok());
  run.result = *result;
  run.values = gpuprio_test::IntValues(result->stdout_text);
  // A sanitizer report in the client (whose exit status a signal may hide) fails the test too.
  INFO("stderr:\n" << result->stderr_text);
  CHECK(result->stderr_text.find("Sanitizer") == std::string::npos);
  return run;
}

json ParseTrace(const std::string& path) {
  std::ifstream file(path);
  REQUIRE(file.good());
  std::stringstream text;
  text << file.rdbuf();
  return json::parse(text.str());  // throws (and fails the test) on anything but valid JSON
}

#define DESCRIBE(run)                                                                 \
  INFO("exit " << (run).result.exit_code << "\nstdout:\n" << (run).result.stdout_text \
               << "\nstderr:\n" << (run).result.stderr_text)

TEST_CASE("A traced run writes a valid trace and nothing else beside it", "[tracer]") {
  const TracedRun run = Run({"exit", "20"});
  DESCRIBE(run);
  REQUIRE(run.result.exit_code == 0);
  const json gpuprio = ParseTrace(run.path).at("otherData").at("gpuprio");
  CHECK(gpuprio.at("pid") == run.values.at("pid"));
  CHECK(gpuprio.at("ops") == 20);
  CHECK(gpuprio.at("gpu_records") == 8);  // the fake libcupti's default per flush
  CHECK(gpuprio.at("dropped_records") == 0);
  // This boot's id, as the kernel gives it (the process runs here).
  std::ifstream boot_id("/proc/sys/kernel/random/boot_id");
  std::string expected_boot_id;
  if (boot_id && std::getline(boot_id, expected_boot_id)) {
    CHECK(gpuprio.at("boot_id") == expected_boot_id);
  }
  CHECK(gpuprio_test::DirectoryEntries(run.dir) == std::vector<std::string>{"trace.json"});
  CHECK(run.result.stderr_text.find("on SIGTERM and SIGINT it is written before the process ends") !=
        std::string::npos);
}

TEST_CASE("A forked child writes no trace; its parent writes its own", "[tracer]") {
  const TracedRun run = Run({"fork", "20"});
  DESCRIBE(run);
  REQUIRE(run.result.exit_code == 0);
  CHECK(run.values.at("child_exit") == 0);
  CHECK(run.values.at("child_wrote_trace") == 0);
  CHECK(run.result.stderr_text.find("is a fork of " + std::to_string(run.values.at("pid"))) !=
        std::string::npos);
  const json gpuprio = ParseTrace(run.path).at("otherData").at("gpuprio");
  CHECK(gpuprio.at("pid") == run.values.at("pid"));
  CHECK(gpuprio.at("ops") == 20);  // the parent's launches only
  CHECK(gpuprio_test::DirectoryEntries(run.dir) == std::vector<std::string>{"trace.json"});
}

TEST_CASE("SIGTERM writes the trace, and the process still dies by SIGTERM", "[tracer]") {
  const TracedRun run = Run({"sigterm", "20"});
  DESCRIBE(run);
  CHECK(run.result.exit_code == 128 + SIGTERM);
  CHECK(run.result.stdout_text.find("survived_sigterm") == std::string::npos);
  const json gpuprio = ParseTrace(run.path).at("otherData").at("gpuprio");
  CHECK(gpuprio.at("pid") == run.values.at("pid"));
  CHECK(gpuprio.at("ops") == 20);
  CHECK(gpuprio_test::DirectoryEntries(run.dir) == std::vector<std::string>{"trace.json"});
}

TEST_CASE("A SIGTERM handler the program installs later wins; the trace is written at exit",
          "[tracer]") {
  const TracedRun run = Run({"app_handler", "20"});
  DESCRIBE(run);
  CHECK(run.result.exit_code == 3);
  CHECK(run.result.stdout_text.find("app_handler ok") != std::string::npos);
  CHECK(ParseTrace(run.path).at("otherData").at("gpuprio").at("ops") == 20);
  CHECK(gpuprio_test::DirectoryEntries(run.dir) == std::vector<std::string>{"trace.json"});
}

TEST_CASE("A wedged CUPTI flush on SIGTERM does not keep the process alive", "[tracer]") {
  const TracedRun run = Run({"sigterm", "5"}, {{"FAKE_CUPTI_FLUSH_HANG", "1"}});
  DESCRIBE(run);
  CHECK(run.result.exit_code == 128 + SIGTERM);
  CHECK(run.result.stderr_text.find("not written within 5s of SIGTERM") != std::string::npos);
  CHECK(gpuprio_test::DirectoryEntries(run.dir).empty());
}

TEST_CASE("A trace path that is not a regular file is refused when tracing starts",
          "[tracer]") {
  const std::string dir = gpuprio_test::FreshDirectory("e2e");
  const std::string fifo = dir + "/trace.json";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  auto env = gpuprio_test::ClientEnv(
      "schedule", {{"GPUPRIO_TRACE", fifo},
                   {"GPUPRIO_CUPTI_LIBRARY", Runfile("tests/fake_cupti/libcupti.so.13")}});
  REQUIRE(env.ok());
  auto result = gpuprio_test::RunProcess({Runfile("tests/tracer/trace_client"), "exit"}, *env);
  REQUIRE(result.ok());
  INFO("stderr:\n" << result->stderr_text);
  CHECK(result->exit_code == 0);  // the program runs on
  CHECK(result->stderr_text.find("is a FIFO") != std::string::npos);
  struct stat st;
  REQUIRE(lstat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
  CHECK(gpuprio_test::DirectoryEntries(dir) == std::vector<std::string>{"trace.json"});
}

// The numbers of the one log line: "dropped: C CUPTI records (B by CUPTI, O over
// GPUPRIO_TRACE_MAX_MB=M, R buffers refused), E op events, S counter samples".
std::map<std::string, long> DropLine(const std::string& stderr_text) {
  static const std::regex kLine(
      R"(dropped: (\d+) CUPTI records \((\d+) by CUPTI, (\d+) over GPUPRIO_TRACE_MAX_MB=\d+, )"
      R"((\d+) buffers refused\), (\d+) op events, (\d+) counter samples)");
  std::smatch m;
  if (!std::regex_search(stderr_text, m, kLine)) return {};
  return {{"dropped_records", std::stol(m[1])},          {"dropped_records_by_cupti", std::stol(m[2])},
          {"dropped_records_over_cap", std::stol(m[3])}, {"refused_buffers", std::stol(m[4])},
          {"dropped_op_events", std::stol(m[5])},        {"dropped_counter_samples", std::stol(m[6])}};
}

void CheckEveryDropCounted(const TracedRun& run, long launches, long cupti_records) {
  const json gpuprio = ParseTrace(run.path).at("otherData").at("gpuprio");
  INFO("otherData: " << gpuprio.dump());
  // Every event is in the trace or counted as dropped.
  CHECK(gpuprio.at("ops").get<long>() + gpuprio.at("dropped_op_events").get<long>() == launches);
  CHECK(gpuprio.at("gpu_records").get<long>() + gpuprio.at("dropped_records").get<long>() ==
        cupti_records);
  CHECK(gpuprio.at("dropped_records").get<long>() ==
        gpuprio.at("dropped_records_by_cupti").get<long>() +
            gpuprio.at("dropped_records_over_cap").get<long>());
  // The log line says the same.
  const std::map<std::string, long> line = DropLine(run.result.stderr_text);
  REQUIRE(line.size() == 6);
  for (const auto& [key, value] : line) {
    INFO(key);
    CHECK(gpuprio.at(key).get<long>() == value);
  }
  CHECK(gpuprio_test::DirectoryEntries(run.dir) == std::vector<std::string>{"trace.json"});
}

TEST_CASE("Every drop at GPUPRIO_TRACE_MAX_MB is counted in the trace and in the log line",
          "[tracer]") {
  SECTION("op events over the cap, and CUPTI's own drops when its buffer is refused") {
    // 25,000 launches issued on the caller (the fast path) are 25,000 op events: more than 1 MiB
    // holds.
    const TracedRun run = Run({"exit", "25000"}, {{"GPUPRIO_TRACE_MAX_MB", "1"},
                                                  {"FAKE_CUPTI_FLUSH_RECORDS", "3000"}});
    DESCRIBE(run);
    REQUIRE(run.result.exit_code == 0);
    const json gpuprio = ParseTrace(run.path).at("otherData").at("gpuprio");
    CHECK(gpuprio.at("dropped_op_events").get<long>() > 0);
    CHECK(gpuprio.at("dropped_records_by_cupti") == 3000);
    CHECK(gpuprio.at("refused_buffers").get<long>() >= 1);
    CheckEveryDropCounted(run, 25000, 3000);
  }
  SECTION("CUPTI records delivered but over the cap") {
    const TracedRun run = Run({"exit", "10"}, {{"GPUPRIO_TRACE_MAX_MB", "2"},
                                               {"FAKE_CUPTI_FLUSH_RECORDS", "20000"}});
    DESCRIBE(run);
    REQUIRE(run.result.exit_code == 0);
    const json gpuprio = ParseTrace(run.path).at("otherData").at("gpuprio");
    CHECK(gpuprio.at("gpu_records").get<long>() > 0);
    CHECK(gpuprio.at("dropped_records_over_cap").get<long>() > 0);
    CheckEveryDropCounted(run, 10, 20000);
  }
}

TEST_CASE("At the default log level one line says where the trace was written", "[tracer]") {
  const TracedRun run = Run({"exit", "20"}, {{"GPUPRIO_LOG", "warning"}});
  DESCRIBE(run);
  REQUIRE(run.result.exit_code == 0);
  const std::string wrote = "gpuprio: info: trace: wrote " + run.path + " (20 ops";
  const std::string& err = run.result.stderr_text;
  const size_t at = err.find(wrote);
  CHECK(at != std::string::npos);
  CHECK(err.find(wrote, at + 1) == std::string::npos);  // once
  CHECK(err.find("call summary") == std::string::npos);   // info lines stay off
}

}  // namespace
