#!/usr/bin/env bash
# Interference benchmark, two-process form (docs/benchmarks.md), run ON the GPU machine from the repo root,
# after tests/gpu/build_artifacts.sh filled .gpu/ on the CPU machine and .gpu was carried:
#
#   bash tools/bench/run_two_process_bench.sh "$OUT" [--mps] [--native-only]
#
# The high process (.gpu/interference --role high: 20 x 50 us chains released every 10 ms) and the
# low process (--role low: back-to-back full-GPU kernels of L ms) are separate processes, so they
# share the GPU the way two jobs do: time-sliced, or concurrently under MPS (--mps). They meet
# through a small peer file (interference.cu says how), so the low rate is counted over exactly
# the high process's measured window. Each round (ROUNDS, default 3) runs
#   alone          the high process only, native: the latency baseline (it does not depend on L,
#                  so one per round, and every L's ratios are against the median of all of them)
# then for each L in LOW_MS (default "0.2 2 20"), in an order rotated per round:
#   low-alone      the low process only, native, for LOW_ALONE_SECONDS (the baseline of its rate)
#   native         both processes, no gpuprio
#   gpuprio        both under LD_PRELOAD=.gpu/libgpuprio.so GPUPRIO_MODE=schedule, GPUPRIO_PRIORITY=high /
#                  low, and a GPUPRIO_DOMAIN of their own (a segment left by an earlier run can
#                  never take part)
# and last "alone-gpuprio" (the high process alone under gpuprio: what scheduling itself costs).
# --native-only skips the gpuprio runs. Before all of it one native alone run calibrates the spin
# kernels' clock; every process then gets that --cycles-per-us (a process calibrating beside a busy
# GPU would not).
# The low kernels are thread-full by default (LOW_SHAPE: 2 blocks of 1024 threads per SM, each
# with half of the SM's shared memory), so no block of another process fits beside them on an
# SM, under MPS included; LOW_SHAPE="--low-blocks-per-sm 4 --low-threads 256" gives the in-process
# table's shape.
#
# --mps: starts an MPS control daemon (as root) with CUDA_MPS_PIPE_DIRECTORY and
# CUDA_MPS_LOG_DIRECTORY under a fresh /tmp directory, exported to every process, runs the same
# matrix, and quits the daemon on every way out (trap EXIT); the daemon's log goes to OUT
# (tools/bench/mps_daemon.sh, shared with run_torch_bench.sh).
#
# Every process has its own process group and a timeout; a failing or hanging run is recorded, not
# fatal, and whatever is left of it is killed before the next run. After gpuprio runs have timed
# out twice the rest are skipped, and once the runs have taken BENCH_BUDGET seconds (default 220)
# every remaining run is skipped (recorded as such): about 2.5-3 minutes per mode when nothing hangs.
# Writes OUT/two_process[_mps].json (every run, per-L medians, spreads, ratios, targets) and
# OUT/two_process[_mps].txt (the table). Exit 0 when every native run succeeded.
# Environment: LOW_MS, ROUNDS (3), RELEASES (200), WARMUP (10), MAX_SECONDS (6; the high process
# stops measuring then), LOW_ALONE_SECONDS (3), PEER_WAIT (15), BENCH_TIMEOUT (40, per high process),
# BENCH_BUDGET (220), LOW_SHAPE, EXTRA_ARGS (more interference flags for both processes),
# BENCH_GPUPRIO_ENV (more VAR=VALUE for the gpuprio processes, e.g. "GPUPRIO_COORDINATE=0"), PYTHON,
# PAIR_CONFIGS (the per-L configurations, default "low-alone native gpuprio"; add "gpuprio-low" for
# the high process native beside a low process with every op confined: what the partition alone
# gives, with nothing of gpuprio in the high process; add "gpuprio-b" for "gpuprio" with B_ENV's
# VAR=VALUE added and LIB_B, when set, as the library: an A/B comparison in the same rounds).
set -uo pipefail

gp_flags=(mps)
source "$(dirname "${BASH_SOURCE[0]}")/../../tests/gpu/gpu_run_args.sh" "$@"
# rounds, gpuprio_env, runs; warmup, low_alone_seconds, low_shape, extra (interference_settings).
source "$repo/tools/bench/bench_runs.sh"
bin="$repo/.gpu/interference"
report="$repo/tools/bench/two_process_report.py"
low_list="${LOW_MS:-0.2 2 20}"
releases="${RELEASES:-200}"
max_seconds="${MAX_SECONDS:-6}"
peer_wait="${PEER_WAIT:-15}"
high_timeout="${BENCH_TIMEOUT:-40}"
budget="${BENCH_BUDGET:-220}"
interference_settings
name=two_process
((mps)) && name=two_process_mps

need_bin "$bin"
need_lib

