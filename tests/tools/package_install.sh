#!/usr/bin/env bash
# The packages installed into fresh places, with no network: tools/packaging/make_packages.py
# writes the wheel and the .deb from the library under test; the wheel is pip-installed into a
# new venv (--no-index) and the .deb unpacked with dpkg-deb -x into an empty root; each one's
# `gpuprio` command then runs the fake-driver demo (tools/demo.sh --installed) with the library
# it bundles, `gpuprio env` must point LD_PRELOAD into that install, `gpuprio --version` must
# print VERSION's version, and each must hold the licence, notices and (the .deb) docs. Run by
# package_install_test.cc inside Bazel's sandbox (venv, pip and dpkg-deb need no network).
set -euo pipefail
runfiles="${TEST_SRCDIR:?}/${TEST_WORKSPACE:-gpuprio}"
work="$(mktemp -d "${TEST_TMPDIR:-/tmp}/packages.XXXXXX")"
failures=0
fail() { echo "FAILED: $*" >&2; failures=$((failures + 1)); }
unset GPUPRIO_LIB LD_PRELOAD

# Where the binary loads: libstdc++ and libgcc are linked in, so the library needs no libstdc++.so
# (a conda environment's older one cannot break it) and at most glibc 2.36 (Debian 12).
lib="$runfiles/hook/libgpuprio.so"
needed="$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')"
echo "libgpuprio.so needs: $needed"
# A sanitizer build (BUILD_SANITIZER, set by .bazelrc's asan/tsan configs) also needs its runtime;
# that build is never what a package ships.
for n in $needed; do
  case "$n" in
    libc.so.6|libm.so.6|ld-linux-x86-64.so.2|libz.so.1) ;;
    libasan.so.*|libubsan.so.*) [[ "${BUILD_SANITIZER:-}" == asan ]] ||
      fail "libgpuprio.so needs $n outside an AddressSanitizer build" ;;
    libtsan.so.*) [[ "${BUILD_SANITIZER:-}" == tsan ]] ||
      fail "libgpuprio.so needs $n outside a ThreadSanitizer build" ;;
    *) fail "libgpuprio.so needs $n (only libc, libm, the loader and zlib are expected)" ;;
  esac
done
versions="$(readelf -V --wide "$lib" | sed -n '/Version needs/,$p' | grep -o 'Name: [A-Z_]*[0-9.]*' |
            sed 's/Name: //' | sort -uV | tr '\n' ' ')"
echo "libgpuprio.so symbol versions: $versions"
grep -q 'GLIBCXX_\|CXXABI_\|GCC_' <<<"$versions" && fail "libgpuprio.so needs libstdc++/libgcc_s versions"
highest="$(tr ' ' '\n' <<<"$versions" | sed -n 's/^GLIBC_2\.\([0-9]*\).*/\1/p' | sort -n | tail -n 1)"
((highest <= 36)) || fail "libgpuprio.so needs GLIBC_2.$highest, more than Debian 12's 2.36"

version="$(head -n 1 "$runfiles/VERSION")"

# A repository missing a file the packages ship is refused, naming it, and nothing is written.
mkdir "$work/bare"
if python3 "$runfiles/tools/packaging/make_packages.py" --repo "$work/bare" \
    --lib "$runfiles/hook/libgpuprio.so" --out "$work/bare_out" 2>"$work/bare.err"; then
  fail "make_packages.py wrote packages from a repository without NOTICE"
fi
grep -q 'missing from .*NOTICE' "$work/bare.err" || fail "make_packages.py: $(cat "$work/bare.err")"
[[ -z "$(ls -A "$work/bare_out" 2>/dev/null)" ]] || fail "make_packages.py wrote into bare_out"

# The repository files the packages carry, as the runfiles have them.
python3 "$runfiles/tools/packaging/make_packages.py" --repo "$runfiles" \
  --lib "$runfiles/hook/libgpuprio.so" --out "$work/out"
wheel="$(ls "$work"/out/gpuprio-*-py3-none-manylinux_2_*_x86_64.whl)"
deb="$(ls "$work"/out/gpuprio_*_amd64.deb)"

