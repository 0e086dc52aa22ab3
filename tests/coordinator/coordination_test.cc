// Processes sharing one (fake) GPU through gpuprio's shared segment: a low or normal process
// issues nothing while a high process has work queued or in flight; three processes; SIGKILL of
// either side at random points, 200 rounds (no hang, the dead slot reclaimed, low work resumes);
// a garbage segment gives one message and local scheduling.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
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
#include "scheduler/coordinator/segment_directory.h"
#include "scheduler/coordinator/segment_name.h"
#include "tests/client_env.h"
#include "tests/coordinator/spawned_client.h"
#include "tests/runfiles.h"

namespace gpuprio_test {
namespace {

using gpuprio::base::SteadyNowNs;

// The fake driver's device 0 UUID ("fakecuda", then zeros).
constexpr uint8_t kFakeUuid[16] = {'f', 'a', 'k', 'e', 'c', 'u', 'd', 'a'};


struct Interval {
  int64_t begin, end;
};

// A high process's chain: the times it had work queued or in flight and had published so (from
// each launch -- the first one's return -- to that kernel's end on the device).
struct Burst {
  std::vector<Interval> busy;
};

std::vector<Burst> Bursts(const std::string& out) {
  std::vector<Burst> bursts;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    if (f.size() != 3) continue;
    const Interval interval{std::stoll(f[1]), std::stoll(f[2])};
    if (f[0] == "burst") bursts.emplace_back();
    if (f[0] == "busy" && !bursts.empty()) bursts.back().busy.push_back(interval);
  }
  return bursts;
}

std::vector<int64_t> Issues(const std::string& out) {
  std::vector<int64_t> issues;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    if (f.size() == 2 && f[0] == "issue") issues.push_back(std::stoll(f[1]));
  }
  std::sort(issues.begin(), issues.end());
  return issues;
}

// The most launches of `issues` that began while one burst's process had work queued or in
// flight, and their total.
std::pair<int, int> IssuesInBursts(const std::vector<Burst>& bursts,
                                   const std::vector<int64_t>& issues) {
  int most = 0, total = 0;
  for (const Burst& b : bursts) {
    int n = 0;
    for (int64_t t : issues) {
      for (const Interval& busy : b.busy) {
        if (t > busy.begin && t < busy.end) {
          ++n;
          break;
        }
      }
    }
    most = std::max(most, n);
    total += n;
  }
  return {most, total};
}

class Files {
 public:
  Files() {
    static int counter = 0;
    const std::string base = absl::StrCat(TempDir(), "/coord_", getpid(), "_", ++counter);
    ready = base + ".ready";
    stop = base + ".stop";
    unlink(ready.c_str());
    unlink(stop.c_str());
  }
  void Stop() const { std::ofstream(stop.c_str()) << "stop"; }
  std::string ready, stop;
};

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

// This test's clients' segment of `domain`, in their private directory (ClientEnv).
std::string SegmentPath(const std::string& domain) {
  return absl::StrCat(TestShmDir(), "/", gpuprio::coordinator::SegmentDirectoryName(geteuid(), -1),
                      "/", gpuprio::coordinator::SegmentFileName(domain, kFakeUuid));
}

gpuprio::coordinator::SegmentOptions TestSegmentOptions() {
  gpuprio::coordinator::SegmentOptions options;
  options.shm_dir = TestShmDir();
  options.domain = TestDomain();
  return options;
}

// High: 12 chains of 5 x 1 ms every 20 ms. Others: back-to-back 2 ms kernels.
constexpr int kBursts = 12;

// A low process streaming 2 ms kernels beside a high process's bursts, each with `low_extra` /
// `high_extra` in its environment: IssuesInBursts of the low launches in the high bursts.
std::pair<int, int> RunBurstsBesideStream(const std::string& client, Env low_extra,
                                          Env high_extra) {
  Files files;
  SpawnedClient low({client, "stream", files.ready, files.stop, "2000"},
                    Environment("low", std::move(low_extra)));
  SpawnedClient high({client, "burst", files.ready, std::to_string(kBursts), "20000", "5", "1000"},
                     Environment("high", std::move(high_extra)));
  REQUIRE(high.Wait() == 0);
  files.Stop();
  REQUIRE(low.Wait() == 0);
  return IssuesInBursts(Bursts(high.Out()), Issues(low.Out()));
}

