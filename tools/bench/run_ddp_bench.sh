#!/usr/bin/env bash
# Two-GPU PyTorch benchmark: a latency-critical server on GPU 0 beside two-rank DDP training on GPUs
# 0 and 1, natively and under gpuprio. Run ON a machine with two GPUs (python3 with torch,
# torchvision and torchrun; no Bazel) from the repo root, after tests/gpu/build_artifacts.sh filled
# .gpu/ on the CPU machine and .gpu was carried:
#
#   bash tools/bench/run_ddp_bench.sh "$OUT" [--mps] [--native-only]
#
# server  = torch_two_process.py high on cuda:0: ResNet-18 batch 1 fp16 inference, requests released
#           open loop at RATE (20) per second, REQUESTS (300) measured after 20 unmeasured ones;
#           latency from each request's due time to its logits on the host. Started without --peer,
#           so it waits for no batch process and reads no peer counters: its result has no low rate.
# trainer = python3 -m torch.distributed.run --standalone --nproc_per_node=2 ddp_train_bench.py:
#           DistributedDataParallel ResNet-50 training over NCCL, rank r on GPU r, synthetic data,
#           batch DDP_BATCH (64) a rank, DDP_PRECISION (bf16 autocast; or fp32), SGD; DDP_WARMUP (5)
#           unmeasured steps, then synchronised steps whose ends it records (ddp_train_bench.py
#           says how it measures and how its ranks agree to stop).
# Per round (ROUNDS, default 3; order rotated per round):
#   alone      the server only, native (the latency baseline)
#   ddp-alone  the trainer only, native, DDP_SECONDS (12) measured (the throughput baseline)
#   native     both, no gpuprio
#   gpuprio    both under LD_PRELOAD=.gpu/libgpuprio.so GPUPRIO_MODE=schedule, the server
#              GPUPRIO_PRIORITY=high, the trainer's torchrun and both its ranks GPUPRIO_PRIORITY=low,
#              one GPUPRIO_DOMAIN of the run's own for all of them
# In native and gpuprio the trainer starts first; the server is started once the trainer's rank 0
# has written its ready file (its warm-up is over), and when the server has ended the runner
# creates the trainer's stop file: the ranks stop after the step in progress. The report then takes
# the trainer's steps that ended inside the server's measured window (both sides time on
# CLOCK_MONOTONIC), so the trainer's start, warm-up and the server's model load do not count.
# --native-only skips the gpuprio runs. DDP_CONFIGS (default "alone ddp-alone native gpuprio")
# picks the configurations; gpuprio-b is gpuprio with B_ENV's VAR=VALUE added and LIB_B, when set,
# as the library (an A/B comparison in the same interleaved rounds; bench_runs.sh).
#
# Every process, the preflight included, has NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
# NVSHMEM_DISABLE_NVLS=1 in its environment: no NVLink multicast on these machines.
#
# --mps (as root): every process, the preflight and both ranks of every trainer included, is a client
# of an MPS control daemon of the script's own, started before the preflight and quit on every way
# out (tools/bench/mps_daemon.sh); its output and log go to OUT. Without MPS the server and the
# trainer's rank 0 are time-sliced on GPU 0.
#
# Every process (the server; the trainer's torchrun) has its own process group and a timeout: the
# server SERVER_TIMEOUT (75 s: loading torch and the model takes 5-15 s, 320 requests at 20/s 16 s);
# a trainer TRAINER_START_S (75 s: torchrun, NCCL, the model and the warm-up, also how long the
# runner waits for the ready file) plus its measured time plus a margin. torchrun starts each worker in
# a session of its own, out of reach of a kill of torchrun's group: the workers write their pids
# (ddp_train_bench.py --pid-dir), leave by themselves when torchrun is gone, and whatever of them is
# still there after a run, or when the script ends, is killed by those pids (checked to be
# ddp_train_bench.py processes first). A failing or hanging run is recorded, not fatal; a pair
# whose trainer never became ready gets no server run and is recorded as failed. After gpuprio runs
# have timed out twice the rest are skipped, and once the runs have taken DDP_BUDGET seconds (450)
# every remaining run is skipped, so the script ends within a 10-minute device call (normally 7-8
# minutes: about 25 s an alone run, 30 s a ddp-alone run, 45 s a pair).
#
# Writes OUT/ddp_bench.json (every run, pooled percentiles, ratios, the server's busy share, the
# targets), OUT/ddp_bench.txt (the table: tools/bench/ddp_bench_report.py says what is in it; last
# lines: whether it ran under MPS, and the settings), OUT/ddp_bench_runs.jsonl (the records as
# written), OUT/ddp_preflight.txt and OUT/ddp_bench_logs.tgz (every process's command line, stdout
# and stderr). The names do not change with --mps: give each form an OUT of its own. Exit 0 when
# every native run succeeded.
# Environment: ROUNDS, REQUESTS, RATE, DDP_BATCH, DDP_PRECISION, DDP_WARMUP, DDP_SECONDS,
# SERVER_TIMEOUT, TRAINER_START_S, DDP_BUDGET (the last four whole seconds), DDP_CONFIGS, SERVER_ARGS (more flags for
# torch_two_process.py high, e.g. "--high-graph" or "--warm-releases 40"), TRAINER_ARGS (more flags for
# ddp_train_bench.py, e.g. "--image-size 160"), BENCH_GPUPRIO_ENV (more VAR=VALUE for the gpuprio
# processes, e.g. "GPUPRIO_ISOLATION=active"), B_ENV, LIB_B, PYTHON, GPUPRIO_LIB.
set -uo pipefail

