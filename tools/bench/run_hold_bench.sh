#!/usr/bin/env bash
# What holding costs on the GPU (docs/benchmarks.md, "CPU while held"): a high process with one
# KERNEL_US kernel in flight and a low process whose short kernel it holds back (no hold bound:
# GPUPRIO_MAX_HOLD_MS=0), each tools/bench/hold_probe. Per run: CPU per second of each process
# (every thread, gpuprio's included) over the hold, and the reaction: from the high kernel's end
# to the low kernel's start on the GPU's global timer.
#
#   bash tools/bench/run_hold_bench.sh OUT [ROUNDS]      (default 3 rounds)
#
# FORM=threads holds within one process instead (hold_probe threads: a high thread's kernel, then
# a low thread's, GPUPRIO_ISOLATION=off so that the low kernel is held rather than confined): the
# process's CPU per second of the low thread's wait, and the same reaction; no "alone" there.
#
# Configurations (CONFIGS picks some), interleaved and rotated per round by bench_runs.sh, whose
# BENCH_GPUPRIO_ENV and B_ENV add settings to the gpuprio processes: native (no gpuprio: the low kernel is not
# held, it time-slices beside the high one), gpuprio (LIB, default .gpu/libgpuprio.so), gpuprio-b
# (LIB_B, default .gpu/libgpuprio_b.so, when it exists: another build, an A/B comparison), and
# alone (the high process under gpuprio with no peer: its CPU without anyone to hold). Needs
# .gpu/hold_probe (tests/gpu/build_artifacts.sh). Writes OUT/hold_runs.txt (one line per process
# and run) and OUT/hold_bench.txt (the table); exit 0 when every run succeeded.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:?usage: run_hold_bench.sh OUT [ROUNDS]}"
ROUNDS="${2:-3}"
lib="${LIB:-$repo/.gpu/libgpuprio.so}"
[[ -z "${LIB_B:-}" && -f "$repo/.gpu/libgpuprio_b.so" ]] && LIB_B="$repo/.gpu/libgpuprio_b.so"
probe="$repo/.gpu/hold_probe"
kernel_us="${KERNEL_US:-2000000}"
form="${FORM:-processes}"
[[ "$form" == processes || "$form" == threads ]] || { echo "run_hold_bench: FORM is processes or threads" >&2; exit 2; }
[[ -x "$probe" ]] || { echo "run_hold_bench: $probe missing (tests/gpu/build_artifacts.sh)" >&2; exit 1; }
[[ -f "$lib" ]] || { echo "run_hold_bench: $lib missing" >&2; exit 1; }
mkdir -p "$out/runs"
work="$out/runs"
py=python3
say() { printf 'run_hold_bench: %s\n' "$*"; }
# rounds, gpuprio_env, b_env; run_library, run_rounds, read_configs.
source "$repo/tools/bench/bench_runs.sh"
if [[ "$form" == threads ]]; then
  read_configs run_hold_bench CONFIGS "native gpuprio ${LIB_B:+gpuprio-b}" native gpuprio gpuprio-b
else
  read_configs run_hold_bench CONFIGS "native gpuprio ${LIB_B:+gpuprio-b }alone" native gpuprio gpuprio-b alone
fi
hold_runs="$out/hold_runs.txt"
: >"$hold_runs"
failed=0

run_one() {  # ROUND CONFIG
  local round="$1" cfg="$2" tag="$2_r$1"
  local shm="$out/shm_$tag" ready="$work/$tag.ready"
  mkdir -p "$shm"
  rm -f "$ready" "$ready.low"
  local -a high_env=() low_env=()
  if [[ "$cfg" != native ]]; then
    run_library "$cfg"
    high_env=("${run_env[@]}" LD_PRELOAD="$run_lib" GPUPRIO_PRIORITY=high GPUPRIO_SHM_DIR="$shm")
    low_env=("${run_env[@]}" LD_PRELOAD="$run_lib" GPUPRIO_PRIORITY=low GPUPRIO_MAX_HOLD_MS=0 GPUPRIO_SHM_DIR="$shm")
  fi
  env "${high_env[@]}" "$probe" high "$ready" "$kernel_us" >"$work/$tag.high" 2>"$work/$tag.high.err" &
  local high_pid=$!
  local low_rc=0 high_rc=0
  if [[ "$cfg" == alone ]]; then
    touch "$ready.low"
  else
    env "${low_env[@]}" "$probe" low "$ready" >"$work/$tag.low" 2>"$work/$tag.low.err" || low_rc=$?
  fi
  wait "$high_pid" || high_rc=$?
  printf '%s %s high rc=%s %s\n' "$cfg" "$round" "$high_rc" "$(cat "$work/$tag.high")" >>"$hold_runs"
  if [[ "$cfg" != alone ]]; then
    printf '%s %s low rc=%s %s\n' "$cfg" "$round" "$low_rc" "$(cat "$work/$tag.low")" >>"$hold_runs"
  fi
  ((high_rc == 0 && low_rc == 0)) || failed=1
  rm -rf "$shm" "$ready" "$ready.low"
  say "$tag high rc=$high_rc low rc=$low_rc"
}

