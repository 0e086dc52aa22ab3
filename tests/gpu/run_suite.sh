#!/usr/bin/env bash
# Runs several GPU checks and benchmarks in one device call (device time is scarce) and packs
# their results so they fit the device tool's limit on returned files:
#
#   bash tests/gpu/run_suite.sh OUT STEP [STEP...]
#
# Steps: interception (passthrough), schedule (interception check in schedule mode, fast path
# on), deferred (the same with GPUPRIO_DIRECT_ISSUE=0: every op through the dispatcher), launch
# (tools/bench/run_launch_bench.sh), interference (tools/bench/run_interference_bench.sh),
# two_process and two_process_mps (tools/bench/run_two_process_bench.sh, without and with --mps;
# ~3 minutes each), torch (tools/bench/run_torch_bench.sh; ~5 minutes: give it a device call of
# its own), trace (tests/gpu/run_trace_check.sh). Each step writes into OUT/work/STEP; at the end
# OUT/results.tgz holds every step's files and OUT/suite.txt each step's exit code and summary.
set -uo pipefail
[[ $# -ge 2 ]] || { echo "usage: $0 OUT STEP [STEP...]" >&2; exit 2; }
out="$1"; shift
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
work="$(mktemp -d /tmp/gpuprio_suite.XXXXXX)"
summary="$out/suite.txt"
mkdir -p "$out"
: >"$summary"
status=0
for step in "$@"; do
  dir="$work/$step"
  mkdir -p "$dir"
  t0=$SECONDS
  case "$step" in
    interception) GPUPRIO_CHECK_MODE=passthrough bash tests/gpu/run_interception_check.sh "$dir" ;;
    schedule) GPUPRIO_CHECK_MODE=schedule bash tests/gpu/run_interception_check.sh "$dir" ;;
    deferred) GPUPRIO_DIRECT_ISSUE=0 GPUPRIO_CHECK_MODE=schedule \
                bash tests/gpu/run_interception_check.sh "$dir" ;;
    launch) bash tools/bench/run_launch_bench.sh "$dir" ;;
    interference) bash tools/bench/run_interference_bench.sh "$dir" ;;
    two_process) bash tools/bench/run_two_process_bench.sh "$dir" ;;
    two_process_mps) bash tools/bench/run_two_process_bench.sh "$dir" --mps ;;
    torch) bash tools/bench/run_torch_bench.sh "$dir" ;;
    trace) bash tests/gpu/run_trace_check.sh "$dir" ;;
    *) echo "unknown step $step" >"$dir/error.txt"; false ;;
  esac >"$dir/console.txt" 2>&1
  rc=$?
  ((rc == 0)) || status=1
  {
    printf '=== %s: rc=%d (%ds)\n' "$step" "$rc" $((SECONDS - t0))
    tail -n 40 "$dir/console.txt"
  } >>"$summary"
done
tar -C "$work" -czf "$out/results.tgz" .
cat "$summary"
exit "$status"
