#!/usr/bin/env bash
# How soon work a killed process was holding back resumes (docs/benchmarks.md, "Kill -> resume"),
# on the fake driver (no GPU). Per repetition: a low process streaming short kernels
# (`coord_client stream`, no hold bound: GPUPRIO_MAX_HOLD_MS=0) and a high process with one long
# kernel in flight (`coord_client hold high`, 5 s); once the low process's progress has stopped
# (it is held), the high process is SIGKILLed at a random point 0-250 ms later, and the figure is
# the time from just before the kill to the low process's next progress timestamp (both
# CLOCK_MONOTONIC). That timestamp is taken when the low process's stream sync returns, so it
# includes running its 8 queued kernels (8 x KERNEL_US, default 10 us each).
#
#   bash tools/bench/kill_resume_bench.sh [REPS] [OUT]     (default 20 repetitions, OUT: stdout)
#
# Builds //tests/coordinator:coord_client, the fake libcuda and libgpuprio.so first (NO_BUILD=1:
# use what bazel-bin holds). Every process coordinates in a private GPUPRIO_SHM_DIR under a
# temporary directory, removed at the end. Prints one row per repetition, then p50 / p90 / max,
# the spread, and the machine's load; exit 0 when every repetition resumed.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
reps="${1:-20}"
out="${2:-}"
kernel_us="${KERNEL_US:-10}"
cd "$repo"
if [[ "${NO_BUILD:-0}" != 1 ]]; then
  bazel build //tests/coordinator:coord_client //tests/fake_cuda:libcuda.so.1 //hook:libgpuprio.so >&2
fi
bin="$repo/bazel-bin"
client="$bin/tests/coordinator/coord_client"
fake="$bin/tests/fake_cuda/libcuda.so.1"
lib="$bin/hook/libgpuprio.so"
for f in "$client" "$fake" "$lib"; do
  [[ -f "$f" ]] || { echo "kill_resume_bench: $f missing" >&2; exit 1; }
done
work="$(mktemp -d "${TMPDIR:-/tmp}/kill_resume_bench.XXXXXX")"
trap 'rm -rf "$work"' EXIT

commit="$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
dirty=""
[[ -n "$(git -C "$repo" status --porcelain --untracked-files=no 2>/dev/null)" ]] && dirty="+changes"

run() {
  python3 - "$client" "$fake" "$lib" "$work" "$reps" "$kernel_us" "$commit$dirty" <<'PY'
import os, random, statistics, subprocess, sys, time

client, fake, lib, work, reps, kernel_us, commit = sys.argv[1:]
reps = int(reps)
# The kill comes at a random point of the held time: each process checks the slot locks every
# 100 ms from its own start, and a kill at a fixed delay would always meet the same phase.
delays = random.Random(20261127)

def now():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)

def env(priority, extra=()):
    e = dict(os.environ)
    e.update({
        "LD_LIBRARY_PATH": os.path.dirname(fake),
        "LD_PRELOAD": lib,
        "GPUPRIO_MODE": "schedule",
        "GPUPRIO_PRIORITY": priority,
        "GPUPRIO_SHM_DIR": os.path.join(work, "shm"),
        "GPUPRIO_DOMAIN": "kill-resume-%d" % os.getpid(),
    })
    e.update(extra)
    return e

def wait_for(cond, timeout_s, what):
    end = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > end:
            raise RuntimeError("timed out waiting for " + what)
        time.sleep(0.001)

def progress(path):
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        return 0
    return int(text) if len(text) == 20 and text.isdigit() else 0

def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])

os.makedirs(os.path.join(work, "shm"), mode=0o700)
load_before = loadavg()
rows, failures = [], 0
print("kill -> resume, fake driver: low `coord_client stream` (%s us kernels, sync every 8, "
      "GPUPRIO_MAX_HOLD_MS=0) held by high `coord_client hold high` (5 s kernel), high SIGKILLed"
      % kernel_us)
print("commit %s, %d CPUs, %d repetitions" % (commit, os.cpu_count(), reps))
print("%4s %14s %14s %10s" % ("rep", "held_ms", "resume_ms", "low_rc"))
for rep in range(1, reps + 1):
    base = os.path.join(work, "r%d" % rep)
    low_ready, high_ready, stop = base + ".low", base + ".high", base + ".stop"
    low = high = None
    try:
        with open(base + ".low.out", "w") as lo, open(base + ".low.err", "w") as le:
            low = subprocess.Popen([client, "stream", low_ready, stop, kernel_us],
                                   stdout=lo, stderr=le,
                                   env=env("low", {"GPUPRIO_MAX_HOLD_MS": "0"}))
        wait_for(lambda: os.path.exists(low_ready), 30, "the low process's first sync")
        with open(base + ".high.out", "w") as ho, open(base + ".high.err", "w") as he:
            high = subprocess.Popen([client, "hold", "high", high_ready, "5000000"],
                                    stdout=ho, stderr=he, env=env("high"))
        wait_for(lambda: os.path.exists(high_ready), 30, "the high process's launch")
        # Held: no progress for 200 ms (a running low process writes every ~0.1-1 ms).
        last, since = progress(low_ready + ".progress"), now()
        high_started = since
        while now() - since < 200_000_000:
            p = progress(low_ready + ".progress")
            if p != last:
                last, since = p, now()
            if high.poll() is not None:
                raise RuntimeError(
                    "the high process ended (rc %d, %.0f ms after its launch) before the low one "
                    "was held (last progress %.0f ms before)"
                    % (high.returncode, (now() - high_started) / 1e6, (now() - last) / 1e6))
            time.sleep(0.001)
        time.sleep(delays.uniform(0, 0.25))
        killed_at = now()
        high.kill()
        high.wait()
        wait_for(lambda: progress(low_ready + ".progress") > killed_at, 30,
                 "the low process to resume")
        resumed_at = progress(low_ready + ".progress")
        open(stop, "w").close()
        rc = low.wait(timeout=120)
        rows.append((killed_at - last, resumed_at - killed_at))
        print("%4d %14.3f %14.3f %10d" % (rep, (killed_at - last) / 1e6,
                                          (resumed_at - killed_at) / 1e6, rc))
        if rc != 0:
            failures += 1
    except Exception as e:  # one failed repetition is reported, the others still run
        failures += 1
        print("%4d failed: %s" % (rep, e))
        for name in ("low", "high"):
            try:
                with open(base + "." + name + ".err") as f:
                    for line in f.read().splitlines()[-5:]:
                        print("     %s stderr: %s" % (name, line))
            except FileNotFoundError:
                pass
    finally:
        for p in (high, low):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
    sys.stdout.flush()

resume = sorted(r[1] / 1e6 for r in rows)
def pct(q):
    return resume[min(len(resume) - 1, int(round(q * (len(resume) - 1))))]
print()
if resume:
    print("resume after kill (ms), %d of %d repetitions: min %.1f  p50 %.1f  p90 %.1f  max %.1f  "
          "mean %.1f  stdev %.1f" % (len(resume), reps, resume[0], pct(0.5), pct(0.9), resume[-1],
                                     statistics.mean(resume),
                                     statistics.stdev(resume) if len(resume) > 1 else 0.0))
print("load average (1/5/15 min): before %s, after %s" % (load_before, loadavg()))
sys.exit(1 if failures or not resume else 0)
PY
}

if [[ -n "$out" ]]; then
  run | tee "$out"
else
  run
fi