run_one_process() {  # ROUND CONFIG: FORM=threads
  local round="$1" cfg="$2" tag="$2_r$1" rc=0
  local shm="$out/shm_$tag"
  mkdir -p "$shm"
  local -a probe_env=()
  if [[ "$cfg" != native ]]; then
    run_library "$cfg"
    probe_env=("${run_env[@]}" LD_PRELOAD="$run_lib" GPUPRIO_ISOLATION=off GPUPRIO_MAX_HOLD_MS=0 GPUPRIO_SHM_DIR="$shm")
  fi
  env "${probe_env[@]}" "$probe" threads "$kernel_us" >"$work/$tag.threads" 2>"$work/$tag.threads.err" || rc=$?
  printf '%s %s low rc=%s %s\n' "$cfg" "$round" "$rc" "$(cat "$work/$tag.threads")" >>"$hold_runs"
  ((rc == 0)) || failed=1
  rm -rf "$shm"
  say "$tag rc=$rc"
}

if [[ "$form" == threads ]]; then
  run_rounds run_one_process "${configs[@]}"
else
  run_rounds run_one "${configs[@]}"
fi

python3 - "$hold_runs" "$kernel_us" "$repo/tools/bench" "$form" >"$out/hold_bench.txt" <<'PY'
import re, sys
sys.path.insert(0, sys.argv[3])
threads = sys.argv[4] == "threads"
from bench_stats import spread
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    m = re.search(r"cpu_ns (\d+) wall_ns (\d+) start_ns (\d+) end_ns (\d+)", line)
    if not m or "rc=0" not in line:
        continue
    cpu, wall, start, end = map(int, m.groups())
    rows.setdefault((f[0], int(f[1])), {})[f[2]] = (cpu, wall, start, end)
def fmt(values, unit):
    s = spread(values)
    return "-" if not s["n"] else "%.1f [%.1f-%.1f] %s" % (s["median"], s["min"], s["max"], unit)
if threads:
    print("hold bench, one process: a high thread's %s us kernel, a low thread's 10 us kernel held "
          "behind it (GPUPRIO_ISOLATION=off GPUPRIO_MAX_HOLD_MS=0); median [min-max] over rounds; "
          "the low column is the whole process's CPU" % sys.argv[2])
else:
    print("hold bench: a high process's %s us kernel, a low process's 10 us kernel held behind it "
          "(GPUPRIO_MAX_HOLD_MS=0); median [min-max] over rounds" % sys.argv[2])
print("%-10s %-28s %-28s %-30s" % ("config", "low CPU ms per held s", "high CPU ms per s",
                                     "reaction us (low start - high end)"))
for cfg in ["native", "gpuprio", "gpuprio-b", "alone"]:
    runs = [v for (c, _), v in sorted(rows.items()) if c == cfg]
    if not runs:
        continue
    low = [r["low"][0] / 1e6 / (r["low"][1] / 1e9) for r in runs if "low" in r]
    high = [r["high"][0] / 1e6 / (r["high"][1] / 1e9) for r in runs if "high" in r]
    if threads:  # one line: the low kernel's start and the high kernel's end
        react = [(r["low"][2] - r["low"][3]) / 1e3 for r in runs if "low" in r]
    else:
        react = [(r["low"][2] - r["high"][3]) / 1e3 for r in runs if "low" in r and "high" in r]
    print("%-10s %-28s %-28s %-30s" % (cfg, fmt(low, ""), fmt(high, ""), fmt(react, "")))
PY
cat "$out/hold_bench.txt"
exit "$failed"
