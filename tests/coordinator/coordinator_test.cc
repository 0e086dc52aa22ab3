// scheduler/coordinator without a GPU: the segment's directory and file (creation, modes, names
// another user took first), their checks (owner, size, magic, version, GPU), slots and what peers
// see of each other, liveness by slot locks (exit, zombie, exec, fork, garbage slots), heartbeats
// judged on the reader's clock, submit times from other clocks, a segment truncated under a
// process, a full segment.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "catch2/catch.hpp"
#include "scheduler/base/clock.h"
#include "scheduler/coordinator/device_segment.h"
#include "scheduler/coordinator/gpu_coordinator.h"
#include "scheduler/coordinator/process_identity.h"
#include "scheduler/coordinator/segment_directory.h"
#include "scheduler/coordinator/segment_layout.h"
#include "scheduler/coordinator/segment_name.h"
#include "scheduler/coordinator/segment_registry.h"
#include "tests/test_directory.h"

namespace gpuprio::coordinator {
namespace {

constexpr uint8_t kUuid[16] = {0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
constexpr uint64_t kWindow = 500'000'000;
constexpr int kFloor = 0;
// A busy window (request gap) no test outlasts.
constexpr uint64_t kHour = 3600'000'000'000;

// A private GPUPRIO_SHM_DIR per test case (under the test's temporary directory), removed with
// everything in it afterwards: nothing is left in /dev/shm or /tmp.
class TestSegment {
 public:
  TestSegment() : dir_("coordinator") {
    options_.shm_dir = dir_.path();
    options_.domain = "unit";
  }
  const SegmentOptions& options() const { return options_; }
  SegmentOptions& options() { return options_; }
  std::string Directory() const {
    return absl::StrCat(options_.shm_dir, "/", SegmentDirectoryName(geteuid(), -1));
  }
  std::string Path() const {
    return absl::StrCat(Directory(), "/", SegmentFileName(options_.domain, kUuid));
  }

  std::unique_ptr<GpuCoordinator> Attach(int default_priority = 0) const {
    auto c = GpuCoordinator::Attach(options_, kUuid, default_priority);
    INFO(c.status().ToString());
    REQUIRE(c.ok());
    return *std::move(c);
  }
  absl::Status AttachStatus() const {
    return GpuCoordinator::Attach(options_, kUuid, 0).status();
  }
  // Writes `bytes` as the whole segment file (mode 0600 unless given), in its directory.
  void WriteFile(const std::string& bytes, mode_t mode = 0600) const {
    mkdir(Directory().c_str(), 0700);
    unlink(Path().c_str());
    const int fd = open(Path().c_str(), O_RDWR | O_CREAT | O_EXCL, mode);
    REQUIRE(fd >= 0);
    REQUIRE(fchmod(fd, mode) == 0);
    REQUIRE(write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
    close(fd);
  }
  // The segment a valid attach made, as bytes.
  std::string ValidBytes() const {
    { auto c = Attach(); }
    const int fd = open(Path().c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    std::string bytes(kSegmentBytes, '\0');
    REQUIRE(read(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
    close(fd);
    return bytes;
  }

 private:
  gpuprio_test::ScopedDirectory dir_;
  SegmentOptions options_;
};

// Kills and reaps the child when it goes, whatever ends the test (a failed REQUIRE included).
class KilledAtEnd {
 public:
  explicit KilledAtEnd(pid_t pid) : pid_(pid) {}
  ~KilledAtEnd() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  KilledAtEnd(const KilledAtEnd&) = delete;
  KilledAtEnd& operator=(const KilledAtEnd&) = delete;

 private:
  pid_t pid_;
};

// Blocks until `pid` has exited, without reaping it (it stays a zombie).
void WaitUntilZombie(pid_t pid) {
  siginfo_t info{};
  REQUIRE(waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) == 0);
}

// A pipe a child writes one byte to once it is ready; the parent waits for it.
struct ReadyPipe {
  int fds[2];
  ReadyPipe() { REQUIRE(pipe(fds) == 0); }
  ~ReadyPipe() {
    close(fds[0]);
    close(fds[1]);
  }
  void Signal() const {
    const char c = 1;
    (void)!write(fds[1], &c, 1);
  }
  void Wait() const {
    char c;
    REQUIRE(read(fds[0], &c, 1) == 1);
  }
};

TEST_CASE("The segment is created with mode 0600 in a 0700 directory, this user's, at its full size",
          "[coordinator]") {
  TestSegment t;
  const mode_t old_umask = umask(0);  // the modes must not depend on the umask
  auto c = t.Attach();
  umask(old_umask);
  struct stat st;
  REQUIRE(stat(t.Directory().c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0700);
  CHECK(st.st_uid == geteuid());
  REQUIRE(stat(t.Path().c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  CHECK(st.st_uid == geteuid());
  CHECK(static_cast<size_t>(st.st_size) == kSegmentBytes);
  CHECK(c->segment().created());
  CHECK(c->segment().path() == t.Path());
  CHECK(absl::EndsWith(t.Path(), "/gpuprio-v2-u" + std::to_string(geteuid()) +
                                     "/unit-deadbeef0102030405060708090a0b0c"));
  CHECK(UuidString(kUuid) == "GPU-deadbeef-0102-0304-0506-0708090a0b0c");
}

TEST_CASE("Peers see each other's active level and recent submissions", "[coordinator]") {
  TestSegment t;
  auto high = t.Attach(1);
  auto low = t.Attach(-1);
  CHECK(high->slot_index() != low->slot_index());
  const int64_t now = base::SteadyNowNs();
  CHECK(low->Peers(now, kWindow, kFloor).highest_active == kNoPriority);
  CHECK(low->PeersAllowDirect(0, kWindow, kFloor));

  CHECK(high->NoteSubmit(1, now));  // a burst begins
  CHECK_FALSE(high->NoteSubmit(1, now));
  PeerState seen = low->Peers(now, kWindow, kFloor);
  CHECK(seen.highest_active == 1);
  CHECK(seen.ceiling == 1);
  CHECK_FALSE(low->PeersAllowDirect(0, kWindow, kFloor));
  CHECK(low->PeersAllowDirect(1, kWindow, kFloor));
  // A process does not see itself.
  CHECK(high->Peers(now, kWindow, kFloor).highest_active == kNoPriority);

  // Withdrawn: no longer active, but within the window the level still budgets lower ones.
  high->SetActive(kNoPriority);
  seen = low->Peers(now, kWindow, kFloor);
  CHECK(seen.highest_active == kNoPriority);
  CHECK(seen.ceiling == 1);
  // Submitted longer ago than the window (submit times are on the real-time clock): nothing.
  std::atomic<int64_t>& stamp = high->segment()
                                    .slot(high->slot_index())
                                    .level_last_submit_unix_ns[1 - kLowestPriority];
  stamp.store(base::SharedCoarseNowNs() - 2 * static_cast<int64_t>(kWindow));
  CHECK(low->Peers(now, kWindow, kFloor).ceiling == kNoPriority);

  // Released: not a peer any more.
  high->NoteSubmit(5, now);
  high->Release();
  low->Maintain(now, 0);
  CHECK(low->Peers(now, kWindow, kFloor).highest_active == kNoPriority);
  CHECK_FALSE(low->PeersPresent());
}

TEST_CASE("A level that dropped less than the busy window ago still counts as busy",
          "[coordinator]") {
  // The request gap (SchedulerOptions::request_gap_ns): a level whose work ended moments ago is
  // between two steps of a request. The drop is stamped at full resolution, before the level falls.
  TestSegment t;
  auto high = t.Attach(1);
  auto low = t.Attach(-1);
  const int64_t now = base::SteadyNowNs();
  CHECK(low->Peers(now, kWindow, kFloor, kHour).busy == kNoPriority);  // never active
  high->NoteSubmit(2, now);
  CHECK(low->Peers(now, kWindow, kFloor, kHour).busy == 2);  // active
  high->SetActive(1);
  PeerState seen = low->Peers(now, kWindow, kFloor, kHour);
  CHECK(seen.highest_active == 1);
  CHECK(seen.busy == 2);                              // dropped from 2 within the window
  CHECK(low->Peers(now, kWindow, kFloor).busy == 1);  // no window: busy is the active level
  high->SetActive(kNoPriority);
  seen = low->Peers(now, kWindow, kFloor, kHour);
  CHECK(seen.highest_active == kNoPriority);
  CHECK(seen.busy == 1);  // the last drop was from 1
  std::atomic<uint64_t>& drop = high->segment().slot(high->slot_index()).last_drop;
  CHECK(LevelStampPriority(drop.load()) == 1);
  CHECK(std::abs(LevelStampUnixUs(drop.load()) - base::SharedNowNs() / 1000) < 60'000'000);
  SECTION("longer ago than the window: not busy") {
    drop.store(LevelStampWord(base::SharedNowNs() - 2'000'000, 1));
    CHECK(low->Peers(now, kWindow, kFloor, 1'000'000).busy == kNoPriority);
    CHECK(low->Peers(now, kWindow, kFloor, 3'000'000).busy == 1);
  }
  SECTION("a drop time from the future or garbage: not busy") {
    drop.store(LevelStampWord(base::SharedNowNs() + 5'000'000'000, 1));
    CHECK(low->Peers(now, kWindow, kFloor, kHour).busy == kNoPriority);
    drop.store(~uint64_t{0});  // level key 255: no valid level
    CHECK(low->Peers(now, kWindow, kFloor, kHour).busy == kNoPriority);
  }
  SECTION("a process does not see its own drop") {
    CHECK(high->Peers(now, kWindow, kFloor, kHour).busy == kNoPriority);
  }
}

TEST_CASE("A level stamp keeps the highest level noted within its window", "[coordinator]") {
  std::atomic<uint64_t> word{0};
  constexpr int64_t kT = 1'700'000'000'000'000'000;  // ns
  constexpr int64_t kKeep = 1'000'000;
  auto level = [&] { return LevelStampPriority(word.load()); };
  auto at_us = [&] { return LevelStampUnixUs(word.load()); };
  NoteLevelStamp(word, 2, kT, kKeep, 0);
  CHECK(level() == 2);
  NoteLevelStamp(word, 1, kT + 500'000, kKeep, 0);  // lower, within the window: kept out
  CHECK(level() == 2);
  CHECK(at_us() == kT / 1000);
  NoteLevelStamp(word, 1, kT + 2'000'000, kKeep, 0);  // lower, after the window: replaces
  CHECK(level() == 1);
  CHECK(at_us() == kT / 1000 + 2'000);
  NoteLevelStamp(word, 1, kT + 2'500'000, kKeep, /*refresh_ns=*/1'000'000);  // its own, too soon
  CHECK(at_us() == kT / 1000 + 2'000);
  NoteLevelStamp(word, 1, kT + 3'500'000, kKeep, 1'000'000);
  CHECK(at_us() == kT / 1000 + 3'500);
  NoteLevelStamp(word, 3, kT + 3'500'001, kKeep, 1'000'000);  // a higher one at once
  CHECK(level() == 3);
  word.store(~uint64_t{0});  // no level in the key, a time far ahead: replaced
  NoteLevelStamp(word, 0, kT, kKeep, 1'000'000);
  CHECK(level() == 0);
  word.store(LevelStampWord(kT + 10'000'000'000, 5));  // a higher level from the future: replaced
  NoteLevelStamp(word, 0, kT, kKeep, 1'000'000);
  CHECK(level() == 0);
  // Nothing kept (the request gap off): a lower level replaces a higher one even within the
  // same microsecond, as two drops in a row on a fast machine are.
  NoteLevelStamp(word, 2, kT + 20'000'000, 0, 0);
  NoteLevelStamp(word, 1, kT + 20'000'100, 0, 0);
  CHECK(level() == 1);
  NoteLevelStamp(word, 1, kT + 20'000'200, 0, 0);  // its own, refresh 0: rewritten
  CHECK(level() == 1);
}

TEST_CASE("A lower level's drop does not hide a higher one's within the request gap",
          "[coordinator]") {
  TestSegment t;
  auto high = t.Attach(1);
  auto low = t.Attach(-1);
  const int64_t now = base::SteadyNowNs();
  high->NoteSubmit(3, now);
  CHECK(high->SetActive(2, kHour) == 3);            // level 3's work ended: 3 stamped
  CHECK(high->SetActive(kNoPriority, kHour) == 2);  // then level 2's: 3's stamp is kept
  CHECK(low->Peers(now, kWindow, kFloor, kHour).busy == 3);
  CHECK(high->SetActive(kNoPriority, kHour) == kNoPriority);  // nothing to drop: no wake, no stamp
}

TEST_CASE("A level's whole-device work is seen by the other processes within the window",
          "[coordinator]") {
  TestSegment t;
  auto high = t.Attach(1);
  auto low = t.Attach(-1);
  const int64_t now = base::SteadyNowNs();
  CHECK(low->Peers(now, kWindow, kFloor).whole_device == kNoPriority);
  high->NoteWholeDevice(2, kWindow);
  high->NoteWholeDevice(1, kWindow);  // a lower level within the window does not replace it
  CHECK(low->Peers(now, kWindow, kFloor).whole_device == 2);
  CHECK(high->Peers(now, kWindow, kFloor).whole_device == kNoPriority);  // not its own
  std::atomic<uint64_t>& stamp = high->segment().slot(high->slot_index()).last_whole_device;
  SECTION("older than the window: gone, and a lower level's note replaces it") {
    stamp.store(LevelStampWord(base::SharedCoarseNowNs() - 2 * static_cast<int64_t>(kWindow), 2));
    CHECK(low->Peers(now, kWindow, kFloor).whole_device == kNoPriority);
    high->NoteWholeDevice(1, kWindow);
    CHECK(low->Peers(now, kWindow, kFloor).whole_device == 1);
  }
  SECTION("from the future, or no valid level: ignored") {
    stamp.store(LevelStampWord(base::SharedCoarseNowNs() + 5000'000'000'000, 2));
    CHECK(low->Peers(now, kWindow, kFloor).whole_device == kNoPriority);
    stamp.store(~uint64_t{0});
    CHECK(low->Peers(now, kWindow, kFloor).whole_device == kNoPriority);
  }
  SECTION("a released process's note is not seen") {
    high->Release();
    low->Maintain(now, 0);
    CHECK(low->Peers(now, kWindow, kFloor).whole_device == kNoPriority);
  }
}

TEST_CASE("A submit time from another clock or the future keeps no ceiling up", "[coordinator]") {
  // Processes in other time namespaces (containers) have other CLOCK_MONOTONIC values; submit
  // times are real-time, which no namespace shifts, and one far in the future is garbage.
  TestSegment t;
  auto high = t.Attach(1);
  auto low = t.Attach(-1);
  high->NoteSubmit(1, 0);
  high->SetActive(kNoPriority);
  const int64_t now = base::SteadyNowNs();
  std::atomic<int64_t>& stamp = high->segment()
                                    .slot(high->slot_index())
                                    .level_last_submit_unix_ns[1 - kLowestPriority];
  const int64_t shared_now = base::SharedCoarseNowNs();
  SECTION("a moment ago") {
    stamp.store(shared_now - 100'000'000);
    CHECK(low->Peers(now, kWindow, kFloor).ceiling == 1);
  }
  SECTION("5000 s ahead (a monotonic clock of another namespace would be)") {
    stamp.store(shared_now + 5000'000'000'000);
    CHECK(low->Peers(now, kWindow, kFloor).ceiling == kNoPriority);
  }
  SECTION("the end of time") {
    stamp.store(INT64_MAX);
    CHECK(low->Peers(now, kWindow, kFloor).ceiling == kNoPriority);
  }
  SECTION("500 s ago") {
    stamp.store(shared_now - 500'000'000'000);
    CHECK(low->Peers(now, kWindow, kFloor).ceiling == kNoPriority);
  }
}

TEST_CASE("Statistics are published in the slot", "[coordinator]") {
  TestSegment t;
  auto c = t.Attach(-1);
  c->CountDispatched(-1, 500, false);       // bucket 0
  c->CountDispatched(-1, 3'000'000, true);  // 3 ms, confined
  c->CountDirect(-1);
  c->PublishQueue(7, 70'000);
  c->PublishInFlight(2, 20'000);
  c->SetHeld(true, 1'000);
  c->SetHeld(false, 5'000);
  const ProcessSlot& s = c->segment().slot(c->slot_index());
  CHECK(s.ops_dispatched.load() == 2);
  CHECK(s.ops_direct.load() == 1);
  CHECK(s.delay_histogram[0].load() == 1);
  CHECK(s.delay_histogram[DelayBucket(3'000'000)].load() == 1);
  CHECK(s.queued_ops.load() == 7);
  CHECK(s.queued_estimated_ns.load() == 70'000);
  CHECK(s.in_flight_ops.load() == 2);
  CHECK(s.held.load() == 0);
  CHECK(s.held_ns_total.load() == 4'000);
  CHECK(s.default_priority.load() == -1);
  CHECK(s.pid == static_cast<uint32_t>(getpid()));
  CHECK(std::string(s.command).size() > 0);
  const uint64_t beat = s.heartbeat.load();
  c->Maintain(base::SteadyNowNs(), 0);
  CHECK(s.heartbeat.load() == beat + 1);
  const LevelRow& row = s.level_rows[0];
  CHECK(row.level_key.load() == LevelKey(-1));
  CHECK(row.ops_dispatched.load() == 2);
  CHECK(row.ops_direct.load() == 1);
  CHECK(row.ops_confined.load() == 1);
  CHECK(row.delay_histogram[0].load() == 1);
  CHECK(row.delay_histogram[DelayBucket(3'000'000)].load() == 1);
  CHECK(s.level_rows[1].level_key.load() == 0);
}

TEST_CASE("Each level counts in a row of its own until the rows run out", "[coordinator]") {
  TestSegment t;
  auto c = t.Attach();
  // One more level than there are rows: the last shares other_levels. -100 and 100 are the
  // ends of the range (keys 1 and 201).
  const int levels[kLevelRows + 1] = {100, -100, 0, 5};
  for (int i = 0; i <= kLevelRows; ++i) {
    for (int n = 0; n <= i; ++n) c->CountDispatched(levels[i], 1'000'000, false);
    c->CountDirect(levels[i]);
  }
  c->CountDirect(100);  // its row again, not a new one
  const ProcessSlot& s = c->segment().slot(c->slot_index());
  for (int i = 0; i < kLevelRows; ++i) {
    INFO("row " << i);
    CHECK(s.level_rows[i].level_key.load() == LevelKey(levels[i]));
    CHECK(s.level_rows[i].ops_dispatched.load() == static_cast<uint64_t>(i + 1));
    CHECK(s.level_rows[i].delay_histogram[DelayBucket(1'000'000)].load() ==
          static_cast<uint64_t>(i + 1));
  }
  CHECK(s.level_rows[0].ops_direct.load() == 2);
  CHECK(s.other_levels.ops_dispatched.load() == kLevelRows + 1);
  CHECK(s.other_levels.ops_direct.load() == 1);
  CHECK(s.ops_dispatched.load() == 1 + 2 + 3 + 4);
  CHECK(s.ops_direct.load() == kLevelRows + 2);
}

TEST_CASE("Threads that count new levels at once each get one row per level", "[coordinator]") {
  TestSegment t;
  auto c = t.Attach();
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&c, i] {
      for (int n = 0; n < 1000; ++n) c->CountDirect(i % 2 == 0 ? 10 : 20);
    });
  }
  for (std::thread& th : threads) th.join();
  const ProcessSlot& s = c->segment().slot(c->slot_index());
  const uint32_t a = s.level_rows[0].level_key.load(), b = s.level_rows[1].level_key.load();
  CHECK(((a == LevelKey(10) && b == LevelKey(20)) || (a == LevelKey(20) && b == LevelKey(10))));
  CHECK(s.level_rows[0].ops_direct.load() == 2000);
  CHECK(s.level_rows[1].ops_direct.load() == 2000);
  CHECK(s.level_rows[2].level_key.load() == 0);
}

TEST_CASE("Isolation state is published; a released coordinator writes nothing", "[coordinator]") {
  TestSegment t;
  auto c = t.Attach();
  const ProcessSlot& s = c->segment().slot(c->slot_index());
  c->PublishIsolation(16, 132, 3, 450'000);
  CHECK(s.isolation_reserved_sms.load() == 16);
  CHECK(s.isolation_device_sms.load() == 132);
  CHECK(s.confined_in_flight_ops.load() == 3);
  CHECK(s.confined_in_flight_estimated_ns.load() == 450'000);
  c->Release();
  // The slot may be another process's now: nothing more is written into it.
  c->PublishIsolation(0, 0, 0, 0);
  c->CountDirect(1);
  c->CountDispatched(1, 1'000, true);
  c->PublishQueue(9, 9);
  CHECK(s.isolation_reserved_sms.load() == 16);
  CHECK(s.ops_direct.load() == 0);
  CHECK(s.ops_dispatched.load() == 0);
  CHECK(s.queued_ops.load() == 0);
  CHECK(s.level_rows[0].level_key.load() == 0);
}

TEST_CASE("A claimed slot starts with empty level rows and isolation fields", "[coordinator]") {
  TestSegment t;
  uint32_t index = 0;
  {
    auto first = t.Attach();
    first->CountDispatched(7, 1'000, true);
    first->PublishIsolation(16, 132, 1, 1);
    index = first->slot_index();
  }
  auto second = t.Attach();
  REQUIRE(second->slot_index() == index);
  const ProcessSlot& s = second->segment().slot(index);
  CHECK(s.level_rows[0].level_key.load() == 0);
  CHECK(s.level_rows[0].ops_dispatched.load() == 0);
  CHECK(s.isolation_reserved_sms.load() == 0);
  CHECK(s.confined_in_flight_ops.load() == 0);
}

TEST_CASE("Delay buckets are half octaves of microseconds", "[coordinator]") {
  CHECK(DelayBucket(0) == 0);
  CHECK(DelayBucket(999) == 0);
  CHECK(DelayBucket(1'000) == 1);
  CHECK(DelayBucket(2'000) == 3);
  CHECK(DelayBucket(2'999) == 3);   // 2 us: [2, 2.83)
  CHECK(DelayBucket(3'000) == 4);   // [2.83, 4)
  CHECK(DelayBucket(4'000) == 5);
  CHECK(DelayBucket(uint64_t{1} << 62) == kDelayBuckets - 1);
}

TEST_CASE("Domains are checked", "[coordinator]") {
  CHECK(ValidDomain("default"));
  CHECK(ValidDomain("team-a_1.x"));
  CHECK_FALSE(ValidDomain(""));
  CHECK_FALSE(ValidDomain("a/b"));
  CHECK_FALSE(ValidDomain(".."));
  CHECK_FALSE(ValidDomain(std::string(65, 'a')));
  TestSegment t;
  t.options().domain = "../etc";
  CHECK(t.AttachStatus().code() == absl::StatusCode::kInvalidArgument);
}

// A child that attaches, publishes a high level and exits without releasing its slot.
pid_t ChildThatDiesActive(const TestSegment& t) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    auto c = GpuCoordinator::Attach(t.options(), kUuid, 50);
    if (!c.ok()) _exit(2);
    (*c)->NoteSubmit(50, base::SteadyNowNs());
    _exit(0);  // no destructor, no release: as if killed
  }
  return pid;
}

TEST_CASE("The slot of a process that died is reclaimed, zombie or reaped", "[coordinator]") {
  TestSegment t;
  auto survivor = t.Attach();
  SECTION("reaped") {
    const pid_t pid = ChildThatDiesActive(t);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    REQUIRE(WEXITSTATUS(status) == 0);
  }
  SECTION("zombie (not reaped yet)") {
    const pid_t pid = ChildThatDiesActive(t);
    WaitUntilZombie(pid);
    survivor->Maintain(base::SteadyNowNs(), 0);
    CHECK(survivor->Peers(base::SteadyNowNs(), kWindow, kFloor).highest_active == kNoPriority);
    waitpid(pid, nullptr, 0);
  }
  const int64_t now = base::SteadyNowNs() + GpuCoordinator::kLivenessCheckNs;
  survivor->Maintain(now, 0);
  CHECK(survivor->Peers(now, kWindow, kFloor).highest_active == kNoPriority);
  CHECK_FALSE(survivor->PeersPresent());
  // The slot is free again: 63 more processes fit.
  std::vector<std::unique_ptr<GpuCoordinator>> others;
  for (uint32_t i = 1; i < kSlotCount; ++i) others.push_back(t.Attach());
  CHECK(t.AttachStatus().code() == absl::StatusCode::kResourceExhausted);
}

// A child that attaches, publishes `priority` active (as with a kernel in flight), signals
// `attached`, then runs `then` while still attached (`then` must not return normally).
template <typename Then>
pid_t ForkActiveChild(const TestSegment& t, int priority, const ReadyPipe& attached, Then then) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    auto c = GpuCoordinator::Attach(t.options(), kUuid, priority);
    if (!c.ok()) _exit(2);
    (*c)->NoteSubmit(priority, base::SteadyNowNs());
    attached.Signal();
    then();
    _exit(3);
  }
  return pid;
}

TEST_CASE("exec() releases the slot at once: no ghost of the old image", "[coordinator]") {
  TestSegment t;
  auto survivor = t.Attach();
  ReadyPipe attached;
  const pid_t pid = ForkActiveChild(t, 50, attached, [] {
    // Same pid, same start time, same namespace: only the slot lock tells the new image apart.
    execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
  });
  const KilledAtEnd stop_child(pid);
  attached.Wait();
  // Alive and exec'ing, or exec'd: the old image's slot goes as the exec completes (the kernel
  // closes its descriptor and unmaps the segment at the end of the exec), while the process
  // lives on with the same pid and start time.
  int64_t now = base::SteadyNowNs();
  for (int i = 0; i < 1000 && survivor->Peers(now, kWindow, kFloor).highest_active == 50; ++i) {
    usleep(10'000);
    now = base::SteadyNowNs() + (i + 1) * GpuCoordinator::kLivenessCheckNs;
    survivor->Maintain(now, 0);
  }
  CHECK(survivor->Peers(now, kWindow, kFloor).highest_active == kNoPriority);
  CHECK_FALSE(survivor->PeersPresent());
  CHECK(kill(pid, 0) == 0);  // still running (sleep)
  // 64 attaches after as many execs: every slot is free again.
  std::vector<std::unique_ptr<GpuCoordinator>> others;
  for (uint32_t i = 1; i < kSlotCount; ++i) others.push_back(t.Attach());
  CHECK(others.size() == kSlotCount - 1);
}

TEST_CASE("A forked child does not keep its parent's slot alive", "[coordinator]") {
  TestSegment t;
  auto observer = t.Attach();
  ReadyPipe grandchild_ready;  // grandchild -> parent: it closed what it inherited
  ReadyPipe grandchild_pid;    // parent -> test: the grandchild's pid
  const pid_t parent = fork();
  REQUIRE(parent >= 0);
  if (parent == 0) {
    auto c = GpuCoordinator::Attach(t.options(), kUuid, 40);
    if (!c.ok()) _exit(2);
    (*c)->NoteSubmit(40, base::SteadyNowNs());
    const pid_t child = fork();
    if (child == 0) {
      CloseInheritedSegments();  // what the library does in a forked child (scheduler_bridge.cc)
      grandchild_ready.Signal();
      alarm(60);  // never outlives a test that failed to stop it
      for (;;) pause();
    }
    grandchild_ready.Wait();
    (void)!write(grandchild_pid.fds[1], &child, sizeof(child));
    _exit(0);  // the parent dies holding its slot; only its own descriptor had the lock
  }
  pid_t grandchild = 0;
  REQUIRE(read(grandchild_pid.fds[0], &grandchild, sizeof(grandchild)) == sizeof(grandchild));
  const KilledAtEnd stop_grandchild(grandchild);
  waitpid(parent, nullptr, 0);
  const int64_t now = base::SteadyNowNs() + GpuCoordinator::kLivenessCheckNs;
  observer->Maintain(now, 0);
  CHECK(observer->Peers(now, kWindow, kFloor).highest_active == kNoPriority);
  CHECK_FALSE(observer->PeersPresent());
}

// Makes slot `index` look like a live slot of `owner` (no process holds its lock).
void ForgeSlot(const GpuCoordinator& any, uint32_t index, const ProcessIdentity& owner,
               int active, uint64_t heartbeat) {
  ProcessSlot& slot = any.segment().slot(index);
  slot.pid = owner.pid;
  slot.start_time_ticks = owner.start_time_ticks;
  slot.pid_namespace = owner.pid_namespace;
  slot.heartbeat.store(heartbeat);
  slot.active_priority.store(active);
  slot.max_seen_priority.store(active);
  slot.level_last_submit_unix_ns[active - kLowestPriority].store(INT64_MAX);
  slot.state_word.store(SlotWord(7, kSlotLive));
  any.segment().header().claims.fetch_add(1);
}

TEST_CASE("A planted slot that no process holds is never trusted, whatever it claims",
          "[coordinator]") {
  TestSegment t;
  auto c = t.Attach();
  const uint32_t forged = c->slot_index() + 1;
  const int64_t now = base::SteadyNowNs();
  SECTION("pid 1, start time 0, the largest heartbeat, priority 100") {
    ForgeSlot(*c, forged, ProcessIdentity{1, 0, OwnIdentity().pid_namespace}, 100, UINT64_MAX);
  }
  SECTION("this very process's identity") {
    ForgeSlot(*c, forged, OwnIdentity(), 100, 1);
  }
  SECTION("another pid namespace") {
    ProcessIdentity owner = OwnIdentity();
    owner.pid_namespace += 1;
    ForgeSlot(*c, forged, owner, 100, 1);
  }
  CHECK(c->Peers(now, kWindow, kFloor).highest_active == kNoPriority);
  CHECK(c->PeersAllowDirect(0, kWindow, kFloor));
  c->Maintain(now, 0);
  CHECK(SlotWordState(c->segment().slot(forged).state_word.load()) == kSlotFree);
  CHECK_FALSE(c->PeersPresent());
}

TEST_CASE("A stopped process (heartbeat no longer changing) holds nobody back", "[coordinator]") {
  TestSegment t;
  auto c = t.Attach();
  ReadyPipe attached;
  const pid_t pid = ForkActiveChild(t, 60, attached, [] {
    alarm(60);       // never outlives a test that failed to stop it (once continued)
    raise(SIGSTOP);  // alive (its lock held), but its dispatcher would beat no more
  });
  const KilledAtEnd stop_child(pid);
  attached.Wait();
  const int64_t now = base::SteadyNowNs();
  c->Maintain(now, 0);
  CHECK(c->PeersPresent());  // alive, so not reclaimed
  CHECK(c->Peers(now, kWindow, kFloor).highest_active == 60);
  // Whatever its own clock says (it is not read): this process's clock moved on, the beat did not.
  const int64_t later = base::SteadyNowNs() + GpuCoordinator::kStaleHeartbeatNs + 1'000'000;
  CHECK(c->Peers(later, kWindow, kFloor).highest_active == kNoPriority);
  CHECK(c->PeersPresent());
}

TEST_CASE("A segment truncated under a process ends its coordination, not the process",
          "[coordinator]") {
  TestSegment t;
  auto victim = t.Attach(1);
  auto peer = t.Attach(-1);
  victim->NoteSubmit(1, base::SteadyNowNs());
  // What a member of the share group can do to the file: shrink it to nothing.
  REQUIRE(truncate(t.Path().c_str(), 0) == 0);
  // Every access now faults (SIGBUS); each is survived on private zeros.
  victim->NoteSubmit(1, base::SteadyNowNs());
  CHECK(victim->Peers(base::SteadyNowNs(), kWindow, kFloor).highest_active == kNoPriority);
  CHECK(victim->segment().lost());
  victim->Maintain(base::SteadyNowNs(), 0);  // says so once, and stops publishing
  CHECK_FALSE(victim->NoteSubmit(1, base::SteadyNowNs()));
  // Truncated and grown back: no fault, the slot reads as free: its owner stops writing there.
  SECTION("grown back") {
    TestSegment u;
    auto owner = u.Attach(1);
    REQUIRE(truncate(u.Path().c_str(), 0) == 0);
    REQUIRE(truncate(u.Path().c_str(), static_cast<off_t>(kSegmentBytes)) == 0);
    owner->Maintain(base::SteadyNowNs(), 0);
    CHECK_FALSE(owner->NoteSubmit(1, base::SteadyNowNs()));
  }
}

TEST_CASE("Garbage in the slots is ignored, never trusted", "[coordinator]") {
  TestSegment t;
  auto c = t.Attach();
  std::mt19937_64 random(12345);
  for (int round = 0; round < 200; ++round) {
    for (uint32_t i = 0; i < kSlotCount; ++i) {
      if (i == c->slot_index()) continue;
      auto* bytes = reinterpret_cast<uint64_t*>(&c->segment().slot(i));
      for (size_t w = 0; w < kSlotBytes / 8; ++w) bytes[w] = random();
      // Half of them claim to be live, with a live pid, so their fields are read.
      if (i % 2 == 0) {
        c->segment().slot(i).state_word.store(SlotWord(random() >> 16, kSlotLive));
        c->segment().slot(i).pid = static_cast<uint32_t>(getpid());
      }
    }
    c->segment().header().claims.fetch_add(1);
    const int64_t now = base::SteadyNowNs();
    const PeerState seen = c->Peers(now, kWindow, kFloor);
    CHECK((seen.highest_active == kNoPriority ||
           (seen.highest_active >= kLowestPriority && seen.highest_active <= kHighestPriority)));
    const PeerState with_gap = c->Peers(now, kWindow, kFloor, kHour);
    for (const int level : {with_gap.busy, with_gap.whole_device}) {
      CHECK((level == kNoPriority || (level >= kLowestPriority && level <= kHighestPriority)));
    }
    c->Maintain(now, 0);
    c->PeersAllowDirect(0, kWindow, kFloor);
  }
}

TEST_CASE("A segment that is not a valid one of this user is refused with a clear message",
          "[coordinator]") {
  TestSegment t;
  const std::string valid = t.ValidBytes();
  auto expect_refused = [&](absl::string_view why) {
    const absl::Status s = t.AttachStatus();
    INFO(s.ToString());
    CHECK_FALSE(s.ok());
    CHECK(absl::StrContains(s.message(), why));
    CHECK(absl::StrContains(s.message(), t.Path()));
  };
  SECTION("random bytes") {
    std::mt19937 random(7);
    std::string bytes(kSegmentBytes, '\0');
    for (char& b : bytes) b = static_cast<char>(random());
    t.WriteFile(bytes);
    expect_refused("bad magic");
  }
  SECTION("truncated") {
    t.WriteFile(valid.substr(0, 100));
    expect_refused("bytes long");
  }
  SECTION("another layout version") {
    std::string bytes = valid;
    bytes[8] = 9;
    t.WriteFile(bytes);
    expect_refused("layout version 9");
  }
  SECTION("another GPU") {
    std::string bytes = valid;
    bytes[24] ^= 1;
    t.WriteFile(bytes);
    expect_refused("another GPU");
  }
  SECTION("readable by others") {
    t.WriteFile(valid, 0644);
    expect_refused("mode 0644");
  }
  SECTION("never finished by its creator: no hang") {
    std::string bytes = valid;
    std::memset(&bytes[40], 0, 4);  // the ready word
    t.WriteFile(bytes);
    t.options().ready_timeout = absl::Milliseconds(50);
    expect_refused("never finished");
  }
  SECTION("another user's") {
    t.WriteFile(valid);
    if (chown(t.Path().c_str(), geteuid() + 1, static_cast<gid_t>(-1)) == 0) {
      expect_refused(absl::StrCat("belongs to user ", geteuid() + 1));
    } else {
      // Not permitted here (not root, or a user namespace): the same check on the file's stat.
      struct stat st;
      REQUIRE(stat(t.Path().c_str(), &st) == 0);
      st.st_uid = geteuid() + 1;
      const absl::Status s = CheckSegmentFile(t.Path(), st, t.options());
      CHECK(absl::StrContains(s.message(), absl::StrCat("belongs to user ", geteuid() + 1)));
    }
  }
  SECTION("shared with a group: the group's, no access for others") {
    struct stat st;
    t.WriteFile(valid, 0660);
    REQUIRE(stat(t.Path().c_str(), &st) == 0);
    SegmentOptions shared = t.options();
    shared.share_gid = st.st_gid;
    CHECK(CheckSegmentFile(t.Path(), st, shared).ok());
    shared.share_gid = st.st_gid + 1;
    CHECK(absl::StrContains(CheckSegmentFile(t.Path(), st, shared).message(), "belongs to group"));
    shared.share_gid = st.st_gid;
    st.st_mode |= 0004;
    CHECK(absl::StrContains(CheckSegmentFile(t.Path(), st, shared).message(), "not 0660"));
  }
}

TEST_CASE("A name another user took first does not decide whether this user coordinates",
          "[coordinator]") {
  TestSegment t;
  const std::string taken = t.Directory();
  SECTION("a file") {
    const int fd = open(taken.c_str(), O_CREAT | O_WRONLY, 0644);
    REQUIRE(fd >= 0);
    close(fd);
  }
  SECTION("a symbolic link") { REQUIRE(symlink("/tmp", taken.c_str()) == 0); }
  SECTION("another user's directory") {
    REQUIRE(mkdir(taken.c_str(), 0700) == 0);
    if (chown(taken.c_str(), geteuid() + 1, static_cast<gid_t>(-1)) != 0) {
      // Not permitted here (not root): the same check on the directory's stat.
      struct stat st;
      REQUIRE(stat(taken.c_str(), &st) == 0);
      st.st_uid = geteuid() + 1;
      CHECK(absl::StrContains(CheckSegmentDirectory(taken, st, -1).message(),
                              absl::StrCat("belongs to user ", geteuid() + 1)));
      chmod(taken.c_str(), 0777);  // what this user can do instead: a directory others can write
    }
  }
  SECTION("this user's, but writable by others") { REQUIRE(mkdir(taken.c_str(), 0777) == 0); }
  // Every process of this user meets in one other directory, whoever made it first.
  auto first = t.Attach(1);
  auto second = t.Attach(-1);
  CHECK(first->segment().path() == second->segment().path());
  CHECK(absl::StartsWith(first->segment().path(), taken + "."));
  first->NoteSubmit(1, base::SteadyNowNs());
  CHECK(second->Peers(base::SteadyNowNs(), kWindow, kFloor).highest_active == 1);
  struct stat st;
  REQUIRE(stat(first->segment().path().c_str(), &st) == 0);
  CHECK(st.st_uid == geteuid());
}

TEST_CASE("A shared group's directory is the group's, setgid, with no access for others",
          "[coordinator]") {
  TestSegment t;
  t.options().share_gid = getegid();
  auto c = t.Attach();
  const std::string dir =
      absl::StrCat(t.options().shm_dir, "/", SegmentDirectoryName(geteuid(), getegid()));
  struct stat st;
  REQUIRE(stat(dir.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 02770);
  CHECK(st.st_gid == getegid());
  REQUIRE(stat(c->segment().path().c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0660);
  CHECK(st.st_gid == getegid());
}

}  // namespace
}  // namespace gpuprio::coordinator
