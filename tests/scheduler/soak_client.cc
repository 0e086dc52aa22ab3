// A -lcuda client that runs a random multi-threaded workload for a given time, for soak tests of
// gpuprio's scheduler (run with and without libgpuprio.so preloaded, against the fake driver or
// tools/bench/null_driver). Usage: soak_client SECONDS [SEED].
//
// 64 threads share 16 streams (blocking and non-blocking, CUDA priorities 0 to -3) and the legacy
// stream. Time is cut into 2 s rounds; in every fourth round all threads use only the legacy
// stream. In a round each thread first creates, uses and destroys two streams of its own, then
// picks at random: append launches (append_u32 on a per-stream log), stream synchronize, stream
// query, fill -> event record -> stream wait event on another stream -> copy (a copy_u32 kernel or
// cuMemcpyDtoDAsync) that must see the filled value, a thread priority change
// (gpuprio_set_thread_priority), or a context synchronize. At the end of a round every thread
// waits, the main thread synchronizes the context and, against the fake, checks that every append
// of the round ran exactly once and in per-(thread, stream) order and that every copy saw its
// data; then the logs are cleared for the next round.
//
// A watchdog fails the run (exit 3) naming each thread that made no progress for 10 s and the
// call it was in. It also samples the resident set size every second after a warm-up (a sixth of
// the run, 5 to 30 s). Prints key=value figures and `soak_client: soak ok` last.
#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/fake_cuda/clients/client_check.h"
#include "tests/fake_cuda/fake_cuda_control.h"
#include "tests/scheduler/append_log.h"
#include "tests/scheduler/client_support.h"

using fake_client::Check;
using fake_client::CheckCu;
using fake_client::Fail;
using sched_client::AppendLog;
using sched_client::NowNs;

namespace {

constexpr int kThreads = 64;
constexpr int kSharedStreams = 16;
constexpr int kLegacyLog = kSharedStreams;  // the legacy stream's log comes after the shared ones
constexpr int kLogs = kSharedStreams + 1;
constexpr int64_t kRoundNs = 2'000'000'000;
constexpr int kLegacyRoundEvery = 4;
// Per thread and round; they bound the logs' size, so memory does not grow with the run.
constexpr uint32_t kMaxAppends = 256;  // per log
constexpr uint32_t kMaxCopies = 256;
constexpr int kChurnStreams = 2;
constexpr uint32_t kChurnAppends = 4;  // per churned stream
constexpr int kStallSeconds = 10;
constexpr int kPriorityUnset = -1000;  // GPUPRIO_PRIORITY_UNSET

std::string Hex(uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08x", value);
  return text;
}

// What a thread is doing, for the watchdog. `doing` is null while the thread waits for others
// (the end of a round), which is not a stall of its own.
struct Progress {
  std::atomic<uint64_t> beats{0};
  std::atomic<const char*> doing{nullptr};
  std::atomic<int> stream{-1};  // log index of the stream the call names, -1 if none
};

// Round hand-over between the main thread and the workers.
struct Rounds {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t number = 0;  // the round running; 0 before the first
  bool finished = false;
  int64_t deadline_ns = 0;
  bool legacy_only = false;
  int arrived = 0;  // workers done with the current round
};

// What one worker did in the current round (written by it, read by the main thread after the
// round's hand-over).
struct Work {
  std::vector<uint32_t> appended = std::vector<uint32_t>(kLogs, 0);
  uint32_t copies = 0;
  std::vector<uint32_t> expected_copy = std::vector<uint32_t>(kMaxCopies, 0);
  uint64_t calls = 0;  // driver calls, whole run
  uint64_t failures = 0;
  int64_t max_call_ns = 0;
  const char* max_call = "none";
  CUevent event = nullptr;
};

// SOAK_CALL_LOG=1 keeps the fake's call log on (memory grows with the run): a copy that read the
// wrong value is then explained by the driver calls that made it, in the order the driver got
// them (the event's records and waits around the producer, the copy itself).
std::string ExplainCopy(CUevent event, CUdeviceptr src, CUdeviceptr dst, uint32_t value) {
  using Count = uint64_t (*)();
  using Get = int (*)(uint64_t, fakecuda_call_record*);
  using Params = uint64_t (*)(uint64_t, void*, uint64_t);
  auto count = sched_client::FakeControl<Count>("fakecuda_call_count");
  auto get = sched_client::FakeControl<Get>("fakecuda_get_call");
  auto params = sched_client::FakeControl<Params>("fakecuda_get_call_params");
  if (count == nullptr || get == nullptr || params == nullptr) return "";
  const uint64_t n = count();
  if (n == 0) return " (no call log: set SOAK_CALL_LOG=1)";
  std::string out;
  uint64_t fill = n;
  for (uint64_t i = n; i-- > 0;) {
    fakecuda_call_record r;
    uint64_t p[3] = {};
    if (get(i, &r) != 0 || std::strcmp(r.function, "fill_u32") != 0) continue;
    params(i, p, sizeof(p));
    if (p[0] == src && static_cast<uint32_t>(p[1]) == value) {
      fill = i;
      break;
    }
  }
  if (fill == n) return " (the producer's launch is not in the call log)";
  auto describe = [&](uint64_t i) {
    fakecuda_call_record r;
    get(i, &r);
    char line[200];
    std::snprintf(line, sizeof(line), "\n  call %llu %s stream=%llx tid=%lld",
                  static_cast<unsigned long long>(i), r.api,
                  static_cast<unsigned long long>(r.stream), static_cast<long long>(r.tid));
    return std::string(line);
  };
  out += "\n driver calls: the producer" + describe(fill);
  int shown = 0;
  for (uint64_t i = fill >= 400 ? fill - 400 : 0; i < n && shown < 16; ++i) {
    fakecuda_call_record r;
    uint64_t p[3] = {};
    if (get(i, &r) != 0) continue;
    const uint64_t size = params(i, p, sizeof(p));
    const bool names_event = size == 8 && p[0] == reinterpret_cast<uintptr_t>(event);
    const bool copies = (std::strcmp(r.function, "copy_u32") == 0 && p[0] == dst) ||
                        (size == 24 && p[0] == dst && p[1] == src);
    if (!names_event && !copies) continue;
    out += describe(i);
    ++shown;
  }
  return out;
}

class Soak {
 public:
  Soak(int64_t duration_ns, uint32_t seed) : duration_ns_(duration_ns), seed_(seed) {}

