// Interference benchmark: two threads of one process (the in-process form), or two processes (--role).
//
// High-priority thread: every --period-ms (10) it releases a chain of --chain (20) spin kernels of
// --high-us (50) each (grid = number of SMs, 128 threads) on its own stream, then
// cudaStreamSynchronize; latency = release time to sync return (steady clock). --warmup (10)
// releases, then --releases (150) measured ones, or fewer if --max-seconds (10, warm-up included)
// run out first (a starved high thread must not outlast the caller's timeout). If a release is late
// (the previous one ran past its slot) it starts at once and is timed from that moment.
//
// Low-priority thread (absent with --low-ms 0, "alone"): on its own stream, full-GPU spin kernels
// of --low-ms L each (grid = 4 x SMs blocks of 256 threads; with --low-fill smem, the default, each
// block also takes 1/4 of the SM's shared memory so that nothing else fits beside it: the GPU is
// full, not just busy), in batches of 20 launches followed by cudaStreamSynchronize, for as long
// as the high thread runs. Block 0 of every low kernel bumps a counter in mapped host memory when
// it is done; the high thread reads it at the start and end of its measured releases, so the
// throughput (low kernels per second) covers exactly the measured window.
//
// Seen on an H100 (native): the high kernels (no shared memory) fit beside a running low kernel,
// so the next low kernel starts beside high kernel i and high kernel i+1 must wait for it to end;
// the chain takes about chain x L, and CUDA stream priorities do not change that (no preemption of
// resident blocks). That is the case gpuprio's host-side hold-back is for.
//
// Kernel lengths: the spin kernel waits on clock64; cycles per microsecond are calibrated once at
// start against cudaEvent timing on the idle GPU.
//
// --priority-mode none|stream|gpuprio:
//   none     both streams default priority (non-blocking streams);
//   stream   CUDA stream priorities: high gets the greatest priority, low the least;
//   gpuprio  default-priority streams, and each thread calls gpuprio_set_thread_priority(1 / -1)
//            if dlsym(RTLD_DEFAULT) finds it (it does when libgpuprio.so is preloaded); the JSON
//            says whether it was found and whether both calls returned 0.
//
// --role both|high|low: the two-process form (tools/bench/run_two_process_bench.sh). The kernels,
// their shapes and the launch pattern are the ones above; only where the two threads live changes.
//   both  (default) the in-process form above.
//   low   only the low thread, in this process: it runs until --seconds S (30) have passed, the high
//         process sets the stop word in --peer-file, or --stop-file appears. It measures its own
//         rate from --low-warmup-s (0.5) after its first kernel completed to the stop (the "low
//         alone" throughput). With --peer-file F it creates F (a 4 KiB block, under a temporary name
//         until it is filled in) and a relay thread copies the GPU-written completion counter into
//         it every 200 us, so the high process can count low kernels over exactly its own window.
//   high  only the high thread. Without --peer-file it is the "alone" run. With --peer-file F it
//         waits (at most --peer-wait-s, 20) for F to exist and show a completed low kernel, then
//         measures as above, reads the low counter at both ends of its window (so low_kernels_per_s
//         is the peer's rate over that window) and sets the stop word when done. --low-ms is then
//         only the peer's L, for the report.
// Timestamps that cross processes are CLOCK_MONOTONIC (window_*_ns in the JSON).
// --cycles-per-us X skips the calibration and uses X: in the two-process form one process would
// calibrate while the other one fills the GPU, so the runner calibrates once, alone, and passes the
// result to every process (the kernels then have the same length in every run).
// Low rate, timed by completions: while high runs beside low work, a thread polls the low
// completion counter every 100 us (in --role low the relay thread does, every 200 us) and logs each
// change with its time; a rate over an interval is the completions between the first and the last
// change inside it over the time between them. low_active_per_s: over the high thread's measured
// window; low_own_timed_per_s: over the low process's own window (--role low, "low alone").
// --idle-tail-s S: after its last measured release the high thread releases nothing for S seconds
// while the low work goes on, then stops it; low_idle_per_s is the low rate over that tail less its
// first --tail-skip-s (0.5: the time gpuprio still counts the high level as active), i.e. what low
// work gets once the important work has gone quiet.
// Prints one JSON line on stdout; exit 0 on success, 1 on any CUDA error.
//
// Usage: interference [--low-ms L] [--priority-mode none|stream|gpuprio] [--releases N]
//                     [--warmup W] [--period-ms P] [--chain C] [--high-us U] [--batch B]
//                     [--low-blocks-per-sm K] [--low-threads T] [--low-fill smem|none]
//                     [--max-seconds S] [--role both|high|low] [--peer-file F] [--stop-file F]
//                     [--seconds S] [--low-warmup-s S] [--peer-wait-s S] [--cycles-per-us X]
//                     [--idle-tail-s S] [--tail-skip-s S]