gp_flags=(mps)
source "$(dirname "${BASH_SOURCE[0]}")/../../tests/gpu/gpu_run_args.sh" "$@"
source "$repo/tools/bench/bench_runs.sh"  # rounds, gpuprio_env, runs
server="$repo/tools/bench/torch_two_process.py"
trainer="$repo/tools/bench/ddp_train_bench.py"
report="$repo/tools/bench/ddp_bench_report.py"
requests="${REQUESTS:-300}"
rate="${RATE:-20}"
ddp_batch="${DDP_BATCH:-64}"
ddp_precision="${DDP_PRECISION:-bf16}"
ddp_warmup="${DDP_WARMUP:-5}"
ddp_seconds="${DDP_SECONDS:-12}"
server_timeout="${SERVER_TIMEOUT:-75}"
trainer_start="${TRAINER_START_S:-75}"
budget="${DDP_BUDGET:-450}"
read -r -a sargs <<<"${SERVER_ARGS:-}"
read -r -a targs <<<"${TRAINER_ARGS:-}"
name=ddp_bench

need_lib
export PYTHONUNBUFFERED=1
# Never NVLink multicast on the shared machines (NCCL, torch's symmetric memory, NVSHMEM).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source "$repo/tools/bench/bench_procs.sh"
source "$repo/tools/bench/mps_daemon.sh"
cleanup_at_exit "gpbench_ddp_$$_"

# The trainer's workers, by the pids they wrote (DIR/rankN.pid): torchrun puts each in a session of
# its own, so neither finish_proc's nor procs_cleanup's kill of torchrun's group reaches them.
declare -a pid_dirs=()

# worker_pids DIR: the pids in DIR that are still live ddp_train_bench.py processes (a pid that
# was reused by another process since is left alone).
worker_pids() {
  local f pid
  for f in "$1"/rank*.pid; do
    [[ -f "$f" ]] || continue
    pid="$(tr -dc 0-9 <"$f")"
    [[ -n "$pid" ]] && alive "$pid" && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q ddp_train_bench &&
      echo "$pid"
  done
  return 0
}

# reap_workers DIR WAIT: gives the workers WAIT seconds to be gone (they leave by themselves once
# torchrun has), then kills what is left of them, each with its process group.
reap_workers() {
  local dir="$1" steps=$(($2 * 10)) i pid left
  for ((i = 0; i < steps; i++)); do
    [[ -z "$(worker_pids "$dir")" ]] && return 0
    sleep 0.1
  done
  left="$(worker_pids "$dir" | tr '\n' ' ')"
  [[ -z "$left" ]] && return 0
  say "trainer workers still running after torchrun ended: killing $left"
  for pid in $left; do kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null; done
  return 0
}

ddp_exit() {
  local d
  procs_cleanup
  for d in "${pid_dirs[@]}"; do reap_workers "$d" 0; done
  procs_exit
}
trap ddp_exit EXIT

# Before the preflight, so that it also shows whether torch gets both GPUs through the daemon.
((mps)) && mps_start "$out" "$name"

say "preflight: $py$( ((mps)) && echo " (under MPS)")"
timeout -k 5 120 env -u LD_PRELOAD "$py" - >"$out/ddp_preflight.txt" 2>&1 <<'PY'
import sys
print("python", sys.version.split()[0])
import torch
print("torch", torch.__version__, "CUDA", torch.version.cuda, "available", torch.cuda.is_available())
n = torch.cuda.device_count()
for i in range(n):
    free, total = torch.cuda.mem_get_info(i)
    print("device %d: %s, memory free %.1f / %.1f GiB" % (i, torch.cuda.get_device_name(i), free / 2**30, total / 2**30))
import torch.distributed as dist
nccl = dist.is_nccl_available()
v = torch.cuda.nccl.version() if nccl else None
print("NCCL", "not available" if v is None else ".".join(str(x) for x in v) if isinstance(v, tuple) else v)
import torchvision
print("torchvision", torchvision.__version__)
if n < 2 or not nccl:
    sys.exit("needs two GPUs and NCCL: %d GPU(s), NCCL %s" % (n, "available" if nccl else "not available"))
PY
pre_rc=$?
sed 's/^/  /' "$out/ddp_preflight.txt"
if ((pre_rc != 0)); then
  say "error: the preflight failed (rc=$pre_rc): no usable torch, torchvision, NCCL or second GPU"
  exit 1
fi

start=$SECONDS
n=0
server_args=(--device cuda:0 --rate "$rate" --requests "$requests" "${sargs[@]}")
trainer_args=(--batch "$ddp_batch" --precision "$ddp_precision" --warmup-steps "$ddp_warmup" "${targs[@]}")

