#!/usr/bin/env bash
# PyTorch benchmark (docs/benchmarks.md), two processes or (--threads) two threads of one process,
# run ON the GPU machine from the repo root, after tests/gpu/build_artifacts.sh filled .gpu/ on the
# CPU machine and .gpu was carried:
#
#   bash tools/bench/run_torch_bench.sh "$OUT" [--threads] [--mps] [--native-only]
#
# high = ResNet-18 batch 1 fp16 inference, requests released open loop at RATE (20) per second;
# low = ResNet-50 batch LOW_BATCH (1024) fp16 inference back to back (tools/bench/torch_two_process.py
# says how each is measured and how the two meet through a peer file). Per round (ROUNDS, default
# 3; order rotated per round):
#   alone      the high process only, native (the latency baseline)
#   low-alone  the low process only, native, LOW_SECONDS measured (the throughput baseline)
#   native     both processes, no gpuprio
#   gpuprio    both under LD_PRELOAD=.gpu/libgpuprio.so GPUPRIO_MODE=schedule, GPUPRIO_PRIORITY=high /
#              low, a GPUPRIO_DOMAIN of their own
# REQUESTS (340) measured requests per high run: over 3 rounds more than 1000 per configuration,
# which is what a p99 needs. --native-only skips the gpuprio runs. torchvision is used when the
# python has it, otherwise the script's own ResNet definitions (the same architecture): the
# preflight says which, and so does every result.
#
# --threads: each run is one process, torch_two_process.py threads, which runs the high job and the
# low job (or, for alone and low-alone, the one job) each in a thread of its own on a CUDA stream of
# its own: the form of a server that runs its batch work in the same process. Both jobs share one
# CUDA context, so their kernels are not time-sliced against each other and spatial isolation can
# act without MPS. The gpuprio runs set no GPUPRIO_PRIORITY: each thread sets its own priority
# through tools/python/gpuprio.py (high 1, low -1), and a run whose threads could not set it fails.
# Same configurations, measurements and table; output named torch_threads[_mps].* instead of
# torch_two_process[_mps].*.
#
# --mps (as root): every process, the preflight and both processes of every run (alone, low-alone,
# native, gpuprio) included, is a client of an MPS control daemon of the script's own, started
# before the preflight and quit on every way out (tools/bench/mps_daemon.sh, shared with
# run_two_process_bench.sh); the daemon's output and log go to OUT. Without MPS the two processes
# are time-sliced, so spatial isolation (GPUPRIO_ISOLATION) cannot act across them.
#
# Every process has its own process group and a timeout (TORCH_TIMEOUT, default 90 s: loading torch
# and the model takes 5-15 s, a high run ~20 s of requests); a failing or hanging run is recorded,
# not fatal, and what is left of it is killed before the next run. After gpuprio runs have timed
# out twice the rest are skipped, and once the runs have taken TORCH_BUDGET seconds (default 420)
# every remaining run is skipped, so the script ends within a 10-minute time budget (normally
# 4-6 minutes).
# Writes OUT/NAME.json (every run, pooled percentiles, ratios), OUT/NAME.txt (the table, with a last
# line saying whether it ran under MPS) and OUT/NAME_runs.jsonl (the records as written), where NAME
# is torch_two_process, torch_two_process_mps, torch_threads or torch_threads_mps. Exit 0 when every
# native run succeeded.
# PAIR picks the two jobs (default resnet, the pair above):
#   resnet         ResNet-18 server beside ResNet-50 inference
#   decoder        the decoder server (torch_two_process.py --server decoder: a small decoder-only
#                  transformer, fp16, static KV cache; per request a prefill of 32 prompt tokens, then 32
#                  output tokens, each after the first one CUDA graph replay; batch DECODE_BATCH, 1)
#                  beside ResNet-50 inference; its table adds TTFT and TPOT p50/p99
#   train          the ResNet-18 server beside ResNet-50 training (--batch-job resnet50-train: bf16
#                  autocast, AdamW, batch LOW_BATCH, here 256 by default), its rate in samples/s
#   decoder-train  the decoder server beside ResNet-50 training
#   decoder-idle   the decoder server beside an idle client (--batch-job idle: its context and model
#                  loaded, nothing launched): what a second process merely attached to the GPU costs
#                  the server (under MPS, one more client of the server); its configurations are
#                  "alone native gpuprio" unless TORCH_CONFIGS says (its batch rate is 0 by construction)
# Output named NAME_PAIR[_mps].* for any pair but resnet (e.g. torch_two_process_decoder.json,
# torch_threads_train_mps.txt); DECODE_BATCH other than 1 adds _bDECODE_BATCH to the pair's name.
# Environment: ROUNDS, REQUESTS, RATE, LOW_BATCH, LOW_SECONDS (12), TORCH_TIMEOUT, TORCH_BUDGET,
# TORCH_CPUS (every run's processes on these CPUs, a taskset list), HIGH_CPUS and LOW_CPUS (the
# high or the low process of the two-process forms on these CPUs instead), TORCH_ARGS (more flags for both processes, or for the one process with --threads, e.g. "--dtype fp32"
# or "--impl builtin"), BENCH_GPUPRIO_ENV (more VAR=VALUE for the gpuprio processes, e.g.
# "GPUPRIO_COORDINATE=0"), PYTHON, TORCH_CONFIGS (default "alone low-alone native gpuprio"; also
# alone-gpuprio, the high job alone under gpuprio, and gpuprio-b, gpuprio with B_ENV's VAR=VALUE
# added and LIB_B, when set, as the library: an A/B comparison in the same interleaved rounds),
# PAIR, DECODE_BATCH (1).
set -uo pipefail

