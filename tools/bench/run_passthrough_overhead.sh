#!/usr/bin/env bash
# The cost gpuprio adds per intercepted call, measured on this machine against a do-nothing driver
# (no GPU needed): passthrough wrappers, schedule mode's fast path, and the client side of a
# deferred launch (schedule, GPUPRIO_DIRECT_ISSUE=0). Prints ns/call and the differences. Usage: tools/bench/run_passthrough_overhead.sh [CALLS]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
bazel build -c opt //hook:libgpuprio.so //tools/bench:passthrough_overhead >/dev/null 2>&1
bin="$(bazel info -c opt bazel-bin 2>/dev/null)"
driver_dir="$bin/tools/bench/null_driver"
calls="${1:-5000000}"
native="$(LD_LIBRARY_PATH="$driver_dir" "$bin/tools/bench/passthrough_overhead" "$calls")"
# Any message from gpuprio (e.g. "running unscheduled") means the mode did not take effect.
preloaded() {
  local err out
  err="$(mktemp)"
  out="$(LD_LIBRARY_PATH="$driver_dir" LD_PRELOAD="$bin/hook/libgpuprio.so" "$@" \
         "$bin/tools/bench/passthrough_overhead" "$calls" 2>"$err")"
  if [[ -s "$err" ]]; then
    echo "run_passthrough_overhead: $* printed:" >&2
    cat "$err" >&2
    exit 1
  fi
  rm -f "$err"
  echo "$out"
}
pass="$(preloaded env GPUPRIO_MODE=passthrough)"
sched="$(preloaded env GPUPRIO_MODE=schedule)"
deferred="$(preloaded env GPUPRIO_MODE=schedule GPUPRIO_DIRECT_ISSUE=0)"
echo "native:      $native"
echo "passthrough: $pass"
echo "schedule:    $sched"
echo "deferred:    $deferred"
python3 - "$native" "$pass" "$sched" "$deferred" <<'PY'
import json, sys
n, p, s, d = (json.loads(a) for a in sys.argv[1:])
assert not n["wrapped"] and p["wrapped"] and s["wrapped"] and d["wrapped"], \
    "the preloaded runs must call gpuprio's wrappers"
for api in ("cuLaunchKernel", "cuStreamQuery"):
    k = api + "_ns"
    print(f"{api}: native {n[k]:.2f} ns; added per call: passthrough {p[k] - n[k]:.2f} ns, "
          f"schedule (fast path) {s[k] - n[k]:.2f} ns, schedule deferred {d[k] - n[k]:.2f} ns")
PY
