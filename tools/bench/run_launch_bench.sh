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
# cannot push the whole script past its 10-minute time budget.
# Writes OUT/launch_bench.json (every run + medians + ratios against native of the same run) and
# OUT/launch_bench.txt (the table). Exit 0 when every native run succeeded.
# Last (not with --native-only; ISOLATION_CHECK=0 skips it), the isolation check: schedule mode with
# GPUPRIO_LOG=info at 1 and 8 threads must print no "gpuprio: info: isolation: device" line and count no
# confined ops (a lone program creates no green context); OUT/launch_isolation.txt, and exit 1 if not.
# Environment: MODES (default "native passthrough schedule sched-nocoord deferred sched-low
# sched-trace"),
# LAUNCHES (per thread, default 100000), REPS (default 3), PYTHON (default python3),
# BENCH_TIMEOUT (seconds per run, default 20; a normal run takes 1-2 s).
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../../tests/gpu/gpu_run_args.sh"
bin="$repo/.gpu/launch_rate"
stats="$repo/tools/bench/bench_stats.py"
launches="${LAUNCHES:-100000}"
reps="${REPS:-3}"
per_run_timeout="${BENCH_TIMEOUT:-20}"

need_bin "$bin"
need_lib
read -r -a modes <<<"${MODES:-native passthrough schedule sched-nocoord deferred sched-low sched-trace}"
((native_only)) && modes=(native)
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
        skip_args=()
        ((rc == 125)) && skip_args=(--skip "$(cat "$work/$tag.err")" --skip-error "skipped (mode timed out twice)")
        "$py" "$stats" record --out "$work/$tag.out" --err "$work/$tag.err" --rc "$rc" "${skip_args[@]}" \
          mode="$mode" threads="$threads" api="$api" rep="$r" >>"$runs"
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

# A lone program must not pay for spatial isolation: with nothing more important anywhere, gpuprio
# creates no green context (GPUPRIO_ISOLATION at its default) and issues nothing on twin streams.
if ((native_only == 0 && ${ISOLATION_CHECK:-1})); then
  iso="$out/launch_isolation.txt"
  : >"$iso"
  for threads in 1 8; do
    tag="isolation.t$threads"
    timeout -k 5 "$per_run_timeout" env -u LD_PRELOAD -u GPUPRIO_ISOLATION -u GPUPRIO_PRIORITY -u GPUPRIO_DOMAIN \
      LD_PRELOAD="$lib" GPUPRIO_MODE=schedule GPUPRIO_LOG=info "$bin" --threads "$threads" --api runtime \
      --launches "$launches" >"$work/$tag.out" 2>"$work/$tag.err"
    irc=$?
    green="$(grep -c 'gpuprio: info: isolation: device' "$work/$tag.err")"
    confined="$(grep -o 'confined=[0-9]*' "$work/$tag.err" | awk -F= '{s += $2; n++} END {if (n) print s}')"
    verdict=PASS
    if ((irc != 0)) || ! grep -q '"ok": *true' "$work/$tag.out"; then verdict="FAIL (rc=$irc)"; fi
    ((green > 0)) && verdict="FAIL (a green context in a lone process)"
    [[ -n "$confined" && "$confined" != 0 ]] && verdict="FAIL (confined=$confined in a lone process)"
    {
      echo "isolation, lone process, threads=$threads: $verdict; 'isolation: device' lines: $green; confined=${confined:-absent}"
      grep '^gpuprio: info: isolation\|confined=' "$work/$tag.err" | sed 's/^/    /'
    } >>"$iso"
    [[ "$verdict" == PASS ]] || rc=1
  done
  cat "$iso"
fi
exit "$rc"