  int Run();

 private:
  void Setup();
  void Worker(int t);
  void OneOp(int t, std::mt19937& rng, bool legacy_only, uint32_t round, CUevent event);
  void Churn(int t, std::mt19937& rng, uint32_t round);
  void FinishRound(uint32_t round);
  void Watch();

  // Brackets one driver call for the watchdog and the longest-call figure.
  template <typename Call>
  CUresult Timed(int t, const char* what, int stream, Call call) {
    Progress& p = progress_[t];
    p.stream.store(stream, std::memory_order_relaxed);
    p.doing.store(what, std::memory_order_release);
    const int64_t begin = NowNs();
    const CUresult r = call();
    const int64_t took = NowNs() - begin;
    p.beats.fetch_add(1, std::memory_order_release);
    Work& w = work_[t];
    ++w.calls;
    if (took > w.max_call_ns) {
      w.max_call_ns = took;
      w.max_call = what;
    }
    return r;
  }
  void Expect(int t, bool ok) {
    if (!ok) ++work_[t].failures;
  }
  CUstream StreamOf(int log) const { return log == kLegacyLog ? nullptr : streams_[log]; }

  const int64_t duration_ns_;
  const uint32_t seed_;
  bool fake_ = false;
  sched_client::Driver driver_;
  CUfunction append_ = nullptr, fill_ = nullptr, copy_ = nullptr;
  std::vector<CUstream> streams_ = std::vector<CUstream>(kSharedStreams);
  std::vector<AppendLog> logs_;
  std::vector<AppendLog> churn_logs_;  // one per thread
  CUdeviceptr produced_ = 0, consumed_ = 0;  // [thread][slot] u32
  // Workers, then the main thread.
  std::vector<Work> work_ = std::vector<Work>(kThreads + 1);
  std::vector<Progress> progress_ = std::vector<Progress>(kThreads + 1);
  Rounds rounds_;
  std::atomic<uint64_t> streams_created_{0};
  uint64_t appends_checked_ = 0, copies_checked_ = 0;