#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.h"

// Spins for `cycles` SM clock cycles.
__device__ __forceinline__ void gp_spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

// Two kernels, not one, so that gpuprio's per-function GPU-time estimates keep the 50 us and the
// long kernels apart.
__global__ void gp_high_spin_kernel(long long cycles) { gp_spin(cycles); }

// Block 0 / thread 0 then adds one to *done (mapped host memory).
__global__ void gp_low_spin_kernel(long long cycles, unsigned long long* done) {
  gp_spin(cycles);
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    __threadfence_system();
    atomicAdd_system(done, 1ULL);
  }
}

namespace {

using gp_bench::json_escape;
using gp_bench::percentile;
using gp_bench::rt_error;
using Clock = std::chrono::steady_clock;
using SetPriorityFn = int (*)(int);

struct Options {
  double low_ms = 0;
  std::string priority_mode = "none";
  int releases = 150;
  int warmup = 10;
  double period_ms = 10;
  int chain = 20;
  double high_us = 50;
  int batch = 20;
  int low_blocks_per_sm = 4;
  int low_threads = 256;
  std::string low_fill = "smem";
  double max_seconds = 10;
  std::string role = "both";
  std::string peer_file;
  std::string stop_file;
  double seconds = 30;
  double low_warmup_s = 0.5;
  double peer_wait_s = 20;
  double cycles_per_us = 0;  // 0: calibrate
  double idle_tail_s = 0;    // after the high thread's last release, low keeps running this long
  double tail_skip_s = 0.5;  // the start of the tail that is not measured (gpuprio's activity window)
};

void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--low-ms L] [--priority-mode none|stream|gpuprio] [--releases N] [--warmup W]\n"
               "          [--period-ms P] [--chain C] [--high-us U] [--batch B] [--low-blocks-per-sm K]\n"
               "          [--low-threads T] [--low-fill smem|none] [--max-seconds S]\n"
               "          [--role both|high|low] [--peer-file F] [--stop-file F] [--seconds S]\n"
               "          [--low-warmup-s S] [--peer-wait-s S] [--cycles-per-us X] [--idle-tail-s S]\n"
               "          [--tail-skip-s S]\n",
               argv0);
  std::exit(2);
}

// First error wins; every thread may report.
struct ErrorSlot {
  std::mutex mu;
  std::string error;
  void set(const std::string& e) {
    std::lock_guard<std::mutex> lock(mu);
    if (error.empty()) error = e;
  }
  std::string get() {
    std::lock_guard<std::mutex> lock(mu);
    return error;
  }
};

// CLOCK_MONOTONIC in ns. steady_clock reads the same clock on Linux; timestamps that another
// process compares name the clock themselves.
int64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// The block the low and high processes share in --peer-file (two-process form). Lock-free 64-bit
// atomics are address-free, so both mappings may use them.
constexpr uint64_t kPeerMagic = 0x3170656572707067ULL;  // "gpprpee1", little-endian
constexpr size_t kPeerFileBytes = 4096;
struct PeerBlock {
  std::atomic<uint64_t> magic;     // kPeerMagic: stored before the file gets its final name
  std::atomic<uint64_t> low_done;  // low kernels completed, copied from the GPU-written counter
  std::atomic<uint64_t> stop;      // 1: the high process's window is over, the low process stops
  std::atomic<int64_t> low_pid;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<int64_t>::is_always_lock_free,
              "the peer block needs address-free atomics");
static_assert(sizeof(PeerBlock) <= kPeerFileBytes, "peer block larger than its file");

// Low side: fills the block under a temporary name and renames it, so that a high process that
// sees the name never maps a file shorter than the block or a block without its magic.
PeerBlock* create_peer(const std::string& path, std::string* error) {
  const std::string tmp = path + ".tmp." + std::to_string((long)getpid());
  const int fd = open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) { *error = "open " + tmp + ": " + std::strerror(errno); return nullptr; }
  void* p = MAP_FAILED;
  if (ftruncate(fd, (off_t)kPeerFileBytes) == 0)
    p = mmap(nullptr, kPeerFileBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int saved = errno;
  close(fd);
  if (p == MAP_FAILED) { *error = "ftruncate/mmap " + tmp + ": " + std::strerror(saved); unlink(tmp.c_str()); return nullptr; }
  PeerBlock* b = new (p) PeerBlock();
  b->low_done.store(0);
  b->stop.store(0);
  b->low_pid.store((int64_t)getpid());
  b->magic.store(kPeerMagic, std::memory_order_release);
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    *error = "rename " + tmp + " -> " + path + ": " + std::strerror(errno);
    munmap(p, kPeerFileBytes);
    unlink(tmp.c_str());
    return nullptr;
  }
  return b;
}

