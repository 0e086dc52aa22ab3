// Tests of `gpuprio top`: segments fabricated by segment_writer.py (the layout of
// scheduler/coordinator/segment_layout.h) in scratch directories, read by the CLI as a subprocess
// through --shm-dir, so the real /dev/shm is never touched; the live view runs inside tmux.
//
// Rates and percentiles compare two samples. They are made deterministic with the CLI's test hook
// --next-shm-dir: the first sample reads one directory and the second another one, written
// beforehand with the counters already advanced, so nothing races the sampling.
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "catch2/catch.hpp"
#include "nlohmann/json.hpp"
#include "tests/runfiles.h"
#include "tests/test_directory.h"

namespace {

using gpuprio_test::FreshDirectory;
using gpuprio_test::ProcessResult;
using nlohmann::json;

constexpr char kUuid[] = "00112233445566778899aabbccddeeff";
constexpr char kGpuName[] = "GPU-00112233-4455-6677-8899-aabbccddeeff";
constexpr int kNoPriority = -101;
// The largest pid_t: no process has it (the kernel's pid_max is at most 2^22).
constexpr int64_t kNoSuchPid = 2147483647;
constexpr int64_t kSecond = 1'000'000'000;

std::string RunfileOrFail(absl::string_view path) {
  auto found = gpuprio_test::Runfile(path);
  REQUIRE(found.ok());
  return *found;
}

std::string Cli() { return RunfileOrFail("tools/cli/gpuprio"); }

ProcessResult Run(const std::vector<std::string>& argv) {
  auto result = gpuprio_test::RunProcess(argv, {});
  REQUIRE(result.ok());
  return *std::move(result);
}

std::vector<std::string> Lines(absl::string_view text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

// This user's segment name for a GPU, as the library names it.
std::string SegmentName(const std::string& uuid, const std::string& domain = "default") {
  return absl::StrCat("gpuprio-v1-u", getuid(), "-", domain, "-", uuid);
}

// Writes a segment file at dir/name from a segment_writer.py spec.
void WriteSegment(const std::string& dir, const std::string& name, const json& spec) {
  // -I: no PYTHON* variables or user site; -S: no site-packages (standard library only);
  // -B: no .pyc in the runfiles.
  const ProcessResult result = Run({"/usr/bin/env", "python3", "-I", "-S", "-B",
                                    RunfileOrFail("tests/tools/segment_writer.py"),
                                    dir + "/" + name, spec.dump()});
  INFO("segment_writer.py: " << result.stderr_text);
  REQUIRE(result.exit_code == 0);
}

int64_t MonotonicNs() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return int64_t{now.tv_sec} * kSecond + now.tv_nsec;
}

// Field 22 of /proc/self/stat: what the library publishes as start_time_ticks.
uint64_t OwnStartTime() {
  std::ifstream in("/proc/self/stat");
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> fields =
      absl::StrSplit(line.substr(line.rfind(')') + 2), ' ');
  REQUIRE(fields.size() > 19);
  return std::stoull(fields[19]);
}

ProcessResult Top(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {Cli(), "top"};
  argv.insert(argv.end(), args.begin(), args.end());
  return Run(argv);
}

json TopJson(const std::vector<std::string>& args) {
  std::vector<std::string> all = {"--json"};
  all.insert(all.end(), args.begin(), args.end());
  const ProcessResult result = Top(all);
  INFO("stdout: " << result.stdout_text << "\nstderr: " << result.stderr_text);
  REQUIRE(result.exit_code == 0);
  CHECK(result.stderr_text.empty());
  json report;
  REQUIRE_NOTHROW(report = json::parse(result.stdout_text));
  return report;
}

const json& BySlot(const json& gpu, int slot) {
  for (const json& process : gpu.at("processes")) {
    if (process.at("slot") == slot) return process;
  }
  FAIL("no process in slot " << slot << " in " << gpu.dump());
  throw;  // not reached: FAIL throws
}

bool HasSlot(const json& gpu, int slot) {
  for (const json& process : gpu.at("processes")) {
    if (process.at("slot") == slot) return true;
  }
  return false;
}

// A live slot of this test's own process (alive, as /proc sees it).
json OwnSlot(int index, const std::string& command) {
  return {{"index", index}, {"pid", getpid()}, {"command", command}};
}

// The segment both tests of the table and of the terminal show: this process at low priority,
// a dead one at high priority, and a command name that tries to drive the terminal.
json TableSpec() {
  json own = OwnSlot(0, "trainer");
  own["default_priority"] = -1;
  own["active_priority"] = -1;
  return {{"uuid", kUuid},
          {"header", {{"priority_high_water", 1}}},
          {"slots",
           {own,
            {{"index", 1}, {"pid", kNoSuchPid}, {"command", "server"},
             {"default_priority", 1}, {"held", 1}},
            {{"index", 2}, {"pid", getpid()}, {"command", "ev\x1b[2Jil"}}}}};
}

TEST_CASE("gpuprio top --json reports each live slot, its rates and percentiles",
          "[cli][top]") {
  const std::string first = FreshDirectory("first");
  const std::string next = FreshDirectory("next");
  const int64_t now = MonotonicNs();
  const uint64_t own_start = OwnStartTime();

  // Slot 0: this process. Between the samples: 600 ops dispatched and 400 direct; queueing
  // delays 90 in bucket 3 (2 us: under 3 us), 9 in bucket 10 (under 32 us), 1 in bucket 20.
  json busy = OwnSlot(0, "trainer");
  busy.update({{"default_priority", -1}, {"active_priority", -1}, {"max_seen_priority", 0},
               {"ops_dispatched", 1000}, {"ops_direct", 50}, {"queued_ops", 3},
               {"queued_estimated_ns", 4500999}, {"in_flight_ops", 2},
               {"in_flight_estimated_ns", 1234567}, {"held_ns_total", 777},
               {"heartbeat_ns", now - 5 * kSecond}, {"histogram", {{"3", 10}}}});
  json busy_next = busy;
  busy_next.update({{"ops_dispatched", 1600}, {"ops_direct", 450},
                    {"histogram", {{"3", 100}, {"10", 9}, {"20", 1}}}});
  // Slot 5: a process that no longer exists, held, no progress.
  const json dead = {{"index", 5}, {"pid", kNoSuchPid}, {"command", "server"},
                     {"default_priority", 1}, {"active_priority", 1}, {"held", 1}};
  // Slot 3: this pid, but published from another pid namespace: not judged.
  json other_namespace = OwnSlot(3, "elsewhere");
  other_namespace["pid_namespace"] = 12345;
  // Slot 4: this pid with another start time: the pid was reused, its publisher is dead.
  json reused = OwnSlot(4, "reused");
  reused["start_time_ticks"] = own_start + 1;
  // Slot 13: its owner could not read its own start time (0): only the pid is compared.
  json no_start_time = OwnSlot(13, "nostart");
  no_start_time["start_time_ticks"] = 0;
  // Slot 7 is being claimed and slot 9 is free (with garbage in it): neither is shown.
  json claimed = OwnSlot(7, "claiming");
  claimed["state"] = 1;
  const json free_slot = {{"index", 9}, {"state", 0}, {"pid", 0}, {"default_priority", 500}};
  // Slot 8 is claimed anew between the samples (a new generation): no rate across the claims.
  json before_claim = OwnSlot(8, "first");
  before_claim["ops_dispatched"] = 10;
  json after_claim = before_claim;
  after_claim.update({{"generation", 2}, {"ops_dispatched", 20}});
  // Slot 10: an unnamed priority, no active level; all delays under 1 us (bucket 0).
  json fast = OwnSlot(10, "fast");
  fast.update({{"default_priority", 7}, {"active_priority", kNoPriority}});
  json fast_next = fast;
  fast_next["histogram"] = {{"0", 10}};
  // Slot 11: one delay in bucket 1 (1 us: under 2 us), one in the last, open bucket.
  json slow = OwnSlot(11, "slow");
  json slow_next = slow;
  slow_next["histogram"] = {{"1", 1}, {"47", 1}};
  // Slot 12: counters that went backwards (no history of one process): no rate, no percentile.
  json backwards = OwnSlot(12, "backwards");
  backwards.update({{"ops_dispatched", 100}, {"histogram", {{"5", 10}}}});
  json backwards_next = backwards;
  backwards_next.update({{"ops_dispatched", 50}, {"histogram", {{"5", 4}}}});
  // Slot 6 appears between the samples.
  const json newcomer = OwnSlot(6, "newcomer");

  const std::string name = SegmentName(kUuid);
  json header = {{"priority_high_water", 1}};
  WriteSegment(first, name,
               {{"uuid", kUuid}, {"header", header},
                {"slots", {busy, dead, other_namespace, reused, claimed, free_slot,
                           before_claim, fast, slow, backwards, no_start_time}}});
  WriteSegment(next, name,
               {{"uuid", kUuid}, {"header", header},
                {"slots", {busy_next, dead, other_namespace, reused, claimed, free_slot,
                           after_claim, fast_next, slow_next, backwards_next, newcomer,
                           no_start_time}}});

  const json report = TopJson({"--interval", "0.3", "--shm-dir", first, "--next-shm-dir", next});
  INFO(report.dump(1));
  CHECK(report.at("ignored") == json::array());
  const double interval = report.at("interval_s").get<double>();
  CHECK(interval >= 0.3);
  CHECK(interval < 60);
  REQUIRE(report.at("gpus").size() == 1);
  const json& gpu = report.at("gpus").at(0);
  CHECK(gpu.at("uuid") == kGpuName);
  CHECK(gpu.at("segment") == next + "/" + name);
  CHECK(gpu.at("domain") == "default");
  CHECK(gpu.at("shared_with") == "user");
  CHECK(gpu.at("owner_id") == getuid());
  CHECK(gpu.at("priority_high_water") == 1);
  CHECK(gpu.at("processes").size() == 10);
  CHECK_FALSE(HasSlot(gpu, 7));
  CHECK_FALSE(HasSlot(gpu, 9));

  const json& p0 = BySlot(gpu, 0);
  CHECK(p0.at("pid") == getpid());
  CHECK(p0.at("command") == "trainer");
  CHECK(p0.at("priority") == -1);
  CHECK(p0.at("priority_name") == "low");
  CHECK(p0.at("active_priority") == -1);
  CHECK(p0.at("max_seen_priority") == 0);
  CHECK(p0.at("ops_dispatched") == 1600);
  CHECK(p0.at("ops_direct") == 450);
  CHECK(p0.at("ops_total") == 2050);
  CHECK(p0.at("ops_per_s").get<double>() == Approx(1000 / interval).epsilon(0.001));
  CHECK(p0.at("queued_ops") == 3);
  CHECK(p0.at("queued_estimated_us") == 4500);
  CHECK(p0.at("in_flight_ops") == 2);
  CHECK(p0.at("in_flight_estimated_us") == 1234);
  CHECK(p0.at("delay_ops") == 100);
  CHECK(p0.at("delay_p50_us") == 3);
  CHECK(p0.at("delay_p50_bucket") == 3);
  CHECK(p0.at("delay_p99_us") == 32);
  CHECK(p0.at("delay_p99_bucket") == 10);
  CHECK(p0.at("held") == false);
  CHECK(p0.at("held_ns_total") == 777);
  CHECK(p0.at("heartbeat_age_s").get<double>() >= 5);
  CHECK(p0.at("heartbeat_age_s").get<double>() < 65);
  CHECK(p0.at("liveness") == "alive");

  const json& p5 = BySlot(gpu, 5);
  CHECK(p5.at("pid") == kNoSuchPid);
  CHECK(p5.at("priority_name") == "high");
  CHECK(p5.at("held") == true);
  CHECK(p5.at("liveness") == "dead");
  CHECK(p5.at("liveness_detail") == "no such process");
  CHECK(p5.at("ops_per_s") == 0.0);
  CHECK(p5.at("delay_ops") == 0);
  CHECK(p5.at("delay_p50_us").is_null());
  CHECK(p5.at("delay_p99_us").is_null());

  CHECK(BySlot(gpu, 3).at("liveness") == "other-pid-namespace");
  CHECK(BySlot(gpu, 4).at("liveness") == "dead");
  CHECK(BySlot(gpu, 4).at("liveness_detail") == "pid reused by another process");
  CHECK(BySlot(gpu, 13).at("liveness") == "alive");

  const json& p8 = BySlot(gpu, 8);
  CHECK(p8.at("ops_total") == 20);
  CHECK(p8.at("ops_per_s").is_null());
  CHECK(p8.at("delay_ops").is_null());

  const json& p10 = BySlot(gpu, 10);
  CHECK(p10.at("priority") == 7);
  CHECK(p10.at("priority_name").is_null());
  CHECK(p10.at("active_priority").is_null());
  CHECK(p10.at("delay_p50_us") == 1);
  CHECK(p10.at("delay_p99_us") == 1);

  const json& p11 = BySlot(gpu, 11);
  CHECK(p11.at("delay_ops") == 2);
  CHECK(p11.at("delay_p50_us") == 2);
  CHECK(p11.at("delay_p50_bucket") == 1);
  CHECK(p11.at("delay_p99_us") == 8388608);  // 2^23 us: the open bucket's lower bound
  CHECK(p11.at("delay_p99_bucket") == 47);

  const json& p12 = BySlot(gpu, 12);
  CHECK(p12.at("ops_per_s").is_null());
  CHECK(p12.at("delay_ops").is_null());
  CHECK(p12.at("delay_p50_us").is_null());

  CHECK(BySlot(gpu, 6).at("ops_per_s").is_null());

  // Highest priority first.
  std::vector<int> priorities;
  for (const json& process : gpu.at("processes")) {
    priorities.push_back(process.at("priority").get<int>());
  }
  CHECK(std::is_sorted(priorities.rbegin(), priorities.rend()));
}

TEST_CASE("gpuprio top shows this user's and its groups' segments, by domain", "[cli][top]") {
  const std::string dir = FreshDirectory("domains");
  const std::string other_uuid = "ffeeddccbbaa99887766554433221100";
  WriteSegment(dir, SegmentName(kUuid), {{"uuid", kUuid}, {"slots", {OwnSlot(0, "a")}}});
  WriteSegment(dir, SegmentName(other_uuid, "batch.jobs-2"),
               {{"uuid", other_uuid}, {"slots", {OwnSlot(0, "b"), OwnSlot(1, "c")}}});
  WriteSegment(dir, absl::StrCat("gpuprio-v1-g", getgid(), "-default-", kUuid),
               {{"uuid", kUuid}, {"mode", "0660"}, {"slots", {OwnSlot(2, "d")}}});
  // Another user's segment is neither shown nor reported.
  WriteSegment(dir, absl::StrCat("gpuprio-v1-u", getuid() + 1, "-default-", kUuid),
               {{"uuid", kUuid}, {"slots", {OwnSlot(0, "e")}}});

  json report = TopJson({"--interval", "0.05", "--shm-dir", dir});
  INFO(report.dump(1));
  CHECK(report.at("ignored") == json::array());
  const json& gpus = report.at("gpus");
  REQUIRE(gpus.size() == 3);
  CHECK(gpus.at(0).at("uuid") == kGpuName);
  CHECK(gpus.at(0).at("domain") == "default");
  CHECK(gpus.at(0).at("shared_with") == "user");
  CHECK(gpus.at(1).at("uuid") == kGpuName);
  CHECK(gpus.at(1).at("shared_with") == "group");
  CHECK(gpus.at(1).at("owner_id") == getgid());
  CHECK(gpus.at(1).at("processes").at(0).at("command") == "d");
  CHECK(gpus.at(2).at("uuid") == "GPU-ffeeddcc-bbaa-9988-7766-554433221100");
  CHECK(gpus.at(2).at("domain") == "batch.jobs-2");
  CHECK(gpus.at(2).at("processes").size() == 2);

  report = TopJson({"--interval", "0.05", "--shm-dir", dir, "--domain", "batch.jobs-2"});
  REQUIRE(report.at("gpus").size() == 1);
  CHECK(report.at("gpus").at(0).at("domain") == "batch.jobs-2");
  report = TopJson({"--interval", "0.05", "--shm-dir", dir, "--domain", "none"});
  CHECK(report.at("gpus") == json::array());
}

TEST_CASE("gpuprio top ignores a bad segment with one line naming why, and goes on",
          "[cli][top]") {
  const std::string dir = FreshDirectory("bad");
  WriteSegment(dir, SegmentName(kUuid), {{"uuid", kUuid}, {"slots", {OwnSlot(0, "good")}}});
  // uuid -> (spec, what "why" must say). Each bad segment is of another GPU, so of another name.
  const std::vector<std::pair<json, std::string>> bad = {
      {{{"random_bytes", 7}}, "is not b'gpuprioS': not a gpuprio segment"},
      {{{"truncate_to", 100000}}, "is 100000 bytes, not 266240"},
      {{{"truncate_to", 0}}, "is empty: its creator has not set it up yet"},
      {{{"header", {{"magic", std::string(8, '\0')}}}},
       "is not ready: its creator has not filled in the header yet"},
      {{{"mode", "0644"}}, "has mode 0644, not 0600: others could write it"},
      {{{"header", {{"layout_version", 2}}}}, "layout version 2; this gpuprio reads version 1"},
      {{{"header", {{"magic", "gpuprioX"}}}}, "its magic b'gpuprioX' is not b'gpuprioS'"},
      {{{"header", {{"slot_count", 63}}}}, "its slot_count is 63, not 64"},
      {{{"header", {{"ready", 0}}}}, "is not ready"},
      {{{"header", {{"device_uuid", std::string(32, 'e')}}}},
       "holds GPU-eeeeeeee-eeee-eeee-eeee-eeeeeeeeeeee, but its name says"},
      {{{"header", {{"priority_high_water", 101}}}}, "priority_high_water is 101, not a priority"},
      {{{"slots", {{{"index", 4}, {"pid", 0}}}}}, "slot 4: pid 0 is not in [1, 2147483647]"},
      {{{"slots", {{{"index", 5}, {"pid", 1}, {"default_priority", 500}}}}},
       "slot 5: default_priority is 500, not a priority in [-100, 100] or -101 (none)"},
      {{{"slots", {{{"index", 6}, {"pid", 1}, {"active_priority", -102}}}}},
       "slot 6: active_priority is -102"},
      {{{"slots", {{{"index", 7}, {"pid", 1}, {"state", 9}}}}},
       "slot 7: state 9 is not free (0), claimed (1) or live (2)"},
      {{{"slots", {{{"index", 8}, {"pid", 1}, {"held", 2}}}}}, "slot 8: held is 2, not 0 or 1"},
      {{{"slots", {{{"index", 9}, {"pid", 1}, {"queued_ops", -1}}}}},
       "slot 9: queued_ops is -1, which cannot be negative"},
  };
  std::vector<std::pair<std::string, std::string>> expected;  // path, why
  for (size_t i = 0; i < bad.size(); ++i) {
    const std::string uuid = absl::StrCat(std::string(30, 'a'), i < 10 ? "0" : "", i);
    json spec = bad[i].first;
    spec["uuid"] = uuid;
    const std::string name = SegmentName(uuid);
    WriteSegment(dir, name, spec);
    expected.emplace_back(dir + "/" + name, bad[i].second);
  }
  // A group's segment whose file belongs to another group: whoever wrote it was not its member.
  const std::string foreign =
      absl::StrCat("gpuprio-v1-g", getgid() + 1, "-default-", std::string(32, 'f'));
  WriteSegment(dir, foreign, {{"uuid", std::string(32, 'f')}, {"mode", "0640"}});
  expected.emplace_back(dir + "/" + foreign,
                        absl::StrCat("belongs to gid ", getgid(), ", but its name says g",
                                     getgid() + 1));
  // A group's segment that others may write.
  const std::string open_group =
      absl::StrCat("gpuprio-v1-g", getgid(), "-default-", std::string(32, 'e'));
  WriteSegment(dir, open_group, {{"uuid", std::string(32, 'e')}, {"mode", "0666"}});
  expected.emplace_back(dir + "/" + open_group, "has mode 0666, not 0660");
  // Not files a segment could be: a FIFO must not hang top, a link is not followed.
  const std::string fifo = dir + "/" + SegmentName(std::string(32, 'b'));
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  expected.emplace_back(fifo, "is not a regular file");
  const std::string link = dir + "/" + SegmentName(std::string(32, 'c'));
  REQUIRE(symlink((dir + "/" + SegmentName(kUuid)).c_str(), link.c_str()) == 0);
  expected.emplace_back(link, "is a symbolic link");
  const std::string subdir = dir + "/" + SegmentName(std::string(32, 'd'));
  REQUIRE(mkdir(subdir.c_str(), 0700) == 0);
  expected.emplace_back(subdir, "is not a regular file");
  // A segment of another layout version: its own gpuprio reads it.
  const std::string v2 = absl::StrCat(dir, "/gpuprio-v2-u", getuid(), "-default-", kUuid);
  std::ofstream(v2) << "v2";
  expected.emplace_back(v2, "a segment of layout version 2; this gpuprio reads version 1");
  // Not gpuprio's at all: not mentioned.
  std::ofstream(dir + "/other-program-segment") << "x";

  const json report = TopJson({"--interval", "0.05", "--shm-dir", dir});
  INFO(report.dump(1));
  REQUIRE(report.at("gpus").size() == 1);
  CHECK(report.at("gpus").at(0).at("processes").at(0).at("command") == "good");
  const json& ignored = report.at("ignored");
  CHECK(ignored.size() == expected.size());
  for (const auto& [path, why] : expected) {
    bool found = false;
    for (const json& entry : ignored) {
      if (entry.at("path") != path) continue;
      found = true;
      INFO(path << ": " << entry.at("why"));
      CHECK(absl::StrContains(entry.at("why").get<std::string>(), why));
    }
    INFO(path);
    CHECK(found);
  }

  // The table: one "ignored:" line per bad file, after the good segment's rows.
  const ProcessResult table = Top({"--once", "--interval", "0.05", "--shm-dir", dir});
  INFO(table.stdout_text << table.stderr_text);
  CHECK(table.exit_code == 0);
  CHECK(table.stderr_text.empty());
  int ignored_lines = 0;
  for (const std::string& line : Lines(table.stdout_text)) {
    if (absl::StartsWith(line, "ignored: " + dir + "/")) ++ignored_lines;
  }
  CHECK(ignored_lines == static_cast<int>(expected.size()));
  CHECK(absl::StrContains(table.stdout_text, " good "));
}

TEST_CASE("gpuprio top with no segments says so and exits 0", "[cli][top]") {
  const std::string dir = FreshDirectory("empty");
  const ProcessResult table = Top({"--once", "--interval", "0.05", "--shm-dir", dir});
  INFO(table.stdout_text << table.stderr_text);
  CHECK(table.exit_code == 0);
  CHECK(table.stderr_text.empty());
  CHECK(absl::StrContains(table.stdout_text,
                          "no GPUs: no gpuprio segment of this user or its groups in " + dir));
  const json report = TopJson({"--interval", "0.05", "--shm-dir", dir});
  CHECK(report.at("gpus") == json::array());
  CHECK(report.at("ignored") == json::array());

  const ProcessResult missing = Top({"--once", "--shm-dir", dir + "/nonexistent"});
  CHECK(missing.exit_code == 2);
  CHECK(missing.stdout_text.empty());
  CHECK(Lines(missing.stderr_text).size() == 1);
  CHECK(absl::StartsWith(missing.stderr_text, "gpuprio top: error: cannot list"));
}

TEST_CASE("gpuprio top --once prints one table", "[cli][top]") {
  const std::string dir = FreshDirectory("table");
  WriteSegment(dir, SegmentName(kUuid), TableSpec());
  const ProcessResult result = Top({"--once", "--interval", "0.05", "--shm-dir", dir});
  INFO(result.stdout_text << result.stderr_text);
  REQUIRE(result.exit_code == 0);
  CHECK(result.stderr_text.empty());
  // A command name cannot drive the terminal: its escape byte is printed as text.
  CHECK(result.stdout_text.find('\x1b') == std::string::npos);
  CHECK(absl::StrContains(result.stdout_text, "ev\\x1b[2Jil"));
  const std::vector<std::string> lines = Lines(result.stdout_text);
  REQUIRE(lines.size() == 6);
  CHECK(absl::StartsWith(lines[0], "gpuprio top - "));
  CHECK(absl::StrContains(lines[0], "1 GPU segment, 3 processes"));
  CHECK(absl::StartsWith(lines[1], absl::StrCat(kGpuName, "  domain default  user ")));
  CHECK(absl::StrContains(lines[1], "highest priority seen 1"));
  for (const char* column : {"PID", "COMMAND", "PRIORITY", "ACTIVE", "OPS/S", "QUEUED",
                             "QUEUED_US", "INFLIGHT", "INFL_US", "P50_US", "P99_US", "HELD",
                             "HB_AGE", "STATUS"}) {
    CHECK(absl::StrContains(lines[2], column));
  }
  // Highest priority first: the dead server, then this process twice.
  CHECK(absl::StrContains(lines[3], "server          1 high"));
  CHECK(absl::StrContains(lines[3], " yes "));
  CHECK(absl::EndsWith(lines[3], "DEAD: no such process"));
  CHECK(absl::StrContains(lines[4], absl::StrCat(getpid(), " ev\\x1b[2Jil")));
  CHECK(absl::StrContains(lines[5], absl::StrCat(getpid(), " trainer         -1 low")));
}

TEST_CASE("gpuprio top refuses bad options with one line and exit 2", "[cli][top]") {
  const std::vector<std::vector<std::string>> cases = {
      {"--interval", "0"},        {"--interval", "-1"},       {"--interval", "nan"},
      {"--interval", "inf"},      {"--interval", "soon"},     {"--iterations", "0"},
      {"--iterations", "x"},      {"--domain", "a/b"},        {"--domain", ""},
      {"--domain", std::string(65, 'd')}, {"--watch"},        {"--json", "--once", "--watch"},
      {"--no-such-option"},
  };
  for (const auto& args : cases) {
    const ProcessResult result = Top(args);
    INFO(absl::StrJoin(args, " ") << " -> " << result.stderr_text);
    CHECK(result.exit_code == 2);
    CHECK(result.stdout_text.empty());
    CHECK(Lines(result.stderr_text).size() == 1);
    CHECK(absl::StartsWith(result.stderr_text, "gpuprio top: error: "));
  }
}

TEST_CASE("gpuprio top --json --watch prints one object per refresh", "[cli][top]") {
  const std::string dir = FreshDirectory("watch");
  WriteSegment(dir, SegmentName(kUuid), TableSpec());
  const ProcessResult result =
      Top({"--json", "--watch", "--iterations", "3", "--interval", "0.05", "--shm-dir", dir});
  INFO(result.stdout_text << result.stderr_text);
  REQUIRE(result.exit_code == 0);
  const std::vector<std::string> lines = Lines(result.stdout_text);
  REQUIRE(lines.size() == 3);
  for (const std::string& line : lines) {
    json report;
    REQUIRE_NOTHROW(report = json::parse(line));
    CHECK(report.at("interval_s").get<double>() >= 0.05);
    CHECK(report.at("gpus").at(0).at("processes").size() == 3);
  }
}

TEST_CASE("gpuprio top off a terminal prints each refresh after the last", "[cli][top]") {
  const std::string dir = FreshDirectory("batch");
  WriteSegment(dir, SegmentName(kUuid), TableSpec());
  const ProcessResult result =
      Top({"--iterations", "2", "--interval", "0.05", "--shm-dir", dir});
  INFO(result.stdout_text << result.stderr_text);
  REQUIRE(result.exit_code == 0);
  CHECK(result.stdout_text.find('\x1b') == std::string::npos);  // no cursor movement
  int titles = 0;
  for (const std::string& line : Lines(result.stdout_text)) {
    if (absl::StartsWith(line, "gpuprio top - ")) ++titles;
  }
  CHECK(titles == 2);
}

TEST_CASE("gpuprio top never prints a traceback when its output goes away", "[cli][top]") {
  const std::string dir = FreshDirectory("closed");
  WriteSegment(dir, SegmentName(kUuid), TableSpec());
  const std::string top = absl::StrCat(Cli(), " top --interval 0.05 --shm-dir ", dir);
  SECTION("stdout closed") {
    const ProcessResult result = Run({"/bin/sh", "-c", top + " --once >&-"});
    INFO(result.stderr_text);
    CHECK(result.exit_code == 1);
    CHECK(result.stderr_text == "gpuprio top: error: standard output is closed\n");
  }
  SECTION("stdout full") {
    const ProcessResult result = Run({"/bin/sh", "-c", top + " --once >/dev/full"});
    INFO(result.stderr_text);
    CHECK(result.exit_code == 1);
    CHECK(Lines(result.stderr_text).size() == 1);
    CHECK(absl::StartsWith(result.stderr_text,
                           "gpuprio top: error: cannot write to standard output: "));
  }
  SECTION("reader stops early") {
    // The refreshes go on until the pipe's reader is gone; then top ends, as cat does.
    const ProcessResult result = Run({"/bin/sh", "-c", top + " | head -n 1"});
    INFO(result.stderr_text);
    CHECK(result.exit_code == 0);
    CHECK(absl::StartsWith(result.stdout_text, "gpuprio top - "));
    CHECK(result.stderr_text.empty());
  }
}

// --- The live view in a real terminal: tmux -------------------------------------------------

// The full path of `program` on PATH, or "" when there is none.
std::string FindOnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':')) {
    const std::string candidate = absl::StrCat(dir, "/", program);
    if (!dir.empty() && access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// Whether a line of the screen starts with `prefix` (typed commands may contain it elsewhere).
bool HasLineStartingWith(const std::string& screen, absl::string_view prefix) {
  for (const std::string& line : Lines(screen)) {
    if (absl::StartsWith(line, prefix)) return true;
  }
  return false;
}

// A tmux server of its own (its socket in a fresh directory), killed when the test ends.
class Tmux {
 public:
  explicit Tmux(std::string path) : path_(std::move(path)) {
    // Under /tmp rather than TEST_TMPDIR: a socket's path must fit in 108 bytes.
    std::string dir = "/tmp/gpuprio_top_test_XXXXXX";
    REQUIRE(mkdtemp(dir.data()) != nullptr);
    dir_ = dir;
    socket_ = dir + "/tmux";
  }
  ~Tmux() {
    gpuprio_test::RunProcess({path_, "-S", socket_, "kill-server"}, {});
    unlink(socket_.c_str());
    rmdir(dir_.c_str());
  }

  ProcessResult Command(std::vector<std::string> args) {
    args.insert(args.begin(), {path_, "-S", socket_});
    return Run(args);
  }

  // Types `text` into the pane (literally), then Enter.
  void Type(const std::string& text) {
    REQUIRE(Command({"send-keys", "-t", "top", "-l", text}).exit_code == 0);
    REQUIRE(Command({"send-keys", "-t", "top", "Enter"}).exit_code == 0);
  }

  std::string Screen() { return Command({"capture-pane", "-p", "-t", "top"}).stdout_text; }

  // Waits up to 20 s for the pane to satisfy `done`; returns the last screen seen.
  template <typename Predicate>
  std::string WaitFor(Predicate done) {
    std::string screen;
    for (int i = 0; i < 200; ++i) {
      screen = Screen();
      if (done(screen)) return screen;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return screen;
  }

 private:
  std::string path_;
  std::string dir_;
  std::string socket_;
};

size_t LongestLine(const std::string& screen) {
  size_t longest = 0;
  for (const std::string& line : Lines(screen)) longest = std::max(longest, line.size());
  return longest;
}

TEST_CASE("gpuprio top redraws in a terminal, follows resizes, suspends, quits on q and Ctrl-C",
          "[cli][top][tmux]") {
  const std::string tmux_path = FindOnPath("tmux");
  if (tmux_path.empty()) {
    WARN("SKIP: tmux is not installed (tools/setup.sh installs it): the live view in a "
         "terminal is not tested");
    return;
  }
  const std::string dir = FreshDirectory("live");
  WriteSegment(dir, SegmentName(kUuid), TableSpec());
  Tmux tmux(tmux_path);
  const ProcessResult started =
      tmux.Command({"new-session", "-d", "-x", "160", "-y", "40", "-s", "top",
                    "env PS1='$ ' /bin/sh"});
  INFO(started.stderr_text);
  REQUIRE(started.exit_code == 0);
  // The prompt, "$ " (capture-pane drops the trailing blank).
  tmux.WaitFor([](const std::string& s) { return HasLineStartingWith(s, "$"); });
  // "top""-exited-": only the output, not the typed command, holds "top-exited-".
  const std::string run = absl::StrCat(Cli(), " top --interval 0.2 --shm-dir ", dir,
                                       "; echo \"top\"\"-exited-$?\"");

  tmux.Type("clear; " + run);
  const std::string own_row = absl::StrCat(getpid(), " trainer         -1 low");
  std::string screen = tmux.WaitFor([&](const std::string& s) {
    return absl::StrContains(s, "q quits") && absl::StrContains(s, own_row);
  });
  INFO("screen:\n" << screen);
  CHECK(absl::StartsWith(screen, "gpuprio top - "));
  CHECK(absl::StrContains(screen, "1 GPU segment, 3 processes"));
  CHECK(absl::StrContains(screen, kGpuName));
  CHECK(absl::StrContains(screen, "PID COMMAND"));
  CHECK(absl::StrContains(screen, own_row));
  CHECK(absl::StrContains(screen, "DEAD: no such process"));
  CHECK_FALSE(absl::StrContains(screen, "top-exited"));  // still running: the shell is hidden

  // Narrower and too short for the table: every line is cut to the width, the rest summarised.
  REQUIRE(tmux.Command({"resize-window", "-t", "top", "-x", "100", "-y", "5"}).exit_code == 0);
  screen = tmux.WaitFor(
      [](const std::string& s) { return absl::StrContains(s, "more lines: enlarge"); });
  INFO("screen after the resize:\n" << screen);
  CHECK(absl::StartsWith(screen, "gpuprio top - "));
  CHECK(absl::StrContains(screen, "more lines: enlarge the terminal"));
  CHECK(LongestLine(screen) < 100);
  REQUIRE(tmux.Command({"resize-window", "-t", "top", "-x", "160", "-y", "40"}).exit_code == 0);
  screen = tmux.WaitFor([&](const std::string& s) {
    return absl::StrContains(s, own_row) && !absl::StrContains(s, "enlarge");
  });
  CHECK(absl::StrContains(screen, own_row));

  REQUIRE(tmux.Command({"send-keys", "-t", "top", "q"}).exit_code == 0);
  screen = tmux.WaitFor(
      [](const std::string& s) { return HasLineStartingWith(s, "top-exited-"); });
  INFO("screen after q:\n" << screen);
  CHECK(HasLineStartingWith(screen, "top-exited-0"));
  CHECK_FALSE(absl::StrContains(screen, "Traceback"));
  CHECK_FALSE(absl::StrContains(screen, "q quits"));  // the table went with the alternate screen
  CHECK(HasLineStartingWith(screen, "$"));  // back at the shell

  tmux.Type("clear; " + run);
  tmux.WaitFor([&](const std::string& s) { return absl::StrContains(s, own_row); });
  REQUIRE(tmux.Command({"send-keys", "-t", "top", "C-c"}).exit_code == 0);
  screen = tmux.WaitFor(
      [](const std::string& s) { return HasLineStartingWith(s, "top-exited-"); });
  INFO("screen after Ctrl-C:\n" << screen);
  CHECK(HasLineStartingWith(screen, "top-exited-0"));
  CHECK_FALSE(absl::StrContains(screen, "Traceback"));
  CHECK_FALSE(absl::StrContains(screen, "KeyboardInterrupt"));

  // Ctrl-Z: the shell gets its screen and terminal back while top is stopped; fg resumes the
  // live view with a full redraw.
  const std::string top_only = absl::StrCat(Cli(), " top --interval 0.2 --shm-dir ", dir);
  tmux.Type("clear; " + top_only);
  tmux.WaitFor([&](const std::string& s) { return absl::StrContains(s, own_row); });
  REQUIRE(tmux.Command({"send-keys", "-t", "top", "C-z"}).exit_code == 0);
  screen = tmux.WaitFor([](const std::string& s) { return absl::StrContains(s, "Stopped"); });
  INFO("screen after Ctrl-Z:\n" << screen);
  CHECK(absl::StrContains(screen, "Stopped"));
  CHECK_FALSE(absl::StrContains(screen, "q quits"));
  // The echo is typed with fg, not after q: keys typed while top still holds the terminal in
  // non-canonical mode would reach the shell without a line end.
  tmux.Type("clear; fg; echo \"top\"\"-exited-$?\"");
  screen = tmux.WaitFor([&](const std::string& s) {
    return absl::StrContains(s, "q quits") && absl::StrContains(s, own_row);
  });
  INFO("screen after fg:\n" << screen);
  CHECK(absl::StartsWith(screen, "gpuprio top - "));
  CHECK(absl::StrContains(screen, own_row));
  REQUIRE(tmux.Command({"send-keys", "-t", "top", "q"}).exit_code == 0);
  screen = tmux.WaitFor(
      [](const std::string& s) { return HasLineStartingWith(s, "top-exited-"); });
  INFO("screen after q:\n" << screen);
  CHECK(HasLineStartingWith(screen, "top-exited-0"));
  CHECK_FALSE(absl::StrContains(screen, "Traceback"));

  // The terminal is as top found it: canonical input and echo back on.
  tmux.Type(
      "clear; echo \"tty\"\"-modes-$(stty -a | tr ' ;' '\\n\\n' | grep -c -x -e icanon -e echo)\"");
  screen = tmux.WaitFor(
      [](const std::string& s) { return HasLineStartingWith(s, "tty-modes-"); });
  INFO("stty:\n" << screen);
  CHECK(HasLineStartingWith(screen, "tty-modes-2"));
}

}  // namespace