  // Watchdog and memory samples.
  std::atomic<bool> stop_watch_{false};
  int64_t start_ns_ = 0;
  int64_t warm_up_ns_ = 0;
  std::vector<long> rss_kb_;  // one sample a second after warm-up
};

void Soak::Setup() {
  driver_ = sched_client::InitDriver();
  // The fake's own call log would grow with every call; the null driver has no controls.
  using SetLogging = void (*)(int);
  using SetDuration = void (*)(const char*, uint64_t);
  if (auto set_logging = sched_client::FakeControl<SetLogging>("fakecuda_set_call_logging")) {
    fake_ = true;
    const char* keep_log = std::getenv("SOAK_CALL_LOG");
    if (keep_log == nullptr || std::strcmp(keep_log, "1") != 0) set_logging(0);
    auto set_duration = sched_client::FakeControl<SetDuration>("fakecuda_set_kernel_duration_ns");
    Check(set_duration != nullptr, "fakecuda_set_kernel_duration_ns");
    set_duration("append_u32", 0);
    set_duration("copy_u32", 0);
    set_duration("fill_u32", 5000);  // a slow producer exposes a copy that does not wait
  }
  append_ = sched_client::Function(driver_.module, "append_u32");
  fill_ = sched_client::Function(driver_.module, "fill_u32");
  copy_ = sched_client::Function(driver_.module, "copy_u32");
  for (int s = 0; s < kSharedStreams; ++s) {
    CheckCu(cuStreamCreateWithPriority(&streams_[s], s % 2 ? CU_STREAM_NON_BLOCKING : 0, -(s % 4)),
            "cuStreamCreateWithPriority");
  }
  for (int l = 0; l < kLogs; ++l) logs_.emplace_back(size_t{kThreads} * kMaxAppends);
  for (int t = 0; t < kThreads; ++t) churn_logs_.emplace_back(kChurnStreams * kChurnAppends);
  produced_ = sched_client::Alloc(size_t{kThreads} * kMaxCopies * 4);
  consumed_ = sched_client::Alloc(size_t{kThreads} * kMaxCopies * 4);
}

void Soak::Churn(int t, std::mt19937& rng, uint32_t round) {
  for (int c = 0; c < kChurnStreams; ++c) {
    CUstream stream;
    const unsigned flags = rng() % 2 ? CU_STREAM_NON_BLOCKING : 0;
    const int priority = -static_cast<int>(rng() % 4);
    Expect(t, Timed(t, "cuStreamCreateWithPriority", -1, [&] {
                return cuStreamCreateWithPriority(&stream, flags, priority);
              }) == CUDA_SUCCESS);
    streams_created_.fetch_add(1, std::memory_order_relaxed);
    for (uint32_t i = 0; i < kChurnAppends; ++i) {
      // One writer per stream: the two streams' work is not ordered.
      const uint32_t value = AppendLog::Encode(c, round, i);
      Expect(t, Timed(t, "cuLaunchKernel(churn)", -1, [&] {
                  return churn_logs_[t].Append(append_, stream, value);
                }) == CUDA_SUCCESS);
    }
    // Destroyed with its work still queued: the work must run all the same.
    Expect(t, Timed(t, "cuStreamDestroy", -1, [&] { return cuStreamDestroy(stream); }) ==
                  CUDA_SUCCESS);
  }
}

void Soak::OneOp(int t, std::mt19937& rng, bool legacy_only, uint32_t round, CUevent event) {
  Work& w = work_[t];
  // A shared stream, or (one time in 17) the legacy stream; only the legacy stream in its rounds.
  const int log = legacy_only ? kLegacyLog : static_cast<int>(rng() % kLogs);
  const CUstream stream = StreamOf(log);
  const uint32_t what = rng() % 1000;
  if (what < 500) {
    if (w.appended[log] < kMaxAppends) {
      const uint32_t value = AppendLog::Encode(t, round, w.appended[log]++);
      Expect(t, Timed(t, "cuLaunchKernel(append)", log, [&] {
                  return logs_[log].Append(append_, stream, value);
                }) == CUDA_SUCCESS);
      return;
    }
  } else if (what < 600) {
    Expect(t, Timed(t, "cuStreamSynchronize", log, [&] { return cuStreamSynchronize(stream); }) ==
                  CUDA_SUCCESS);
    return;
  } else if (what < 850) {
    if (w.copies < kMaxCopies) {
      // Produce on `stream`, record, make another stream wait, copy there.
      const int log2 = legacy_only ? kLegacyLog
                                   : (log + 1 + static_cast<int>(rng() % (kLogs - 1))) % kLogs;
      const CUstream stream2 = StreamOf(log2);
      const uint32_t slot = w.copies++;
      uint32_t value = (round & 0x3ffff) << 14 | static_cast<uint32_t>(t) << 8 | slot;
      w.expected_copy[slot] = value;
      CUdeviceptr src = produced_ + (size_t{static_cast<uint32_t>(t)} * kMaxCopies + slot) * 4;
      CUdeviceptr dst = consumed_ + (size_t{static_cast<uint32_t>(t)} * kMaxCopies + slot) * 4;
      uint32_t one = 1;
      void* fill_args[] = {&src, &value, &one};
      void* copy_args[] = {&dst, &src, &one};
      Expect(t, Timed(t, "cuLaunchKernel(fill)", log, [&] {
                  return cuLaunchKernel(fill_, 1, 1, 1, 1, 1, 1, 0, stream, fill_args, nullptr);
                }) == CUDA_SUCCESS);
      Expect(t, Timed(t, "cuEventRecord", log, [&] { return cuEventRecord(event, stream); }) ==
                    CUDA_SUCCESS);
      Expect(t, Timed(t, "cuStreamWaitEvent", log2, [&] {
                  return cuStreamWaitEvent(stream2, event, 0);
                }) == CUDA_SUCCESS);
      if (slot % 2 == 0) {
        Expect(t, Timed(t, "cuLaunchKernel(copy)", log2, [&] {
                    return cuLaunchKernel(copy_, 1, 1, 1, 1, 1, 1, 0, stream2, copy_args, nullptr);
                  }) == CUDA_SUCCESS);
      } else {
        Expect(t, Timed(t, "cuMemcpyDtoDAsync", log2, [&] {
                    return cuMemcpyDtoDAsync(dst, src, 4, stream2);
                  }) == CUDA_SUCCESS);
      }
      value = 0xdeadbeef;  // a deferred launch must own its copy of the parameters
      return;
    }
  } else if (what < 900) {
    static constexpr int kPriorities[] = {-2, -1, 0, 1, 2, kPriorityUnset};
    const int priority = kPriorities[rng() % 6];
    Timed(t, "gpuprio_set_thread_priority", -1, [&] {
      sched_client::SetThreadPriority(priority);
      return CUDA_SUCCESS;
    });
    return;
  } else if (what < 902) {
    Expect(t, Timed(t, "cuCtxSynchronize", -1, [] { return cuCtxSynchronize(); }) ==
                  CUDA_SUCCESS);
    return;
  }
  // Queries, and whatever a full quota turned away.
  const CUresult r = Timed(t, "cuStreamQuery", log, [&] { return cuStreamQuery(stream); });
  Expect(t, r == CUDA_SUCCESS || r == CUDA_ERROR_NOT_READY);
}

void Soak::Worker(int t) {
  CheckCu(cuCtxSetCurrent(driver_.ctx), "cuCtxSetCurrent (worker)");
  std::mt19937 rng(seed_ * 7919u + static_cast<uint32_t>(t));
  CUevent event;
  CheckCu(cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  work_[t].event = event;
  uint64_t last_round = 0;
  for (;;) {
    uint64_t round;
    int64_t deadline;
    bool legacy_only;
    {
      std::unique_lock<std::mutex> lock(rounds_.mu);
      rounds_.cv.wait(lock, [&] { return rounds_.finished || rounds_.number != last_round; });
      if (rounds_.finished) break;
      round = last_round = rounds_.number;
      deadline = rounds_.deadline_ns;
      legacy_only = rounds_.legacy_only;
    }
    Work& w = work_[t];
    std::fill(w.appended.begin(), w.appended.end(), 0);
    w.copies = 0;
    Churn(t, rng, static_cast<uint32_t>(round));
    while (NowNs() < deadline) {
      OneOp(t, rng, legacy_only, static_cast<uint32_t>(round), event);
    }
    progress_[t].doing.store(nullptr, std::memory_order_release);
    {
      std::lock_guard<std::mutex> lock(rounds_.mu);
      ++rounds_.arrived;
    }
    rounds_.cv.notify_all();
  }
  sched_client::SetThreadPriority(kPriorityUnset);
  CheckCu(cuEventDestroy(event), "cuEventDestroy");
}

void Soak::FinishRound(uint32_t round) {
  const int main = kThreads;
  Expect(main, Timed(main, "cuCtxSynchronize(end of round)", -1, [] { return cuCtxSynchronize(); }) ==
                CUDA_SUCCESS);
  if (!fake_) return;  // the null driver runs nothing: there is nothing to check
  progress_[main].doing.store("checking the round", std::memory_order_release);
  for (int l = 0; l < kLogs; ++l) {
    std::vector<uint32_t> launched(kThreads);
    for (int t = 0; t < kThreads; ++t) launched[t] = work_[t].appended[l];
    const AppendLog::Verdict v = logs_[l].Check(launched, round);
    if (!v.ok()) {
      Fail(("round " + std::to_string(round) + ", stream log " + std::to_string(l) + ": " +
            v.first_problem)
               .c_str());
    }
    appends_checked_ += v.entries;
    logs_[l].Clear();
    progress_[main].beats.fetch_add(1, std::memory_order_release);
  }
  const std::vector<uint32_t> consumed =
      sched_client::ReadBack(consumed_, size_t{kThreads} * kMaxCopies);
  const std::vector<uint32_t> produced =
      sched_client::ReadBack(produced_, size_t{kThreads} * kMaxCopies);
  for (int t = 0; t < kThreads; ++t) {
    const std::vector<uint32_t> launched(kChurnStreams, kChurnAppends);
    const AppendLog::Verdict v = churn_logs_[t].Check(launched, round);
    if (!v.ok()) {
      Fail(("round " + std::to_string(round) + ", thread " + std::to_string(t) +
            "'s destroyed streams: " + v.first_problem)
               .c_str());
    }
    appends_checked_ += v.entries;
    churn_logs_[t].Clear();
    for (uint32_t slot = 0; slot < work_[t].copies; ++slot) {
      const size_t index = size_t{static_cast<uint32_t>(t)} * kMaxCopies + slot;
      if (consumed[index] != work_[t].expected_copy[slot]) {
        // The producer's own result tells a copy that did not wait (the fill wrote the value)
        // from a fill that went wrong (its parameters, say).
        const bool produced_ok = produced[index] == work_[t].expected_copy[slot];
        Fail(("round " + std::to_string(round) + ", thread " + std::to_string(t) + " copy " +
              std::to_string(slot) +
              (produced_ok ? " ran before the event it waited for"
                           : " read a value its producer did not write") +
              " (expected " + Hex(work_[t].expected_copy[slot]) + ", produced " +
              Hex(produced[index]) + ", consumed " + Hex(consumed[index]) + ")" +
              ExplainCopy(work_[t].event, produced_ + index * 4, consumed_ + index * 4,
                          work_[t].expected_copy[slot]))
                 .c_str());
      }
    }
    copies_checked_ += work_[t].copies;
  }
  progress_[main].beats.fetch_add(1, std::memory_order_release);
}

void Soak::Watch() {
  std::vector<uint64_t> seen(progress_.size(), 0);
  std::vector<int64_t> since(progress_.size(), NowNs());
  int64_t next_sample = start_ns_ + warm_up_ns_;
  while (!stop_watch_.load(std::memory_order_acquire)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const int64_t now = NowNs();
    if (now >= next_sample) {
      rss_kb_.push_back(sched_client::RssKb());
      next_sample += 1'000'000'000;
    }
    std::string stalled;
    for (size_t i = 0; i < progress_.size(); ++i) {
      const uint64_t beats = progress_[i].beats.load(std::memory_order_acquire);
      const char* doing = progress_[i].doing.load(std::memory_order_acquire);
      if (beats != seen[i] || doing == nullptr) {
        seen[i] = beats;
        since[i] = now;
        continue;
      }
      if (now - since[i] < int64_t{kStallSeconds} * 1'000'000'000) continue;
      const int stream = progress_[i].stream.load(std::memory_order_relaxed);
      stalled += "\n  " +
                 (i == kThreads ? std::string("main thread") : "thread " + std::to_string(i)) +
                 " in " + doing +
                 (stream < 0 ? std::string()
                             : stream == kLegacyLog ? " on the legacy stream"
                                                    : " on stream " + std::to_string(stream));
    }
    if (!stalled.empty()) {
      std::fprintf(stderr, "soak_client: soak stalled: no progress for %d s:%s\n", kStallSeconds,
                   stalled.c_str());
      std::fflush(stderr);
      _exit(3);
    }
  }
}

int Soak::Run() {
  Setup();
  start_ns_ = NowNs();
  warm_up_ns_ = std::clamp<int64_t>(duration_ns_ / 6, 5'000'000'000, 30'000'000'000);
  std::thread watchdog([this] { Watch(); });
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) workers.emplace_back([this, t] { Worker(t); });
  const int main = kThreads;
  uint32_t round = 0;
  for (;;) {
    ++round;
    {
      std::lock_guard<std::mutex> lock(rounds_.mu);
      rounds_.number = round;
      rounds_.arrived = 0;
      rounds_.deadline_ns = std::min(NowNs() + kRoundNs, start_ns_ + duration_ns_);
      rounds_.legacy_only = round % kLegacyRoundEvery == 0;
    }
    rounds_.cv.notify_all();
    {
      std::unique_lock<std::mutex> lock(rounds_.mu);
      rounds_.cv.wait(lock, [&] { return rounds_.arrived == kThreads; });
    }
    FinishRound(round);
    progress_[main].doing.store(nullptr, std::memory_order_release);
    if (NowNs() >= start_ns_ + duration_ns_) break;
  }
  {
    std::lock_guard<std::mutex> lock(rounds_.mu);
    rounds_.finished = true;
  }
  rounds_.cv.notify_all();
  for (auto& w : workers) w.join();
  const double seconds = static_cast<double>(NowNs() - start_ns_) / 1e9;
  stop_watch_.store(true, std::memory_order_release);
  watchdog.join();
  for (CUstream s : streams_) CheckCu(cuStreamDestroy(s), "cuStreamDestroy");
  CheckCu(cuCtxSynchronize(), "final cuCtxSynchronize");

  uint64_t calls = 0, failures = 0;
  int64_t max_call_ns = 0;
  const char* max_call = "none";
  for (const Work& w : work_) {
    calls += w.calls;
    failures += w.failures;
    if (w.max_call_ns > max_call_ns) {
      max_call_ns = w.max_call_ns;
      max_call = w.max_call;
    }
  }
  std::printf(
      "driver=%s seed=%u seconds=%.1f threads=%d rounds=%u calls=%llu calls_per_s=%.0f "
      "failed_calls=%llu appends_checked=%llu copies_checked=%llu streams_created=%llu "
      "max_call_us=%lld max_call=%s\n",
      fake_ ? "fake" : "null", seed_, seconds, kThreads, round,
      static_cast<unsigned long long>(calls), static_cast<double>(calls) / seconds,
      static_cast<unsigned long long>(failures),
      static_cast<unsigned long long>(appends_checked_),
      static_cast<unsigned long long>(copies_checked_),
      static_cast<unsigned long long>(streams_created_.load()),
      static_cast<long long>(max_call_ns / 1000), max_call);
  Check(rss_kb_.size() >= 2, "the run lasts beyond its warm-up");
  std::string by_minute;  // the first sample and one a minute after it
  for (size_t i = 0; i < rss_kb_.size(); i += 60) {
    by_minute += (by_minute.empty() ? "" : ",") + std::to_string(rss_kb_[i]);
  }
  std::printf("rss_warm_up_s=%lld rss_samples=%zu rss_first_kb=%ld rss_last_kb=%ld rss_max_kb=%ld "
              "rss_growth_kb=%ld rss_kb_each_minute=%s stalls=0\n",
              static_cast<long long>(warm_up_ns_ / 1'000'000'000), rss_kb_.size(),
              rss_kb_.front(), rss_kb_.back(), *std::max_element(rss_kb_.begin(), rss_kb_.end()),
              rss_kb_.back() - rss_kb_.front(), by_minute.c_str());
  Check(failures == 0, "every call returned success (queries: success or not ready)");
  return fake_client::Succeed();
}

}  // namespace

int main(int argc, char** argv) {
  fake_client::g_client_name = "soak_client";
  fake_client::g_scenario = "soak";
  if (argc < 2) Fail("usage: soak_client SECONDS [SEED]");
  const long seconds = std::atol(argv[1]);
  if (seconds < 1) Fail("SECONDS must be at least 1");
  const uint32_t seed = argc > 2 ? static_cast<uint32_t>(std::atol(argv[2])) : 1;
  Soak soak(int64_t{seconds} * 1'000'000'000, seed);
  return soak.Run();
}
