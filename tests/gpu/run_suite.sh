#!/usr/bin/env bash
# Runs several GPU checks and benchmarks one after another on the GPU machine, each step within
# its own time budget, and packs every step's results into one archive, OUT/results.tgz:
#
#   bash tests/gpu/run_suite.sh OUT STEP [STEP...]
#
# Steps: interception (passthrough), schedule (interception check in schedule mode, fast path
# on), deferred (the same with GPUPRIO_DIRECT_ISSUE=0: every op through the dispatcher), launch
# (tools/bench/run_launch_bench.sh), interference (tools/bench/run_interference_bench.sh),
# two_process and two_process_mps (tools/bench/run_two_process_bench.sh, without and with --mps;
# ~3 minutes each), torch (tools/bench/run_torch_bench.sh; ~5 minutes: best run on its own),
# trace (tests/gpu/run_trace_check.sh). Each step writes into OUT/work/STEP; at the end
# OUT/results.tgz holds every step's files and OUT/suite.txt each step's exit code and summary.
#
# Spatial isolation (GPUPRIO_ISOLATION, GPUPRIO_RESERVED_SMS; docs/benchmarks.md says what each
# measures). Expected wall time on an H100 in brackets; every script skips its remaining runs once
# its own budget is spent, so a hang costs at most that step's time:
#   interference        main plan: L 0.2/2/20/100 ms, alone, low alone, native, stream priorities,
#                       gpuprio isolation off/active/always, 3 rounds, idle tails   [~6.5 min, cap 7.5]
#   iso_launch          launch bench natively and in schedule mode (3 rounds), and no green
#                       context in a lone process (MODES="native schedule")         [~1 min]
#   iso_reserved        GPUPRIO_RESERVED_SMS 8/16/32/64 at L = 20 and 2 ms          [~2.5 min, cap 3.5]
#   iso_sparse          releases every 1 s at L = 20 ms: isolation active vs always [~2.5 min, cap 3.5]
#   isolated            the interception check (ResNet-50, training step, cuBLAS, Triton, CUDA
#                       graphs, -lcuda program) with GPUPRIO_ISOLATION=force, schedule mode:
#                       bit-identical outputs, a green context and confined ops     [~2.5 min]
#   iso_two_process_mps two processes under MPS, L 0.2/2/20/100 ms, isolation active [~4.5 min, cap 5.5]
#   iso_mps_tail        where the two-process tail under MPS comes from: L 2/20 ms, 400 releases,
#                       gpuprio (both processes) against gpuprio-low (the high process native, every
#                       low op confined)                                              [~2 min, cap 3.5]
#   iso_active          the main plan cut to what isolation must show: L 0.2/2/20/100 ms, alone,
#                       alone-gpuprio, low-alone, low-alone-gpuprio (the batch job alone under
#                       gpuprio) and gpuprio-active, 3 rounds                       [~3 min, cap 3.5]
#   iso_mps_active      two processes under MPS, L 2/20 ms, 400 releases, low-alone and gpuprio
#                       (isolation active), 3 rounds                                [~2 min, cap 2.5]
#   iso_mps_ab          iso_mps_active's pair, 5 rounds, the library against a second build of it
#                       (LIB_B, default .gpu/libgpuprio_b.so) and against gpuprio-low, interleaved
#                                                                                   [~5 min, cap 5.5]
#   iso_torch           PyTorch ResNet-18 at 20 requests/s beside ResNet-50 batch 1024 inference,
#                       two processes under MPS (isolation across processes needs it), isolation
#                       active, 3 rounds (run_torch_bench.sh --mps; root)          [~5 min, cap 7.5]
#   iso_torch_threads   the same two jobs as two threads of one process, a CUDA stream each, each
#                       thread setting its own gpuprio priority; one CUDA context, so no MPS
#                       needed; isolation active, 3 rounds (run_torch_bench.sh --threads)
#                                                                                   [~5 min, cap 7.5]
#   iso_torch_reserve   iso_torch_threads with a reserve of 32 SMs (36 used on an H100) against the
#                       default 16 (gpuprio-b) and the server alone under gpuprio, 3 rounds: the
#                       reserve an eager PyTorch server needs (docs/isolation.md)  [~6.5 min, cap 8]
#   iso_torch_reserve_mps  the same as two processes under MPS (root)             [~6.5 min, cap 8]
#   iso_torch_calls     iso_torch_threads's server alone under gpuprio and beside the batch job,
#                       2 rounds, with GPUPRIO_LOG=info: the exit summaries' time in stream calls
#                       per level and the dispatcher's CPU time, printed per run (is the server's
#                       extra host time spent in gpuprio and the driver, or outside them?) [~2.5 min]
#   iso_torch_ab        iso_torch_threads against a second build of the library (LIB_B, default
#                       .gpu/libgpuprio_b.so), with the server alone natively and under gpuprio and
#                       the batch job alone, 3 rounds, GPUPRIO_LOG=info: both builds' exit summaries
#                       per run (time in the server's stream calls, dispatcher CPU and polls)
#                                                                                   [~8 min, cap 8.5]
#   iso_torch_p99       the PyTorch latency targets with enough samples for a p99: the server alone,
#                       the batch job alone and both under gpuprio, 800 requests a round (2 400 a
#                       configuration), 3 rounds, threads form; per-round ratios against the same
#                       round's alone run, and the host's noise (steal, preemptions) per run; every
#                       run's processes on CPUs 0-7 (TORCH_CPUS)
#                                                                                   [~7 min, cap 8.5]
#   iso_torch_p99_mps   the same, two processes under MPS (root)                    [~7.5 min, cap 8.5]
#   iso_torch_low_ab    the batch job's throughput beside the server, threads form, the library against a
#                       second build (LIB_B), 3 rounds                              [~4.5 min, cap 6]
#   iso_torch_gil       where the threads form's host-phase tail comes from: the server beside the batch
#                       job under gpuprio with Python's switch interval (5 ms) against 0.2 ms
#                       (gpuprio-b, TORCH_SWITCH_INTERVAL_S), the server alone, 600 requests a round,
#                       3 rounds                                                    [~6.5 min, cap 8.5]
#   iso_torch_yield     the threads form with host-side priority (GPUPRIO_HOST_YIELD_US, default 2000)
#                       against without it (gpuprio-b, 0), the server alone and the batch job alone,
#                       500 requests a round, 3 rounds                              [~7.5 min, cap 8.5]
# On two GPUs (nvidia-h100-x2; docs/gpu_checks.md, "Several GPUs"):
#   multi_gpu           tests/gpu/run_multi_gpu_check.sh: a one-process two-GPU program, a two-GPU
#                       CUDA graph program and two-rank DDP, natively and in every configuration
#                       (schedule, low, force, deferred, low_deferred), 2 runs each  [~6 min]
#   ddp_bench           tools/bench/run_ddp_bench.sh: a server on GPU 0 (high) beside DDP training
#                       (low) on GPUs 0 and 1, 2 rounds                              [~5.5 min]
#   ddp_bench_mps       the same under MPS (root)                                    [~5.5 min]
# The isolation steps in four runs of at most 9 minutes each, on the GPU machine with .gpu/ from
# tests/gpu/build_artifacts.sh:
#   1: bash tests/gpu/run_suite.sh $OUT interference iso_launch                   (~7.5 min)
#   2: bash tests/gpu/run_suite.sh $OUT iso_reserved iso_sparse isolated          (~7.5 min)
#   3: bash tests/gpu/run_suite.sh $OUT iso_two_process_mps iso_torch             (~9 min: if
#      short of time, run iso_torch on its own)
#   4: bash tests/gpu/run_suite.sh $OUT iso_torch_threads                         (~5 min)
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
# torch_step FORM: tools/bench/run_torch_bench.sh in FORM (--threads or --mps) with the step's
# variables, isolation active and GPUPRIO_LOG=info for the gpuprio runs, then each gpuprio run's
# exit summary.
torch_step() {
  BENCH_GPUPRIO_ENV="GPUPRIO_ISOLATION=active GPUPRIO_LOG=info" bash tools/bench/run_torch_bench.sh "$dir" "$1" &&
    python3 tools/bench/exit_summaries.py "$dir"/torch_*_runs.jsonl
}
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
    multi_gpu) MULTI_GPU_RUNS=2 bash tests/gpu/run_multi_gpu_check.sh "$dir" ;;
    ddp_bench) ROUNDS=2 bash tools/bench/run_ddp_bench.sh "$dir" ;;
    ddp_bench_mps) ROUNDS=2 bash tools/bench/run_ddp_bench.sh "$dir" --mps ;;
    iso_launch) MODES="native schedule" bash tools/bench/run_launch_bench.sh "$dir" ;;
    iso_reserved) bash tools/bench/run_interference_bench.sh "$dir" --plan reserved ;;
    iso_sparse) bash tools/bench/run_interference_bench.sh "$dir" --plan sparse ;;
    isolated) GPUPRIO_ISOLATION=force GPUPRIO_CHECK_MODE=schedule bash tests/gpu/run_interception_check.sh "$dir" ;;
    iso_two_process_mps) LOW_MS="0.2 2 20 100" BENCH_BUDGET=300 BENCH_GPUPRIO_ENV="GPUPRIO_ISOLATION=active" \
                           bash tools/bench/run_two_process_bench.sh "$dir" --mps ;;
    iso_mps_tail) LOW_MS="2 20" RELEASES=400 PAIR_CONFIGS="low-alone gpuprio gpuprio-low" BENCH_BUDGET=200 \
                    BENCH_GPUPRIO_ENV="GPUPRIO_ISOLATION=active" bash tools/bench/run_two_process_bench.sh "$dir" --mps ;;
    iso_active) LOW_MS="0.2 2 20 100" CONFIGS="low-alone low-alone-gpuprio gpuprio-active" BENCH_BUDGET=190 \
                  bash tools/bench/run_interference_bench.sh "$dir" ;;
    iso_mps_active) LOW_MS="2 20" RELEASES=400 PAIR_CONFIGS="low-alone gpuprio" BENCH_BUDGET=110 \
                      BENCH_GPUPRIO_ENV="GPUPRIO_ISOLATION=active" bash tools/bench/run_two_process_bench.sh "$dir" --mps ;;
    iso_mps_ab) LOW_MS="2 20" RELEASES=400 ROUNDS=5 LIB_B="${LIB_B:-$repo/.gpu/libgpuprio_b.so}" \
                  PAIR_CONFIGS="low-alone gpuprio gpuprio-b gpuprio-low" BENCH_BUDGET=330 \
                  BENCH_GPUPRIO_ENV="GPUPRIO_ISOLATION=active" bash tools/bench/run_two_process_bench.sh "$dir" --mps ;;
    iso_torch) TORCH_BUDGET=400 BENCH_GPUPRIO_ENV="GPUPRIO_ISOLATION=active" \
                 bash tools/bench/run_torch_bench.sh "$dir" --mps ;;
    iso_torch_threads) TORCH_BUDGET=400 BENCH_GPUPRIO_ENV="GPUPRIO_ISOLATION=active" \
                         bash tools/bench/run_torch_bench.sh "$dir" --threads ;;
    iso_torch_reserve | iso_torch_reserve_mps)
      ROUNDS=3 TORCH_BUDGET=470 TORCH_CONFIGS="alone alone-gpuprio low-alone gpuprio gpuprio-b" \
        BENCH_GPUPRIO_ENV="GPUPRIO_ISOLATION=active GPUPRIO_RESERVED_SMS=32" B_ENV="GPUPRIO_RESERVED_SMS=16" \
        bash tools/bench/run_torch_bench.sh "$dir" "$([[ "$step" == *_mps ]] && echo --mps || echo --threads)" ;;
    iso_torch_calls) ROUNDS=2 TORCH_BUDGET=200 TORCH_CONFIGS="alone-gpuprio gpuprio" torch_step --threads ;;
    iso_torch_ab)
      ROUNDS=3 TORCH_BUDGET=490 TORCH_CONFIGS="alone alone-gpuprio low-alone gpuprio gpuprio-b" \
        LIB_B="${LIB_B:-$repo/.gpu/libgpuprio_b.so}" torch_step --threads ;;
    iso_torch_p99 | iso_torch_p99_mps)
      ROUNDS=3 REQUESTS=800 TORCH_TIMEOUT=120 TORCH_BUDGET=500 TORCH_CONFIGS="alone low-alone gpuprio" \
        TORCH_CPUS="${TORCH_CPUS:-0-7}" torch_step "$([[ "$step" == *_mps ]] && echo --mps || echo --threads)" ;;
    iso_torch_gil)
      ROUNDS=3 REQUESTS=600 TORCH_TIMEOUT=120 TORCH_BUDGET=480 TORCH_CONFIGS="alone gpuprio gpuprio-b" \
        B_ENV="TORCH_SWITCH_INTERVAL_S=0.0002" torch_step --threads ;;
    iso_torch_yield)
      ROUNDS=3 REQUESTS=500 TORCH_TIMEOUT=120 TORCH_BUDGET=500 TORCH_CONFIGS="alone low-alone gpuprio gpuprio-b" \
        B_ENV="GPUPRIO_HOST_YIELD_US=0" torch_step --threads ;;
    iso_torch_low_ab)
      ROUNDS=3 TORCH_BUDGET=340 TORCH_CONFIGS="low-alone gpuprio gpuprio-b" \
        LIB_B="${LIB_B:-$repo/.gpu/libgpuprio_b.so}" torch_step --threads ;;
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
