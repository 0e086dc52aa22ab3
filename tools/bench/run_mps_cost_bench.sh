#!/usr/bin/env bash
# MPS cost benchmark (docs/benchmarks.md): what MPS itself costs a launch-bound server that runs
# ALONE (no neighbour), run ON the GPU machine from the repo root, as root, after
# tests/gpu/build_artifacts.sh filled .gpu/ on the CPU machine and .gpu was carried:
#
#   bash tools/bench/run_mps_cost_bench.sh "$OUT" [--native-only]
#
# Servers (SERVERS, default "chain chain-short launch torch"), each one process alone on the GPU:
#   chain        .gpu/interference --role high --low-ms 0: the synthetic benchmarks' server, a chain
#                of 20 kernels of 50 us released every 10 ms (RELEASES, 300); p50/p99 of a chain
#   chain-short  the same with --chain 100 --high-us 2: 100 kernels of 2 us, launch-bound (the host
#                issues the chain more slowly than the GPU runs it)
#   launch       .gpu/launch_rate --threads 1 --api runtime --launches LAUNCHES (100000): the time of
#                a launch call (p50/p99 over batches of 32 calls, in us) and the launch rate
#   torch        tools/bench/torch_two_process.py high: ResNet-18 batch 1 fp16 eager (launch-bound),
#                TORCH_REQUESTS (500) requests open loop at TORCH_RATE (50) per second; left out, and
#                said so, when PYTHON has no torch with a GPU
# Configurations (MPS_COST_CONFIGS, default "native gpuprio mps gpuprio-mps"):
#   native       no MPS, no gpuprio: the baseline
#   mps          a client of an MPS control daemon of the script's own (tools/bench/mps_daemon.sh)
#   gpuprio      LD_PRELOAD=.gpu/libgpuprio.so GPUPRIO_MODE=schedule GPUPRIO_PRIORITY=high, a
#                GPUPRIO_DOMAIN of its own, no MPS
#   gpuprio-mps  the same under MPS
# --native-only: native and mps only. ROUNDS (3) rounds; each round runs the configurations in the
# list turned left by round - 1 (so no configuration always runs first, and the MPS daemon is started
# and quit at most twice a round: the two MPS configurations are next to each other in every
# rotation but the one that wraps them), and within a configuration every server, also rotated.
# The daemon is started before a round's first MPS run and quit before its next non-MPS run; a
# daemon that was already running before the script (e.g. at the default pipe directory) is said
# in the table, as the native runs would then not be native.
# One native chain run on the idle GPU first calibrates the spin kernels' clock (as the other
# interference runners do); every chain run gets that --cycles-per-us.
# Every process has a timeout (BENCH_TIMEOUT, 60 s; torch: TORCH_TIMEOUT, 90 s); a failing or
# hanging run is recorded, not fatal; after gpuprio runs have timed out twice the rest are skipped,
# and once the runs have taken BENCH_BUDGET seconds (480) every remaining run is (recorded as such).
# Normally ~6 minutes with torch, ~2.5 without (3 rounds).
# Writes OUT/mps_cost.json (every run; per server and configuration p50/p99 median [min-max] over
# rounds, ratios against native of the same round, and each configuration's spread between rounds),
# OUT/mps_cost.txt (the table; tools/bench/mps_cost_report.py says what each column is),
# OUT/mps_cost_runs.jsonl and, per round with MPS, the daemon's output and log
# (OUT/mps_cost_rR_N_mps_control.txt, OUT/mps_cost_rR_N_mps_log: round R, started before run N).
# Exit 0 when every run without
# gpuprio succeeded.
# Environment: SERVERS, MPS_COST_CONFIGS, ROUNDS, RELEASES, WARMUP (10), LAUNCHES, TORCH_REQUESTS,
# TORCH_RATE, TORCH_ARGS (more flags for torch_two_process.py high, e.g. "--high-graph"),
# BENCH_TIMEOUT, TORCH_TIMEOUT, BENCH_BUDGET, BENCH_GPUPRIO_ENV (more VAR=VALUE for the gpuprio
# runs), PYTHON.
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../../tests/gpu/gpu_run_args.sh" "$@"
source "$repo/tools/bench/bench_runs.sh"  # rounds, gpuprio_env, runs, run_skip, count_timeout, ...
name=mps_cost
report="$repo/tools/bench/mps_cost_report.py"
stats="$repo/tools/bench/bench_stats.py"
chain_bin="$repo/.gpu/interference"
launch_bin="$repo/.gpu/launch_rate"
torch_script="$repo/tools/bench/torch_two_process.py"
releases="${RELEASES:-300}"
warmup="${WARMUP:-10}"
launches="${LAUNCHES:-100000}"
torch_requests="${TORCH_REQUESTS:-500}"
torch_rate="${TORCH_RATE:-50}"
bench_timeout="${BENCH_TIMEOUT:-60}"
torch_timeout="${TORCH_TIMEOUT:-90}"
budget="${BENCH_BUDGET:-480}"
read -r -a torch_extra <<<"${TORCH_ARGS:-}"
read -r -a servers <<<"${SERVERS:-chain chain-short launch torch}"
for s in "${servers[@]}"; do
  case "$s" in
    chain | chain-short | launch | torch) ;;
    *) echo "run_mps_cost_bench: unknown server '$s' in SERVERS (chain, chain-short, launch, torch)" >&2; exit 2 ;;
  esac