TEST_CASE("A low process issues nothing while a high process has work queued or in flight",
          "[coordinator]") {
  const std::string client = ClientPath();
  SECTION("coordinated") {
    Files files;
    SpawnedClient low({client, "stream", files.ready, files.stop, "2000"}, Environment("low"));
    SpawnedClient high(
        {client, "burst", files.ready, std::to_string(kBursts), "20000", "5", "1000"},
        Environment("high"));
    REQUIRE(high.Wait() == 0);
    files.Stop();
    REQUIRE(low.Wait() == 0);
    const auto bursts = Bursts(high.Out());
    const auto issues = Issues(low.Out());
    REQUIRE(bursts.size() == kBursts);
    REQUIRE(issues.size() > 20);
    const auto [most, total] = IssuesInBursts(bursts, issues);
    INFO("low launches inside high bursts: most " << most << ", total " << total);
    // At most the one launch that passed admission just before the high process published: the
    // low dispatcher reads the other processes' levels before each admission, and only the op
    // it was issuing when the level went up can begin its launch afterwards. (Counted from the
    // return of the high chain's first launch, when its level is certainly published: before
    // that, under the sanitizers' slowdown, the low dispatcher can admit several ops while the
    // high client thread is still on its way to publishing.)
    CHECK(most <= 1);
    // The segment is this user's alone.
    struct stat st;
    REQUIRE(stat(SegmentPath(TestDomain()).c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
  }
  SECTION("the same card numbered differently in each process (CUDA_VISIBLE_DEVICES)") {
    // The low process sees two cards and uses its device 1; the high process sees only that
    // card, as its device 0. Segments are named by the card's UUID, so they still meet.
    const auto [most, total] = RunBurstsBesideStream(client, {{"FAKECUDA_DEVICES", "2"}, {"FAKE_CLIENT_DEVICE", "1"}}, {{"FAKECUDA_VISIBLE_DEVICES", "1"}});
    INFO("low launches inside high bursts: most " << most << ", total " << total);
    CHECK(most <= 1);
  }
  SECTION("different cards do not hold each other back") {
    const auto [most, total] = RunBurstsBesideStream(client, {{"FAKECUDA_DEVICES", "2"}, {"FAKE_CLIENT_DEVICE", "1"}}, {{"FAKECUDA_VISIBLE_DEVICES", "0"}});
    INFO("low launches inside high bursts: most " << most << ", total " << total);
    CHECK(total >= kBursts);
  }
  SECTION("not coordinated (GPUPRIO_COORDINATE=0): the same test sees low launches in bursts") {
    const auto [most, total] = RunBurstsBesideStream(client, {{"GPUPRIO_COORDINATE", "0"}}, {{"GPUPRIO_COORDINATE", "0"}});
    INFO("low launches inside high bursts: most " << most << ", total " << total);
    CHECK(total >= kBursts);
  }
}

// "kernels N confined C" from a stream client's output.
std::pair<int, int> ConfinedKernels(const std::string& out) {
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    if (f.size() == 4 && f[0] == "kernels" && f[2] == "confined") {
      return {std::stoi(f[1]), std::stoi(f[3])};
    }
  }
  FAIL("no 'kernels N confined C' line in:\n" << out);
  return {0, 0};
}

TEST_CASE("Under MPS a low process's kernels run in the SM partition while a high process is "
          "active; without MPS nothing is confined",
          "[coordinator]") {
  const std::string client = ClientPath();
  for (const bool mps : {true, false}) {
    INFO((mps ? "MPS" : "time-sliced"));
    const Env extra = {{"FAKECUDA_MPS", mps ? "1" : "0"}, {"GPUPRIO_ISOLATION", "active"}};
    Files files;
    SpawnedClient low({client, "stream", files.ready, files.stop, "2000"},
                      Environment("low", extra));
    SpawnedClient high(
        {client, "burst", files.ready, std::to_string(kBursts), "20000", "5", "1000"},
        Environment("high", extra));
    REQUIRE(high.Wait() == 0);
    files.Stop();
    REQUIRE(low.Wait() == 0);
    const auto [low_kernels, low_confined] = ConfinedKernels(low.Out());
    const auto [high_kernels, high_confined] = ConfinedKernels(high.Out());
    INFO("low: " << low_kernels << " kernels, " << low_confined << " confined; high: "
                 << high_kernels << " kernels, " << high_confined << " confined");
    CHECK(high_kernels == kBursts * 5);
    CHECK(high_confined == 0);  // the most important work keeps the whole GPU
    REQUIRE(low_kernels > 20);
    if (mps) {
      // The bursts span ~240 ms and keep the low level confined until 0.5 s after the last.
      CHECK(low_confined >= 10);
    } else {
      CHECK(low_confined == 0);  // processes time-slice: a partition would only idle SMs
    }
  }
}

// A `coord_client hold` line: cpu_ns, wall_ns, start_ns, end_ns.
struct HoldReport {
  int64_t cpu_ns = 0, wall_ns = 0, start_ns = 0, end_ns = 0;
};
HoldReport ParseHold(const std::string& out) {
  HoldReport r;
  long long cpu, wall, start, end;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (std::sscanf(std::string(line).c_str(), "cpu_ns %lld wall_ns %lld start_ns %lld end_ns %lld",
                    &cpu, &wall, &start, &end) == 4) {
      return {cpu, wall, start, end};
    }
  }
  FAIL("no hold report in:\n" << out);
  return r;
}

