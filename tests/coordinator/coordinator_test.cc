// scheduler/coordinator without a GPU: the segment's creation and checks (mode, owner, size,
// magic, version, GPU), slots and what peers see of each other, reclaiming the slots of dead
// processes (exited, zombie, reused pid), stale heartbeats, garbage slots, a full segment.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "catch2/catch.hpp"
#include "scheduler/base/clock.h"
#include "scheduler/coordinator/device_segment.h"
#include "scheduler/coordinator/gpu_coordinator.h"
#include "scheduler/coordinator/process_identity.h"
#include "scheduler/coordinator/segment_layout.h"
#include "scheduler/coordinator/segment_name.h"

namespace gpuprio::coordinator {
namespace {

constexpr uint8_t kUuid[16] = {0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
constexpr uint64_t kWindow = 500'000'000;
constexpr int kFloor = 0;

// A fresh domain per test case, its segment removed before and after.
class TestSegment {
 public:
  TestSegment() {
    // Not the pid alone: tests in other pid namespaces may have the same one.
    static const uint32_t process_tag = std::random_device()();
    static int counter = 0;
    options_.domain = absl::StrCat("unit-", getpid(), "-", absl::Hex(process_tag), "-", ++counter);
    shm_unlink(Name().c_str());
  }
  ~TestSegment() { shm_unlink(Name().c_str()); }
  const SegmentOptions& options() const { return options_; }
  SegmentOptions& options() { return options_; }
  std::string Name() const { return SegmentName(options_.domain, geteuid(), -1, kUuid); }
  std::string Path() const { return absl::StrCat("/dev/shm", Name()); }

  std::unique_ptr<GpuCoordinator> Attach(int default_priority = 0) const {
    auto c = GpuCoordinator::Attach(options_, kUuid, default_priority);
    REQUIRE(c.ok());
    return *std::move(c);
  }
  absl::Status AttachStatus() const {
    return GpuCoordinator::Attach(options_, kUuid, 0).status();
  }
  // Writes `bytes` as the whole segment file (mode 0600 unless given).
  void WriteFile(const std::string& bytes, mode_t mode = 0600) const {
    shm_unlink(Name().c_str());
    const int fd = shm_open(Name().c_str(), O_RDWR | O_CREAT | O_EXCL, mode);
    REQUIRE(fd >= 0);
    REQUIRE(fchmod(fd, mode) == 0);
    REQUIRE(write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
    close(fd);
  }
  // The segment a valid attach made, as bytes.
  std::string ValidBytes() const {
    { auto c = Attach(); }
    const int fd = shm_open(Name().c_str(), O_RDONLY, 0);
    REQUIRE(fd >= 0);
    std::string bytes(kSegmentBytes, '\0');
    REQUIRE(read(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
    close(fd);
    return bytes;
  }

 private:
  SegmentOptions options_;
};

TEST_CASE("The segment is created with mode 0600, this user's, at its full size", "[coordinator]") {
  TestSegment t;
  const mode_t old_umask = umask(0);  // the mode must not depend on the umask
  auto c = t.Attach();
  umask(old_umask);
  struct stat st;
  REQUIRE(stat(t.Path().c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  CHECK(st.st_uid == geteuid());
  CHECK(static_cast<size_t>(st.st_size) == kSegmentBytes);
  CHECK(c->segment().created());
  CHECK(absl::StrContains(t.Name(), "-deadbeef0102030405060708090a0b0c"));
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
  // After the window, nothing.
  seen = low->Peers(now + 2 * static_cast<int64_t>(kWindow), kWindow, kFloor);
  CHECK(seen.ceiling == kNoPriority);

  // Released: not a peer any more.
  high->NoteSubmit(5, now);
  high->Release();
  low->Maintain(now, 0);
  CHECK(low->Peers(now, kWindow, kFloor).highest_active == kNoPriority);
  CHECK_FALSE(low->PeersPresent());
}

TEST_CASE("Statistics are published in the slot", "[coordinator]") {
  TestSegment t;
  auto c = t.Attach(-1);
  c->CountDispatched(500);        // bucket 0
  c->CountDispatched(3'000'000);  // 3 ms
  c->CountDirect();
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
    // Wait until it is a zombie without reaping it.
    for (int i = 0; i < 2000 && StartTimeTicks(pid).has_value(); ++i) usleep(1000);
    REQUIRE_FALSE(StartTimeTicks(pid).has_value());
    survivor->Maintain(base::SteadyNowNs(), 0);
    CHECK(survivor->Peers(base::SteadyNowNs(), kWindow, kFloor).highest_active == kNoPriority);
    waitpid(pid, nullptr, 0);
  }
  const int64_t now = base::SteadyNowNs();
  survivor->Maintain(now, 0);
  CHECK(survivor->Peers(now, kWindow, kFloor).highest_active == kNoPriority);
  CHECK_FALSE(survivor->PeersPresent());
  // The slot is free again: 63 more processes fit.
  std::vector<std::unique_ptr<GpuCoordinator>> others;
  for (uint32_t i = 1; i < kSlotCount; ++i) others.push_back(t.Attach());
  CHECK(t.AttachStatus().code() == absl::StatusCode::kResourceExhausted);
}

// Makes slot `index` look like a live slot of `owner`.
void ForgeSlot(const GpuCoordinator& any, uint32_t index, const ProcessIdentity& owner,
               int active, int64_t heartbeat_ns) {
  ProcessSlot& slot = any.segment().slot(index);
  slot.pid = owner.pid;
  slot.start_time_ticks = owner.start_time_ticks;
  slot.pid_namespace = owner.pid_namespace;
  slot.heartbeat_ns.store(heartbeat_ns);
  slot.active_priority.store(active);
  slot.max_seen_priority.store(active);
  slot.state_word.store(SlotWord(7, kSlotLive));
  any.segment().header().claims.fetch_add(1);
}

TEST_CASE("A reused pid does not keep a dead process's slot", "[coordinator]") {
  TestSegment t;
  auto c = t.Attach();
  const uint32_t forged = c->slot_index() + 1;
  ProcessIdentity owner = OwnIdentity();
  REQUIRE(owner.start_time_ticks != 0);
  const int64_t now = base::SteadyNowNs();
  SECTION("same pid, same start time: alive") {
    ForgeSlot(*c, forged, owner, 40, now);
    c->Maintain(now, 0);
    CHECK(c->Peers(now, kWindow, kFloor).highest_active == 40);
  }
  SECTION("same pid, another start time: a reused pid, reclaimed") {
    owner.start_time_ticks += 1;
    ForgeSlot(*c, forged, owner, 40, now);
    c->Maintain(now, 0);
    CHECK(c->Peers(now, kWindow, kFloor).highest_active == kNoPriority);
    CHECK(SlotWordState(c->segment().slot(forged).state_word.load()) == kSlotFree);
  }
  SECTION("another pid namespace: kept while its heartbeat is fresh, ignored when stale") {
    owner.pid_namespace += 1;
    ForgeSlot(*c, forged, owner, 40, now);
    c->Maintain(now, 0);
    CHECK(c->Peers(now, kWindow, kFloor).highest_active == 40);
    const int64_t later = now + GpuCoordinator::kStaleHeartbeatNs + 1;
    CHECK(c->Peers(later, kWindow, kFloor).highest_active == kNoPriority);
    // Silent for very long: reclaimed.
    c->Maintain(now + GpuCoordinator::kAbandonedHeartbeatNs + 1, 0);
    CHECK(SlotWordState(c->segment().slot(forged).state_word.load()) == kSlotFree);
  }
}

TEST_CASE("A stopped process (stale heartbeat) holds nobody back", "[coordinator]") {
  TestSegment t;
  auto c = t.Attach();
  const int64_t now = base::SteadyNowNs();
  ForgeSlot(*c, c->slot_index() + 1, OwnIdentity(), 60,
            now - GpuCoordinator::kStaleHeartbeatNs - 1);
  c->Maintain(now, 0);
  CHECK(c->PeersPresent());  // alive, so not reclaimed
  CHECK(c->Peers(now, kWindow, kFloor).highest_active == kNoPriority);
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
      const absl::Status s = CheckSegmentFile(t.Name(), st, t.options());
      CHECK(absl::StrContains(s.message(), absl::StrCat("belongs to user ", geteuid() + 1)));
    }
  }
  SECTION("shared with a group: the group's, no access for others") {
    struct stat st;
    t.WriteFile(valid, 0660);
    REQUIRE(stat(t.Path().c_str(), &st) == 0);
    SegmentOptions shared = t.options();
    shared.share_gid = st.st_gid;
    CHECK(CheckSegmentFile(t.Name(), st, shared).ok());
    shared.share_gid = st.st_gid + 1;
    CHECK(absl::StrContains(CheckSegmentFile(t.Name(), st, shared).message(), "belongs to group"));
    shared.share_gid = st.st_gid;
    st.st_mode |= 0004;
    CHECK(absl::StrContains(CheckSegmentFile(t.Name(), st, shared).message(), "not 0660"));
  }
}

}  // namespace
}  // namespace gpuprio::coordinator