// High side: waits until the file exists and the low process has completed a kernel, so the
// measured window starts with the GPU full, as the in-process form waits for the low thread.
PeerBlock* open_peer(const std::string& path, double wait_s, std::string* error) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(wait_s));
  PeerBlock* b = nullptr;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!b) {
      const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
      if (fd >= 0) {
        struct stat st;
        void* p = MAP_FAILED;
        if (fstat(fd, &st) == 0 && (size_t)st.st_size >= kPeerFileBytes)
          p = mmap(nullptr, kPeerFileBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (p != MAP_FAILED) {
          b = static_cast<PeerBlock*>(p);
          if (b->magic.load(std::memory_order_acquire) != kPeerMagic) {
            *error = path + " is not a peer block";
            munmap(p, kPeerFileBytes);
            return nullptr;
          }
        }
      }
    }
    if (b && b->low_done.load(std::memory_order_acquire) >= 1) return b;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  *error = b ? "the low process completed no kernel within --peer-wait-s" : path + " did not appear within --peer-wait-s";
  if (b) {
    b->stop.store(1);  // whatever it is doing, it is not measured: let it stop
    munmap(b, kPeerFileBytes);
  }
  return nullptr;
}

struct Shared {
  ErrorSlot err;
  bool wait_for_low_thread = false;      // in-process: the high thread starts once the low thread has
  std::atomic<bool> low_started{false};  // the low thread has issued its first batch
  std::atomic<bool> low_exited{false};   // the low thread has left its loop
  std::atomic<bool> stop{false};         // the high thread is done: the low thread stops
  volatile unsigned long long* low_done_host = nullptr;  // low kernels completed (GPU-written)
  PeerBlock* peer = nullptr;  // --role high with --peer-file: the low counter is the peer's
};

struct HighResult {
  std::vector<double> latency_ms;  // measured releases only
  int warmup_done = 0;
  bool cut_short = false;  // --max-seconds ran out
  double window_s = 0;     // first measured release to end of the last
  int64_t window_start_ns = 0, window_end_ns = 0;  // the same, CLOCK_MONOTONIC
  int64_t tail_end_ns = 0;  // end of the idle tail (--idle-tail-s), 0 without one
  unsigned long long low_done_start = 0, low_done_end = 0;
  int set_priority_rc = -2;  // -2: not called
};

struct LowResult {
  unsigned long long launched = 0;
  int set_priority_rc = -2;
};

// --role low: the low process's own measurement.
struct LowOwn {
  std::string stopped_by = "not run";
  double window_s = 0;  // from --low-warmup-s after the first completion to the stop
  unsigned long long kernels = 0;
  int64_t window_start_ns = 0, window_end_ns = 0;
};

// Low completions as a poller saw them: (CLOCK_MONOTONIC ns, count) at each change of the count.
// A rate over an interval runs from the first change inside it to the last one, so it does not
// depend on where in a kernel the interval's ends fall (at L = 100 ms a 2 s interval holds only ~20
// kernels: counting whole kernels over the interval would be off by up to 5%).
struct CompletionSample {
  int64_t t_ns;
  unsigned long long n;
};

struct TimedRate {
  double per_s = 0;
  unsigned long long kernels = 0;  // completions between the first and the last change inside
  double span_s = 0;
};

TimedRate rate_between(const std::vector<CompletionSample>& log, int64_t from_ns, int64_t to_ns) {
  TimedRate r;
  const CompletionSample* first = nullptr;
  const CompletionSample* last = nullptr;
  for (const CompletionSample& c : log) {
    if (c.t_ns < from_ns) continue;
    if (c.t_ns > to_ns) break;
    if (!first) first = &c;
    last = &c;
  }
  if (first && last != first) {
    r.kernels = last->n - first->n;
    r.span_s = (double)(last->t_ns - first->t_ns) / 1e9;
    r.per_s = (double)r.kernels / r.span_s;
  }
  return r;
}

void note_completions(std::vector<CompletionSample>& log, unsigned long long n) {
  if (log.empty() || log.back().n != n) log.push_back({mono_ns(), n});
}

unsigned long long read_counter(volatile unsigned long long* p) {
  return p ? __atomic_load_n(const_cast<unsigned long long*>(p), __ATOMIC_ACQUIRE) : 0;
}

// Low kernels completed so far, wherever they run.
unsigned long long low_done_now(const Shared& sh) {
  if (sh.peer) return sh.peer->low_done.load(std::memory_order_acquire);
  return read_counter(sh.low_done_host);
}