gp_flags=(mps threads)
source "$(dirname "${BASH_SOURCE[0]}")/../../tests/gpu/gpu_run_args.sh" "$@"
source "$repo/tools/bench/bench_runs.sh"  # rounds, gpuprio_env, runs
script="$repo/tools/bench/torch_two_process.py"
requests="${REQUESTS:-340}"
rate="${RATE:-20}"
pair="${PAIR:-resnet}"
decode_batch="${DECODE_BATCH:-1}"
case "$pair" in
  resnet) pair_args=() ;;
  decoder) pair_args=(--server decoder --decode-batch "$decode_batch") ;;
  train) pair_args=(--batch-job resnet50-train) ;;
  decoder-train) pair_args=(--server decoder --decode-batch "$decode_batch" --batch-job resnet50-train) ;;
  decoder-idle) pair_args=(--server decoder --decode-batch "$decode_batch" --batch-job idle) ;;
  *) echo "run_torch_bench: unknown PAIR '$pair' (resnet, decoder, train, decoder-train or decoder-idle)" >&2; exit 2 ;;
esac
if [[ "$pair" == *train ]]; then
  low_batch="${LOW_BATCH:-256}"
else
  low_batch="${LOW_BATCH:-1024}"
fi
low_seconds="${LOW_SECONDS:-12}"
run_timeout="${TORCH_TIMEOUT:-90}"
budget="${TORCH_BUDGET:-420}"
read -r -a targs <<<"${TORCH_ARGS:-}"
name=torch_two_process
((threads)) && name=torch_threads
[[ "$pair" != resnet ]] && name="${name}_$pair"
[[ "$pair" == decoder* && "$decode_batch" != 1 ]] && name="${name}_b$decode_batch"
((mps)) && name="${name}_mps"

need_lib
export PYTHONUNBUFFERED=1
source "$repo/tools/bench/bench_procs.sh"
source "$repo/tools/bench/mps_daemon.sh"
cleanup_at_exit "gpbench_torch_$$_"

# Before the preflight, so that it also shows whether torch gets a GPU through the daemon.
((mps)) && mps_start "$out" "$name"

# What this python has: torch, CUDA, torchvision (or not, and then the builtin models).
say "preflight: $py$( ((mps)) && echo " (under MPS)")$( ((threads)) && echo "; threads of one process")"
say "pair $pair: ${pair_args[*]:-ResNet-18 server, ResNet-50 inference}; low batch $low_batch"
timeout -k 5 120 env -u LD_PRELOAD "$py" - >"$out/torch_preflight.txt" 2>&1 <<'PY'
import sys
print("python", sys.version.split()[0])
import torch
print("torch", torch.__version__, "CUDA", torch.version.cuda, "available", torch.cuda.is_available())
# The decoder server's attention (PAIR=decoder*) needs it: torch 2.0 or later.
print("scaled_dot_product_attention", hasattr(torch.nn.functional, "scaled_dot_product_attention"))
if torch.cuda.is_available():
    free, total = torch.cuda.mem_get_info()
    print("device", torch.cuda.get_device_name(0), "memory free %.1f / %.1f GiB" % (free / 2**30, total / 2**30))
