#!/usr/bin/env bash
# Interference benchmark, in-process form (docs/benchmarks.md, section 3), run ON the GPU machine from the repo root,
# after tests/gpu/build_artifacts.sh filled .gpu/ on the CPU machine and .gpu was carried:
#
#   bash tools/bench/run_interference_bench.sh "$OUT" [--native-only]
#
# For each low-priority kernel length L in LOW_MS (default "0.2 2 20"), in this order:
#   alone    .gpu/interference --low-ms 0 (native; the baseline of this L's rows)
#   none     native, both streams default priority
#   stream   native, CUDA stream priorities
#   gpuprio  LD_PRELOAD=.gpu/libgpuprio.so GPUPRIO_MODE=schedule, thread priorities 1 / -1
# and at the end "alone" under gpuprio (L=0: the cost of scheduling itself, against the native alone
# runs). --native-only skips the gpuprio rows. Every run has a timeout (BENCH_TIMEOUT, default 30 s;
# the program itself stops measuring after MAX_SECONDS, default 10); a failing or hanging run is
# recorded, not fatal, and after gpuprio runs have timed out twice the rest are skipped, so the
# whole script stays well inside the device tool's limits (about 1-2 minutes when nothing hangs).
# Writes OUT/interference.json (every run, plus ratios) and OUT/interference.txt (the table):
# high p50/p99 against alone of the same L group, low throughput against native 'none'.
# Exit 0 when every native run succeeded.
# Environment: LOW_MS, RELEASES (default 150), WARMUP (10), MAX_SECONDS (10), BENCH_TIMEOUT (30),
# EXTRA_ARGS (more interference flags, e.g. "--low-fill none"), PYTHON (python3).
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../../tests/gpu/gpu_run_args.sh"
bin="$repo/.gpu/interference"
lib="$repo/.gpu/libgpuprio.so"
low_list="${LOW_MS:-0.2 2 20}"
releases="${RELEASES:-150}"
warmup="${WARMUP:-10}"
max_seconds="${MAX_SECONDS:-10}"
per_run_timeout="${BENCH_TIMEOUT:-30}"
read -r -a extra <<<"${EXTRA_ARGS:-}"
py="${PYTHON:-python3}"
say() { printf 'run_interference_bench: %s\n' "$*"; }

[[ -x "$bin" ]] || { say "error: $bin missing: run tests/gpu/build_artifacts.sh and carry .gpu"; exit 1; }
if ((native_only == 0)); then
  [[ -f "$lib" ]] || { say "error: $lib missing (use --native-only to measure without it)"; exit 1; }
fi
mkdir -p "$out"
work="$(mktemp -d /tmp/gpuprio_interference.XXXXXX)"
runs="$work/runs.jsonl"
: >"$runs"
gpuprio_timeouts=0
n=0

# run_one GROUP_L CONFIG LOW_MS PRIORITY_MODE WITH_GPUPRIO(0|1)
run_one() {
  local group="$1" config="$2" low="$3" pmode="$4" with_lib="$5"
  local env_args=(env -u LD_PRELOAD -u GPUPRIO_MODE -u GPUPRIO_LOG)
  ((with_lib)) && env_args+=(LD_PRELOAD="$lib" GPUPRIO_MODE=schedule)
  n=$((n + 1))
  local tag="$n.$config.l$low" rc
  if ((with_lib && gpuprio_timeouts >= 2)); then
    echo "skipped: gpuprio runs timed out twice" >"$work/$tag.err"
    : >"$work/$tag.out"
    rc=125
  else
    timeout -k 5 "$per_run_timeout" "${env_args[@]}" "$bin" --low-ms "$low" --priority-mode "$pmode" \
      --releases "$releases" --warmup "$warmup" --max-seconds "$max_seconds" "${extra[@]}" \
      >"$work/$tag.out" 2>"$work/$tag.err"
    rc=$?
    ((with_lib && (rc == 124 || rc == 137))) && gpuprio_timeouts=$((gpuprio_timeouts + 1))
  fi
  # One record per run: the program's JSON line (if any) plus what the script knows.
  "$py" - "$group" "$config" "$with_lib" "$rc" "$work/$tag.out" "$work/$tag.err" >>"$runs" <<'PY'
import json, sys
group, config, with_lib, rc, out_path, err_path = sys.argv[1:]
rec = {}
out = open(out_path, errors="replace").read()
for line in out.splitlines():
    if line.startswith("{"):
        try:
            rec = json.loads(line)
        except ValueError:
            pass
err = open(err_path, errors="replace").read()
rec.update(group_low_ms=float(group), config=config, gpuprio=bool(int(with_lib)), rc=int(rc))
rec["ok"] = bool(rec.get("ok")) and int(rc) == 0
rec["stderr_tail"] = err[-1500:]
if not rec["ok"]:
    rec["stdout_tail"] = out[-500:]
    if int(rc) in (124, 137):
        rec["error"] = (rec.get("error") or "") + " timed out"
    elif int(rc) == 125:
        rec["error"] = "skipped (gpuprio runs timed out twice)"
    if not rec.get("error"):
        tail = [l for l in err.splitlines() if l.strip()]
        rec["error"] = "rc %s: %s" % (rc, tail[-1] if tail else "no output")
print(json.dumps(rec))
PY
  printf 'run_interference_bench: L=%-4s %-13s rc=%d %s\n' "$group" "$config" "$rc" \
    "$(grep -o '"releases_done":[0-9]*\|"high_p50_ms":[0-9.]*\|"high_p99_ms":[0-9.]*\|"low_kernels_per_s":[0-9.]*' \
      "$work/$tag.out" 2>/dev/null | tr '\n' ' ')"
}

start=$SECONDS
for low in $low_list; do
  run_one "$low" alone 0 none 0
  run_one "$low" none "$low" none 0
  run_one "$low" stream "$low" stream 0
  ((native_only)) || run_one "$low" gpuprio "$low" gpuprio 1
done
((native_only)) || run_one 0 alone-gpuprio 0 gpuprio 1
say "all runs took $((SECONDS - start)) s"

"$py" "$repo/tools/bench/interference_report.py" "$runs" "$out/interference.json" "$out/interference.txt"
rc=$?
cat "$out/interference.txt" 2>/dev/null
exit "$rc"