void high_thread(const Options& opt, cudaStream_t stream, long long cycles, int sms, SetPriorityFn set_prio,
                 Shared& sh, HighResult& res) {
  cudaError_t e = cudaSetDevice(0);
  if (e != cudaSuccess) { sh.err.set(rt_error("cudaSetDevice (high)", e)); sh.stop = true; return; }
  if (set_prio) res.set_priority_rc = set_prio(1);
  if (sh.wait_for_low_thread)
    while (!sh.low_started.load(std::memory_order_acquire) && !sh.stop.load()) std::this_thread::sleep_for(std::chrono::microseconds(200));

  const auto begin = Clock::now();
  const auto deadline = begin + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt.max_seconds));
  const auto period = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(opt.period_ms));
  res.latency_ms.reserve(opt.releases);
  auto next = begin;
  Clock::time_point window_start{};
  const int total = opt.warmup + opt.releases;
  for (int i = 0; i < total; ++i) {
    std::this_thread::sleep_until(next);
    if (Clock::now() >= deadline) { res.cut_short = true; break; }
    if (i == opt.warmup) {
      window_start = Clock::now();
      res.window_start_ns = mono_ns();
      res.low_done_start = low_done_now(sh);
    }
    const auto t0 = Clock::now();
    for (int k = 0; k < opt.chain; ++k) gp_high_spin_kernel<<<sms, 128, 0, stream>>>(cycles);
    e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    const auto t1 = Clock::now();
    if (e != cudaSuccess) { sh.err.set(rt_error("high chain launch/cudaStreamSynchronize", e)); break; }
    if (i < opt.warmup) ++res.warmup_done;
    else res.latency_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    next += period;
    if (next < t1) next = t1;  // late: release the next chain at once
  }
  if (!res.latency_ms.empty()) {
    res.low_done_end = low_done_now(sh);
    res.window_s = std::chrono::duration<double>(Clock::now() - window_start).count();
    res.window_end_ns = mono_ns();
    // The idle tail: no more releases, the low work goes on; its rate is taken from the log.
    if (opt.idle_tail_s > 0 && sh.err.get().empty()) {
      std::this_thread::sleep_for(std::chrono::duration<double>(opt.idle_tail_s));
      res.tail_end_ns = mono_ns();
    }
  }
  sh.stop.store(true, std::memory_order_release);
}

void low_thread(const Options& opt, cudaStream_t stream, long long cycles, int sms, size_t smem,
                unsigned long long* done_dev, SetPriorityFn set_prio, Shared& sh, LowResult& res) {
  cudaError_t e = cudaSetDevice(0);
  if (e != cudaSuccess) { sh.err.set(rt_error("cudaSetDevice (low)", e)); sh.low_started = true; return; }
  if (set_prio) res.set_priority_rc = set_prio(-1);
  const int blocks = opt.low_blocks_per_sm * sms;
  while (!sh.stop.load(std::memory_order_acquire)) {
    for (int k = 0; k < opt.batch; ++k)
      gp_low_spin_kernel<<<blocks, opt.low_threads, smem, stream>>>(cycles, done_dev);
    res.launched += (unsigned long long)opt.batch;
    e = cudaGetLastError();
    sh.low_started.store(true, std::memory_order_release);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    if (e != cudaSuccess) { sh.err.set(rt_error("low launch/cudaStreamSynchronize", e)); break; }
  }
  sh.low_started.store(true, std::memory_order_release);
  sh.low_exited.store(true, std::memory_order_release);
}

