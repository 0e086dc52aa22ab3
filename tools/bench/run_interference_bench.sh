#!/usr/bin/env bash
# Interference benchmark, in-process form (docs/benchmarks.md), run ON the GPU machine from the repo
# root, after tests/gpu/build_artifacts.sh filled .gpu/ on the CPU machine and .gpu was carried:
#
#   bash tools/bench/run_interference_bench.sh "$OUT" [--plan main|reserved|sparse] [--native-only]
#
# One program (.gpu/interference), two threads: the high chain (20 x 50 us every 10 ms) and
# thread-full low kernels of L ms (LOW_SHAPE, default 2 blocks of 1024 threads per SM with half the
# SM's shared memory each: no other block fits on a busy SM). Every pair run has an idle tail
# (TAIL_S, 2.5 s: no releases, low goes on; its rate is taken after TAIL_SKIP_S, 0.5 s, gpuprio's
# activity window). Configurations:
#   alone            the high thread only, native (once per round: it has no L)
#   low-alone        the low thread only (--role low), native, LOW_ALONE_SECONDS
#   low-alone-gpuprio the same under gpuprio at GPUPRIO_PRIORITY=low (a batch job with no server)
#   none / stream    native, default stream priorities / CUDA stream priorities
#   gpuprio-off|-active|-always
#                    LD_PRELOAD=.gpu/libgpuprio.so GPUPRIO_MODE=schedule GPUPRIO_LOG=info
#                    GPUPRIO_ISOLATION=off|active|always, thread priorities 1 / -1 (C API)
#   gpuprio-rN       gpuprio-active with GPUPRIO_RESERVED_SMS=N
#   alone-gpuprio    the high thread alone under gpuprio (what scheduling itself costs)
# Plans (--plan, default main):
#   main      L in LOW_MS ("0.2 2 20 100"): alone, alone-gpuprio, and per L the configurations in
#             CONFIGS ("low-alone none stream gpuprio-off gpuprio-active gpuprio-always"; ~6 minutes)
#   reserved  L in LOW_MS ("20 2"), N in RESERVED ("8 16 32 64"): alone, and per L low-alone and
#             gpuprio-rN (~2.5 minutes)
#   sparse    the first request after a quiet period: releases every SPARSE_PERIOD_MS (1000, more
#             than the 0.5 s activity window), SPARSE_RELEASES (12) measured, L in LOW_MS ("20"):
#             alone, gpuprio-active, gpuprio-always (~2.5 minutes)
# ROUNDS (3) rounds, configurations of an L in an order rotated per round. One native alone run
# first calibrates the spin kernels' clock; every run then gets that --cycles-per-us.
# L = 100 ms runs get RELEASES_LONG (300) releases and MAX_SECONDS_LONG (8) so that a gpuprio run
# has ~30 low kernels in its window; natively a chain then takes ~2 s, and the run is cut short by
# max-seconds (recorded: "cut short").
# --native-only skips every gpuprio run. Every run has a timeout (max-seconds + tail + 20 s); a
# failing or hanging run is recorded, not fatal; after gpuprio runs have timed out twice the rest
# are skipped, and once the runs have taken BENCH_BUDGET seconds (main 420, else 200) every
# remaining run is skipped (recorded as such).
# Writes OUT/interference[_PLAN].json (every run, per configuration medians and spreads over
# rounds, ratios, targets) and OUT/interference[_PLAN].txt (the table); interference_report.py says
# what each column is. Exit 0 when every native run succeeded.
# Environment: LOW_MS, CONFIGS, RESERVED, ROUNDS, BENCH_TIMEOUT (seconds per run instead of the computed one), RELEASES (150), WARMUP (10), MAX_SECONDS (5),
# RELEASES_LONG, MAX_SECONDS_LONG, TAIL_S, TAIL_SKIP_S, LOW_ALONE_SECONDS (3), SPARSE_PERIOD_MS,
# SPARSE_RELEASES, BENCH_BUDGET, LOW_SHAPE, EXTRA_ARGS (more interference flags for every run),
# BENCH_GPUPRIO_ENV (more VAR=VALUE for every gpuprio run), PYTHON.
set -uo pipefail

plan=main
rest=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --plan) plan="${2:-}"; shift 2 || shift ;;
    *) rest+=("$1"); shift ;;
  esac
done
source "$(dirname "${BASH_SOURCE[0]}")/../../tests/gpu/gpu_run_args.sh" "${rest[@]}"
# rounds, gpuprio_env, runs; warmup, low_alone_seconds, low_shape, extra (interference_settings).
source "$repo/tools/bench/bench_runs.sh"
bin="$repo/.gpu/interference"
report="$repo/tools/bench/interference_report.py"
stats="$repo/tools/bench/bench_stats.py"
case "$plan" in
  main) low_list="${LOW_MS:-0.2 2 20 100}"; budget="${BENCH_BUDGET:-420}"; name=interference ;;
  reserved) low_list="${LOW_MS:-20 2}"; budget="${BENCH_BUDGET:-200}"; name=interference_reserved ;;
  sparse) low_list="${LOW_MS:-20}"; budget="${BENCH_BUDGET:-200}"; name=interference_sparse ;;
  *) say "error: unknown --plan '$plan' (main, reserved or sparse)"; exit 2 ;;
esac
read -r -a reserved_list <<<"${RESERVED:-8 16 32 64}"
releases="${RELEASES:-150}"
max_seconds="${MAX_SECONDS:-5}"
releases_long="${RELEASES_LONG:-300}"
max_seconds_long="${MAX_SECONDS_LONG:-8}"
tail_s="${TAIL_S:-2.5}"
tail_skip_s="${TAIL_SKIP_S:-0.5}"
sparse_period="${SPARSE_PERIOD_MS:-1000}"
sparse_releases="${SPARSE_RELEASES:-12}"
interference_settings