# wait_ready PID FILE SECONDS: 0 once FILE exists; 1 when the process PID ended or SECONDS passed first.
wait_ready() {
  local pid="$1" file="$2" steps=$(($3 * 10)) i
  for ((i = 0; i < steps; i++)); do
    [[ -f "$file" ]] && return 0
    alive "$pid" || break
    sleep 0.1
  done
  [[ -f "$file" ]]
}

# run_config ROUND CONFIG
run_config() {
  local round="$1" config="$2"
  n=$((n + 1))
  local tag="$n.$config.r$round" with_lib=0 skip="" domain="gpbench_ddp_$$_$n"
  [[ "$config" == gpuprio* ]] && with_lib=1
  local -a henv=() lenv=()
  if ((with_lib)); then
    run_library "$config"
    henv=(LD_PRELOAD="$run_lib" GPUPRIO_MODE=schedule GPUPRIO_PRIORITY=high GPUPRIO_DOMAIN="$domain" "${run_env[@]}")
    lenv=(LD_PRELOAD="$run_lib" GPUPRIO_MODE=schedule GPUPRIO_PRIORITY=low GPUPRIO_DOMAIN="$domain" "${run_env[@]}")
  fi
  run_skip "$with_lib" DDP_BUDGET
  local -a rec=(--config "$config" --round "$round" --gpuprio "$with_lib" --mps "$mps")
  if [[ -n "$skip" ]]; then
    "$py" "$report" record "${rec[@]}" --skip "$skip" >>"$runs"
    say "r$round $config: $skip"
    return
  fi
  say "r$round $config: starting ($((SECONDS - start)) s into the runs)"
  local ready="$work/$tag.ready" stop="$work/$tag.stop" pids="$work/$tag.pids" hpid="" lpid="" hrc="" lrc=""
  local t0=$SECONDS
  local -a scmd=("$py" "$server" high --result "$work/$tag.high.json" "${server_args[@]}")
  local -a tcmd=("$py" -m torch.distributed.run --standalone --nproc_per_node=2 "$trainer"
                 --result "$work/$tag.low.json" --pid-dir "$pids" "${trainer_args[@]}")
  case "$config" in
    alone)
      start_proc "$tag.high" "$server_timeout" -- "${scmd[@]}"
      hpid=$started_pid ;;
    ddp-alone)
      pid_dirs+=("$pids")
      start_proc "$tag.low" $((trainer_start + ddp_seconds + 30)) -- "${tcmd[@]}" --seconds "$ddp_seconds"
      lpid=$started_pid ;;
    native | gpuprio | gpuprio-b)
      # --seconds: a backstop only; the stop file ends it once the server has.
      pid_dirs+=("$pids")
      start_proc "$tag.low" $((trainer_start + server_timeout + 45)) "${lenv[@]}" -- "${tcmd[@]}" \
        --ready-file "$ready" --stop-file "$stop" --seconds $((server_timeout + 15))
      lpid=$started_pid
      if wait_ready "$lpid" "$ready" "$trainer_start"; then
        say "r$round $config: trainer ready after $((SECONDS - t0)) s; starting the server"
        start_proc "$tag.high" "$server_timeout" "${henv[@]}" -- "${scmd[@]}"
        hpid=$started_pid
      else
        # Stuck in its start or warm-up (it reads the stop file only in its measured steps): killed.
        if alive "$lpid"; then
          say "r$round $config: the trainer did not become ready within $trainer_start s: killing it; no server run"
          kill_group "$lpid"
        else
          say "r$round $config: the trainer ended before it was ready: no server run"
        fi
      fi ;;
  esac
  finish_pair "$hpid" "$lpid" "$stop" 10 30 "r$round $config"
  [[ -n "$lpid" ]] && reap_workers "$pids" 5
  record_pair "$report" "$t0" result "r$round $config" server trainer "${rec[@]}"
}

read_configs run_ddp_bench DDP_CONFIGS "alone ddp-alone native gpuprio" alone ddp-alone native gpuprio gpuprio-b
if ((native_only)); then
  keep=()
  for c in "${configs[@]}"; do [[ "$c" == gpuprio* ]] || keep+=("$c"); done
  configs=("${keep[@]}")
fi
run_rounds run_config "${configs[@]}"

cp "$runs" "$out/${name}_runs.jsonl"
tar -czf "$out/${name}_logs.tgz" -C "$work" --exclude='*.json' --exclude='*.pids' --exclude='*.ready' \
  --exclude='*.stop' --exclude='runs.jsonl' . 2>/dev/null
if ((mps)); then
  form="every process ran under MPS (a control daemon of the script's own)"
else
  form="no MPS: the server and the trainer's rank 0 were time-sliced on GPU 0"
fi
finish_report "$report" processes "$form" \
  "settings: REQUESTS=$requests RATE=$rate DDP_BATCH=$ddp_batch DDP_PRECISION=$ddp_precision DDP_WARMUP=$ddp_warmup DDP_SECONDS=$ddp_seconds SERVER_ARGS='${SERVER_ARGS:-}' TRAINER_ARGS='${TRAINER_ARGS:-}'"
