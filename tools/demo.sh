#!/usr/bin/env bash
# The main job: build libgpuprio.so and run CUDA programs under it.
#  - With a GPU (libcuda.so.1 loadable and nvidia-smi sees a device): builds the -lcuda driver-API
#    program with nvcc and runs it natively and under gpuprio in schedule mode; runs a PyTorch
#    matmul under gpuprio too if python3 has torch.
#  - Without a GPU: says so, and runs the fake driver's clients (tests/fake_cuda) under gpuprio in
#    schedule mode instead, including the priority scenario (a high-priority chain beside 100 ms
#    of low-priority kernels), natively and scheduled, and prints the call summary.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
say() { printf '\ndemo: %s\n' "$*"; }

say "building libgpuprio.so (bazel build -c opt //hook:libgpuprio.so)"
bazel build -c opt //hook:libgpuprio.so //tests/fake_cuda:libcuda.so.1 \
  //tests/fake_cuda/clients:all //tests/scheduler:sched_client 2>&1 | tail -n 2
bin="$(bazel info -c opt bazel-bin 2>/dev/null)"
lib="$bin/hook/libgpuprio.so"
trap 'bazel shutdown >/dev/null 2>&1 || true' EXIT

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 &&
   ldconfig -p | grep -q 'libcuda\.so\.1 '; then
  say "GPU found: $(nvidia-smi -L | head -n 1)"
  bash tools/gpu_check/build_artifacts.sh --skip-lib >/dev/null
  install -m 0755 "$lib" .gpu/libgpuprio.so
  say "driver-API program, native"
  .gpu/driver_api_program --iterations 20
  say "driver-API program under gpuprio (GPUPRIO_MODE=schedule GPUPRIO_LOG=info)"
  LD_PRELOAD="$PWD/.gpu/libgpuprio.so" GPUPRIO_MODE=schedule GPUPRIO_LOG=info \
    .gpu/driver_api_program --iterations 20
  if python3 -c 'import torch' 2>/dev/null; then
    say "PyTorch matmul under gpuprio"
    LD_PRELOAD="$PWD/.gpu/libgpuprio.so" GPUPRIO_MODE=schedule GPUPRIO_LOG=info python3 -c '
import torch
a = torch.randn(2048, 2048, device="cuda"); b = torch.randn(2048, 2048, device="cuda")
c = a @ b; torch.cuda.synchronize()
print("matmul ok:", torch.allclose(c.cpu(), a.cpu() @ b.cpu(), rtol=1e-3, atol=1e-2))'
  fi
  exit 0
fi

say "no GPU on this machine: running the same programs against the fake driver (tests/fake_cuda),"
say "a libcuda.so.1 that executes kernels on a virtual device. Nothing here touches a GPU."
export LD_LIBRARY_PATH="$bin/tests/fake_cuda"
for scenario in launch_forms streams; do
  say "cudart_like_client $scenario under gpuprio (schedule mode, exit summary on)"
  LD_PRELOAD="$lib" GPUPRIO_MODE=schedule GPUPRIO_LOG=info \
    "$bin/tests/fake_cuda/clients/cudart_like_client" "$scenario"
done
say "priority: 40 x 5 ms low-priority kernels, then a high-priority chain of 5 x 200 us"
printf 'native:    '; "$bin/tests/scheduler/sched_client" priority | head -n 1
printf 'scheduled: '; LD_PRELOAD="$lib" GPUPRIO_MODE=schedule "$bin/tests/scheduler/sched_client" priority |
  head -n 1
say "done (high_latency_us: how long the high-priority chain took from submission to completion)"
