#!/usr/bin/env bash
# The glibc floor of libgpuprio.so (docs/decisions/2026-11-27-glibc-floor.md), run by
# glibc_floor_test.cc:
#   glibc_floor.sh versions FILE...  fails if a FILE needs a glibc symbol version above 2.28 (the
#                                    manylinux_2_28 baseline), naming each such symbol
#   glibc_floor.sh run               runs glibc_floor_probe (C, linked against glibc 2.31) under
#                                    Debian 11's own loader and libraries (tools/setup.sh puts them in
#                                    third_party/glibc_floor/bullseye) with libgpuprio.so preloaded
#                                    and the fake driver built the same way, and checks that it ran
#                                    there, nothing of the host's glibc was mapped, every launch
#                                    reached the driver through gpuprio's scheduler, and gpuprio said
#                                    so at exit. A missing Debian 11 glibc is a failure, never a skip:
#                                    tools/setup.sh installs it.
# The last line is "glibc floor <mode>: ok" when every check passed; exit 1 otherwise.
set -uo pipefail
floor_minor=28
failures=0
fail() { echo "FAILED: $*"; failures=$((failures + 1)); }
finish() {
  if ((failures)); then echo "glibc floor $1: $failures check(s) failed"; exit 1; fi
  echo "glibc floor $1: ok"
  exit 0
}

mode="${1:-}"
shift || true
case "$mode" in
versions)
  (($#)) || { echo "usage: glibc_floor.sh versions FILE..."; exit 2; }
  for file in "$@"; do
    needs="$(readelf -V --wide "$file" | sed -n '/Version needs/,$p' |
             grep -o 'Name: GLIBC_2\.[0-9.]*' | sed 's/Name: //' | sort -uV | tr '\n' ' ')"
    if [[ -z "$needs" ]]; then
      fail "$file needs no GLIBC_ version at all: not a program linked against glibc?"
      continue
    fi
    echo "$file needs: $needs"
    # Every undefined dynamic symbol bound to a version above the floor: "GLIBC_2.N name".
    over="$(objdump -T "$file" | awk -v floor="$floor_minor" '
      /\*UND\*/ && match($0, /GLIBC_2\.[0-9]+(\.[0-9]+)?/) {
        version = substr($0, RSTART, RLENGTH); split(version, part, ".")
        if (part[2] + 0 > floor) print version, $NF
      }' | sort -uV)"
    if [[ -n "$over" ]]; then
      fail "$file needs glibc symbol versions above GLIBC_2.$floor_minor (it would not load on glibc 2.$floor_minor):"
      sed 's/^/  /' <<<"$over"
    fi
  done
  finish versions
  ;;
run)
  runfiles="${TEST_SRCDIR:?}/${TEST_WORKSPACE:-gpuprio}"
  floor="$runfiles/third_party/glibc_floor/bullseye"
  loader="$floor/lib/ld-linux-x86-64.so.2"
  lib="$runfiles/hook/libgpuprio.so"
  fake_dir="$runfiles/tests/fake_cuda/glibc_floor"
  probe="$runfiles/tests/hook/glibc_floor_probe"
  if [[ ! -x "$loader" || ! -f "$floor/VERSIONS" ]]; then
    fail "Debian 11's glibc is missing ($loader): run tools/setup.sh"
    finish run
  fi
  echo "Debian 11 packages: $(tr '\n' ' ' <"$floor/VERSIONS")"
  grep -q '^libc6 2\.31-' "$floor/VERSIONS" || fail "the loader is not glibc 2.31's: $(cat "$floor/VERSIONS")"
  work="$(mktemp -d "${TEST_TMPDIR:?}/glibc_floor.XXXXXX")"
  mkdir -p "$work/shm"
  # A clean environment: nothing of the test's (LD_LIBRARY_PATH, GPUPRIO_*) reaches the probe. The
  # loader finds every library in --library-path: Debian 11's, then the fake driver's directory.
  env -i PATH=/usr/bin:/bin HOME="$work" TMPDIR="$work" GPUPRIO_SHM_DIR="$work/shm" \
    GPUPRIO_LOG=info LD_PRELOAD="$lib" \
    "$loader" --library-path "$floor/lib:$fake_dir" "$probe" >"$work/out" 2>"$work/err"
  rc=$?
  echo "--- the probe under $loader (exit $rc): stdout"
  cat "$work/out"
  echo "--- stderr"
  cat "$work/err"
  echo "---"
  ((rc == 0)) || fail "the probe exited $rc"
  grep -qx 'probe: ok' "$work/out" || fail "the probe did not finish its checks"
  grep -qx 'glibc: 2\.31' "$work/out" || fail "the probe did not run on glibc 2.31"
  # gpuprio itself ran: its start line in schedule mode, and its call summary at exit.
  grep -q '^gpuprio: info: pid [0-9]* mode=schedule' "$work/err" || fail "no gpuprio start line in schedule mode"
  grep -q '^gpuprio: info: calls api=cuLaunchKernel total=42 dlsym=42 ' "$work/err" ||
    fail "gpuprio's summary does not count the 42 launches it intercepted"
  grep -q '^scheduler: priority=.* submitted=[1-9]' "$work/out" || fail "the scheduler took no op"
  # Nothing of the host's glibc (or any other host library) was mapped; the files that were are
  # Debian 11's, the fake driver's and libgpuprio.so itself.
  mapped="$(sed -n 's/^mapped: //p' "$work/out")"
  [[ -n "$mapped" ]] || fail "the probe listed no mapped file"
  while read -r path; do
    [[ -z "$path" ]] && continue
    case "$path" in
      /lib/*|/lib64/*|/usr/lib/*|/usr/lib64/*|/usr/local/*) fail "a host library was mapped: $path" ;;
    esac
  done <<<"$mapped"
  for expected in "$floor/lib/libc.so.6" "$floor/lib/libpthread.so.0" "$floor/lib/ld-linux-x86-64.so.2" \
                  "$lib" "$fake_dir/libcuda.so.1"; do
    real="$(realpath "$expected")"
    grep -qxF "$real" <<<"$mapped" || fail "$real was not mapped"
  done
  finish run
  ;;
*)
  echo "usage: glibc_floor.sh versions FILE... | run"
  exit 2
  ;;
esac
