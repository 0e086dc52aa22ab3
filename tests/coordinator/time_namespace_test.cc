// Processes in other time namespaces sharing the (fake) GPU with a process of the host, for real:
// the high process runs under `unshare --time --monotonic OFFSET`, as in a container whose
// CLOCK_MONOTONIC is OFFSET seconds off the host's. With work in flight it holds a low host
// process back for as long as the work lasts (longer than the stale-heartbeat bound: heartbeats
// are judged on the reader's clock) and the low process resumes after it, 5000 s ahead and 500 s
// behind; stopped (SIGSTOP) with work in flight, it holds the low process back only until its
// heartbeat goes stale, while it is still stopped; and it never frees a slot of the host's (a
// live host process that never beats keeps its slot, and nobody gives up coordinating).
//
// Needs util-linux's unshare with --time (2.36 or later) at /usr/bin/unshare, a kernel with time
// namespaces (Linux 5.6 or later, CONFIG_TIME_NS) and the right to create one (CAP_SYS_ADMIN:
// root, as in CI). Where any is missing, each test case says why in a warning and checks
// nothing. Every client is killed (and continued) and reaped whatever ends the test.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "catch2/catch.hpp"
#include "scheduler/base/clock.h"
#include "scheduler/coordinator/device_segment.h"
#include "scheduler/coordinator/gpu_coordinator.h"
#include "scheduler/coordinator/segment_layout.h"
#include "tests/client_env.h"
#include "tests/coordinator/spawned_client.h"
#include "tests/runfiles.h"

namespace gpuprio_test {
namespace {

using gpuprio::base::SteadyNowNs;
using gpuprio::coordinator::GpuCoordinator;

constexpr char kUnshare[] = "/usr/bin/unshare";
// The fake driver's device 0 UUID ("fakecuda", then zeros).
constexpr uint8_t kFakeUuid[16] = {'f', 'a', 'k', 'e', 'c', 'u', 'd', 'a'};
constexpr int64_t kSecondNs = 1'000'000'000;

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// Why this machine cannot run a program in a time namespace `offset_s` seconds off the host's
// monotonic clock, or "" if it can.
std::string TimeNamespaceUnavailable(int64_t offset_s) {
  if (access(kUnshare, X_OK) != 0) return absl::StrCat(kUnshare, " is missing");
  auto r = RunProcess({kUnshare, "--time", "--monotonic", std::to_string(offset_s), "/bin/true"},
                      {});
  if (!r.ok()) return r.status().ToString();
  if (r->exit_code != 0) {
    return absl::StrCat("`unshare --time --monotonic ", offset_s, " /bin/true` exited with ",
                        r->exit_code, ": ", r->stderr_text,
                        "(needs CAP_SYS_ADMIN, Linux 5.6+ with CONFIG_TIME_NS, util-linux 2.36+)");
  }
  return "";
}


// The files a low `stream` client and a high `hold` client are started and stopped by.
class Files {
 public:
  Files() {
    static int counter = 0;
    const std::string base = absl::StrCat(TempDir(), "/timens_", getpid(), "_", ++counter);
    low_ready = base + ".low";
    high_ready = base + ".high";
    stop = base + ".stop";
  }
  ~Files() {
    for (const std::string& f : {low_ready, low_ready + ".progress", high_ready, stop}) {
      unlink(f.c_str());
    }
  }
  void Stop() const { std::ofstream(stop.c_str()) << "stop"; }
  // The low client's last progress timestamp (CLOCK_MONOTONIC of the host), 0 if none yet.
  int64_t LowProgress() const {
    const std::string text = ReadFile(low_ready + ".progress");
    return text.size() == 20 ? std::stoll(text) : 0;
  }
  std::string low_ready, high_ready, stop;
};

// Waits at most `timeout_s` (a hang, not a timing check) for `done`.
template <typename Done>
bool WaitFor(Done done, int timeout_s = 60) {
  for (int i = 0; i < timeout_s * 1000 && !done(); ++i) usleep(1000);
  return done();
}

std::string ClientPath() {
  auto path = Runfile("tests/coordinator/coord_client");
  REQUIRE(path.ok());
  return *path;
}

Env Environment(const std::string& priority, Env extra = {}) {
  extra.push_back({"GPUPRIO_PRIORITY", priority});
  auto env = ClientEnv("schedule", std::move(extra));
  REQUIRE(env.ok());
  return *env;
}

// The low host process: back-to-back 1 ms kernels, held back for as long as the high process
// has work (no hold bound).
std::unique_ptr<SpawnedClient> StartLow(const Files& files) {
  auto low = std::make_unique<SpawnedClient>(
      std::vector<std::string>{ClientPath(), "stream", files.low_ready, files.stop, "1000"},
      Environment("low", {{"GPUPRIO_MAX_HOLD_MS", "0"}}));
  REQUIRE(WaitFor([&] { return Exists(files.low_ready); }));
  return low;
}

// The high process in a time namespace `offset_s` off the host's: one kernel of `kernel_us`.
std::unique_ptr<SpawnedClient> StartNamespacedHigh(const Files& files, int64_t offset_s,
                                                   int64_t kernel_us) {
  return std::make_unique<SpawnedClient>(
      std::vector<std::string>{kUnshare, "--time", "--monotonic", std::to_string(offset_s), "--",
                               ClientPath(), "hold", "high", files.high_ready,
                               std::to_string(kernel_us)},
      Environment("high"));
}

// The times of the low client's launches, sorted (host clock).
std::vector<int64_t> Issues(const std::string& out) {
  std::vector<int64_t> issues;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    if (f.size() == 2 && f[0] == "issue") issues.push_back(std::stoll(f[1]));
  }
  std::sort(issues.begin(), issues.end());
  return issues;
}

int IssuesBetween(const std::vector<int64_t>& issues, int64_t begin, int64_t end) {
  return static_cast<int>(std::count_if(issues.begin(), issues.end(),
                                        [&](int64_t t) { return t > begin && t < end; }));
}

// `coord_client hold high`'s report: when its kernel ran on the fake device, on its own clock.
struct HoldReport {
  int64_t start_ns = 0, end_ns = 0;
};
HoldReport ParseHold(const std::string& out) {
  long long cpu, wall, start, end;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (std::sscanf(std::string(line).c_str(), "cpu_ns %lld wall_ns %lld start_ns %lld end_ns %lld",
                    &cpu, &wall, &start, &end) == 4) {
      return {start, end};
    }
  }
  FAIL("no hold report in:\n" << out);
  return {};
}