// A high process's 1.5 s kernel and a low process's short kernel (no hold bound), each process
// with `high_extra` / `low_extra` in its environment.
// What a process may spend per second while it holds or is held, for the bound below: TSan makes
// every round of the dispatcher and every call of the client's own wait (a query every 2 ms)
// several times dearer. The polling this replaced cost 255 ms a second natively and all of a
// core under TSan.
#if defined(__SANITIZE_THREAD__)
constexpr double kHoldCpuBoundMsPerS = 400;
#else
constexpr double kHoldCpuBoundMsPerS = 100;
#endif

// The same within one process, whose one dispatcher both holds and is held: the client's own
// query every 2 ms and the watcher's wake-up every 10 ms cost about 10 ms a second here.
#if defined(__SANITIZE_THREAD__)
constexpr double kThreadHoldCpuBoundMsPerS = 200;
#else
constexpr double kThreadHoldCpuBoundMsPerS = 40;
#endif

std::pair<HoldReport, HoldReport> RunHold(Env high_extra, Env low_extra) {
  const std::string client = ClientPath();
  Files files;
  SpawnedClient high({client, "hold", "high", files.ready, "1500000"},
                     Environment("high", std::move(high_extra)));
  low_extra.push_back({"GPUPRIO_MAX_HOLD_MS", "0"});
  SpawnedClient low({client, "hold", "low", files.ready, "0"},
                    Environment("low", std::move(low_extra)));
  REQUIRE(high.Wait() == 0);
  REQUIRE(low.Wait() == 0);
  return {ParseHold(high.Out()), ParseHold(low.Out())};
}

