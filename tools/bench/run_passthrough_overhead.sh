#!/usr/bin/env bash
# The cost gpuprio adds per intercepted call, measured on this machine against a do-nothing driver
# (no GPU needed): passthrough wrappers; schedule mode's fast path without the cross-process
# segment (GPUPRIO_COORDINATE=0), with it and no other process, and with a low-priority process
# attached to the same GPU's segment (the high process of a two-process deployment); and the client
# side of a deferred launch (schedule, GPUPRIO_DIRECT_ISSUE=0). Prints ns/call and the differences.
# Usage: tools/bench/run_passthrough_overhead.sh [CALLS]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
bazel build -c opt //hook:libgpuprio.so //tools/bench:passthrough_overhead >/dev/null 2>&1
bin="$(bazel info -c opt bazel-bin 2>/dev/null)"
driver_dir="$bin/tools/bench/null_driver"
calls="${1:-5000000}"
# A domain and segment directory of its own: no segment of another run or program takes part.
domain="overhead_$$"
shm="$(mktemp -d /tmp/gpuprio_overhead.XXXXXX)"
export GPUPRIO_SHM_DIR="$shm"
peer_pid=""
cleanup() {
  [[ -n "$peer_pid" ]] && kill "$peer_pid" 2>/dev/null
  rm -rf "$shm"
  return 0
}
trap cleanup EXIT
native="$(LD_LIBRARY_PATH="$driver_dir" "$bin/tools/bench/passthrough_overhead" "$calls")"
# Any message from gpuprio (e.g. "running unscheduled") means the mode did not take effect.
preloaded() {
  local err out
  err="$(mktemp)"
  out="$(env LD_LIBRARY_PATH="$driver_dir" LD_PRELOAD="$bin/hook/libgpuprio.so" \
         GPUPRIO_DOMAIN="$domain" "$@" "$bin/tools/bench/passthrough_overhead" "$calls" 2>"$err")"
  if [[ -s "$err" ]]; then
    echo "run_passthrough_overhead: $* printed:" >&2
    cat "$err" >&2
    exit 1
  fi
  rm -f "$err"
  echo "$out"
}
pass="$(preloaded GPUPRIO_MODE=passthrough)"
uncoordinated="$(preloaded GPUPRIO_MODE=schedule GPUPRIO_COORDINATE=0)"
sched="$(preloaded GPUPRIO_MODE=schedule GPUPRIO_PRIORITY=high)"
deferred="$(preloaded GPUPRIO_MODE=schedule GPUPRIO_DIRECT_ISSUE=0)"
env LD_LIBRARY_PATH="$driver_dir" LD_PRELOAD="$bin/hook/libgpuprio.so" GPUPRIO_DOMAIN="$domain" \
  GPUPRIO_MODE=schedule GPUPRIO_PRIORITY=low "$bin/tools/bench/passthrough_overhead" 1 600 &
peer_pid=$!
for _ in $(seq 1 100); do
  [[ -n "$(ls "$shm"/gpuprio-v*/"$domain"-* 2>/dev/null)" ]] && break
  sleep 0.05
done
sleep 0.2
with_peer="$(preloaded GPUPRIO_MODE=schedule GPUPRIO_PRIORITY=high)"
echo "native:                   $native"
echo "passthrough:              $pass"
echo "schedule, no segment:     $uncoordinated"
echo "schedule, alone:          $sched"
echo "schedule, low peer:       $with_peer"
echo "deferred:                 $deferred"
python3 - "$native" "$pass" "$uncoordinated" "$sched" "$with_peer" "$deferred" <<'PY'
import json, sys
n, p, u, s, w, d = (json.loads(a) for a in sys.argv[1:])
assert not n["wrapped"] and all(x["wrapped"] for x in (p, u, s, w, d)), \
    "the preloaded runs must call gpuprio's wrappers"
for api in ("cuLaunchKernel", "cuStreamQuery", "cuCtxSynchronize"):
    k = api + "_ns"
    print(f"{api}: native {n[k]:.2f} ns; added per call: passthrough {p[k] - n[k]:.2f} ns, "
          f"schedule (fast path) without the segment {u[k] - n[k]:.2f} ns, with it alone "
          f"{s[k] - n[k]:.2f} ns, beside a low process {w[k] - n[k]:.2f} ns; "
          f"schedule deferred {d[k] - n[k]:.2f} ns")
PY