try:
    import torchvision
    print("torchvision", torchvision.__version__, "found: models from torchvision.models")
except ImportError as e:
    print("torchvision not importable (%s): models from torch_two_process.py's own definitions" % e)
PY
pre_rc=$?
sed 's/^/  /' "$out/torch_preflight.txt"
if ((pre_rc != 0)); then
  say "error: the preflight failed (rc=$pre_rc): no usable torch"
  exit 1
fi

# TORCH_CPUS (a taskset list, e.g. 0-7): every run's process on those CPUs, so that no run is
# faster or slower than another for where the kernel placed it.
job_py=("$py")
if [[ -n "${TORCH_CPUS:-}" ]]; then
  job_py=(taskset -c "$TORCH_CPUS" "$py")
  say "every run on CPUs $TORCH_CPUS (taskset); $(lscpu 2>/dev/null | grep -i '^NUMA node' | tr -s ' ' | paste -sd ';' -)"
fi
# HIGH_CPUS / LOW_CPUS (taskset lists): the two-process forms' high or low process on those CPUs
# instead, so that the jobs' host sides share no core (where the server's host time goes).
high_py=("${job_py[@]}")
low_py=("${job_py[@]}")
[[ -n "${HIGH_CPUS:-}" ]] && high_py=(taskset -c "$HIGH_CPUS" "$py")
[[ -n "${LOW_CPUS:-}" ]] && low_py=(taskset -c "$LOW_CPUS" "$py")
[[ -n "${HIGH_CPUS:-}${LOW_CPUS:-}" ]] && say "high process on CPUs ${HIGH_CPUS:-any}, low process on CPUs ${LOW_CPUS:-any} (taskset)"

start=$SECONDS
n=0
# The pair's flags go to both processes (each records which pair it belonged to).
high_args=(--rate "$rate" --requests "$requests" "${pair_args[@]}" "${targs[@]}")
low_args=(--batch "$low_batch" "${pair_args[@]}" "${targs[@]}")
# The threads form takes both jobs' options at once (TORCH_ARGS once).
both_args=(--rate "$rate" --requests "$requests" --batch "$low_batch" "${pair_args[@]}" "${targs[@]}")

# run_threads_config TAG CONFIG ENV...: one process, torch_two_process.py threads, for the run
# (after run_config's skip checks); sets hrc and lrc, both the process's exit code, for the record.
run_threads_config() {
  local tag="$1" config="$2"
  shift 2
  # A pair's process gets the 15 s more that the low process of a pair gets: it loads both models
  # before either job starts. Its low job stops when the high one ends (--seconds is a backstop).
  local jobs=high,low seconds="$run_timeout" tmo=$((run_timeout + 15))
  case "$config" in
    alone | alone-gpuprio) jobs=high tmo="$run_timeout" ;;
    low-alone) jobs=low seconds="$low_seconds" tmo="$run_timeout" ;;
  esac
  start_proc "$tag" "$tmo" "$@" -- "${job_py[@]}" "$script" threads --jobs "$jobs" --high-result "$work/$tag.high.json" \
    --low-result "$work/$tag.low.json" --seconds "$seconds" "${both_args[@]}"
  finish_proc "$started_pid"
  hrc="" lrc=""
  [[ "$jobs" == *high* ]] && hrc=$finished_rc
  [[ "$jobs" == *low* ]] && lrc=$finished_rc
}

