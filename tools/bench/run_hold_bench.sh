#!/usr/bin/env bash
# What holding costs on the GPU (docs/benchmarks.md, "CPU while held"): a high process with one
# KERNEL_US kernel in flight and a low process whose short kernel it holds back (no hold bound:
# GPUPRIO_MAX_HOLD_MS=0), each tools/bench/hold_probe. Per run: CPU per second of each process
# (every thread, gpuprio's included) over the hold, and the reaction: from the high kernel's end
# to the low kernel's start on the GPU's global timer.
#
#   bash tools/bench/run_hold_bench.sh OUT [ROUNDS]      (default 3 rounds)
#
# Configurations, interleaved and rotated per round: native (no gpuprio: the low kernel is not
# held, it time-slices beside the high one), gpuprio (LIB, default .gpu/libgpuprio.so), gpuprio-b
# (LIB_B, default .gpu/libgpuprio_b.so, when it exists: another build, an A/B comparison), and
# alone (the high process under gpuprio with no peer: its CPU without anyone to hold). Needs
# .gpu/hold_probe (tests/gpu/build_artifacts.sh). Writes OUT/hold_runs.txt (one line per process
# and run) and OUT/hold_bench.txt (the table); exit 0 when every run succeeded.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:?usage: run_hold_bench.sh OUT [ROUNDS]}"
rounds="${2:-3}"
lib="${LIB:-$repo/.gpu/libgpuprio.so}"
lib_b="${LIB_B:-$repo/.gpu/libgpuprio_b.so}"
probe="$repo/.gpu/hold_probe"
kernel_us="${KERNEL_US:-2000000}"
[[ -x "$probe" ]] || { echo "run_hold_bench: $probe missing (tests/gpu/build_artifacts.sh)" >&2; exit 1; }
[[ -f "$lib" ]] || { echo "run_hold_bench: $lib missing" >&2; exit 1; }
mkdir -p "$out/runs"
configs=(native gpuprio alone)
[[ -f "$lib_b" ]] && configs=(native gpuprio gpuprio-b alone)
runs="$out/hold_runs.txt"
: >"$runs"
failed=0

run_one() {  # CONFIG ROUND
  local cfg="$1" round="$2" tag="$1_r$2"
  local shm="$out/shm_$tag" ready="$out/runs/$tag.ready"
  mkdir -p "$shm"
  rm -f "$ready" "$ready.low"
  local -a high_env=() low_env=()
  case "$cfg" in
    native) ;;
    gpuprio|alone) high_env=(LD_PRELOAD="$lib" GPUPRIO_PRIORITY=high GPUPRIO_SHM_DIR="$shm")
                   low_env=(LD_PRELOAD="$lib" GPUPRIO_PRIORITY=low GPUPRIO_MAX_HOLD_MS=0 GPUPRIO_SHM_DIR="$shm") ;;
    gpuprio-b) high_env=(LD_PRELOAD="$lib_b" GPUPRIO_PRIORITY=high GPUPRIO_SHM_DIR="$shm")
               low_env=(LD_PRELOAD="$lib_b" GPUPRIO_PRIORITY=low GPUPRIO_MAX_HOLD_MS=0 GPUPRIO_SHM_DIR="$shm") ;;
  esac
  env "${high_env[@]}" "$probe" high "$ready" "$kernel_us" >"$out/runs/$tag.high" 2>"$out/runs/$tag.high.err" &
  local high_pid=$!
  local low_rc=0 high_rc=0
  if [[ "$cfg" == alone ]]; then
    touch "$ready.low"
  else
    env "${low_env[@]}" "$probe" low "$ready" >"$out/runs/$tag.low" 2>"$out/runs/$tag.low.err" || low_rc=$?
  fi
  wait "$high_pid" || high_rc=$?
  printf '%s %s high rc=%s %s\n' "$cfg" "$round" "$high_rc" "$(cat "$out/runs/$tag.high")" >>"$runs"
  if [[ "$cfg" != alone ]]; then
    printf '%s %s low rc=%s %s\n' "$cfg" "$round" "$low_rc" "$(cat "$out/runs/$tag.low")" >>"$runs"
  fi
  ((high_rc == 0 && low_rc == 0)) || failed=1
  rm -rf "$shm" "$ready" "$ready.low"
  echo "run_hold_bench: $tag high rc=$high_rc low rc=$low_rc"
}

for ((r = 1; r <= rounds; ++r)); do
  n=${#configs[@]}
  for ((i = 0; i < n; ++i)); do run_one "${configs[$(((i + r - 1) % n))]}" "$r"; done
done

python3 - "$runs" "$kernel_us" >"$out/hold_bench.txt" <<'PY'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    m = re.search(r"cpu_ns (\d+) wall_ns (\d+) start_ns (\d+) end_ns (\d+)", line)
    if not m or "rc=0" not in line:
        continue
    cpu, wall, start, end = map(int, m.groups())
    rows.setdefault((f[0], int(f[1])), {})[f[2]] = (cpu, wall, start, end)
def fmt(values, unit):
    if not values:
        return "-"
    return "%.1f [%.1f-%.1f] %s" % (statistics.median(values), min(values), max(values), unit)
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
    react = [(r["low"][2] - r["high"][3]) / 1e3 for r in runs if "low" in r and "high" in r]
    print("%-10s %-28s %-28s %-30s" % (cfg, fmt(low, ""), fmt(high, ""), fmt(react, "")))
PY
cat "$out/hold_bench.txt"
exit "$failed"