# The .deb's control file: the Depends the library's NEEDED list calls for, and no libstdc++.
control="$(dpkg-deb -f "$deb")"
echo "$control"
grep -q '^Depends: python3 (>= 3.9), libc6 (>= 2\.[0-9]*)' <<<"$control" || fail "Depends: $control"
grep -q 'libstdc++' <<<"$control" && fail "the .deb depends on libstdc++ (linked statically)"

# check_files NAME DIR FILE...: each FILE (a repository path) is in DIR under its base name, the
# same bytes as the repository's.
check_files() {
  local name="$1" dir="$2" file
  shift 2
  for file in "$@"; do
    cmp -s "$runfiles/$file" "$dir/$(basename "$file")" ||
      fail "$name: $dir/$(basename "$file") is missing or differs from $file"
  done
}

# check_install NAME GPUPRIO_CMD PREFIX: the version and the demo through GPUPRIO_CMD, whose
# library lies under PREFIX.
check_install() {
  local name="$1" cmd="$2" prefix="$3" out="$work/demo.$1"
  local exported reported
  reported="$("$cmd" --version)" || fail "$name: gpuprio --version failed"
  [[ "$reported" == "gpuprio $version" ]] ||
    fail "$name: gpuprio --version printed '$reported', not 'gpuprio $version' (VERSION)"
  exported="$("$cmd" env --priority low | sed -n 's/^export LD_PRELOAD=//p')"
  [[ "$exported" == "$prefix"/*libgpuprio.so && -f "$exported" ]] ||
    fail "$name: gpuprio env preloads '$exported', not the library under $prefix"
  if ! DEMO_BIN="$runfiles" bash "$runfiles/tools/demo.sh" --installed "$cmd" >"$out" 2>&1
  then
    fail "$name: the demo failed"
  fi
  cat "$out"
  grep -q 'gpuprio: pid [0-9]* mode=schedule priority=normal budget=2000us' "$out" ||
    fail "$name: no start line from the installed library"
  grep -q 'gpuprio: calls api=' "$out" || fail "$name: no call summary from the library"
  # The priority scenario, natively and scheduled (the scheduled line may follow the library's
  # start line on the same output line).
  (($(grep -c 'high_latency_us=[0-9]* .*low_max_in_flight=' "$out") == 2)) ||
    fail "$name: no priority scenario result"
  grep -q 'gpuprio *[0-9]* of the [0-9]* low kernels' "$out" || fail "$name: no two-process result"
  grep -q '^demo: .*done$' "$out" || fail "$name: the demo did not finish"
}

echo "=== wheel: $(basename "$wheel") into a new venv ==="
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --no-index --disable-pip-version-check -q "$wheel"
"$work/venv/bin/python" -c 'import gpuprio; assert gpuprio.available() is False; print("import gpuprio: ok")'
check_install wheel "$work/venv/bin/gpuprio" "$work/venv/lib"
dist_info=("$work"/venv/lib/python3*/site-packages/gpuprio-"$version".dist-info)
check_files wheel "${dist_info[0]}" LICENSE NOTICE THIRD_PARTY_NOTICES.md

echo "=== .deb: $(basename "$deb") unpacked into an empty root ==="
mkdir "$work/root"
dpkg-deb -x "$deb" "$work/root"
PYTHONPATH="$work/root/usr/lib/python3/dist-packages" python3 -c 'import gpuprio; print("import gpuprio: ok")'
check_install deb "$work/root/usr/bin/gpuprio" "$work/root/usr/lib/gpuprio"
doc="$work/root/usr/share/doc/gpuprio"
check_files deb "$doc" README.md docs/user_guide.md docs/build.md CHANGELOG.md NOTICE \
  THIRD_PARTY_NOTICES.md
cmp -s "$runfiles/LICENSE" "$doc/copyright" || fail "deb: $doc/copyright is not LICENSE"

rm -rf "$work"
if ((failures)); then
  echo "$failures failures"
  exit 1
fi
echo "package install: all checks passed"
