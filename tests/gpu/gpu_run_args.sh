# shellcheck shell=bash
# What every GPU check and benchmark script starts with, in one place: `source` this file with the
# script's own arguments ("OUT_DIR [--native-only]", plus --NAME for each NAME the script lists in
# the array gp_flags before sourcing, e.g. gp_flags=(mps threads): each such variable is 1 when
# its flag was given, else 0). Sets
#   out          OUT_DIR, created, as an absolute path
#   native_only  0 or 1
#   repo         the checkout's root, which becomes the working directory
#   py           $PYTHON or python3
#   lib          $GPUPRIO_LIB or .gpu/libgpuprio.so (built by tests/gpu/build_artifacts.sh)
#   work         a fresh /tmp/gpuprio_SCRIPT.XXXXXX for the runs' files, removed when the script
#                exits (what a run reports is in OUT_DIR) unless GPUPRIO_KEEP_WORK=1 keeps it
# and defines say (prints "SCRIPT: ..."), need_lib (unless --native-only: exit 1 when $lib is
# missing), need_bin PATH (exit 1 when PATH is not an executable) and remove_work (the EXIT trap
# set here; a script that sets an EXIT trap of its own calls it there, as bench_procs.sh's
# procs_exit does). Bad arguments: usage, exit 2.
gp_flags=("${gp_flags[@]+"${gp_flags[@]}"}")
usage() {
  local flags=""
  ((${#gp_flags[@]})) && flags="$(printf ' [--%s]' "${gp_flags[@]}")"
  echo "usage: $0 OUT_DIR [--native-only]$flags" >&2
  exit 2
}
[[ $# -ge 1 ]] || usage
out="$1"; shift
native_only=0
for gp_flag in "${gp_flags[@]+"${gp_flags[@]}"}"; do printf -v "$gp_flag" 0; done
for arg in "$@"; do
  if [[ "$arg" == --native-only ]]; then
    native_only=1
    continue
  fi
  gp_known=0
  for gp_flag in "${gp_flags[@]+"${gp_flags[@]}"}"; do
    if [[ "$arg" == "--$gp_flag" ]]; then
      printf -v "$gp_flag" 1
      gp_known=1
    fi
  done
  ((gp_known)) || usage
done
repo="$(cd "$(dirname "${BASH_SOURCE[1]}")/../.." && pwd)"
cd "$repo" || exit 1
gp_script_name="$(basename "${BASH_SOURCE[1]}" .sh)"
py="${PYTHON:-python3}"
lib="${GPUPRIO_LIB:-$repo/.gpu/libgpuprio.so}"
say() { printf '%s: %s\n' "$gp_script_name" "$*"; }
need_lib() {
  ((native_only)) && return 0
  [[ -f "$lib" ]] && return 0
  say "error: $lib missing: run tests/gpu/build_artifacts.sh (without --skip-lib) and copy .gpu/ to the GPU machine, or use --native-only"
  exit 1
}
need_bin() {
  [[ -x "$1" ]] && return 0
  say "error: $1 missing: run tests/gpu/build_artifacts.sh on the CPU machine and copy .gpu/ to the GPU machine"
  exit 1
}
mkdir -p "$out" || exit 1
out="$(cd "$out" && pwd)"
work="$(mktemp -d "/tmp/gpuprio_$gp_script_name.XXXXXX")"
remove_work() {
  [[ "${GPUPRIO_KEEP_WORK:-0}" == 1 ]] || rm -rf "$work"
}
trap remove_work EXIT