// A process of the host attached to the clients' segment that never beats (its dispatcher-less
// slot's heartbeat never changes), and its slot's state word as it claimed it.
struct HostProbe {
  HostProbe() {
    gpuprio::coordinator::SegmentOptions options;
    options.shm_dir = TestShmDir();
    options.domain = TestDomain();
    auto c = GpuCoordinator::Attach(options, kFakeUuid, 0);
    INFO(c.status().ToString());
    REQUIRE(c.ok());
    coordinator = *std::move(c);
    word = SlotWord();
  }
  uint64_t SlotWord() const {
    return coordinator->segment().slot(coordinator->slot_index()).state_word.load();
  }
  // Whether a live slot of the segment belongs to `pid`.
  bool LiveSlotOf(pid_t pid) const {
    for (uint32_t i = 0; i < gpuprio::coordinator::kSlotCount; ++i) {
      const auto& slot = coordinator->segment().slot(i);
      if (slot.pid == static_cast<uint32_t>(pid) &&
          gpuprio::coordinator::SlotWordState(slot.state_word.load()) ==
              gpuprio::coordinator::kSlotLive) {
        return true;
      }
    }
    return false;
  }
  std::unique_ptr<GpuCoordinator> coordinator;
  uint64_t word = 0;
};

// Neither client gave up coordinating (its slot freed or overwritten by another process).
void CheckStillCoordinating(const SpawnedClient& low, const SpawnedClient& high) {
  for (const SpawnedClient* c : {&low, &high}) {
    const std::string err = c->Err();
    INFO("stderr of " << c->pid() << ":\n" << err);
    CHECK_FALSE(absl::StrContains(err, "no longer coordinates"));
    CHECK_FALSE(absl::StrContains(err, "no coordination"));
  }
}