TEST_CASE("A process held back by another sleeps until that process's level drops",
          "[coordinator]") {
  // Polling the other process's level, as the held dispatcher once did every 50 us, cost a
  // quarter of a core (255 ms a second here); it now sleeps on the segment's level-drop word and
  // wakes when the high process withdraws its level (or every 10 ms at most). The high process
  // polled its kernel's end as often (86 ms a second here, 300 on an H100); the watcher now
  // sleeps in the driver until the kernel ends. Bounds loose for a loaded machine and the
  // sanitizers (the GPU figures are in docs/performance.md).
  auto check_held = [](const HoldReport& h, const HoldReport& l) {
    const double low_cpu_ms_per_s = static_cast<double>(l.cpu_ns) / 1e6 / (l.wall_ns / 1e9);
    const double high_cpu_ms_per_s = static_cast<double>(h.cpu_ns) / 1e6 / (h.wall_ns / 1e9);
    INFO("low: waited " << l.wall_ns / 1e9 << " s, " << low_cpu_ms_per_s
         << " ms CPU per s; high: " << high_cpu_ms_per_s << " ms CPU per s; low issued "
         << (l.start_ns - h.end_ns) / 1000 << " us after the high kernel ended");
    // Held throughout: its kernel ran only once the high one had ended.
    CHECK(l.start_ns >= h.end_ns);
    CHECK(low_cpu_ms_per_s < kHoldCpuBoundMsPerS);
    CHECK(high_cpu_ms_per_s < kHoldCpuBoundMsPerS);
    // Noticed: a bound a loaded machine cannot break.
    CHECK(l.start_ns - h.end_ns < 1'000'000'000);
  };
  SECTION("one card") {
    const auto [h, l] = RunHold({}, {});
    check_held(h, l);
  }
  SECTION("the second of two cards, numbered differently in each process") {
    const auto [h, l] = RunHold({{"FAKECUDA_VISIBLE_DEVICES", "1"}},
                                {{"FAKECUDA_DEVICES", "2"}, {"FAKE_CLIENT_DEVICE", "1"}});
    check_held(h, l);
  }
  SECTION("different cards: nothing held, nobody waits") {
    const auto [h, l] = RunHold({{"FAKECUDA_VISIBLE_DEVICES", "0"}},
                                {{"FAKECUDA_DEVICES", "2"}, {"FAKE_CLIENT_DEVICE", "1"}});
    INFO("low issued " << (h.end_ns - l.start_ns) / 1000 << " us before the high kernel ended");
    CHECK(l.start_ns < h.end_ns);
  }
}

TEST_CASE("A thread held back by another thread's work in flight sleeps until that work ends",
          "[coordinator]") {
  // Within one process the dispatcher polled the end of the high thread's kernel every 20-200 us
  // for as long as it held the low thread's work (68 ms of CPU a second here); after its first
  // 5 ms the wait is now the watcher's, asleep in the driver. Without isolation, so that
  // the low kernel is held rather than confined. Bounds as above: loose for a loaded machine.
  Env extra = {{"GPUPRIO_ISOLATION", "off"}, {"GPUPRIO_MAX_HOLD_MS", "0"}};
  auto env = ClientEnv("schedule", std::move(extra));
  REQUIRE(env.ok());
  SpawnedClient both({ClientPath(), "hold-threads", "1500000"}, *env);
  REQUIRE(both.Wait() == 0);
  const HoldReport h = ParseHold(both.Out());
  const double cpu_ms_per_s = static_cast<double>(h.cpu_ns) / 1e6 / (h.wall_ns / 1e9);
  INFO("held " << h.wall_ns / 1e9 << " s, " << cpu_ms_per_s << " ms CPU per s; low issued "
               << (h.start_ns - h.end_ns) / 1000 << " us after the high kernel ended");
  CHECK(h.wall_ns > 1'000'000'000);
  CHECK(h.start_ns >= h.end_ns);
  CHECK(cpu_ms_per_s < kThreadHoldCpuBoundMsPerS);
  CHECK(h.start_ns - h.end_ns < 1'000'000'000);
}

TEST_CASE("Three processes: normal and low both wait for high", "[coordinator]") {
  const std::string client = ClientPath();
  Files files;
  Files unused;
  SpawnedClient low({client, "stream", unused.ready, files.stop, "2000"}, Environment("low"));
  SpawnedClient normal({client, "stream", files.ready, files.stop, "2000"}, Environment("normal"));
  SpawnedClient high({client, "burst", files.ready, std::to_string(kBursts), "20000", "5", "1000"},
                     Environment("high"));
  REQUIRE(high.Wait() == 0);
  files.Stop();
  REQUIRE(low.Wait() == 0);
  REQUIRE(normal.Wait() == 0);
  const auto bursts = Bursts(high.Out());
  REQUIRE(bursts.size() == kBursts);
  const auto low_issues = Issues(low.Out());
  const auto normal_issues = Issues(normal.Out());
  REQUIRE(low_issues.size() > 5);
  REQUIRE(normal_issues.size() > 5);
  CHECK(IssuesInBursts(bursts, low_issues).first <= 1);
  CHECK(IssuesInBursts(bursts, normal_issues).first <= 1);
}

TEST_CASE("SIGKILL of either side at random points: no hang, the slot reclaimed, low resumes",
          "[coordinator]") {
  const std::string client = ClientPath();
  std::mt19937 random(20261123);
  constexpr int kRounds = 200;
  int resumed_checked = 0;
  for (int round = 0; round < kRounds; ++round) {
    const bool kill_high = round % 2 == 0;
    Files files;
    // High: chains back to back (5 x 1 ms every 5 ms): almost always active when killed.
    SpawnedClient low({client, "stream", files.ready, files.stop, "1000"}, Environment("low"));
    SpawnedClient high({client, "burst", files.ready, "100", "5000", "5", "1000"},
                       Environment("high"));
    for (int i = 0; i < 3000 && access(files.ready.c_str(), F_OK) != 0; ++i) usleep(1000);
    REQUIRE(access(files.ready.c_str(), F_OK) == 0);
    usleep(std::uniform_int_distribution<int>(0, 40'000)(random));
    if (kill_high) {
      const int64_t killed_at = SteadyNowNs();
      high.Kill();
      CHECK(high.Wait() == 128 + SIGKILL);
      // Low resumes: a stream sync of its returns after the kill (the dead process's level may
      // have been active). No bound tighter than the client's own 60 s: how soon it resumes
      // depends on the machine's load, and is a benchmark's to measure.
      const std::string progress = files.ready + ".progress";
      int64_t resumed_at = 0;
      for (int i = 0; i < 60'000 && resumed_at <= killed_at; ++i) {
        const std::string text = ReadFile(progress);
        if (!text.empty()) resumed_at = std::stoll(text);
        if (resumed_at <= killed_at) usleep(1000);
      }
      files.Stop();
      REQUIRE(low.Wait() == 0);
      INFO("round " << round);
      CHECK(resumed_at > killed_at);
      // The first low launch after the kill exists.
      const auto issues = Issues(low.Out());
      CHECK(std::upper_bound(issues.begin(), issues.end(), killed_at) != issues.end());
      ++resumed_checked;
    } else {
      low.Kill();
      CHECK(low.Wait() == 128 + SIGKILL);
      REQUIRE(high.Wait() == 0);  // high is never held by the dead low process
    }
    // Both gone: a new process finds no live slot (the killed one's is reclaimed on attach).
    auto probe = gpuprio::coordinator::GpuCoordinator::Attach(
        TestSegmentOptions(), kFakeUuid, 0);
    REQUIRE(probe.ok());
    if ((*probe)->PeersPresent()) {
      for (uint32_t i = 0; i < gpuprio::coordinator::kSlotCount; ++i) {
        const auto& slot = (*probe)->segment().slot(i);
        if (i == (*probe)->slot_index() || (slot.state_word.load() & 0xff) == 0) continue;
        UNSCOPED_INFO("live slot " << i << " word " << slot.state_word.load() << " pid "
                                   << slot.pid << " (low " << low.pid() << ", high " << high.pid()
                                   << ") exists " << (kill(slot.pid, 0) == 0));
      }
    }
    CHECK_FALSE((*probe)->PeersPresent());
  }
  CHECK(resumed_checked == kRounds / 2);
}

TEST_CASE("A garbage segment: one clear message, and the process runs with local scheduling",
          "[coordinator]") {
  const std::string domain = absl::StrCat(TestDomain(), "-garbage");
  const std::string path = SegmentPath(domain);
  mkdir(absl::StrCat(TestShmDir(), "/", gpuprio::coordinator::SegmentDirectoryName(geteuid(), -1))
            .c_str(),
        0700);
  {
    std::ofstream garbage(path, std::ios::binary);
    std::mt19937 random(3);
    for (size_t i = 0; i < gpuprio::coordinator::kSegmentBytes; ++i) {
      garbage.put(static_cast<char>(random()));
    }
  }
  chmod(path.c_str(), 0600);
  Files files;
  files.Stop();  // a few launches, then stop
  SpawnedClient low({ClientPath(), "stream", files.ready, files.stop, "100"},
                    Environment("low", {{"GPUPRIO_DOMAIN", domain}}));
  CHECK(low.Wait() == 0);
  const std::string err = low.Err();
  INFO(err);
  CHECK(absl::StrContains(err, "no coordination with other processes on GPU 0"));
  CHECK(absl::StrContains(err, path));
  CHECK(absl::StrContains(err, "bad magic"));
  size_t count = 0;
  for (size_t at = err.find("no coordination"); at != std::string::npos;
       at = err.find("no coordination", at + 1)) {
    ++count;
  }
  CHECK(count == 1);
  CHECK(Issues(low.Out()).size() >= 8);
  unlink(path.c_str());
}

}  // namespace
}  // namespace gpuprio_test