source "$repo/tools/bench/bench_procs.sh"
source "$repo/tools/bench/mps_daemon.sh"
cleanup_at_exit "gpbench_$$_"

((mps)) && mps_start "$out" "$name"

cycles_args=()
common=(--releases "$releases" --warmup "$warmup" --max-seconds "$max_seconds" "${low_shape[@]}" "${extra[@]}")
start=$SECONDS
n=0

# run_config ROUND GROUP_L CONFIG: one run (one or two processes) and its record in runs.jsonl.
run_config() {
  local round="$1" low="$2" config="$3"
  n=$((n + 1))
  local tag="$n.$config.l$low.r$round" with_lib=0 skip="" domain="gpbench_$$_$n"
  [[ "$config" == gpuprio* || "$config" == alone-gpuprio ]] && with_lib=1
  local -a henv=() lenv=()
  if ((with_lib)); then
    run_library "$config"
    henv=(LD_PRELOAD="$run_lib" GPUPRIO_MODE=schedule GPUPRIO_PRIORITY=high GPUPRIO_DOMAIN="$domain" "${run_env[@]}")
    lenv=(LD_PRELOAD="$run_lib" GPUPRIO_MODE=schedule GPUPRIO_PRIORITY=low GPUPRIO_DOMAIN="$domain" "${run_env[@]}")
    # The diagnosis: the high process native, every low op confined.
    [[ "$config" == gpuprio-low ]] && henv=() lenv+=(GPUPRIO_ISOLATION=force)
  fi
  run_skip "$with_lib" BENCH_BUDGET
  local -a rec=(--group "$low" --config "$config" --round "$round" --mps "$mps" --gpuprio "$with_lib")
  if [[ -n "$skip" ]]; then
    "$py" "$report" record "${rec[@]}" --skip "$skip" >>"$runs"
    say "r$round L=$low $config: $skip"
    return
  fi
  local peer="$work/$tag.peer" stop="$work/$tag.stop" hpid="" lpid="" hrc="" lrc="" t0=$SECONDS
  # The low process stops by itself well after the high process's longest run, in case neither
  # the peer block nor the stop file reaches it.
  local low_seconds=$((peer_wait + ${max_seconds%.*} + 15))
  case "$config" in
    alone | alone-gpuprio)
      start_proc "$tag.high" "$high_timeout" "${henv[@]}" -- "$bin" --role high --low-ms 0 "${cycles_args[@]}" \
        "${common[@]}"
      hpid=$started_pid ;;
    low-alone)
      start_proc "$tag.low" $((${low_alone_seconds%.*} + 30)) -- "$bin" --role low --low-ms "$low" \
        --seconds "$low_alone_seconds" "${cycles_args[@]}" "${common[@]}"
      lpid=$started_pid ;;
    native | gpuprio | gpuprio-b | gpuprio-low)
      start_proc "$tag.low" $((low_seconds + 15)) "${lenv[@]}" -- "$bin" --role low --low-ms "$low" \
        --peer-file "$peer" --stop-file "$stop" --seconds "$low_seconds" "${cycles_args[@]}" "${common[@]}"
      lpid=$started_pid
      start_proc "$tag.high" "$high_timeout" "${henv[@]}" -- "$bin" --role high --low-ms "$low" \
        --peer-file "$peer" --peer-wait-s "$peer_wait" "${cycles_args[@]}" "${common[@]}"
      hpid=$started_pid ;;
  esac
  # A low batch is 20 x L (400 ms at 20 ms); 10 s give it that and its exit, then it is ended.
  finish_pair "$hpid" "$lpid" "$stop" 5 10 "r$round L=$low $config"
  record_pair "$report" "$t0" out "r$round L=$low $config" high low "${rec[@]}"
}

# --- Calibration: one native alone run on the idle GPU; its clock rate goes to every process. ---
say "work dir $work; $( ((mps)) && echo "under MPS" || echo "without MPS (time-sliced)"); low shape: ${low_shape[*]}"
start_proc calibrate 60 -- "$bin" --role high --low-ms 0 --releases 20 --warmup 5
finish_proc "$started_pid"
"$py" "$report" record --group 0 --config calibrate --round 0 --mps "$mps" --gpuprio 0 \
  --high-out "$work/calibrate.out" --high-err "$work/calibrate.err" --high-rc "$finished_rc" >>"$runs"
use_calibration "$finished_rc" "$report"

read -r -a pair_configs <<<"${PAIR_CONFIGS:-low-alone native gpuprio}"
((native_only)) && pair_configs=(low-alone native)
for ((r = 1; r <= rounds; r++)); do
  run_config "$r" 0 alone
  for low in $low_list; do
    rotated "$r" "${pair_configs[@]}"
    for c in "${rotated[@]}"; do run_config "$r" "$low" "$c"; done
  done
  ((native_only)) || run_config "$r" 0 alone-gpuprio
done

finish_report "$report" processes