# run_config ROUND CONFIG
run_config() {
  local round="$1" config="$2"
  n=$((n + 1))
  local tag="$n.$config.r$round" with_lib=0 skip="" domain="gpbench_torch_$$_$n"
  [[ "$config" == gpuprio* || "$config" == alone-gpuprio ]] && with_lib=1
  local -a henv=() lenv=() tenv=()
  if ((with_lib)); then
    run_library "$config"
    # Threads: no process priority; each thread sets its own.
    tenv=(LD_PRELOAD="$run_lib" GPUPRIO_MODE=schedule GPUPRIO_DOMAIN="$domain" "${run_env[@]}")
    henv=(LD_PRELOAD="$run_lib" GPUPRIO_MODE=schedule GPUPRIO_PRIORITY=high GPUPRIO_DOMAIN="$domain" "${run_env[@]}")
    lenv=(LD_PRELOAD="$run_lib" GPUPRIO_MODE=schedule GPUPRIO_PRIORITY=low GPUPRIO_DOMAIN="$domain" "${run_env[@]}")
  fi
  run_skip "$with_lib" TORCH_BUDGET
  local -a rec=(--config "$config" --round "$round" --gpuprio "$with_lib")
  ((threads)) && rec+=(--form threads)
  if [[ -n "$skip" ]]; then
    "$py" "$script" record "${rec[@]}" --skip "$skip" >>"$runs"
    say "r$round $config: $skip"
    return
  fi
  say "r$round $config: starting ($((SECONDS - start)) s into the runs)"
  local peer="$work/$tag.peer" stop="$work/$tag.stop" hpid="" lpid="" hrc="" lrc="" t0=$SECONDS
  if ((threads)); then
    run_threads_config "$tag" "$config" "${tenv[@]}"
    local -a files=()
    [[ -n "$hrc" ]] && files+=(--high-result "$work/$tag.high.json" --high-err "$work/$tag.err" --high-rc "$hrc")
    [[ -n "$lrc" ]] && files+=(--low-result "$work/$tag.low.json" --low-err "$work/$tag.err" --low-rc "$lrc")
    record_run "$script" "$t0" "r$round $config: rc=${hrc:-$lrc}" "${rec[@]}" "${files[@]}"
    count_timeout "$with_lib" "$hrc" "$lrc"
    return
  fi
  case "$config" in
    alone | alone-gpuprio)
      start_proc "$tag.high" "$run_timeout" "${henv[@]}" -- "${high_py[@]}" "$script" high --result "$work/$tag.high.json" \
        "${high_args[@]}"
      hpid=$started_pid ;;
    low-alone)
      start_proc "$tag.low" "$run_timeout" -- "${low_py[@]}" "$script" low --result "$work/$tag.low.json" \
        --seconds "$low_seconds" "${low_args[@]}"
      lpid=$started_pid ;;
    native | gpuprio | gpuprio-b)
      # The low process would stop by itself after the high process's longest possible run.
      start_proc "$tag.low" $((run_timeout + 15)) "${lenv[@]}" -- "${low_py[@]}" "$script" low --result "$work/$tag.low.json" \
        --peer "$peer" --stop-file "$stop" --seconds "$run_timeout" "${low_args[@]}"
      lpid=$started_pid
      start_proc "$tag.high" "$run_timeout" "${henv[@]}" -- "${high_py[@]}" "$script" high --result "$work/$tag.high.json" \
        --peer "$peer" "${high_args[@]}"
      hpid=$started_pid ;;
  esac
  finish_pair "$hpid" "$lpid" "$stop" 10 15 "r$round $config"
  record_pair "$script" "$t0" result "r$round $config" high low "${rec[@]}"
}

# An idle batch job has no rate to compare: no low-alone run by default.
default_configs="alone low-alone native gpuprio"
[[ "$pair" == decoder-idle ]] && default_configs="alone native gpuprio"
read_configs run_torch_bench TORCH_CONFIGS "$default_configs" \
  alone alone-gpuprio low-alone native gpuprio gpuprio-b
((native_only)) && configs=(alone low-alone native)
run_rounds run_config "${configs[@]}"

cp "$runs" "$out/${name}_runs.jsonl"
# The records carry no MPS field: the table says it, as well as the file names.
if ((mps)); then
  form="every process ran under MPS (a control daemon of the script's own)"
elif ((threads)); then
  form="no MPS: one process, so one CUDA context for both jobs' streams"
else
  form="no MPS: the two processes were time-sliced"
fi
[[ -n "${TORCH_CPUS:-}" ]] && form="$form; every process on CPUs $TORCH_CPUS (taskset)"
[[ -n "${HIGH_CPUS:-}${LOW_CPUS:-}" ]] && form="$form; high process on CPUs ${HIGH_CPUS:-any}, low on ${LOW_CPUS:-any} (taskset)"
finish_report "$script" processes "$form"
