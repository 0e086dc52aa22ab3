#!/usr/bin/env bash
# What preloading libgpuprio.so costs a process that never uses CUDA: the shells, shims and tools
# a launcher starts, each of which loads the library. Runs N starts of each command natively and
# with the library in LD_PRELOAD, in several rounds whose order alternates (native first, then
# preloaded first), so that a machine getting slower or faster during the run weighs on both;
# reports each round's cost per start (preloaded minus native, over N) and the spread between
# rounds. No GPU is needed, nor any driver: the commands make no CUDA call.
#
#   tools/bench/startup_bench.sh [--lib PATH] [-n N] [-r ROUNDS] [--out FILE]
#
#   --lib PATH   the library (default: bazel-bin/hook/libgpuprio.so; build it with
#                `bazel build -c opt //hook:libgpuprio.so` first, as users get it)
#   -n N         starts per command, variant and round (default 300)
#   -r ROUNDS    rounds (default 5)
#   --out FILE   also write the raw table (one row per round, command and variant) to FILE
#
# The commands: /bin/true (one exec) and `sh -c true` (a shell whose `true` is a builtin). Each
# start is one fork of this script's shell and one exec, the same in both variants.
set -euo pipefail

bench="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/startup_bench.XXXXXX")"
trap 'rm -rf "$work"' EXIT
py="${PYTHON:-python3}"
say() { printf 'startup_bench: %s\n' "$*"; }
# rotated: each round's order of the variants.
source "$bench/bench_runs.sh"
lib="bazel-bin/hook/libgpuprio.so"
n=300
rounds=5
out=""
while (($#)); do
  case "$1" in
    --lib) lib="$2"; shift 2 ;;
    -n) n="$2"; shift 2 ;;
    -r) rounds="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "startup_bench: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ -f "$lib" ]] || { echo "startup_bench: no library at $lib (see --help)" >&2; exit 2; }
[[ "$n" =~ ^[1-9][0-9]*$ && "$rounds" =~ ^[1-9][0-9]*$ ]] ||
  { echo "startup_bench: -n and -r take positive integers" >&2; exit 2; }
lib="$(cd "$(dirname "$lib")" && pwd)/$(basename "$lib")"
# The library must stay quiet in every process it is preloaded into: no GPUPRIO_ setting of the
# caller's may make it speak, and its output would be timed too.
while read -r var; do unset "$var"; done < <(env | sed -n 's/^\(GPUPRIO_[A-Za-z0-9_]*\)=.*/\1/p')
unset LD_PRELOAD

# run_starts VARIANT CMD...: N starts of CMD; prints the elapsed nanoseconds.
run_starts() {
  local variant="$1" i start end
  shift
  start="$(date +%s%N)"
  if [[ "$variant" == preloaded ]]; then
    for ((i = 0; i < n; i++)); do LD_PRELOAD="$lib" "$@"; done
  else
    for ((i = 0; i < n; i++)); do "$@"; done
  fi
  end="$(date +%s%N)"
  echo $((end - start))
}

# One check before timing anything: the library loads and says nothing.
if [[ -n "$(LD_PRELOAD="$lib" /bin/true 2>&1)" ]]; then
  echo "startup_bench: /bin/true printed something with $lib preloaded:" >&2
  LD_PRELOAD="$lib" /bin/true >&2 || true
  exit 1
fi

declare -a commands=("/bin/true" "sh -c true")
raw="round	command	variant	starts	total_ms	per_start_us"
declare -A costs=()  # command -> per-start costs (us) of each round, space-separated
for ((r = 1; r <= rounds; r++)); do
  for command in "${commands[@]}"; do
    read -ra argv <<<"$command"
    rotated "$r" native preloaded
    declare -A ns=()
    for variant in "${rotated[@]}"; do
      ns[$variant]="$(run_starts "$variant" "${argv[@]}")"
      raw+=$'\n'"$(awk -v r="$r" -v c="$command" -v v="$variant" -v n="$n" -v t="${ns[$variant]}" \
        'BEGIN { printf "%d\t%s\t%s\t%d\t%.1f\t%.1f", r, c, v, n, t / 1e6, t / n / 1e3 }')"
    done
    cost="$(awk -v p="${ns[preloaded]}" -v q="${ns[native]}" -v n="$n" \
      'BEGIN { printf "%.1f", (p - q) / n / 1e3 }')"
    costs[$command]+="$cost "
    unset ns
  done
done

echo "libgpuprio.so: $lib"
echo "$n starts per command, variant and round; $rounds rounds; $(nproc) CPUs; $(date -u +%Y-%m-%dT%H:%MZ)"
echo
echo "$raw" | column -t -s $'\t'
echo
printf '%-12s %-40s %9s %9s %9s %9s\n' command "cost per start, each round (us)" median min max spread
for command in "${commands[@]}"; do
  "$py" - "$bench" "$command" "${costs[$command]}" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
from bench_stats import spread
s = spread([float(v) for v in sys.argv[3].split()])
print("%-12s %-40s %9.1f %9.1f %9.1f %9.1f" % (sys.argv[2], sys.argv[3], s["median"], s["min"], s["max"],
                                              s["max"] - s["min"]))
PY
done
if [[ -n "$out" ]]; then
  echo "$raw" >"$out"
  echo
  echo "raw table: $out"
fi