// --role low: publishes the completion counter to the peer block, decides when to stop, and
// measures the low process's own rate. A thread of its own because the low thread is blocked in
// cudaStreamSynchronize for a whole batch (20 x L: 400 ms at L = 20 ms).
void relay_thread(const Options& opt, volatile unsigned long long* done_host, PeerBlock* peer, Shared& sh,
                  LowOwn& own, std::vector<CompletionSample>& log) {
  const auto begin = Clock::now();
  const auto deadline = begin + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt.seconds));
  const auto warm = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt.low_warmup_s));
  bool have_first = false, started = false;
  Clock::time_point first{}, start_t{};
  unsigned long long start_n = 0;
  for (unsigned iter = 0;; ++iter) {
    const unsigned long long n = read_counter(done_host);
    const auto t = Clock::now();
    if (peer) peer->low_done.store(n, std::memory_order_release);
    note_completions(log, n);
    if (!have_first && n >= 1) { have_first = true; first = t; }
    if (have_first && !started && t - first >= warm) {
      started = true;
      start_t = t;
      start_n = n;
      own.window_start_ns = mono_ns();
    }
    if (peer && peer->stop.load(std::memory_order_acquire)) { own.stopped_by = "peer"; break; }
    // A stat every 10 ms is enough for a file the runner creates by hand.
    if (!opt.stop_file.empty() && iter % 50 == 0 && access(opt.stop_file.c_str(), F_OK) == 0) {
      own.stopped_by = "stop-file";
      break;
    }
    if (t >= deadline) { own.stopped_by = "seconds"; break; }
    if (sh.low_exited.load(std::memory_order_acquire)) { own.stopped_by = "low thread ended"; break; }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  if (started) {
    const unsigned long long n = read_counter(done_host);
    own.window_s = std::chrono::duration<double>(Clock::now() - start_t).count();
    own.window_end_ns = mono_ns();
    own.kernels = n - start_n;
  }
  sh.stop.store(true, std::memory_order_release);
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  gp_bench::Args args(argc, argv, usage);
  while (args.next()) {
    if (args.is("--low-ms")) opt.low_ms = args.num();
    else if (args.is("--priority-mode")) opt.priority_mode = args.str();
    else if (args.is("--releases")) opt.releases = (int)args.integer();
    else if (args.is("--warmup")) opt.warmup = (int)args.integer();
    else if (args.is("--period-ms")) opt.period_ms = args.num();
    else if (args.is("--chain")) opt.chain = (int)args.integer();
    else if (args.is("--high-us")) opt.high_us = args.num();
    else if (args.is("--batch")) opt.batch = (int)args.integer();
    else if (args.is("--low-blocks-per-sm")) opt.low_blocks_per_sm = (int)args.integer();
    else if (args.is("--low-threads")) opt.low_threads = (int)args.integer();
    else if (args.is("--low-fill")) opt.low_fill = args.str();
    else if (args.is("--max-seconds")) opt.max_seconds = args.num();
    else if (args.is("--role")) opt.role = args.str();
    else if (args.is("--peer-file")) opt.peer_file = args.str();
    else if (args.is("--stop-file")) opt.stop_file = args.str();
    else if (args.is("--seconds")) opt.seconds = args.num();
    else if (args.is("--low-warmup-s")) opt.low_warmup_s = args.num();
    else if (args.is("--peer-wait-s")) opt.peer_wait_s = args.num();
    else if (args.is("--cycles-per-us")) opt.cycles_per_us = args.num();
    else if (args.is("--idle-tail-s")) opt.idle_tail_s = args.num();
    else if (args.is("--tail-skip-s")) opt.tail_skip_s = args.num();
    else args.bad();
  }
  if (opt.low_ms < 0 || opt.releases < 1 || opt.warmup < 0 || opt.period_ms <= 0 || opt.chain < 1 ||
      opt.high_us <= 0 || opt.batch < 1 || opt.low_blocks_per_sm < 1 || opt.low_threads < 1 ||
      opt.low_threads > 1024 || opt.max_seconds <= 0 ||
      (opt.priority_mode != "none" && opt.priority_mode != "stream" && opt.priority_mode != "gpuprio") ||
      (opt.low_fill != "smem" && opt.low_fill != "none") ||
      (opt.role != "both" && opt.role != "high" && opt.role != "low") || (opt.role == "low" && opt.low_ms <= 0) ||
      opt.seconds <= 0 || opt.low_warmup_s < 0 || opt.peer_wait_s <= 0 || opt.cycles_per_us < 0 ||
      opt.idle_tail_s < 0 || opt.tail_skip_s < 0 || (opt.idle_tail_s > 0 && opt.tail_skip_s >= opt.idle_tail_s) ||
      (opt.role == "both" && (!opt.peer_file.empty() || !opt.stop_file.empty())))
    usage(argv[0]);
  const bool run_high_here = opt.role != "low";
  const bool run_low_here = opt.role == "low" || (opt.role == "both" && opt.low_ms > 0);
  const bool with_peer = !opt.peer_file.empty();
  // "alone": the high chain with no low work anywhere (in-process, or a high process with no peer).
  const bool alone = opt.role == "both" ? opt.low_ms == 0 : (opt.role == "high" && !with_peer);

  // gpuprio's C API, if the library is loaded.
  SetPriorityFn set_prio = nullptr;
  const bool have_symbol = dlsym(RTLD_DEFAULT, "gpuprio_set_thread_priority") != nullptr;
  if (opt.priority_mode == "gpuprio" && have_symbol)
    set_prio = reinterpret_cast<SetPriorityFn>(dlsym(RTLD_DEFAULT, "gpuprio_set_thread_priority"));
  std::fprintf(stderr, "interference: gpuprio_set_thread_priority %s%s\n", have_symbol ? "found" : "not found",
               opt.priority_mode == "gpuprio" ? (set_prio ? " (used)" : " (priority-mode gpuprio: threads run unprioritized)")
                                              : " (not used)");

  std::string error;
  char device[256] = "";
  int driver_version = 0;  // through the driver API: this program links libcuda.so.1 itself
  if (cuDriverGetVersion(&driver_version) != CUDA_SUCCESS) driver_version = 0;
  int sms = 0, smem_per_sm = 0, smem_reserved = 0, smem_optin = 0, least = 0, greatest = 0;
  cudaError_t e = cudaSetDevice(0);
  if (e == cudaSuccess) e = cudaFree(nullptr);
  if (e != cudaSuccess) error = rt_error("cudaSetDevice/cudaFree(0)", e);
  if (error.empty()) {
    cudaDeviceProp prop;
    e = cudaGetDeviceProperties(&prop, 0);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, 0);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&smem_reserved, cudaDevAttrReservedSharedMemoryPerBlock, 0);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0);
    if (e == cudaSuccess) e = cudaDeviceGetStreamPriorityRange(&least, &greatest);
    if (e != cudaSuccess) error = rt_error("device queries", e);
    else std::snprintf(device, sizeof device, "%s", prop.name);
  }

  // Low kernel: with --low-fill smem each block asks for 1/K of the SM's shared memory (less the
  // per-block reservation), so K low blocks leave no room for any other block on the SM.
  size_t low_smem = 0;
  int low_resident = 0;
  if (error.empty() && run_low_here) {
    if (opt.low_fill == "smem") {
      long s = (long)smem_per_sm / opt.low_blocks_per_sm - smem_reserved;
      s = std::min<long>(std::max<long>(s, 0), smem_optin);
      low_smem = (size_t)s;
      e = cudaFuncSetAttribute(gp_low_spin_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)low_smem);
      if (e == cudaSuccess)
        e = cudaFuncSetAttribute(gp_low_spin_kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                 (int)cudaSharedmemCarveoutMaxShared);
      if (e != cudaSuccess) error = rt_error("cudaFuncSetAttribute (low kernel shared memory)", e);
    }
    if (error.empty()) {
      e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&low_resident, gp_low_spin_kernel, opt.low_threads, low_smem);
      if (e != cudaSuccess) error = rt_error("cudaOccupancyMaxActiveBlocksPerMultiprocessor", e);
    }
  }

  // Calibration: SM cycles per microsecond, from a 1M-cycle spin kernel (high-kernel shape) timed
  // with events on the idle GPU; median of 5 after 2 warm-ups. The low kernel uses the same clock.
  // With --cycles-per-us only the clock warm-up runs.
  double cycles_per_us = 0;
  if (error.empty()) {
    const long long cal_cycles = 1000000;
    cudaEvent_t a = nullptr, b = nullptr;
    e = cudaEventCreate(&a);
    if (e == cudaSuccess) e = cudaEventCreate(&b);
    // Bring the SM clock up from idle first (~50 ms at full clock), so that the calibration sees
    // the clock the measured runs see.
    gp_high_spin_kernel<<<sms, 128>>>(100000000LL);
    e = e == cudaSuccess ? cudaGetLastError() : e;
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    std::vector<double> us;
    for (int i = 0; i < 7 && e == cudaSuccess && opt.cycles_per_us == 0; ++i) {
      e = cudaEventRecord(a, 0);
      if (e == cudaSuccess) {
        gp_high_spin_kernel<<<sms, 128>>>(cal_cycles);
        e = cudaGetLastError();
      }
      if (e == cudaSuccess) e = cudaEventRecord(b, 0);
      if (e == cudaSuccess) e = cudaEventSynchronize(b);
      float ms = 0;
      if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, a, b);
      if (e == cudaSuccess && i >= 2) us.push_back(ms * 1000.0);
    }
    if (e != cudaSuccess) error = rt_error("calibration", e);
    else cycles_per_us = opt.cycles_per_us > 0 ? opt.cycles_per_us : (double)cal_cycles / percentile(us, 0.5);
    if (a) cudaEventDestroy(a);
    if (b) cudaEventDestroy(b);
  }
  const long long high_cycles = (long long)(opt.high_us * cycles_per_us);
  const long long low_cycles = (long long)(opt.low_ms * 1000.0 * cycles_per_us);

  // Streams: non-blocking, so neither waits on the legacy stream.
  cudaStream_t hs = nullptr, ls = nullptr;
  if (error.empty()) {
    const bool prio = opt.priority_mode == "stream";
    if (run_high_here) e = cudaStreamCreateWithPriority(&hs, cudaStreamNonBlocking, prio ? greatest : 0);
    if (e == cudaSuccess && run_low_here) e = cudaStreamCreateWithPriority(&ls, cudaStreamNonBlocking, prio ? least : 0);
    if (e != cudaSuccess) error = rt_error("cudaStreamCreateWithPriority", e);
  }

  // The low kernels' completion counter, in mapped pinned host memory.
  unsigned long long* done_host = nullptr;
  unsigned long long* done_dev = nullptr;
  if (error.empty() && run_low_here) {
    e = cudaHostAlloc((void**)&done_host, sizeof *done_host, cudaHostAllocMapped);
    if (e == cudaSuccess) { *done_host = 0; e = cudaHostGetDevicePointer((void**)&done_dev, done_host, 0); }
    if (e != cudaSuccess) error = rt_error("cudaHostAlloc/cudaHostGetDevicePointer", e);
  }

  Shared sh;
  sh.low_done_host = done_host;
  sh.wait_for_low_thread = opt.role == "both" && run_low_here;
  HighResult hr;
  LowResult lr;
  LowOwn own;
  std::vector<CompletionSample> completions;  // written by the sampler or relay thread, read after joins
  completions.reserve(1 << 16);
  PeerBlock* peer = nullptr;
  if (error.empty() && with_peer) {
    peer = opt.role == "low" ? create_peer(opt.peer_file, &error) : open_peer(opt.peer_file, opt.peer_wait_s, &error);
    if (opt.role == "high") sh.peer = peer;
  }
  double run_s = 0;
  if (error.empty()) {
    const auto t0 = Clock::now();
    std::thread low, relay, high;
    if (run_low_here)
      low = std::thread(low_thread, std::cref(opt), ls, low_cycles, sms, low_smem, done_dev, set_prio, std::ref(sh),
                        std::ref(lr));
    if (opt.role == "low")
      relay = std::thread(relay_thread, std::cref(opt), done_host, peer, std::ref(sh), std::ref(own),
                          std::ref(completions));
    if (run_high_here)
      high = std::thread(high_thread, std::cref(opt), hs, high_cycles, sms, set_prio, std::ref(sh), std::ref(hr));
    // Low work beside the high thread (here or in the peer): its completions, polled every 100 us.
    std::atomic<bool> sampler_stop{false};
    std::thread sampler;
    if (run_high_here && !alone)
      sampler = std::thread([&] {
        while (!sampler_stop.load(std::memory_order_acquire)) {
          note_completions(completions, low_done_now(sh));
          std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
      });
    if (high.joinable()) high.join();
    sampler_stop.store(true, std::memory_order_release);
    if (sampler.joinable()) sampler.join();
    if (opt.role == "high" && peer) peer->stop.store(1, std::memory_order_release);  // the window is over
    if (relay.joinable()) relay.join();
    if (low.joinable()) low.join();
    run_s = std::chrono::duration<double>(Clock::now() - t0).count();
    error = sh.err.get();
  }
  if (peer && opt.role == "low") peer->low_done.store(read_counter(done_host), std::memory_order_release);

  const std::vector<double>& lat = hr.latency_ms;
  double mean = 0;
  for (double v : lat) mean += v;
  if (!lat.empty()) mean /= (double)lat.size();
  const double p50 = percentile(lat, 0.50), p99 = percentile(lat, 0.99);
  const double mx = lat.empty() ? 0 : *std::max_element(lat.begin(), lat.end());
  const double mn = lat.empty() ? 0 : *std::min_element(lat.begin(), lat.end());
  const unsigned long long low_in_window = hr.low_done_end - hr.low_done_start;
  const double low_per_s = (!alone && hr.window_s > 0) ? (double)low_in_window / hr.window_s : 0;
  const double low_gpu_fraction = low_per_s * opt.low_ms / 1000.0;  // nominal GPU time per second
  const unsigned long long low_total =
      done_host ? read_counter(done_host) : (peer ? peer->low_done.load(std::memory_order_acquire) : 0);
  if (error.empty() && run_high_here && lat.empty()) error = "no measured release completed (max-seconds too short?)";
  if (error.empty() && opt.role == "low" && own.window_s <= 0)
    error = "the low process stopped (" + own.stopped_by + ") before its own window began (--low-warmup-s)";
  const double low_own_per_s = own.window_s > 0 ? (double)own.kernels / own.window_s : 0;
  const TimedRate low_active = rate_between(completions, hr.window_start_ns, hr.window_end_ns);
  const TimedRate low_idle =
      hr.tail_end_ns ? rate_between(completions, hr.window_end_ns + (int64_t)(opt.tail_skip_s * 1e9), hr.tail_end_ns)
                     : TimedRate{};
  const TimedRate low_own_timed = rate_between(completions, own.window_start_ns, own.window_end_ns);
  if (peer) {
    if (opt.role == "high") peer->stop.store(1, std::memory_order_release);  // also after an error
    munmap(peer, kPeerFileBytes);
  }

  if (hs) cudaStreamDestroy(hs);
  if (ls) cudaStreamDestroy(ls);
  if (done_host) cudaFreeHost(done_host);

  const gp_bench::GpuprioEnv env = gp_bench::gpuprio_env();
  const bool set_ok = set_prio != nullptr && (!run_high_here || hr.set_priority_rc == 0) &&
                      (!run_low_here || lr.set_priority_rc == 0);
  const char* env_priority = std::getenv("GPUPRIO_PRIORITY");
  const char* env_domain = std::getenv("GPUPRIO_DOMAIN");
  const char* env_coordinate = std::getenv("GPUPRIO_COORDINATE");
  const char* env_isolation = std::getenv("GPUPRIO_ISOLATION");
  const char* env_reserved = std::getenv("GPUPRIO_RESERVED_SMS");

  std::printf(
      "{\"bench\":\"interference\",\"ok\":%s,\"priority_mode\":\"%s\",\"low_ms\":%g,\"alone\":%s,"
      "\"releases\":%d,\"releases_done\":%zu,\"warmup\":%d,\"cut_short\":%s,\"period_ms\":%g,\"chain\":%d,"
      "\"high_us\":%g,\"high_grid\":%d,\"high_threads\":128,"
      "\"high_p50_ms\":%.4f,\"high_p99_ms\":%.4f,\"high_max_ms\":%.4f,\"high_min_ms\":%.4f,\"high_mean_ms\":%.4f,"
      "\"window_s\":%.4f,\"low_kernels_in_window\":%llu,\"low_kernels_per_s\":%.3f,\"low_gpu_fraction\":%.4f,"
      "\"low_kernels_total\":%llu,\"low_kernels_launched\":%llu,\"low_batch\":%d,\"low_grid\":%d,\"low_threads\":%d,"
      "\"low_blocks_per_sm\":%d,\"low_fill\":\"%s\",\"low_smem_per_block\":%zu,\"low_resident_blocks_per_sm\":%d,"
      "\"sms\":%d,\"cycles_per_us\":%.2f,\"stream_priority_greatest\":%d,\"stream_priority_least\":%d,"
      "\"gpuprio_symbol\":%s,\"gpuprio_priority_set\":%s,\"high_set_rc\":%d,\"low_set_rc\":%d,"
      "\"run_s\":%.3f,\"driver_version\":%d,\"device\":\"%s\",\"preloaded\":%s,\"gpuprio_mode\":\"%s\","
      "\"role\":\"%s\",\"peer\":%s,\"cycles_per_us_given\":%s,\"window_start_ns\":%lld,\"window_end_ns\":%lld,"
      "\"low_own_window_s\":%.4f,\"low_own_kernels\":%llu,\"low_own_per_s\":%.3f,\"low_stopped_by\":\"%s\","
      "\"low_window_start_ns\":%lld,\"low_window_end_ns\":%lld,\"pid\":%ld,\"env_priority\":\"%s\","
      "\"env_domain\":\"%s\",\"env_coordinate\":\"%s\",\"env_isolation\":\"%s\",\"env_reserved_sms\":\"%s\","
      "\"idle_tail_s\":%g,\"tail_skip_s\":%g,\"tail_end_ns\":%lld,\"low_active_per_s\":%.3f,"
      "\"low_active_kernels\":%llu,\"low_active_span_s\":%.4f,\"low_idle_per_s\":%.3f,\"low_idle_kernels\":%llu,"
      "\"low_idle_span_s\":%.4f,\"low_own_timed_per_s\":%.3f,\"low_own_timed_kernels\":%llu,"
      "\"completion_samples\":%zu,\"error\":\"%s\"}\n",
      error.empty() ? "true" : "false", opt.priority_mode.c_str(), opt.low_ms, alone ? "true" : "false",
      opt.releases, lat.size(), opt.warmup, hr.cut_short ? "true" : "false", opt.period_ms, opt.chain, opt.high_us, sms,
      p50, p99, mx, mn, mean, hr.window_s, low_in_window, low_per_s, low_gpu_fraction, low_total, lr.launched,
      opt.batch, alone ? 0 : opt.low_blocks_per_sm * sms, opt.low_threads, opt.low_blocks_per_sm, opt.low_fill.c_str(),
      low_smem, low_resident, sms, cycles_per_us, greatest, least, have_symbol ? "true" : "false",
      set_ok ? "true" : "false", hr.set_priority_rc, lr.set_priority_rc, run_s, driver_version, json_escape(device).c_str(),
      env.preloaded ? "true" : "false", json_escape(env.mode).c_str(), opt.role.c_str(), with_peer ? "true" : "false",
      opt.cycles_per_us > 0 ? "true" : "false", (long long)hr.window_start_ns, (long long)hr.window_end_ns,
      own.window_s, own.kernels, low_own_per_s, json_escape(own.stopped_by).c_str(), (long long)own.window_start_ns,
      (long long)own.window_end_ns, (long)getpid(), json_escape(env_priority ? env_priority : "").c_str(),
      json_escape(env_domain ? env_domain : "").c_str(), json_escape(env_coordinate ? env_coordinate : "").c_str(),
      json_escape(env_isolation ? env_isolation : "").c_str(), json_escape(env_reserved ? env_reserved : "").c_str(),
      opt.idle_tail_s, opt.tail_skip_s, (long long)hr.tail_end_ns, low_active.per_s, low_active.kernels,
      low_active.span_s, low_idle.per_s, low_idle.kernels, low_idle.span_s, low_own_timed.per_s, low_own_timed.kernels,
      completions.size(), json_escape(error).c_str());
  std::fflush(stdout);
  return error.empty() ? 0 : 1;
}
