#!/usr/bin/env bash
# The cost gpuprio's passthrough wrappers add per intercepted call, measured on this machine
# against a do-nothing driver (no GPU needed). Prints native and preloaded ns/call and the
# difference. Usage: tools/bench/run_passthrough_overhead.sh [CALLS]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
bazel build -c opt //hook:libgpuprio.so //tools/bench:passthrough_overhead >/dev/null 2>&1
bin="$(bazel info -c opt bazel-bin 2>/dev/null)"
driver_dir="$bin/tools/bench/null_driver"
calls="${1:-5000000}"
native="$(LD_LIBRARY_PATH="$driver_dir" "$bin/tools/bench/passthrough_overhead" "$calls")"
pass="$(LD_LIBRARY_PATH="$driver_dir" LD_PRELOAD="$bin/hook/libgpuprio.so" GPUPRIO_MODE=passthrough \
        "$bin/tools/bench/passthrough_overhead" "$calls")"
echo "native:      $native"
echo "passthrough: $pass"
python3 - "$native" "$pass" <<'PY'
import json, sys
n, p = json.loads(sys.argv[1]), json.loads(sys.argv[2])
assert not n["wrapped"] and p["wrapped"], "the preloaded run must call gpuprio's wrappers"
for api in ("cuLaunchKernel", "cuStreamQuery"):
    k = api + "_ns"
    print(f"{api}: native {n[k]:.2f} ns, passthrough {p[k]:.2f} ns, added {p[k] - n[k]:.2f} ns per call")
PY
