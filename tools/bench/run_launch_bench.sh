#!/usr/bin/env bash
# Launch-overhead benchmark (docs/benchmarks.md, section 2), run ON the GPU machine from the repo root, after
# tests/gpu/build_artifacts.sh filled .gpu/ on the CPU machine and .gpu was carried along:
#
#   bash tools/bench/run_launch_bench.sh "$OUT" [--native-only]
#
# Runs .gpu/launch_rate natively, with LD_PRELOAD=.gpu/libgpuprio.so GPUPRIO_MODE=passthrough, and
# in schedule mode three ways: "schedule" (defaults: the fast path issues on the caller while
# nothing more important is active), "deferred" (GPUPRIO_DIRECT_ISSUE=0: every launch goes through
# the dispatcher thread) and "sched-low" (GPUPRIO_PRIORITY=low: budgeted work, always through the
# dispatcher), "sched-nocoord" (schedule with GPUPRIO_COORDINATE=0: what the cross-process segment
# costs a lone process) and "sched-trace" (schedule with GPUPRIO_TRACE: the tracer's cost per
# launch); 1 and 8 threads; --api driver and runtime; each configuration
# REPS times (default 3), interleaved (round r runs every configuration once before round r+1).
# A failing or hanging run (e.g. schedule mode not implemented yet) is recorded, not fatal; after a
# mode has timed out twice its remaining runs are skipped (recorded as skipped), so a hanging mode
# cannot push the whole script past the device tool's 10-minute limit.
# Writes OUT/launch_bench.json (every run + medians + ratios against native of the same run) and
# OUT/launch_bench.txt (the table). Exit 0 when every native run succeeded.
# Environment: MODES (default "native passthrough schedule sched-nocoord deferred sched-low
# sched-trace"),
# LAUNCHES (per thread, default 100000), REPS (default 3), PYTHON (default python3),
# BENCH_TIMEOUT (seconds per run, default 20; a normal run takes 1-2 s).
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../../tests/gpu/gpu_run_args.sh"
bin="$repo/.gpu/launch_rate"
lib="$repo/.gpu/libgpuprio.so"
launches="${LAUNCHES:-100000}"
reps="${REPS:-3}"
per_run_timeout="${BENCH_TIMEOUT:-20}"
py="${PYTHON:-python3}"
say() { printf 'run_launch_bench: %s\n' "$*"; }

[[ -x "$bin" ]] || { say "error: $bin missing: run tests/gpu/build_artifacts.sh and carry .gpu"; exit 1; }
read -r -a modes <<<"${MODES:-native passthrough schedule sched-nocoord deferred sched-low sched-trace}"
if ((native_only)); then
  modes=(native)
else
  [[ -f "$lib" ]] || { say "error: $lib missing (use --native-only to measure without it)"; exit 1; }
fi
mkdir -p "$out"
work="$(mktemp -d /tmp/gpuprio_launch_bench.XXXXXX)"
runs="$work/runs.jsonl"
: >"$runs"
declare -A timeouts=()

for ((r = 1; r <= reps; r++)); do
  for threads in 1 8; do
    for api in driver runtime; do
      for mode in "${modes[@]}"; do
        env_args=(env -u LD_PRELOAD -u GPUPRIO_MODE -u GPUPRIO_LOG -u GPUPRIO_PRIORITY
                  -u GPUPRIO_DIRECT_ISSUE -u GPUPRIO_TRACE -u GPUPRIO_MAX_QUEUED
                  -u GPUPRIO_COORDINATE -u GPUPRIO_DOMAIN)
        case "$mode" in
          native) ;;
          passthrough) env_args+=(LD_PRELOAD="$lib" GPUPRIO_MODE=passthrough) ;;
          schedule) env_args+=(LD_PRELOAD="$lib" GPUPRIO_MODE=schedule GPUPRIO_DOMAIN="launch_$$") ;;
          # The same without the cross-process segment: what the segment costs a lone process.
          sched-nocoord) env_args+=(LD_PRELOAD="$lib" GPUPRIO_MODE=schedule GPUPRIO_COORDINATE=0) ;;
          # No backpressure in these two (GPUPRIO_MAX_QUEUED high): "call" is then the client-side
          # cost of queueing a launch, the rate is the dispatcher's.
          deferred) env_args+=(LD_PRELOAD="$lib" GPUPRIO_MODE=schedule GPUPRIO_DIRECT_ISSUE=0
                               GPUPRIO_MAX_QUEUED=1000000) ;;
          sched-low) env_args+=(LD_PRELOAD="$lib" GPUPRIO_MODE=schedule GPUPRIO_PRIORITY=low
                                GPUPRIO_MAX_QUEUED=1000000) ;;
          sched-trace) env_args+=(LD_PRELOAD="$lib" GPUPRIO_MODE=schedule
                                  GPUPRIO_TRACE="$work/trace.t$threads.$api.r$r.json") ;;
        esac
        tag="$mode.t$threads.$api.r$r"
        if ((${timeouts[$mode]:-0} >= 2)); then
          echo "skipped: mode $mode timed out twice" >"$work/$tag.err"
          : >"$work/$tag.out"
          rc=125
        else
          # A traced run writes ~1 KB of trace per launch at exit: a fifth of the launches keeps the
          # file and the write short (the per-launch figures compare all the same).
          n="$launches"
          [[ "$mode" == sched-trace ]] && n=$((launches / 5))
          timeout -k 5 "$per_run_timeout" "${env_args[@]}" "$bin" --threads "$threads" --api "$api" \
            --launches "$n" >"$work/$tag.out" 2>"$work/$tag.err"
          rc=$?
          rm -f "$work"/trace.*.json
          ((rc == 124 || rc == 137)) && timeouts[$mode]=$((${timeouts[$mode]:-0} + 1))
        fi
        # One record per run: the program's JSON line (if any) plus what the script knows.
        "$py" - "$mode" "$threads" "$api" "$r" "$rc" "$work/$tag.out" "$work/$tag.err" >>"$runs" <<'PY'
import json, sys
mode, threads, api, rep, rc, out_path, err_path = sys.argv[1:]
rec = {}
out = open(out_path, errors="replace").read()
for line in out.splitlines():
    if line.startswith("{"):
        try:
            rec = json.loads(line)
        except ValueError:
            pass
err = open(err_path, errors="replace").read()
rec.update(mode=mode, threads=int(threads), api=api, rep=int(rep), rc=int(rc))
rec["ok"] = bool(rec.get("ok")) and int(rc) == 0
if not rec["ok"]:
    rec["stderr_tail"] = err[-1500:]
    rec["stdout_tail"] = out[-500:]
    if int(rc) in (124, 137):
        rec["error"] = (rec.get("error") or "") + " timed out"
    elif int(rc) == 125:
        rec["error"] = "skipped (mode timed out twice)"
print(json.dumps(rec))
PY
        printf 'run_launch_bench: round %d %-11s threads=%d api=%-7s rc=%d %s\n' "$r" "$mode" "$threads" "$api" "$rc" \
          "$(grep -o '"launches_per_s":[0-9.]*,"call_us_mean":[0-9.]*' "$work/$tag.out" 2>/dev/null)"
      done
    done
  done
done

"$py" "$repo/tools/bench/launch_bench_report.py" "$runs" "$out/launch_bench.json" "$out/launch_bench.txt" \
  --launches "$launches" --reps "$reps"
rc=$?
cat "$out/launch_bench.txt" 2>/dev/null
exit "$rc"
