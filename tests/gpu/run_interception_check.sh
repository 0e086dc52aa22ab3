#!/usr/bin/env bash
# Interception check, run ON the GPU machine from the repo root, after build_artifacts.sh has filled
# .gpu/ on the CPU machine and .gpu was carried along:
#
#   bash tests/gpu/run_interception_check.sh "$OUT" [--native-only]
#
# Each check (resnet, matmul, triton, graph: PyTorch/Triton in python3; driver: .gpu/driver_api_program)
# runs twice, each time as its own process: natively, then with
#   LD_PRELOAD=$PWD/.gpu/libgpuprio.so GPUPRIO_MODE=passthrough GPUPRIO_LOG=info
# The outputs must be correct both times and bit-identical between the two, the driver program's
# launches must be counted on gpuprio's exported path, and gpuprio must have seen launches through
# both cuLaunchKernel and cuLaunchKernelEx. --native-only runs every check twice natively instead
# (checks the scripts and that the outputs are deterministic, without the library).
#
# Writes OUT/interception_summary.txt, OUT/interception.json, OUT/log.txt; exit 0 only on PASS.
# With GPUPRIO_ISOLATION=force in the environment (it reaches the preloaded runs; run_suite.sh's
# "isolated" step), each preloaded run must also print `gpuprio: info: isolation: device ...` and the
# summary must count ops issued on twin streams (confined=K > 0 over all runs).
# Environment: PYTHON (default python3), GPUPRIO_CHECK_TIMEOUT (seconds per process, default 60;
# natively the slowest check took 17 s on the H100).
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/gpu_run_args.sh"
per_run_timeout="${GPUPRIO_CHECK_TIMEOUT:-60}"
prog="$repo/.gpu/driver_api_program"
script="$repo/tests/gpu/interception_check.py"
need_bin "$prog"
need_lib
tags=(native preload)
((native_only)) && tags=(native native2)

# GPUPRIO_CHECK_MODE: the mode of the preloaded runs (passthrough, the interception check, or
# schedule, where every launch is issued by gpuprio's dispatcher thread).
mode="${GPUPRIO_CHECK_MODE:-passthrough}"
say "preloaded runs use GPUPRIO_MODE=$mode"
export PYTHONUNBUFFERED=1
export CUBLAS_WORKSPACE_CONFIG=:4096:8

# run_one CHECK TAG: one process, its stdout/stderr/rc/command kept in $work.
run_one() {
  local check="$1" tag="$2"
  local base="$work/$check.$tag"
  local -a env_args=(env -u LD_PRELOAD -u GPUPRIO_MODE -u GPUPRIO_LOG)
  if [[ "$tag" == preload ]]; then
    env_args+=(LD_PRELOAD="$lib" GPUPRIO_MODE="$mode" GPUPRIO_LOG=info)
  fi
  # Each run compiles its own Triton kernels, so the two runs take the same path.
  env_args+=(TRITON_CACHE_DIR="$work/triton_cache.$tag")
  local -a cmd
  if [[ "$check" == driver ]]; then
    cmd=("$prog" --iterations 20)
  else
    cmd=("$py" "$script" run "$check" --tag "$tag" --workdir "$work")
  fi
  echo "${env_args[*]} ${cmd[*]}" >"$base.cmd"
  local t0=$SECONDS
  timeout -k 10 "$per_run_timeout" "${env_args[@]}" "${cmd[@]}" >"$base.out" 2>"$base.err"
  local rc=$?
  echo "$rc" >"$base.rc"
  say "$check [$tag]: rc=$rc ($((SECONDS - t0)) s)$( ((rc == 124 || rc == 137)) && echo " TIMED OUT after ${per_run_timeout}s")"
}

say "work dir $work; tags ${tags[*]}"
for check in driver resnet train matmul triton graph; do
  for tag in "${tags[@]}"; do
    run_one "$check" "$tag"
  done
done

summ=(summarize --workdir "$work" --out "$out" --tags "${tags[@]}")
((native_only)) || summ+=(--expect-gpuprio)
# GPUPRIO_ISOLATION=force (the suite's "isolated" step): every op goes through a twin stream in a
# green context; the outputs must still be bit-identical, and the library must say it confined work.
[[ "${GPUPRIO_ISOLATION:-}" == force ]] && ((native_only == 0)) && summ+=(--expect-confined)
env -u LD_PRELOAD "$py" "$script" "${summ[@]}"
rc=$?
say "summary in $out/interception_summary.txt, $out/interception.json, $out/log.txt; exit $rc"
exit "$rc"