done
read_configs run_mps_cost_bench MPS_COST_CONFIGS "native gpuprio mps gpuprio-mps" native gpuprio mps gpuprio-mps
if ((native_only)); then
  keep=()
  for c in "${configs[@]}"; do [[ "$c" == gpuprio* ]] || keep+=("$c"); done
  configs=("${keep[@]}")
fi
((${#configs[@]})) || { say "error: no configuration left to run"; exit 2; }
has_server() {
  local s
  for s in "${servers[@]}"; do [[ "$s" == "$1" ]] && return 0; done
  return 1
}
has_server chain || has_server chain-short && need_bin "$chain_bin"
has_server launch && need_bin "$launch_bin"
for c in "${configs[@]}"; do [[ "$c" == gpuprio* ]] && need_lib; done

source "$repo/tools/bench/bench_procs.sh"
source "$repo/tools/bench/mps_daemon.sh"
cleanup_at_exit "gpbench_mpscost_$$_"

notes=()
before="$(mps_pids)"
if [[ -n "$before" ]]; then
  say "warning: MPS processes were running before the script (pids $before): runs without MPS may be clients of them"
  notes+=("WARNING: MPS processes (pids $before) were running before the script: the runs without MPS may have been their clients")
fi

# torch: only where this python has it and a GPU (checked without MPS, without gpuprio).
if has_server torch; then
  if timeout -k 5 120 env -u LD_PRELOAD "$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
    >"$out/mps_cost_torch_preflight.txt" 2>&1; then
    say "torch with a GPU found: the ResNet-18 server runs"
  else
    say "no torch with a GPU in $py ($(tail -n 1 "$out/mps_cost_torch_preflight.txt")): the torch server is left out"
    notes+=("the torch server was left out: no torch with a GPU in $py")
    keep=()
    for s in "${servers[@]}"; do [[ "$s" == torch ]] || keep+=("$s"); done
    servers=("${keep[@]}")
  fi
fi
((${#servers[@]})) || { say "error: no server left to run"; exit 1; }

start=$SECONDS
n=0
cycles_args=()
if has_server chain || has_server chain-short; then
  start_proc calibrate 60 -- env -u CUDA_MPS_PIPE_DIRECTORY -u CUDA_MPS_LOG_DIRECTORY "$chain_bin" --role high \
    --low-ms 0 --releases 20 --warmup 5
  finish_proc "$started_pid"
  "$py" "$stats" record --out "$work/calibrate.out" --err "$work/calibrate.err" --rc "$finished_rc" \
    server=chain config=calibrate round=0 mps=false gpuprio=false >>"$runs"
  use_calibration "$finished_rc" "$report"
fi

mps_on=0
# want_mps ROUND 0|1: the daemon running (a fresh one, named for the round) or not.
want_mps() {
  if (($2 && !mps_on)); then
    mps_start "$out" "${name}_r${1}_$n"
    mps_on=1
  elif ((!$2 && mps_on)); then
    mps_stop
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    mps_on=0
  fi
}

# run_one ROUND CONFIG SERVER: one process alone, and its record in runs.jsonl.
run_one() {
  local round="$1" config="$2" server="$3"
  n=$((n + 1))
  local tag="$n.$server.$config.r$round" with_lib=0 with_mps=0 skip="" rc=125 tmo="$bench_timeout"
  [[ "$config" == gpuprio* ]] && with_lib=1
  [[ "$config" == *mps ]] && with_mps=1
  local -a envs=() cmd=()
  local out_file="$work/$tag.out"
  if ((with_lib)); then
    run_library "$config"
    envs=(LD_PRELOAD="$run_lib" GPUPRIO_MODE=schedule GPUPRIO_PRIORITY=high GPUPRIO_DOMAIN="gpbench_mpscost_$$_$n"
          "${run_env[@]}")
  fi
  case "$server" in
    chain) cmd=("$chain_bin" --role high --low-ms 0 --releases "$releases" --warmup "$warmup" "${cycles_args[@]}") ;;
    chain-short) cmd=("$chain_bin" --role high --low-ms 0 --chain 100 --high-us 2 --releases "$releases"
                      --warmup "$warmup" "${cycles_args[@]}") ;;
    launch) cmd=("$launch_bin" --threads 1 --api runtime --launches "$launches") ;;
    torch)
      out_file="$work/$tag.json"
      tmo="$torch_timeout"
      cmd=("$py" "$torch_script" high --result "$out_file" --rate "$torch_rate" --requests "$torch_requests"
           "${torch_extra[@]}") ;;
  esac
  run_skip "$with_lib" BENCH_BUDGET
  if [[ -n "$skip" ]]; then
    echo "$skip" >"$work/$tag.err"
    : >"$out_file"
  else
    want_mps "$round" "$with_mps"
    start_proc "$tag" "$tmo" "${envs[@]}" -- "${cmd[@]}"
    finish_proc "$started_pid"
    rc=$finished_rc
    # start_proc sends stdout to TAG.out; the torch server writes its result to TAG.json.
    count_timeout "$with_lib" "$rc"
  fi
  local -a skip_args=()
  [[ -n "$skip" ]] && skip_args=(--skip "$skip")
  "$py" "$stats" record --out "$out_file" --err "$work/$tag.err" --rc "$rc" "${skip_args[@]}" \
    server="$server" config="$config" round="$round" mps="$( ((with_mps)) && echo true || echo false)" \
    gpuprio="$( ((with_lib)) && echo true || echo false)" >>"$runs"
  say "r$round $config $server: rc=$rc $(tail -n 1 "$runs" | "$py" "$report" brief)"
}

say "work dir $work; servers: ${servers[*]}; configurations: ${configs[*]}; $rounds rounds"
for ((r = 1; r <= rounds; r++)); do
  rotated "$r" "${configs[@]}"
  round_configs=("${rotated[@]}")
  for c in "${round_configs[@]}"; do
    rotated "$r" "${servers[@]}"
    for s in "${rotated[@]}"; do run_one "$r" "$c" "$s"; done
  done
done
want_mps 0 0

cp "$runs" "$out/${name}_runs.jsonl"
finish_report "$report" runs "${notes[@]}"
