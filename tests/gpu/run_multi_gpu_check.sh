#!/usr/bin/env bash
# Multi-GPU transparency check, run ON a two-GPU machine from the repo root, after
# build_artifacts.sh has filled .gpu/ on the CPU machine and .gpu was carried along:
#
#   bash tests/gpu/run_multi_gpu_check.sh "$OUT" [--native-only]
#
# Runs tests/gpu/multi_gpu_check.py's checks (xdev: one process, two GPUs, a cross-device event
# wait and copy; graph: the same through one CUDA graph per GPU; ddp: torchrun DDP ResNet-18 over
# NCCL, two ranks) natively and under each gpuprio configuration, several runs each, and compares
# every digest with the first native run's. Every run must succeed and match.
#
# Configurations (MULTI_GPU_CONFIGS, space-separated, default all of them):
#   native        no library
#   schedule      GPUPRIO_MODE=schedule (the default settings)
#   low           ... GPUPRIO_PRIORITY=low
#   force         ... GPUPRIO_ISOLATION=force (every op through a twin stream in a green context)
#   deferred      ... GPUPRIO_DIRECT_ISSUE=0 (every op through the dispatcher)
#   low_deferred  ... GPUPRIO_PRIORITY=low GPUPRIO_DIRECT_ISSUE=0
# Further names KEY=VALUE,KEY=VALUE (e.g. low,GPUPRIO_ISOLATION=off is written
# "GPUPRIO_PRIORITY=low,GPUPRIO_ISOLATION=off") run schedule mode with those variables.
# MULTI_GPU_CHECKS (default "xdev graph ddp"), MULTI_GPU_RUNS (default 3), MULTI_GPU_LOG (the
# preloaded runs' GPUPRIO_LOG, default warning), MULTI_GPU_DDP_ARGS (more arguments of the ddp
# check, e.g. "--no-set-device --image-size 224").
#
# Writes OUT/multi_gpu_summary.txt (one row per run) and OUT/multi_gpu_logs.tgz; exit 0 only on PASS.
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/gpu_run_args.sh"
need_lib
script="$repo/tests/gpu/multi_gpu_check.py"
checks=(${MULTI_GPU_CHECKS:-xdev graph ddp})
runs="${MULTI_GPU_RUNS:-3}"
configs=(${MULTI_GPU_CONFIGS:-native schedule low force deferred low_deferred})
((native_only)) && configs=(native)
log_level="${MULTI_GPU_LOG:-warning}"
export PYTHONUNBUFFERED=1 CUBLAS_WORKSPACE_CONFIG=:4096:8
# Never NVLink multicast on the shared machines.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

config_env() {
  case "$1" in
    native) ;;
    schedule) echo "GPUPRIO_MODE=schedule" ;;
    low) echo "GPUPRIO_MODE=schedule GPUPRIO_PRIORITY=low" ;;
    force) echo "GPUPRIO_MODE=schedule GPUPRIO_ISOLATION=force" ;;
    deferred) echo "GPUPRIO_MODE=schedule GPUPRIO_DIRECT_ISSUE=0" ;;
    low_deferred) echo "GPUPRIO_MODE=schedule GPUPRIO_PRIORITY=low GPUPRIO_DIRECT_ISSUE=0" ;;
    *=*) echo "GPUPRIO_MODE=schedule ${1//,/ }" ;;
    *) say "error: unknown configuration $1"; exit 2 ;;
  esac
}

summary="$out/multi_gpu_summary.txt"
printf '%-8s %-44s %3s %4s %-10s %8s %s\n' check config run rc digest seconds match >"$summary"
failures=0
for check in "${checks[@]}"; do
  reference=""
  for config in "${configs[@]}"; do
    for ((r = 1; r <= runs; r++)); do
      base="$work/$check.${config//[^A-Za-z0-9_]/_}.$r"
      env_args=(env -u LD_PRELOAD -u GPUPRIO_MODE -u GPUPRIO_PRIORITY -u GPUPRIO_ISOLATION
                -u GPUPRIO_DIRECT_ISSUE)
      if [[ "$config" != native ]]; then
        # shellcheck disable=SC2207
        env_args+=(LD_PRELOAD="$lib" GPUPRIO_LOG="$log_level" $(config_env "$config"))
      fi
      if [[ "$check" == ddp ]]; then
        port=$((29500 + RANDOM % 2000))
        cmd=("$py" -m torch.distributed.run --nproc_per_node=2 --master_port="$port" "$script" ddp
             ${MULTI_GPU_DDP_ARGS:-})
      else
        cmd=("$py" "$script" "$check")
      fi
      echo "${env_args[*]} ${cmd[*]}" >"$base.cmd"
      timeout -k 10 240 "${env_args[@]}" "${cmd[@]}" >"$base.out" 2>"$base.err"
      rc=$?
      line="$(grep -m1 '^digest=' "$base.out")"
      d="$(sed -n 's/^digest=\([0-9a-f]*\).*/\1/p' <<<"$line")"
      secs="$(sed -n 's/.*seconds=\([0-9.]*\).*/\1/p' <<<"$line")"
      if [[ "$config" == native && $r -eq 1 && $rc -eq 0 && -n "$d" ]]; then reference="$d"; fi
      match=no
      [[ $rc -eq 0 && -n "$d" && "$d" == "$reference" ]] && match=yes
      [[ "$match" == yes ]] || failures=$((failures + 1))
      printf '%-8s %-44s %3d %4d %-10s %8s %s\n' "$check" "$config" "$r" "$rc" "${d:0:10}" \
        "${secs:--}" "$match" | tee -a "$summary"
      if [[ $rc -ne 0 ]]; then tail -n 5 "$base.err" | sed 's/^/    /'; fi
    done
  done
done
tar -czf "$out/multi_gpu_logs.tgz" -C "$work" . 2>/dev/null
if ((failures)); then
  say "FAIL: $failures run(s) failed or differ from native" | tee -a "$summary"
  exit 1
fi
say "PASS: every run bit-identical to native" | tee -a "$summary"
