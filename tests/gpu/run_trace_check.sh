#!/usr/bin/env bash
# Tracer check, run ON the GPU machine from the repo root, after
# tests/gpu/build_artifacts.sh filled .gpu/ on the CPU machine and .gpu was carried along:
#
#   bash tests/gpu/run_trace_check.sh "$OUT" [--native-only]
#
# Runs (each a separate python3 process with a timeout; workloads in tests/gpu/trace_check.py):
#   a  resnet50_trace     GPUPRIO_MODE=schedule GPUPRIO_LOG=info GPUPRIO_TRACE=OUT/resnet_trace.json:
#                         ResNet-50 forwards + one training step; the trace is checked (kernels
#                         linked to client threads, flows complete, dispatcher slices)
#   c  profiler.native    torch.profiler (CPU+CUDA) around ResNet-18 forwards, natively: kernels
#                         linked to aten ops (the baseline)
#      profiler.gpuprio   the same with GPUPRIO_MODE=schedule (no GPUPRIO_TRACE); its
#                         torch.profiler trace is OUT/torch_profiler_trace.json
#   d  profiler.both      the same with GPUPRIO_TRACE too: who gets CUPTI is reported, only exit 0
#                         is asserted
#   e  profiler_range     GPUPRIO_TRACE_RANGE=profiler_api: ResNet-18 iterations between
#                         torch.cuda.profiler.start/stop; the trace is written at the stop and
#                         holds only the range's ops
#   b  latency.CONFIG.rR  ResNet-18 batch 1 latency, CONFIG native / schedule / trace (schedule +
#                         GPUPRIO_TRACE) / trace-gz (the same written as .json.gz) / trace-all,
#                         ROUNDS rounds interleaved (rotated order per round)
# --native-only runs only the native runs (checks the scripts and the workloads without the library).
# A failing or hanging run is recorded, not fatal; after gpuprio runs have timed out twice, or once
# the runs have taken TRACE_CHECK_BUDGET seconds, the remaining runs are skipped (recorded as such),
# so the script ends within a 10-minute time budget (normally 3-5 minutes).
#
# Writes OUT/trace_check_summary.txt (PASS/FAIL per check), OUT/trace_check.json, OUT/trace_overhead.md,
# OUT/trace_overhead.json, OUT/log.txt, OUT/resnet_trace.json and OUT/torch_profiler_trace.json
# (gzipped, .json.gz, when over 15 MiB, so the results stay small enough to copy off the GPU
# machine). Exit 0 only on PASS.
# Environment: PYTHON (default python3), GPUPRIO_LIB (default .gpu/libgpuprio.so),
# TRACE_CHECK_TIMEOUT (seconds per run, default 150), TRACE_CHECK_BUDGET (seconds for all runs,
# default 450), ROUNDS (3), ITERS (latency iterations, 500), WARMUP (50).
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/gpu_run_args.sh"
script="$repo/tests/gpu/trace_check.py"
per_run_timeout="${TRACE_CHECK_TIMEOUT:-150}"
budget="${TRACE_CHECK_BUDGET:-450}"
rounds="${ROUNDS:-3}"
iters="${ITERS:-500}"
warmup="${WARMUP:-50}"
need_lib
# Files the report reads; names shared with trace_check.py.
rm -f "$out/resnet_trace.json" "$out/resnet_trace.json.gz" "$out/torch_profiler_trace.json" "$out/torch_profiler_trace.json.gz"
export PYTHONUNBUFFERED=1
gpuprio_timeouts=0
start=$SECONDS

