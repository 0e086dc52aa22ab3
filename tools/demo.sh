#!/usr/bin/env bash
# The main job: build libgpuprio.so and run CUDA programs under it.
#  - With a GPU (libcuda.so.1 loadable and nvidia-smi sees a device): builds the -lcuda driver-API
#    program with nvcc and runs it natively and under gpuprio in schedule mode; runs a PyTorch
#    matmul under gpuprio too if python3 has torch.
#    Then two processes sharing the GPU, started with `gpuprio run`: a high-priority chain of
#    20 x 50 us kernels every 10 ms beside a low-priority process of back-to-back thread-full 2 ms
#    kernels (tools/bench/interference.cu), natively and under gpuprio: the chain's p50/p99.
#  - Without a GPU: says so, and runs the fake driver's clients (tests/fake_cuda) under gpuprio in
#    schedule mode instead, including the priority scenario (a high-priority chain beside 100 ms
#    of low-priority kernels), natively and scheduled, and prints the call summary; then two
#    processes (each with its own fake GPU): how many of the low process's kernels were issued
#    while the high process had work queued or in flight, natively and under gpuprio.
# --prebuilt: use what tests/gpu/build_artifacts.sh put in .gpu/ instead of building (for a
# GPU machine without Bazel); GPU part only.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
progress_prefix=demo
# shellcheck source=tools/progress.sh
source tools/progress.sh
say() { printf '\n'; progress_note "$*"; }

prebuilt=0
[[ "${1:-}" == --prebuilt ]] && prebuilt=1
# Whether this workspace's Bazel server runs already (read from its pid file, which starts none):
# then it is someone else's, and the demo leaves it running.
bazel_server_running() {
  local base pid
  base="${HOME}/.cache/bazel/_bazel_$(id -un)/$(printf '%s' "$PWD" | md5sum | cut -d' ' -f1)"
  pid="$(cat "$base/server/server.pid.txt" 2>/dev/null)" || return 1
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null
}
bazel_server_was_running=1  # nothing to shut down unless the demo builds
# --installed CMD: the fake-driver part only, through an installed `gpuprio` command and the
# library it bundles (a wheel or .deb); the fake driver and its clients come from
# $DEMO_BIN (a bazel-bin or a test's runfiles). tests/tools/package_install.sh.
installed=""
if [[ "${1:-}" == --installed ]]; then
  installed="${2:?--installed needs the gpuprio command}"
  bin="${DEMO_BIN:?--installed needs DEMO_BIN}"
  lib=""
  bazel() { :; }
elif ((prebuilt)); then
  lib="$PWD/.gpu/libgpuprio.so"
  [[ -f "$lib" && -x .gpu/interference ]] || { echo "demo: --prebuilt needs .gpu/ (tests/gpu/build_artifacts.sh)" >&2; exit 1; }
  bazel() { :; }
else
  bazel_server_was_running="$(bazel_server_running && echo 1 || echo 0)"
  say "building libgpuprio.so (bazel build -c opt //hook:libgpuprio.so; the first build compiles Abseil too)"
  # The whole output stays in build_log, which is kept when the build fails.
  build_log="$(mktemp /tmp/gpuprio_demo_build.XXXXXX.log)"
  if ! progress_bazel "$build_log" build -c opt //hook:libgpuprio.so //tests/fake_cuda:libcuda.so.1 \
      //tests/fake_cuda/clients:all //tests/scheduler:sched_client //tests/coordinator:coord_client; then
    ((bazel_server_was_running)) || bazel shutdown >/dev/null 2>&1 || true
    exit 1
  fi
  rm -f "$build_log"
  progress_note "built"
  bin="$(bazel info -c opt bazel-bin 2>/dev/null)"
  lib="$bin/hook/libgpuprio.so"
fi
work="$(mktemp -d /tmp/gpuprio_demo.XXXXXX)"
# A coordination domain and segment directory of its own for every program the demo runs: no
# other program on this machine takes part, and its segments go with $work at the end.
domain="demo_$$"
export GPUPRIO_DOMAIN="$domain"
mkdir -p "$work/shm"
export GPUPRIO_SHM_DIR="$work/shm"
cleanup() {
  jobs -p | xargs -r kill 2>/dev/null || true
  rm -rf "$work"
  # Only a Bazel server the demo itself started: another build may be using one.
  ((bazel_server_was_running)) || bazel shutdown >/dev/null 2>&1 || true
}
trap cleanup EXIT
gpuprio_run() {
  if [[ -n "$installed" ]]; then
    GPUPRIO_DOMAIN="$domain" "$installed" run "$@"
  else
    GPUPRIO_LIB="$lib" GPUPRIO_DOMAIN="$domain" tools/cli/gpuprio run "$@"
  fi
}
# as_priority native|gpuprio PRIORITY CMD...: CMD as it is, or under `gpuprio run --priority`.
as_priority() {
  local with="$1" priority="$2"
  shift 2
  if [[ "$with" == gpuprio ]]; then gpuprio_run --priority "$priority" -- "$@"; else "$@"; fi
}