need_bin "$bin"
need_lib
cycles_args=()
start=$SECONDS
n=0

# run_one ROUND GROUP_L CONFIG: one process, and its record in runs.jsonl.
run_one() {
  local round="$1" low="$2" config="$3"
  n=$((n + 1))
  local tag="$n.$config.l$low.r$round" with_lib=0 skip=""
  local -a env_args=(env -u LD_PRELOAD -u GPUPRIO_MODE -u GPUPRIO_LOG -u GPUPRIO_ISOLATION -u GPUPRIO_RESERVED_SMS
                     -u GPUPRIO_PRIORITY -u GPUPRIO_DOMAIN)
  local -a args=(--priority-mode none)
  case "$config" in
    alone) args+=(--low-ms 0) ;;
    low-alone) args=(--role low --low-ms "$low" --seconds "$low_alone_seconds") ;;
    low-alone-gpuprio)
      with_lib=1; args=(--role low --low-ms "$low" --seconds "$low_alone_seconds"); env_args+=(GPUPRIO_PRIORITY=low) ;;
    none) args+=(--low-ms "$low") ;;
    stream) args=(--priority-mode stream --low-ms "$low") ;;
    alone-gpuprio) with_lib=1; args=(--priority-mode gpuprio --low-ms 0) ;;
    gpuprio-off | gpuprio-active | gpuprio-always)
      with_lib=1; args=(--priority-mode gpuprio --low-ms "$low"); env_args+=(GPUPRIO_ISOLATION="${config#gpuprio-}") ;;
    gpuprio-r*)
      with_lib=1; args=(--priority-mode gpuprio --low-ms "$low")
      env_args+=(GPUPRIO_ISOLATION=active GPUPRIO_RESERVED_SMS="${config#gpuprio-r}") ;;
  esac
  ((with_lib)) && env_args+=(LD_PRELOAD="$lib" GPUPRIO_MODE=schedule GPUPRIO_LOG=info "${gpuprio_env[@]}")
  local rel="$releases" maxs="$max_seconds" wu="$warmup" period=10
  [[ "$low" == 100 ]] && rel="$releases_long" maxs="$max_seconds_long"
  if [[ "$plan" == sparse ]]; then
    period="$sparse_period" rel="$sparse_releases" wu=2
    maxs=$(((rel + wu + 1) * period / 1000 + 5))
  fi
  [[ "$config" == low-alone* ]] || args+=(--releases "$rel" --warmup "$wu" --max-seconds "$maxs" --period-ms "$period")
  [[ "$config" == alone || "$config" == alone-gpuprio || "$config" == low-alone* ]] ||
    args+=(--idle-tail-s "$tail_s" --tail-skip-s "$tail_skip_s")
  local tmo="${BENCH_TIMEOUT:-$((${maxs%.*} + ${tail_s%.*} + 20))}"
  run_skip "$with_lib" BENCH_BUDGET
  local rc=125
  if [[ -n "$skip" ]]; then
    echo "$skip" >"$work/$tag.err"
    : >"$work/$tag.out"
  else
    echo "${env_args[*]} $bin ${args[*]}" >"$work/$tag.cmd"
    timeout -k 5 "$tmo" "${env_args[@]}" "$bin" "${args[@]}" "${cycles_args[@]}" "${low_shape[@]}" "${extra[@]}" \
      >"$work/$tag.out" 2>"$work/$tag.err"
    rc=$?
    count_timeout "$with_lib" "$rc"
  fi
  local -a skip_args=()
  [[ -n "$skip" ]] && skip_args=(--skip "$skip")
  "$py" "$stats" record --out "$work/$tag.out" --err "$work/$tag.err" --rc "$rc" --stderr-always "${skip_args[@]}" \
    plan="$plan" group_low_ms="$low" config="$config" round="$round" gpuprio="$( ((with_lib)) && echo true || echo false)" \
    >>"$runs"
  say "r$round L=$low $config: rc=$rc $(tail -n 1 "$runs" | "$py" "$report" brief)"
}

# --- Calibration: one native alone run on the idle GPU; its clock rate goes to every run. ---
say "plan $plan, work dir $work, low shape: ${low_shape[*]}"
timeout -k 5 60 env -u LD_PRELOAD "$bin" --low-ms 0 --releases 20 --warmup 5 >"$work/calibrate.out" 2>"$work/calibrate.err"
crc=$?
"$py" "$stats" record --out "$work/calibrate.out" --err "$work/calibrate.err" --rc "$crc" \
  plan="$plan" group_low_ms=0 config=calibrate round=0 gpuprio=false >>"$runs"
use_calibration "$crc" "$report"

case "$plan" in
  main) read -r -a per_l <<<"${CONFIGS:-low-alone none stream gpuprio-off gpuprio-active gpuprio-always}"
        once=(alone alone-gpuprio) ;;
  reserved) per_l=(low-alone); for r in "${reserved_list[@]}"; do per_l+=("gpuprio-r$r"); done; once=(alone) ;;
  sparse) per_l=(gpuprio-active gpuprio-always); once=(alone) ;;
esac
if ((native_only)); then
  keep=()
  for c in "${per_l[@]}"; do [[ "$c" == gpuprio-* ]] || keep+=("$c"); done
  per_l=("${keep[@]}")
  once=(alone)
fi
for ((r = 1; r <= rounds; r++)); do
  for c in "${once[@]}"; do run_one "$r" 0 "$c"; done
  for low in $low_list; do
    rotated "$r" "${per_l[@]}"
    for c in "${rotated[@]}"; do run_one "$r" "$low" "$c"; done
  done
done

finish_report "$report" runs