# run_one NAME [VAR=VALUE ...] -- WORKLOAD ARGS...
# With any VAR=VALUE the run is a gpuprio run: LD_PRELOAD=$lib plus those variables.
run_one() {
  local name="$1"; shift
  local -a genv=()
  while [[ $# -gt 0 && "$1" != "--" ]]; do genv+=("$1"); shift; done
  shift
  local base="$work/$name"
  local -a env_args=(env -u LD_PRELOAD -u GPUPRIO_MODE -u GPUPRIO_LOG -u GPUPRIO_TRACE -u GPUPRIO_PRIORITY
                     -u GPUPRIO_DIRECT_ISSUE)
  local with_lib=0
  if ((${#genv[@]})); then
    with_lib=1
    env_args+=(LD_PRELOAD="$lib" "${genv[@]}")
  fi
  local -a cmd=("$py" "$script" workload "$@" --result "$base.result.json")
  echo "${env_args[*]} ${cmd[*]}" >"$base.cmd"
  local skip=""
  if ((with_lib && gpuprio_timeouts >= 2)); then
    skip="skipped: gpuprio runs timed out twice"
  elif ((SECONDS - start > budget)); then
    skip="skipped: the runs took over TRACE_CHECK_BUDGET=${budget}s"
  fi
  if [[ -n "$skip" ]]; then
    echo "$skip" >"$base.err"
    : >"$base.out"
    echo 125 >"$base.rc"
    say "$name: $skip"
    return
  fi
  local t0=$SECONDS
  timeout -k 10 "$per_run_timeout" "${env_args[@]}" "${cmd[@]}" >"$base.out" 2>"$base.err"
  local rc=$?
  echo "$rc" >"$base.rc"
  echo "$((SECONDS - t0))" >"$base.wall"
  ((with_lib && (rc == 124 || rc == 137))) && gpuprio_timeouts=$((gpuprio_timeouts + 1))
  say "$name: rc=$rc ($((SECONDS - t0)) s)$( ((rc == 124 || rc == 137)) && echo " TIMED OUT after ${per_run_timeout}s")"
  if ((rc != 0)); then
    grep -v '^\s*$' "$base.err" | tail -n 15 | sed 's/^/    /'
  fi
}

say "work dir $work; library $lib; $( ((native_only)) && echo "native only" || echo "with gpuprio")"

# a: the traced ResNet-50 run, every op through the dispatcher (GPUPRIO_DIRECT_ISSUE=0: what the
# tracer exists for), and again with the fast path on (an idle process issues on its own threads).
((native_only)) || run_one resnet50_trace GPUPRIO_MODE=schedule GPUPRIO_LOG=info \
  GPUPRIO_DIRECT_ISSUE=0 GPUPRIO_TRACE="$out/resnet_trace.json" -- resnet50 --iters 3 --batch 8
((native_only)) || run_one resnet50_trace_fast GPUPRIO_MODE=schedule GPUPRIO_LOG=info \
  GPUPRIO_TRACE="$work/resnet_trace_fast.json" -- resnet50 --iters 3 --batch 8

# c: torch.profiler natively, then under gpuprio.
run_one profiler.native -- profiler --iters 10 --batch 8 --trace-out "$work/torch_profiler_trace.native.json"
# Every launch on the dispatcher thread, so the profiler's links depend on the Kineto id carrier.
((native_only)) || run_one profiler.gpuprio GPUPRIO_MODE=schedule GPUPRIO_DIRECT_ISSUE=0 -- \
  profiler --iters 10 --batch 8 --trace-out "$out/torch_profiler_trace.json"

# d: torch.profiler while gpuprio traces too.
((native_only)) || run_one profiler.both GPUPRIO_MODE=schedule GPUPRIO_LOG=info \
  GPUPRIO_TRACE="$work/profiler_both.gpuprio_trace.json" -- \
  profiler --iters 10 --batch 8 --trace-out "$work/profiler_both.torch_trace.json"

# e: the trace bounded by torch.cuda.profiler.start/stop (cuProfilerStart/Stop).
((native_only)) || run_one profiler_range GPUPRIO_MODE=schedule GPUPRIO_LOG=info \
  GPUPRIO_TRACE_RANGE=profiler_api GPUPRIO_TRACE="$work/profiler_range.json" -- \
  profiler_range --iters 10 --warmup 20

# b: latency, interleaved rounds; round r starts at a different configuration.
configs=(native schedule trace trace-gz trace-all)
((native_only)) && configs=(native)
for ((r = 1; r <= rounds; r++)); do
  n=${#configs[@]}
  for ((i = 0; i < n; i++)); do
    cfg="${configs[$(((i + r - 1) % n))]}"
    lat=(latency --iters "$iters" --warmup "$warmup")
    case "$cfg" in
      native) run_one "latency.native.r$r" -- "${lat[@]}" ;;
      schedule) run_one "latency.schedule.r$r" GPUPRIO_MODE=schedule -- "${lat[@]}" ;;
      trace) run_one "latency.trace.r$r" GPUPRIO_MODE=schedule GPUPRIO_TRACE="$work/latency_trace.r$r.json" -- "${lat[@]}" ;;
      trace-gz) run_one "latency.trace-gz.r$r" GPUPRIO_MODE=schedule \
                  GPUPRIO_TRACE="$work/latency_trace.r$r.json.gz" -- "${lat[@]}" ;;
      trace-all) run_one "latency.trace-all.r$r" GPUPRIO_MODE=schedule GPUPRIO_TRACE_ALL_APIS=1 \
                   GPUPRIO_TRACE="$work/latency_trace_all.r$r.json" -- "${lat[@]}" ;;
    esac
  done
done
say "all runs took $((SECONDS - start)) s"

report=(report --workdir "$work" --out "$out")
((native_only)) && report+=(--native-only)
timeout -k 10 300 env -u LD_PRELOAD "$py" "$script" "${report[@]}"
rc=$?

# Large traces are gzipped: the results are copied off the GPU machine.
for f in "$out/resnet_trace.json" "$out/torch_profiler_trace.json"; do
  if [[ -f "$f" ]] && (($(stat -c %s "$f") > 15 * 1024 * 1024)); then
    gzip -f "$f" && say "gzipped $(basename "$f") (over 15 MiB)"
  fi
done
rm -f "$work"/latency_trace.r*.json "$work"/latency_trace.r*.json.gz  # sizes are in the report
say "results in $out (trace_check_summary.txt, trace_check.json, trace_overhead.md); work dir $work; exit $rc"
exit "$rc"