void CheckHeldAcrossNamespaces(int64_t offset_s) {
  const std::string unavailable = TimeNamespaceUnavailable(offset_s);
  if (!unavailable.empty()) {
    WARN("skipped: no time namespace here: " << unavailable);
    return;
  }
  const HostProbe probe;
  Files files;
  const std::unique_ptr<SpawnedClient> low = StartLow(files);
  // Twice the stale-heartbeat bound: the high process holds the low one back for longer than
  // a stopped one could.
  const int64_t kernel_ns = 2 * GpuCoordinator::kStaleHeartbeatNs;
  const int64_t spawned_at = SteadyNowNs();
  const std::unique_ptr<SpawnedClient> high =
      StartNamespacedHigh(files, offset_s, kernel_ns / 1000);
  REQUIRE(high->Wait() == 0);
  const int64_t high_ended_at = SteadyNowNs();
  // Every slot of the host stays: the low process's (it beats) and the probe's (it never does),
  // though the high process checked the slot locks every 100 ms of its clock.
  CHECK(probe.LiveSlotOf(low->pid()));
  CHECK(probe.SlotWord() == probe.word);
  REQUIRE(WaitFor([&] { return files.LowProgress() > high_ended_at; }));
  files.Stop();
  REQUIRE(low->Wait() == 0);
  CheckStillCoordinating(*low, *high);

  // The high kernel's time on the device, on the host's clock: the namespace is the given
  // offset off the host's.
  const HoldReport h = ParseHold(high->Out());
  const int64_t start = h.start_ns - offset_s * kSecondNs;
  const int64_t end = h.end_ns - offset_s * kSecondNs;
  INFO("offset " << offset_s << " s; high kernel on the host's clock " << start << ".." << end
                 << " (spawned " << spawned_at << ", reaped " << high_ended_at << ")");
  REQUIRE(start > spawned_at);
  REQUIRE(end < high_ended_at);
  REQUIRE(end - start >= kernel_ns);
  const std::vector<int64_t> issues = Issues(low->Out());
  // Held throughout (at most the one launch that had passed admission as the high process
  // published), and resumed after.
  const int during = IssuesBetween(issues, start, end);
  const auto after = std::upper_bound(issues.begin(), issues.end(), end);
  INFO("low launches during the high kernel: " << during << "; first after it: "
                                               << (after != issues.end() ? *after - end : -1)
                                               << " ns after its end");
  CHECK(during <= 1);
  CHECK(after != issues.end());
  CHECK(IssuesBetween(issues, 0, start) > 0);  // the low process ran before
}

TEST_CASE("A high process in a time namespace 5000 s ahead holds a host process back while its "
          "work is in flight, frees it after, and frees no slot of the host's",
          "[coordinator][timens]") {
  CheckHeldAcrossNamespaces(5000);
}

TEST_CASE("A high process in a time namespace 500 s behind holds a host process back while its "
          "work is in flight, frees it after, and frees no slot of the host's",
          "[coordinator][timens]") {
  CheckHeldAcrossNamespaces(-500);
}

TEST_CASE("A high process in a time namespace 5000 s ahead, stopped with work in flight, holds a "
          "host process back only until its heartbeat goes stale",
          "[coordinator][timens]") {
  constexpr int64_t kOffsetS = 5000;
  const std::string unavailable = TimeNamespaceUnavailable(kOffsetS);
  if (!unavailable.empty()) {
    WARN("skipped: no time namespace here: " << unavailable);
    return;
  }
  const HostProbe probe;
  Files files;
  const std::unique_ptr<SpawnedClient> low = StartLow(files);
  // A kernel that outlasts the test: only the stop can end the hold.
  const std::unique_ptr<SpawnedClient> high = StartNamespacedHigh(files, kOffsetS, 600'000'000);
  REQUIRE(WaitFor([&] { return Exists(files.high_ready); }));
  const int64_t published_at = SteadyNowNs();  // the high level is up by now
  // Running, it holds the low process back for longer than the stale bound.
  usleep(static_cast<useconds_t>((GpuCoordinator::kStaleHeartbeatNs + kSecondNs / 2) / 1000));
  const int64_t stopped_at = SteadyNowNs();
  high->Signal(SIGSTOP);
  REQUIRE(WaitFor([&] { return high->Stopped(); }));
  // The low process resumes while the high one is still stopped, its work still in flight.
  REQUIRE(WaitFor([&] { return files.LowProgress() > stopped_at; }));
  const int64_t resumed_at = files.LowProgress();
  CHECK(high->Stopped());
  CHECK(probe.LiveSlotOf(high->pid()));  // stopped, not dead: its slot stays
  CHECK(probe.LiveSlotOf(low->pid()));
  CHECK(probe.SlotWord() == probe.word);
  high->Signal(SIGKILL);
  high->Signal(SIGCONT);
  CHECK(high->Wait() == 128 + SIGKILL);
  files.Stop();
  REQUIRE(low->Wait() == 0);
  CheckStillCoordinating(*low, *high);

  const std::vector<int64_t> issues = Issues(low->Out());
  const auto first_after_stop = std::upper_bound(issues.begin(), issues.end(), stopped_at);
  REQUIRE(first_after_stop != issues.end());
  INFO("low launches between the high level's publication and the stop: "
       << IssuesBetween(issues, published_at, stopped_at) << "; first launch "
       << (*first_after_stop - stopped_at) / 1'000'000 << " ms after the stop, a sync returned "
       << (resumed_at - stopped_at) / 1'000'000 << " ms after it");
  CHECK(IssuesBetween(issues, published_at, stopped_at) <= 1);
  // The stale bound (2 s) and the dispatcher's sleep, with room for a loaded machine: a bound
  // on the mechanism, not a timing figure.
  CHECK(*first_after_stop - stopped_at < 30 * kSecondNs);
}

}  // namespace
}  // namespace gpuprio_test
