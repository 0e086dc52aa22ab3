// Tests of `gpuprio top`: segments fabricated by segment_writer.py (the layout of
// scheduler/coordinator/segment_layout.h) in the per-owner directories (segment_directory.h) of
// scratch GPUPRIO_SHM_DIRs, read by the CLI as a subprocess through --shm-dir, so the real
// /dev/shm is never touched; the live view runs inside tmux. A slot is live while its owner holds
// the write lock on its byte of the file: this test holds those locks itself, as the library's
// processes do. Every scratch directory is removed when its test ends.
//
// Rates, percentiles and heartbeat ages compare samples. They are made deterministic with the
// CLI's test hook --next-shm-dir: the first sample reads one directory and the second another
// one, written beforehand with the counters already advanced, so nothing races the sampling.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
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
constexpr off_t kHeaderBytes = 4096;  // kHeaderBytes, kSlotBytes: where a slot's lock byte is
constexpr off_t kSlotBytes = 4096;
constexpr int64_t kTiB = int64_t{1} << 40;
// An id no account of this machine has (for directories and files of "another" owner).
constexpr uint32_t kOtherId = 54321;

std::string RunfileOrFail(absl::string_view path) {
  auto found = gpuprio_test::Runfile(path);
  REQUIRE(found.ok());
  return *found;
}

std::string Cli() { return RunfileOrFail("tools/cli/gpuprio"); }

ProcessResult Run(const std::vector<std::string>& argv,
                  const std::vector<std::pair<std::string, std::string>>& env = {}) {
  auto result = gpuprio_test::RunProcess(argv, env);
  REQUIRE(result.ok());
  return *std::move(result);
}