if [[ -z "$installed" ]] && command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 &&
   ldconfig -p | grep -q 'libcuda\.so\.1 '; then
  say "GPU found: $(nvidia-smi -L | head -n 1)"
  if ((!prebuilt)); then
    bash tests/gpu/build_artifacts.sh --skip-lib >/dev/null
    install -m 0755 "$lib" .gpu/libgpuprio.so
  fi
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
  say "two processes: a high chain (20 x 50 us every 10 ms) beside 2 ms thread-full low kernels"
  # gpu_pair alone|native|gpuprio: the low process, then the high one; prints the chain's latency.
  # The spin kernels' clock is calibrated once, alone (a process calibrating beside a busy GPU
  # would not be right).
  cycles=()
  gpu_pair() {
    local with="$1" peer="$work/peer.$1" stop="$work/stop.$1" low_pid
    local -a shape=(--low-ms 2 --low-blocks-per-sm 2 --low-threads 1024 --low-fill smem
                    "${cycles[@]}")
    if [[ "$with" == alone ]]; then
      .gpu/interference --role high --low-ms 0 --releases 300 >"$work/high.$with" 2>&1 || true
      cycles=(--cycles-per-us "$(python3 -c 'import json,sys
print(next(json.loads(l) for l in open(sys.argv[1]) if l.startswith("{"))["cycles_per_us"])' \
        "$work/high.$with" 2>/dev/null || echo 0)")
      [[ "${cycles[1]}" == 0 ]] && cycles=()
    fi
    local -a low=(.gpu/interference --role low "${shape[@]}" --peer-file "$peer"
                  --stop-file "$stop" --seconds 60)
    local -a high=(.gpu/interference --role high "${shape[@]}" --peer-file "$peer"
                   --releases 300)
    if [[ "$with" != alone ]]; then
      as_priority "$with" low "${low[@]}" >"$work/low.$with" 2>&1 &
      low_pid=$!
      as_priority "$with" high "${high[@]}" >"$work/high.$with" 2>&1 || true
      : >"$stop"
      wait "$low_pid" || true
    fi
    python3 - "$with" "$work/high.$with" <<'PY'
import json, sys
with_, path = sys.argv[1:]
text = open(path, errors="replace").read()
rec = next((json.loads(l) for l in text.splitlines() if l.startswith("{")), None)
if rec is None or not rec.get("ok"):
    print(f"{with_:8s} the high process failed: {text[-500:]}")
else:
    print(f"{with_:8s} high chain p50 {rec['high_p50_ms']:.2f} ms, p99 {rec['high_p99_ms']:.2f} ms")
PY
  }
  gpu_pair alone
  gpu_pair native
  gpu_pair gpuprio
  say "(docs/performance.md has the current two-process figures)"
  exit 0
fi

((prebuilt)) && { echo "demo: --prebuilt: no GPU found" >&2; exit 1; }
say "no GPU on this machine: running the same programs against the fake driver (tests/fake_cuda),"
say "a libcuda.so.1 that executes kernels on a virtual device. Nothing here touches a GPU."
export LD_LIBRARY_PATH="$bin/tests/fake_cuda"
for scenario in launch_forms streams; do
  say "cudart_like_client $scenario under gpuprio (schedule mode, exit summary on)"
  if [[ -n "$installed" ]]; then
    gpuprio_run --mode schedule --log info -- "$bin/tests/fake_cuda/clients/cudart_like_client" \
      "$scenario"
  else
    LD_PRELOAD="$lib" GPUPRIO_MODE=schedule GPUPRIO_LOG=info \
      "$bin/tests/fake_cuda/clients/cudart_like_client" "$scenario"
  fi
done
say "priority: 40 x 5 ms low-priority kernels, then a high-priority chain of 5 x 200 us"
if [[ ! -x "$bin/tests/scheduler/sched_client" ]]; then
  echo "(sched_client is not in $bin: skipped)"
else
printf 'native:    '; "$bin/tests/scheduler/sched_client" priority | head -n 1
printf 'scheduled: '
if [[ -n "$installed" ]]; then
  gpuprio_run --mode schedule -- "$bin/tests/scheduler/sched_client" priority | head -n 1
else
  LD_PRELOAD="$lib" GPUPRIO_MODE=schedule "$bin/tests/scheduler/sched_client" priority | head -n 1
fi
fi
say "(high_latency_us: how long the high-priority chain took from submission to completion)"

say "two processes: a high-priority one (20 bursts of 5 x 200 us kernels, one every 20 ms) beside a
      low-priority one (back-to-back 2 ms kernels). Each has its own fake GPU, so what shows is
      the coordination itself: low kernels issued while the high process had work queued or in
      flight"
coord="$bin/tests/coordinator/coord_client"
fake_pair() {
  local with="$1" ready="$work/ready.$1" stop="$work/stop.$1" low_pid
  as_priority "$with" low "$coord" stream "$ready" "$stop" 2000 >"$work/low.$with" &
  low_pid=$!
  as_priority "$with" high "$coord" burst "$ready" 20 20000 5 200 >"$work/high.$with"
  : >"$stop"
  wait "$low_pid"
  python3 - "$with" "$work/high.$with" "$work/low.$with" <<'PY'
import sys
with_, high, low = sys.argv[1:]
busy = [tuple(map(int, l.split()[1:3])) for l in open(high) if l.startswith("busy ")]
issues = [int(l.split()[1]) for l in open(low) if l.startswith("issue ")]
first, last = min(b for b, _ in busy), max(e for _, e in busy)
during = [t for t in issues if first <= t <= last]
inside = sum(1 for t in during if any(b <= t <= e for b, e in busy))
print(f"{with_:8s} {inside:3d} of the {len(during)} low kernels issued while the high bursts ran "
      f"were issued while high work was queued or in flight")
PY
}
fake_pair native
fake_pair gpuprio
say "done"