std::vector<std::string> Lines(absl::string_view text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

// The directories the library keeps segments in (segment_directory.h), in GPUPRIO_SHM_DIR.
std::string UserDirName(uint32_t uid = getuid()) { return absl::StrCat("gpuprio-v2-u", uid); }
std::string GroupDirName(uint32_t gid = getgid()) { return absl::StrCat("gpuprio-v2-g", gid); }

// A segment's file name in its directory, as the library names it.
std::string SegmentName(const std::string& uuid, const std::string& domain = "default") {
  return absl::StrCat(domain, "-", uuid);
}

// Makes the directory `path` with exactly `mode` (whatever the umask), of group `gid` if given.
std::string MakeDirectory(const std::string& path, mode_t mode, int64_t gid = -1) {
  INFO(path);
  REQUIRE(mkdir(path.c_str(), 0700) == 0);
  if (gid >= 0) REQUIRE(chown(path.c_str(), static_cast<uid_t>(-1), static_cast<gid_t>(gid)) == 0);
  REQUIRE(chmod(path.c_str(), mode) == 0);
  return path;
}

// A scratch GPUPRIO_SHM_DIR under TEST_TMPDIR, removed with everything in it when it goes.
class ShmDir {
 public:
  explicit ShmDir(const std::string& prefix) : path_(FreshDirectory(prefix)) {}
  ~ShmDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ShmDir(const ShmDir&) = delete;
  ShmDir& operator=(const ShmDir&) = delete;

  const std::string& path() const { return path_; }
  std::string operator/(absl::string_view name) const { return absl::StrCat(path_, "/", name); }
  // This user's segment directory, gpuprio-v2-u<uid> (0700), made here.
  std::string UserDir() const { return MakeDirectory(*this / UserDirName(), 0700); }
  // Its group's, gpuprio-v2-g<gid> (02770).
  std::string GroupDir() const { return MakeDirectory(*this / GroupDirName(), 02770, getgid()); }

 private:
  std::string path_;
};

// Another user a file of this test can be given to (root, with that id mapped in its user
// namespace), or -1.
int64_t OtherUser() {
  const ShmDir probe("probe_user");
  const std::string file = probe / "file";
  std::ofstream(file) << "x";
  const uid_t other = getuid() + kOtherId;
  return chown(file.c_str(), other, static_cast<gid_t>(-1)) == 0 ? int64_t{other} : -1;
}

// Another group than this process's own that a file of this test can be given to (any group, for
// root; else another of its groups), or -1.
int64_t OtherGroup() {
  const ShmDir probe("probe_group");
  const std::string file = probe / "file";
  std::ofstream(file) << "x";
  std::vector<gid_t> candidates = {getgid() + kOtherId};
  std::vector<gid_t> groups(static_cast<size_t>(std::max(getgroups(0, nullptr), 0)));
  groups.resize(static_cast<size_t>(
      std::max(getgroups(static_cast<int>(groups.size()), groups.data()), 0)));
  candidates.insert(candidates.end(), groups.begin(), groups.end());
  for (const gid_t gid : candidates) {
    if (gid != getgid() && chown(file.c_str(), static_cast<uid_t>(-1), gid) == 0) return gid;
  }
  return -1;
}

// Slots of a segment file locked as their owner locks them (an open-file-description write lock
// on the slot's byte), until this goes.
class SlotLocks {
 public:
  SlotLocks() = default;
  SlotLocks(const std::string& path, const std::vector<int>& slots) {
    if (slots.empty()) return;
    fd_ = open(path.c_str(), O_RDWR | O_CLOEXEC);
    INFO(path);
    REQUIRE(fd_ >= 0);
    for (int slot : slots) Lock(slot);
  }
  SlotLocks(SlotLocks&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  SlotLocks& operator=(SlotLocks&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  ~SlotLocks() {
    if (fd_ >= 0) close(fd_);
  }

  void Lock(int slot) {
    REQUIRE(fd_ >= 0);
    struct flock range {};
    range.l_type = F_WRLCK;
    range.l_whence = SEEK_SET;
    range.l_start = kHeaderBytes + slot * kSlotBytes;
    range.l_len = 1;
    REQUIRE(fcntl(fd_, F_OFD_SETLK, &range) == 0);
  }

 private:
  int fd_ = -1;
};

// Writes a segment file at dir/name from a segment_writer.py spec, and locks its live slots (all
// but those marked "owned": false) as their owners would: the locks last as long as the result.
SlotLocks WriteSegment(const std::string& dir, const std::string& name, json spec) {
  std::vector<int> owned;
  if (spec.contains("slots")) {
    for (json& slot : spec.at("slots")) {
      const bool live = slot.value("state", 2) == 2;
      if (live && slot.value("owned", true)) owned.push_back(slot.at("index").get<int>());
      slot.erase("owned");
    }
  }
  // -I: no PYTHON* variables or user site; -S: no site-packages (standard library only);
  // -B: no .pyc in the runfiles.
  const ProcessResult result = Run({"/usr/bin/env", "python3", "-I", "-S", "-B",
                                    RunfileOrFail("tests/tools/segment_writer.py"),
                                    dir + "/" + name, spec.dump()});
  INFO("segment_writer.py: " << result.stderr_text);
  REQUIRE(result.exit_code == 0);
  return SlotLocks(dir + "/" + name, owned);
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

ProcessResult Top(const std::vector<std::string>& args,
                  const std::vector<std::pair<std::string, std::string>>& env = {}) {
  std::vector<std::string> argv = {Cli(), "top"};
  argv.insert(argv.end(), args.begin(), args.end());
  return Run(argv, env);
}

json TopJson(const std::vector<std::string>& args,
             const std::vector<std::pair<std::string, std::string>>& env = {}) {
  std::vector<std::string> all = {"--json"};
  all.insert(all.end(), args.begin(), args.end());
  const ProcessResult result = Top(all, env);
  INFO("stdout: " << result.stdout_text << "\nstderr: " << result.stderr_text);
  REQUIRE(result.exit_code == 0);
  CHECK(result.stderr_text.empty());
  json report;
  REQUIRE_NOTHROW(report = json::parse(result.stdout_text));
  return report;
}

// The seconds in a row's last cell ("1.5s"; the HB_STILL column of a row with no STATUS).
double LastCell(const std::string& row) {
  const std::string cell = row.substr(row.rfind(' ') + 1);
  INFO(row);
  REQUIRE(absl::EndsWith(cell, "s"));
  double seconds = -1;
  REQUIRE(absl::SimpleAtod(cell.substr(0, cell.size() - 1), &seconds));
  return seconds;
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

// Checks that `ignored` (the report's list) holds exactly `expected` (path, part of the why).
void CheckIgnored(const json& ignored,
                  const std::vector<std::pair<std::string, std::string>>& expected) {
  INFO(ignored.dump(1));
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
}

// A live slot of this test's own process (alive, as /proc sees it), its lock held by
// WriteSegment unless the slot says "owned": false.
json OwnSlot(int index, const std::string& command) {
  return {{"index", index}, {"pid", getpid()}, {"command", command}};
}

json Unowned(json slot) {
  slot["owned"] = false;
  return slot;
}

// The segment both tests of the table and of the terminal show: this process at low priority
// and at normal priority with a command name that tries to drive the terminal, and a slot whose
// owner is gone (its lock is free) at high priority.
json TableSpec() {
  json own = OwnSlot(0, "trainer");
  own["default_priority"] = -1;
  own["active_priority"] = -1;
  return {{"uuid", kUuid},
          {"header", {{"priority_high_water", 1}}},
          {"slots",
           {own,
            {{"index", 1}, {"pid", kNoSuchPid}, {"command", "server"},
             {"default_priority", 1}, {"held", 1}, {"owned", false}},
            {{"index", 2}, {"pid", getpid()}, {"command", "ev\x1b[2Jil"}}}}};
}

TEST_CASE("gpuprio top --json reports each live-state slot, its rates and percentiles",
          "[cli][top]") {
  const ShmDir first("first");
  const ShmDir next("next");
  const std::string first_dir = first.UserDir();
  const std::string next_dir = next.UserDir();
  const uint64_t own_start = OwnStartTime();

  // Slot 0: this process. Between the samples: 600 ops dispatched and 400 direct; queueing
  // delays 90 in bucket 3 (2 us: under 3 us), 9 in bucket 10 (under 32 us), 1 in bucket 20; its
  // heartbeat moves.
  json busy = OwnSlot(0, "trainer");
  busy.update({{"default_priority", -1},
               {"active_priority", -1},
               {"max_seen_priority", 0},
               {"ops_dispatched", 1000},
               {"ops_direct", 50},
               {"queued_ops", 3},
               {"queued_estimated_ns", 4500999},
               {"in_flight_ops", 2},
               {"in_flight_estimated_ns", 1234567},
               {"held_ns_total", 777},
               {"heartbeat", 5},
               {"histogram", {{"3", 10}}},
               // A level stamp of 1970 (level 1): long past the window, so not shown.
               {"last_whole_device", (uint64_t{1'000'000} << 8) | 102}});
  json busy_next = busy;
  busy_next.update({{"ops_dispatched", 1600}, {"ops_direct", 450}, {"heartbeat", 6},
                    {"histogram", {{"3", 100}, {"10", 9}, {"20", 1}}}});
  // Slot 5: a process that no longer exists (nobody holds the lock), held, no progress.
  const json dead = Unowned({{"index", 5}, {"pid", kNoSuchPid}, {"command", "server"},
                             {"default_priority", 1}, {"active_priority", 1}, {"held", 1}});
  // Slot 3: owned, published from another pid namespace: its pid is not this namespace's.
  json other_namespace = OwnSlot(3, "elsewhere");
  other_namespace["pid_namespace"] = 12345;
  // Slot 4: this pid with another start time, and nobody holds the lock: the pid was reused.
  json reused = Unowned(OwnSlot(4, "reused"));
  reused["start_time_ticks"] = own_start + 1;
  // Slot 13: its owner could not read its own start time (0): only the pid is compared.
  json no_start_time = OwnSlot(13, "nostart");
  no_start_time["start_time_ticks"] = 0;
  // Slot 14: this very process, which runs, but holds no lock on the slot (as after an exec).
  const json orphan = Unowned(OwnSlot(14, "orphan"));
  // Slot 15: owned, whatever its pid says: the lock decides.
  const json owned_gone = {{"index", 15}, {"pid", kNoSuchPid}, {"command", "badpid"}};
  // Slot 7 is being claimed and slot 9 is free (with garbage in it): neither is shown.
  json claimed = OwnSlot(7, "claiming");
  claimed["state"] = 1;
  const json free_slot = {{"index", 9}, {"state", 0}, {"pid", 0}, {"default_priority", 500}};
  // Slot 8 is claimed anew between the samples (a new generation): no rate across the claims.
  json before_claim = OwnSlot(8, "first");
  before_claim["ops_dispatched"] = 10;
  json after_claim = before_claim;
  after_claim.update({{"generation", 2}, {"ops_dispatched", 20}});
  // Slot 10: an unnamed priority, no active level; all delays under 1 us (bucket 0); its
  // heartbeat stands still.
  json fast = OwnSlot(10, "fast");
  fast.update({{"default_priority", 7}, {"active_priority", kNoPriority}, {"heartbeat", 77}});
  json fast_next = fast;
  fast_next["histogram"] = {{"0", 10}};
  // Slot 11: one delay in bucket 1 (1 us: under 2 us), one in the last, open bucket; a heartbeat
  // counter at its largest value (only whether it moves counts).
  json slow = OwnSlot(11, "slow");
  slow["heartbeat"] = UINT64_MAX;
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
  const SlotLocks first_locks = WriteSegment(
      first_dir, name,
      {{"uuid", kUuid}, {"header", header},
       {"slots", {busy, dead, other_namespace, reused, claimed, free_slot, before_claim, fast,
                  slow, backwards, no_start_time, orphan, owned_gone}}});
  const SlotLocks next_locks = WriteSegment(
      next_dir, name,
      {{"uuid", kUuid}, {"header", header},
       {"slots", {busy_next, dead, other_namespace, reused, claimed, free_slot, after_claim,
                  fast_next, slow_next, backwards_next, newcomer, no_start_time, orphan,
                  owned_gone}}});

  const json report =
      TopJson({"--interval", "0.3", "--shm-dir", first.path(), "--next-shm-dir", next.path()});
  INFO(report.dump(1));
  CHECK(report.at("ignored") == json::array());
  const double interval = report.at("interval_s").get<double>();
  CHECK(interval >= 0.3);
  CHECK(interval < 60);
  REQUIRE(report.at("gpus").size() == 1);
  const json& gpu = report.at("gpus").at(0);
  CHECK(gpu.at("uuid") == kGpuName);
  CHECK(gpu.at("segment") == next_dir + "/" + name);
  CHECK(gpu.at("directory") == next_dir);
  CHECK(gpu.at("alternate_directory") == false);
  CHECK(gpu.at("domain") == "default");
  CHECK(gpu.at("shared_with") == "user");
  CHECK(gpu.at("owner_id") == getuid());
  CHECK(gpu.at("priority_high_water") == 1);
  CHECK(gpu.at("skipped_slots") == json::array());
  CHECK(gpu.at("processes").size() == 12);
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
  // Stale and never stamped: null (exporter_test.py checks the window on a fixed clock).
  CHECK(p0.at("whole_device_priority").is_null());
  CHECK(BySlot(gpu, 10).at("whole_device_priority").is_null());
  CHECK(p0.at("heartbeat") == 6);
  CHECK(p0.at("heartbeat_unchanged_s") == 0);  // it moved between the samples
  CHECK(p0.at("liveness") == "alive");
  CHECK(p0.at("liveness_detail") == "");

  // Heartbeats that stood still: unchanged since the first sample, whatever their value.
  CHECK(BySlot(gpu, 10).at("heartbeat") == 77);
  CHECK(BySlot(gpu, 10).at("heartbeat_unchanged_s").get<double>() ==
        Approx(interval).margin(0.002));
  CHECK(BySlot(gpu, 11).at("heartbeat") == UINT64_MAX);
  CHECK(BySlot(gpu, 11).at("heartbeat_unchanged_s").get<double>() ==
        Approx(interval).margin(0.002));
  // No earlier sample of the same claim: nothing to compare.
  CHECK(BySlot(gpu, 6).at("heartbeat_unchanged_s").is_null());
  CHECK(BySlot(gpu, 8).at("heartbeat_unchanged_s").is_null());

  const json& p5 = BySlot(gpu, 5);
  CHECK(p5.at("pid") == kNoSuchPid);
  CHECK(p5.at("priority_name") == "high");
  CHECK(p5.at("held") == true);
  CHECK(p5.at("liveness") == "dead");
  CHECK(p5.at("liveness_detail") == "no owner holds its lock; no such process");
  CHECK(p5.at("ops_per_s") == 0.0);
  CHECK(p5.at("delay_ops") == 0);
  CHECK(p5.at("delay_p50_us").is_null());
  CHECK(p5.at("delay_p99_us").is_null());

  CHECK(BySlot(gpu, 3).at("liveness") == "alive");
  CHECK(BySlot(gpu, 3).at("liveness_detail") == "in another pid namespace");
  CHECK(BySlot(gpu, 4).at("liveness") == "dead");
  CHECK(BySlot(gpu, 4).at("liveness_detail") ==
        "no owner holds its lock; pid reused by another process");
  CHECK(BySlot(gpu, 13).at("liveness") == "alive");
  CHECK(BySlot(gpu, 14).at("liveness") == "dead");
  CHECK(BySlot(gpu, 14).at("liveness_detail") ==
        "no owner holds its lock; its process exec'd, or never owned the slot");
  CHECK(BySlot(gpu, 15).at("liveness") == "alive");
  CHECK(BySlot(gpu, 15).at("liveness_detail") ==
        "its lock is held, but /proc says of its pid: no such process");

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

  // The live slots first, highest priority first; then the dead ones.
  std::vector<int> live_priorities;
  bool dead_seen = false;
  for (const json& process : gpu.at("processes")) {
    const bool dead_slot = process.at("liveness") == "dead";
    CHECK((dead_slot || !dead_seen));
    dead_seen = dead_seen || dead_slot;
    if (!dead_slot) live_priorities.push_back(process.at("priority").get<int>());
  }
  CHECK(live_priorities.size() == 9);
  CHECK(std::is_sorted(live_priorities.rbegin(), live_priorities.rend()));
}

TEST_CASE("gpuprio top reports a slot live only while its lock is held", "[cli][top]") {
  const ShmDir shm("locks");
  const std::string dir = shm.UserDir();
  // Slot 0 owned; slot 1 says live and names this running process, but nobody holds its lock;
  // slot 2 is garbage nobody owns.
  SlotLocks locks = WriteSegment(
      dir, SegmentName(kUuid),
      {{"uuid", kUuid},
       {"slots", {OwnSlot(0, "owner"), Unowned(OwnSlot(1, "orphan")),
                  Unowned({{"index", 2}, {"pid", 0}})}}});
  const std::vector<std::string> args = {"--interval", "0.05", "--shm-dir", shm.path()};

  json report = TopJson(args);
  INFO(report.dump(1));
  CHECK(report.at("ignored") == json::array());
  REQUIRE(report.at("gpus").size() == 1);
  json gpu = report.at("gpus").at(0);
  CHECK(gpu.at("processes").size() == 2);
  CHECK(BySlot(gpu, 0).at("liveness") == "alive");
  CHECK(BySlot(gpu, 1).at("liveness") == "dead");
  CHECK(BySlot(gpu, 1).at("liveness_detail") ==
        "no owner holds its lock; its process exec'd, or never owned the slot");
  // Garbage in a slot nobody owns is no process: left out, and said so.
  CHECK(gpu.at("skipped_slots") ==
        json::array({{{"slot", 2}, {"why", "pid 0 is not in [1, 2147483647]"}}}));

  const ProcessResult table = Top({"--once", "--interval", "0.05", "--shm-dir", shm.path()});
  INFO(table.stdout_text << table.stderr_text);
  CHECK(table.exit_code == 0);
  std::vector<std::string> lines = Lines(table.stdout_text);
  REQUIRE(lines.size() == 6);
  CHECK(absl::StrContains(lines[0], "1 GPU segment, 1 process, 1 dead slot"));
  CHECK(absl::StrContains(lines[3], absl::StrCat(getpid(), " owner ")));
  CHECK(absl::StrContains(lines[4], absl::StrCat(getpid(), " orphan ")));
  CHECK(absl::EndsWith(
      lines[4], "DEAD: no owner holds its lock; its process exec'd, or never owned the slot"));
  CHECK(lines[5] ==
        "  slot 2 skipped: no owner holds its lock, and pid 0 is not in [1, 2147483647]");

  // Its owner takes the lock: live.
  locks.Lock(1);
  report = TopJson(args);
  CHECK(BySlot(report.at("gpus").at(0), 1).at("liveness") == "alive");

  // Garbage in a slot that has an owner: the whole segment is suspect.
  locks.Lock(2);
  report = TopJson(args);
  CHECK(report.at("gpus") == json::array());
  CheckIgnored(report.at("ignored"),
               {{dir + "/" + SegmentName(kUuid), "slot 2: pid 0 is not in [1, 2147483647]"}});

  // Every owner gone: every slot dead.
  locks = SlotLocks();
  report = TopJson(args);
  REQUIRE(report.at("gpus").size() == 1);
  gpu = report.at("gpus").at(0);
  CHECK(BySlot(gpu, 0).at("liveness") == "dead");
  CHECK(BySlot(gpu, 1).at("liveness") == "dead");
  CHECK(gpu.at("skipped_slots").size() == 1);
}

TEST_CASE("gpuprio top's heartbeat column: how long the counter has stood still, as top saw it",
          "[cli][top]") {
  const ShmDir shm("heartbeat");
  const std::string dir = shm.UserDir();
  json still = OwnSlot(0, "still");
  still["heartbeat"] = UINT64_MAX;  // a garbage value says nothing either way
  const SlotLocks locks = WriteSegment(dir, SegmentName(kUuid), {{"uuid", kUuid},
                                                                 {"slots", {still}}});
  // Each report carries the time of the first sample that showed the value on to the next.
  const ProcessResult watch = Top({"--json", "--watch", "--iterations", "3", "--interval", "0.1",
                                   "--shm-dir", shm.path()});
  INFO(watch.stdout_text << watch.stderr_text);
  REQUIRE(watch.exit_code == 0);
  const std::vector<std::string> reports = Lines(watch.stdout_text);
  REQUIRE(reports.size() == 3);
  double total = 0;
  for (size_t i = 0; i < reports.size(); ++i) {
    const json report = json::parse(reports[i]);
    total += report.at("interval_s").get<double>();
    const double unchanged =
        report.at("gpus").at(0).at("processes").at(0).at("heartbeat_unchanged_s").get<double>();
    INFO("report " << i << ": " << reports[i]);
    CHECK(unchanged == Approx(total).margin(0.003));
    CHECK(unchanged >= 0.1 * static_cast<double>(i + 1) - 0.001);
  }

  // The table: '-' on the first refresh, seconds after.
  const ProcessResult batch =
      Top({"--iterations", "2", "--interval", "0.1", "--shm-dir", shm.path()});
  INFO(batch.stdout_text << batch.stderr_text);
  REQUIRE(batch.exit_code == 0);
  std::vector<std::string> rows;
  for (const std::string& line : Lines(batch.stdout_text)) {
    if (absl::StrContains(line, absl::StrCat(getpid(), " still "))) rows.push_back(line);
    if (absl::StrContains(line, "PID COMMAND")) CHECK(absl::StrContains(line, " HB_STILL "));
  }
  REQUIRE(rows.size() == 2);
  CHECK(absl::EndsWith(rows[0], " -"));
  CHECK(LastCell(rows[1]) >= 0.1);
  CHECK_FALSE(absl::StrContains(batch.stdout_text, "HB_AGE"));
}

TEST_CASE("gpuprio top shows this user's and its groups' segments, by domain", "[cli][top]") {
  const ShmDir shm("domains");
  const std::string user = shm.UserDir();
  const std::string group = shm.GroupDir();
  const std::string other_uuid = "ffeeddccbbaa99887766554433221100";
  std::vector<SlotLocks> locks;
  locks.push_back(
      WriteSegment(user, SegmentName(kUuid), {{"uuid", kUuid}, {"slots", {OwnSlot(0, "a")}}}));
  locks.push_back(WriteSegment(user, SegmentName(other_uuid, "batch.jobs-2"),
                               {{"uuid", other_uuid},
                                {"slots", {OwnSlot(0, "b"), OwnSlot(1, "c")}}}));
  locks.push_back(WriteSegment(group, SegmentName(kUuid),
                               {{"uuid", kUuid}, {"mode", "0660"}, {"slots", {OwnSlot(2, "d")}}}));
  // Another user's directory and a group this user is not in: neither shown nor reported.
  const std::string other_user = MakeDirectory(shm / UserDirName(getuid() + kOtherId), 0700);
  WriteSegment(other_user, SegmentName(kUuid), {{"uuid", kUuid}, {"slots", {OwnSlot(0, "e")}}});
  const std::string other_group =
      MakeDirectory(shm / GroupDirName(getgid() + kOtherId), 02770, getgid());
  WriteSegment(other_group, SegmentName(kUuid),
               {{"uuid", kUuid}, {"mode", "0660"}, {"slots", {OwnSlot(0, "f")}}});

  json report = TopJson({"--interval", "0.05", "--shm-dir", shm.path()});
  INFO(report.dump(1));
  CHECK(report.at("ignored") == json::array());
  const json& gpus = report.at("gpus");
  REQUIRE(gpus.size() == 3);
  CHECK(gpus.at(0).at("uuid") == kGpuName);
  CHECK(gpus.at(0).at("domain") == "default");
  CHECK(gpus.at(0).at("shared_with") == "user");
  CHECK(gpus.at(0).at("directory") == user);
  CHECK(gpus.at(1).at("uuid") == kGpuName);
  CHECK(gpus.at(1).at("shared_with") == "group");
  CHECK(gpus.at(1).at("owner_id") == getgid());
  CHECK(gpus.at(1).at("directory") == group);
  CHECK(gpus.at(1).at("processes").at(0).at("command") == "d");
  CHECK(gpus.at(1).at("processes").at(0).at("liveness") == "alive");
  CHECK(gpus.at(2).at("uuid") == "GPU-ffeeddcc-bbaa-9988-7766-554433221100");
  CHECK(gpus.at(2).at("domain") == "batch.jobs-2");
  CHECK(gpus.at(2).at("processes").size() == 2);

  report = TopJson({"--interval", "0.05", "--shm-dir", shm.path(), "--domain", "batch.jobs-2"});
  REQUIRE(report.at("gpus").size() == 1);
  CHECK(report.at("gpus").at(0).at("domain") == "batch.jobs-2");
  report = TopJson({"--interval", "0.05", "--shm-dir", shm.path(), "--domain", "none"});
  CHECK(report.at("gpus") == json::array());

  // Without --shm-dir: GPUPRIO_SHM_DIR, as the library reads it.
  report = TopJson({"--interval", "0.05"}, {{"GPUPRIO_SHM_DIR", shm.path()}});
  CHECK(report.at("gpus").size() == 3);
  const ShmDir empty("empty_env");
  report = TopJson({"--interval", "0.05", "--shm-dir", shm.path()},
                   {{"GPUPRIO_SHM_DIR", empty.path()}});
  CHECK(report.at("gpus").size() == 3);
  const ProcessResult relative = Top({"--once"}, {{"GPUPRIO_SHM_DIR", "shm"}});
  CHECK(relative.exit_code == 2);
  CHECK(relative.stdout_text.empty());
  CHECK(Lines(relative.stderr_text).size() == 1);
  CHECK(absl::StartsWith(relative.stderr_text,
                         "gpuprio top: error: GPUPRIO_SHM_DIR='shm' is not an absolute"));
}

TEST_CASE("gpuprio top finds the alternate directory its user's processes use", "[cli][top]") {
  const std::string preferred_name = UserDirName();
  SECTION("the preferred name is a file") {
    const ShmDir shm("alternate");
    const std::string preferred = shm / preferred_name;
    std::ofstream(preferred) << "not a directory";
    const std::string alternate = MakeDirectory(shm / (preferred_name + ".00000000deadbeef"), 0700);
    const std::string later = MakeDirectory(shm / (preferred_name + ".ffffffffffffffff"), 0700);
    // Of this user but not valid, and a link: reported, not read.
    const std::string open_mode = MakeDirectory(shm / (preferred_name + ".0000000000000001"), 0750);
    const std::string link = shm / (preferred_name + ".0000000000000002");
    REQUIRE(symlink(alternate.c_str(), link.c_str()) == 0);
    const SlotLocks in_alternate = WriteSegment(alternate, SegmentName(kUuid),
                                                {{"uuid", kUuid}, {"slots", {OwnSlot(0, "alt")}}});
    // A process that started while the later one was the first valid one may still be there.
    const SlotLocks in_later = WriteSegment(later, SegmentName(kUuid),
                                            {{"uuid", kUuid}, {"slots", {OwnSlot(1, "later")}}});
    WriteSegment(open_mode, SegmentName(kUuid), {{"uuid", kUuid}, {"slots", {OwnSlot(2, "x")}}});

    const json report = TopJson({"--interval", "0.05", "--shm-dir", shm.path()});
    INFO(report.dump(1));
    REQUIRE(report.at("gpus").size() == 2);
    const json& gpu = report.at("gpus").at(0);
    CHECK(gpu.at("directory") == alternate);
    CHECK(gpu.at("segment") == alternate + "/" + SegmentName(kUuid));
    CHECK(gpu.at("alternate_directory") == true);
    CHECK(gpu.at("processes").at(0).at("command") == "alt");
    CHECK(gpu.at("processes").at(0).at("liveness") == "alive");
    CHECK(report.at("gpus").at(1).at("directory") == later);
    CHECK(report.at("gpus").at(1).at("processes").at(0).at("command") == "later");
    CheckIgnored(report.at("ignored"),
                 {{preferred, absl::StrCat("is not a directory; this user's processes use ",
                                           preferred_name, ".00000000deadbeef instead")},
                  {open_mode, "has mode 0750, not 0700; not used for segments"},
                  {link, "is a symbolic link, not a directory; not used for segments"}});

    const ProcessResult table = Top({"--once", "--interval", "0.05", "--shm-dir", shm.path()});
    INFO(table.stdout_text << table.stderr_text);
    CHECK(table.exit_code == 0);
    CHECK(absl::StrContains(table.stdout_text,
                            absl::StrCat("  in ", preferred_name, ".00000000deadbeef\n")));
    CHECK(absl::StrContains(table.stdout_text,
                            absl::StrCat("ignored: ", preferred, ": is not a directory")));
  }
  SECTION("the preferred name is a link to a valid directory") {
    const ShmDir shm("link");
    const std::string target = MakeDirectory(shm / "elsewhere", 0700);
    const SlotLocks locks =
        WriteSegment(target, SegmentName(kUuid), {{"uuid", kUuid}, {"slots", {OwnSlot(0, "a")}}});
    REQUIRE(symlink(target.c_str(), (shm / preferred_name).c_str()) == 0);
    const json report = TopJson({"--interval", "0.05", "--shm-dir", shm.path()});
    INFO(report.dump(1));
    CHECK(report.at("gpus") == json::array());
    CheckIgnored(report.at("ignored"),
                 {{shm / preferred_name,
                   absl::StrCat("is a symbolic link, not a directory; there is no valid ",
                                preferred_name, ".* directory for this user's processes")}});
  }
}

TEST_CASE("gpuprio top ignores a directory of the wrong mode or owner, saying why",
          "[cli][top]") {
  struct Case {
    std::string name;
    mode_t mode;
    int64_t uid;  // chown to it (-1: this user's)
    int64_t gid;  // chgrp to it (-1: unchanged)
    std::string why;
  };
  const std::string user = UserDirName();
  const std::string group = GroupDirName();
  const std::string no_user_alternate =
      absl::StrCat("; there is no valid ", user, ".* directory for this user's processes");
  const std::string no_group_alternate = absl::StrCat(
      "; there is no valid ", group, ".* directory for group ", getgid(), "'s processes");
  std::vector<Case> cases = {
      {user, 0755, -1, -1, "has mode 0755, not 0700" + no_user_alternate},
      {user, 0710, -1, -1, "has mode 0710, not 0700" + no_user_alternate},
      {group, 02775, -1, getgid(), "has mode 2775, not 2770" + no_group_alternate},
      {group, 02750, -1, getgid(), "has mode 2750, not 2770" + no_group_alternate},
  };
  if (const int64_t other_user = OtherUser(); other_user >= 0) {
    cases.push_back({user, 0700, other_user, -1,
                     absl::StrCat("belongs to user ", other_user, ", not to this user (",
                                  getuid(), ")", no_user_alternate)});
  } else {
    WARN("SKIP: no file can be given to another user here: a directory of another user is not "
         "tested");
  }
  if (const int64_t other_group = OtherGroup(); other_group >= 0) {
    cases.push_back({group, 02770, -1, other_group,
                     absl::StrCat("belongs to group ", other_group, ", not ", getgid(),
                                  no_group_alternate)});
  } else {
    WARN("SKIP: no file can be given to another group here: a directory of another group is not "
         "tested");
  }
  for (const Case& c : cases) {
    const ShmDir shm("wrong");
    const std::string dir = shm / c.name;
    MakeDirectory(dir, 0700, c.gid);
    // A segment that would be shown from a valid directory.
    const SlotLocks locks =
        WriteSegment(dir, SegmentName(kUuid), {{"uuid", kUuid},
                                               {"mode", c.name == group ? "0660" : "0600"},
                                               {"slots", {OwnSlot(0, "hidden")}}});
    if (c.uid >= 0) {
      REQUIRE(chown(dir.c_str(), static_cast<uid_t>(c.uid), static_cast<gid_t>(-1)) == 0);
    }
    REQUIRE(chmod(dir.c_str(), c.mode) == 0);
    const json report = TopJson({"--interval", "0.05", "--shm-dir", shm.path()});
    INFO(c.name << " " << c.why << "\n" << report.dump(1));
    CHECK(report.at("gpus") == json::array());
    CheckIgnored(report.at("ignored"), {{dir, c.why}});
  }
}

TEST_CASE("gpuprio top ignores a bad segment with one line naming why, and goes on",
          "[cli][top]") {
  const ShmDir shm("bad");
  const std::string dir = shm.UserDir();
  const std::string group = shm.GroupDir();
  const SlotLocks good = WriteSegment(dir, SegmentName(kUuid),
                                      {{"uuid", kUuid}, {"slots", {OwnSlot(0, "good")}}});
  // uuid -> (spec, what "why" must say). Each bad segment is of another GPU, so of another name.
  // The slots with values out of bounds have owners (their locks are held).
  const std::vector<std::pair<json, std::string>> bad = {
      {{{"random_bytes", 7}}, "is not b'gpuprioS': not a gpuprio segment"},
      {{{"truncate_to", 100000}}, "is 100000 bytes, not 266240"},
      // A sparse terabyte that starts as a segment does: its size says it is none.
      {{{"truncate_to", kTiB}}, "is 1099511627776 bytes, not 266240"},
      {{{"truncate_to", 0}}, "is empty: its creator has not set it up yet"},
      {{{"header", {{"magic", std::string(8, '\0')}}}},
       "is not ready: its creator has not filled in the header yet"},
      {{{"mode", "0644"}}, "has mode 0644, not 0600: others could write it"},
      {{{"header", {{"layout_version", 1}}}}, "layout version 1; this gpuprio reads version 2"},
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
      {{{"slots", {{{"index", 8}, {"pid", 1}, {"held", 2}}}}}, "slot 8: held is 2, not 0 or 1"},
      {{{"slots", {{{"index", 9}, {"pid", 1}, {"queued_ops", -1}}}}},
       "slot 9: queued_ops is -1, which cannot be negative"},
  };
  std::vector<SlotLocks> locks;
  std::vector<std::pair<std::string, std::string>> expected;  // path, why
  for (size_t i = 0; i < bad.size(); ++i) {
    const std::string uuid = absl::StrCat(std::string(30, 'a'), i < 10 ? "0" : "", i);
    json spec = bad[i].first;
    spec["uuid"] = uuid;
    const std::string name = SegmentName(uuid);
    locks.push_back(WriteSegment(dir, name, spec));
    expected.emplace_back(dir + "/" + name, bad[i].second);
  }
  // A state that is none: the writer's lock is taken here, as it is not a live slot's.
  const std::string bad_state = SegmentName(std::string(32, '7'));
  WriteSegment(dir, bad_state,
               {{"uuid", std::string(32, '7')}, {"slots", {{{"index", 7}, {"pid", 1},
                                                            {"state", 9}}}}});
  locks.emplace_back(dir + "/" + bad_state, std::vector<int>{7});
  expected.emplace_back(dir + "/" + bad_state,
                        "slot 7: state 9 is not free (0), claimed (1) or live (2)");
  // A sparse terabyte of nothing at all (as `truncate -s 1T` makes it): its size, not "not ready".
  const std::string huge = dir + "/" + SegmentName(std::string(32, '9'));
  {
    const int fd = open(huge.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    REQUIRE(fd >= 0);
    CHECK(ftruncate(fd, kTiB) == 0);
    close(fd);
  }
  expected.emplace_back(huge, "is 1099511627776 bytes, not 266240 (4096-byte header and 64 slots");
  // A group's segment that others may read and write, and one the group cannot write.
  const std::string open_group = SegmentName(std::string(32, 'e'));
  WriteSegment(group, open_group, {{"uuid", std::string(32, 'e')}, {"mode", "0666"}});
  expected.emplace_back(group + "/" + open_group, "has mode 0666, not 0660");
  const std::string read_only_group = SegmentName(std::string(32, '6'));
  WriteSegment(group, read_only_group, {{"uuid", std::string(32, '6')}, {"mode", "0640"}});
  expected.emplace_back(group + "/" + read_only_group, "has mode 0640, not 0660");
  // Files of another owner in this user's directory, of another group in the group's.
  if (const int64_t other_user = OtherUser(); other_user >= 0) {
    const std::string foreign_user = SegmentName(std::string(32, '4'));
    WriteSegment(dir, foreign_user, {{"uuid", std::string(32, '4')}});
    REQUIRE(chown((dir + "/" + foreign_user).c_str(), static_cast<uid_t>(other_user),
                  static_cast<gid_t>(-1)) == 0);
    expected.emplace_back(dir + "/" + foreign_user,
                          absl::StrCat("belongs to uid ", other_user,
                                       ", not to its directory's owner (uid ", getuid(), ")"));
  } else {
    WARN("SKIP: no file can be given to another user here: such a segment is not tested");
  }
  if (const int64_t other_group = OtherGroup(); other_group >= 0) {
    const std::string foreign_group = SegmentName(std::string(32, '5'));
    WriteSegment(group, foreign_group, {{"uuid", std::string(32, '5')}, {"mode", "0660"}});
    REQUIRE(chown((group + "/" + foreign_group).c_str(), static_cast<uid_t>(-1),
                  static_cast<gid_t>(other_group)) == 0);
    expected.emplace_back(group + "/" + foreign_group,
                          absl::StrCat("belongs to gid ", other_group,
                                       ", not to its directory's group (gid ", getgid(), ")"));
  } else {
    WARN("SKIP: no file can be given to another group here: such a segment is not tested");
  }
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
  // Segments of another layout version: a version-1 file straight in the directory, a
  // version-3 directory. Their own gpuprio reads them.
  const std::string v1 = shm / absl::StrCat("gpuprio-v1-u", getuid(), "-default-", kUuid);
  std::ofstream(v1) << "v1";
  expected.emplace_back(v1, "of layout version 1; this gpuprio reads version 2: use the gpuprio "
                            "that wrote it");
  const std::string v3 = MakeDirectory(shm / absl::StrCat("gpuprio-v3-u", getuid()), 0700);
  expected.emplace_back(v3, "of layout version 3; this gpuprio reads version 2");
  // Not gpuprio's at all: not mentioned.
  std::ofstream(shm / "other-program-segment") << "x";
  std::ofstream(dir + "/notes.txt") << "x";
  std::ofstream(dir + "/" + SegmentName(kUuid) + "~123.tmp") << "x";

  const json report = TopJson({"--interval", "0.05", "--shm-dir", shm.path()});
  INFO(report.dump(1));
  REQUIRE(report.at("gpus").size() == 1);
  CHECK(report.at("gpus").at(0).at("processes").at(0).at("command") == "good");
  CheckIgnored(report.at("ignored"), expected);

  // The table: one "ignored:" line per bad file, after the good segment's rows.
  const ProcessResult table = Top({"--once", "--interval", "0.05", "--shm-dir", shm.path()});
  INFO(table.stdout_text << table.stderr_text);
  CHECK(table.exit_code == 0);
  CHECK(table.stderr_text.empty());
  int ignored_lines = 0;
  for (const std::string& line : Lines(table.stdout_text)) {
    if (absl::StartsWith(line, "ignored: " + shm.path() + "/")) ++ignored_lines;
  }
  CHECK(ignored_lines == static_cast<int>(expected.size()));
  CHECK(absl::StrContains(table.stdout_text, " good "));
}

TEST_CASE("gpuprio top with no segments says so and exits 0", "[cli][top]") {
  const ShmDir shm("empty");
  const std::string dir = shm.path();
  const ProcessResult table = Top({"--once", "--interval", "0.05", "--shm-dir", dir});
  INFO(table.stdout_text << table.stderr_text);
  CHECK(table.exit_code == 0);
  CHECK(table.stderr_text.empty());
  CHECK(absl::StrContains(table.stdout_text,
                          "no GPUs: no gpuprio segment of this user or its groups in " + dir));
  json report = TopJson({"--interval", "0.05", "--shm-dir", dir});
  CHECK(report.at("gpus") == json::array());
  CHECK(report.at("ignored") == json::array());
  // This user's directory, empty.
  shm.UserDir();
  report = TopJson({"--interval", "0.05", "--shm-dir", dir});
  CHECK(report.at("gpus") == json::array());
  CHECK(report.at("ignored") == json::array());

  const ProcessResult missing = Top({"--once", "--shm-dir", dir + "/nonexistent"});
  CHECK(missing.exit_code == 2);
  CHECK(missing.stdout_text.empty());
  CHECK(Lines(missing.stderr_text).size() == 1);
  CHECK(absl::StartsWith(missing.stderr_text, "gpuprio top: error: cannot list"));
}

TEST_CASE("gpuprio top --once prints one table", "[cli][top]") {
  const ShmDir shm("table");
  const SlotLocks locks = WriteSegment(shm.UserDir(), SegmentName(kUuid), TableSpec());
  const ProcessResult result = Top({"--once", "--interval", "0.05", "--shm-dir", shm.path()});
  INFO(result.stdout_text << result.stderr_text);
  REQUIRE(result.exit_code == 0);
  CHECK(result.stderr_text.empty());
  // A command name cannot drive the terminal: its escape byte is printed as text.
  CHECK(result.stdout_text.find('\x1b') == std::string::npos);
  CHECK(absl::StrContains(result.stdout_text, "ev\\x1b[2Jil"));
  const std::vector<std::string> lines = Lines(result.stdout_text);
  REQUIRE(lines.size() == 6);
  CHECK(absl::StartsWith(lines[0], "gpuprio top - "));
  CHECK(absl::StrContains(lines[0], "1 GPU segment, 2 processes, 1 dead slot"));
  CHECK(absl::StartsWith(lines[1], absl::StrCat(kGpuName, "  domain default  user ")));
  CHECK(absl::EndsWith(lines[1], "highest priority seen 1"));
  for (const char* column : {"PID", "COMMAND", "PRIORITY", "ACTIVE", "OPS/S", "QUEUED",
                             "QUEUED_US", "INFLIGHT", "INFL_US", "P50_US", "P99_US", "HELD",
                             "HB_STILL", "STATUS"}) {
    CHECK(absl::StrContains(lines[2], column));
  }
  // Highest priority first, this process twice; then the slot whose owner is gone.
  CHECK(absl::StrContains(lines[3], absl::StrCat(getpid(), " ev\\x1b[2Jil")));
  CHECK(absl::StrContains(lines[4], absl::StrCat(getpid(), " trainer         -1 low")));
  CHECK(LastCell(lines[4]) >= 0.05);  // its heartbeat stood still over the interval
  CHECK(absl::StrContains(lines[5], "server          1 high"));
  CHECK(absl::StrContains(lines[5], " yes "));
  CHECK(absl::EndsWith(lines[5], "DEAD: no owner holds its lock; no such process"));
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
  const ShmDir shm("watch");
  const SlotLocks locks = WriteSegment(shm.UserDir(), SegmentName(kUuid), TableSpec());
  const ProcessResult result = Top(
      {"--json", "--watch", "--iterations", "3", "--interval", "0.05", "--shm-dir", shm.path()});
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
  const ShmDir shm("batch");
  const SlotLocks locks = WriteSegment(shm.UserDir(), SegmentName(kUuid), TableSpec());
  const ProcessResult result =
      Top({"--iterations", "2", "--interval", "0.05", "--shm-dir", shm.path()});
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
  const ShmDir shm("closed");
  const SlotLocks locks = WriteSegment(shm.UserDir(), SegmentName(kUuid), TableSpec());
  const std::string top = absl::StrCat(Cli(), " top --interval 0.05 --shm-dir ", shm.path());
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
  const ShmDir shm("live");
  const SlotLocks locks = WriteSegment(shm.UserDir(), SegmentName(kUuid), TableSpec());
  const std::string& dir = shm.path();
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
  CHECK(absl::StrContains(screen, "1 GPU segment, 2 processes, 1 dead slot"));
  CHECK(absl::StrContains(screen, kGpuName));
  CHECK(absl::StrContains(screen, "PID COMMAND"));
  CHECK(absl::StrContains(screen, own_row));
  CHECK(absl::StrContains(screen, "DEAD: no owner holds its lock"));
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
