#!/usr/bin/env bash
# The packages installed into fresh places, with no network: tools/package.sh --lib writes the
# wheel and the .deb from the library under test (tools/packaging/make_packages.py) where the
# README's install lines say; the wheel is pip-installed into a new venv (--no-index) and the .deb
# unpacked with dpkg-deb -x into an empty root; each one's `gpuprio` command then runs the
# fake-driver demo (tools/demo.sh --installed) with the library it bundles, `gpuprio env` must
# point LD_PRELOAD into that install, `gpuprio --version` and the module's __version__ must be
# VERSION's version, pkgutil and help(gpuprio) must not list the library as a module, the .deb's
# launcher must run under /usr/bin/python3, and each must hold the licence, notices and (the
# .deb) docs. Run by package_install_test.cc inside Bazel's sandbox (venv, pip and dpkg-deb need
# no network).
set -euo pipefail
runfiles="${TEST_SRCDIR:?}/${TEST_WORKSPACE:-gpuprio}"
work="$(mktemp -d "${TEST_TMPDIR:-/tmp}/packages.XXXXXX")"
failures=0
fail() { echo "FAILED: $*" >&2; failures=$((failures + 1)); }
unset GPUPRIO_LIB LD_PRELOAD

# Where the binary loads: libstdc++ and libgcc are linked in, so the library needs no libstdc++.so
# (a conda environment's older one cannot break it), and it is linked against glibc 2.31, so it
# needs at most glibc 2.28 (//tests/hook:glibc_floor_test checks that in detail) and, from before
# glibc 2.34 merged them into libc, libpthread, libdl and librt.
lib="$runfiles/hook/libgpuprio.so"
needed="$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')"
echo "libgpuprio.so needs: $needed"
# A sanitizer build (BUILD_SANITIZER, set by .bazelrc's asan/tsan configs) also needs its runtime;
# that build is never what a package ships.
for n in $needed; do
  case "$n" in
    libc.so.6|libm.so.6|ld-linux-x86-64.so.2|libz.so.1|libpthread.so.0|libdl.so.2|librt.so.1) ;;
    libasan.so.*|libubsan.so.*) [[ "${BUILD_SANITIZER:-}" == asan ]] ||
      fail "libgpuprio.so needs $n outside an AddressSanitizer build" ;;
    libtsan.so.*) [[ "${BUILD_SANITIZER:-}" == tsan ]] ||
      fail "libgpuprio.so needs $n outside a ThreadSanitizer build" ;;
    *) fail "libgpuprio.so needs $n (only glibc's libraries, the loader and zlib are expected)" ;;
  esac
done
versions="$(readelf -V --wide "$lib" | sed -n '/Version needs/,$p' | grep -o 'Name: [A-Z_]*[0-9.]*' |
            sed 's/Name: //' | sort -uV | tr '\n' ' ')"
echo "libgpuprio.so symbol versions: $versions"
grep -q 'GLIBCXX_\|CXXABI_\|GCC_' <<<"$versions" && fail "libgpuprio.so needs libstdc++/libgcc_s versions"
highest="$(tr ' ' '\n' <<<"$versions" | sed -n 's/^GLIBC_2\.\([0-9]*\).*/\1/p' | sort -n | tail -n 1)"
# A sanitizer build links against the host's glibc (Debian 12's 2.36); the library a package ships
# needs at most 2.28.
floor=28
[[ -n "${BUILD_SANITIZER:-}" ]] && floor=36
((highest <= floor)) || fail "libgpuprio.so needs GLIBC_2.$highest, more than glibc 2.$floor"

version="$(head -n 1 "$runfiles/VERSION")"

# A repository missing a file the packages ship is refused, naming it, and nothing is written.
mkdir "$work/bare"
if python3 "$runfiles/tools/packaging/make_packages.py" --repo "$work/bare" \
    --lib "$runfiles/hook/libgpuprio.so" --out "$work/bare_out" 2>"$work/bare.err"; then
  fail "make_packages.py wrote packages from a repository without NOTICE"
fi
grep -q 'missing from .*NOTICE' "$work/bare.err" || fail "make_packages.py: $(cat "$work/bare.err")"
[[ -z "$(ls -A "$work/bare_out" 2>/dev/null)" ]] || fail "make_packages.py wrote into bare_out"

# tools/package.sh --lib run as a user runs it, in a copy of the repository files the packages
# carry (as the runfiles have them), writing into its default place.
repo_files=(tools/package.sh tools/progress.sh tools/packaging/make_packages.py
            tools/python/gpuprio.py tools/cli/gpuprio
            scheduler/base/env_vars.def VERSION
            README.md docs/user_guide.md docs/build.md CHANGELOG.md NOTICE THIRD_PARTY_NOTICES.md
            LICENSE)
for file in "$runfiles"/tools/cli/gpuprio_cli/*.py; do  # the launcher's package, every module
  repo_files+=("tools/cli/gpuprio_cli/$(basename "$file")")
done
for file in "${repo_files[@]}"; do
  mkdir -p "$work/repo/$(dirname "$file")"
  cp -L "$runfiles/$file" "$work/repo/$file"
done
(cd "$work" && bash "$work/repo/tools/package.sh" --lib "$runfiles/hook/libgpuprio.so")
wheel="$(ls "$work"/repo/out/packages/gpuprio-*-py3-none-manylinux_2_*_x86_64.whl)"
deb="$(ls "$work"/repo/out/packages/gpuprio_*_amd64.deb)"

# The README's install lines name what package.sh wrote: each path, taken from the checkout's
# root, matches exactly that file.
readme_wheel="$(sed -n 's/.*pip install --no-index \([^ ]*\.whl\).*/\1/p' "$runfiles/README.md")"
readme_deb="$(sed -n 's/.*apt install \.\/\([^ ]*\.deb\).*/\1/p' "$runfiles/README.md")"
shopt -s nullglob
# shellcheck disable=SC2206  # the README's globs, expanded on purpose
readme_wheels=(${readme_wheel:+$work/repo/$readme_wheel})
# shellcheck disable=SC2206
readme_debs=(${readme_deb:+$work/repo/$readme_deb})
shopt -u nullglob
[[ ${#readme_wheels[@]} == 1 && "${readme_wheels[0]}" == "$wheel" ]] ||
  fail "README's pip install names '$readme_wheel', which is not what package.sh wrote ($wheel)"
[[ ${#readme_debs[@]} == 1 && "${readme_debs[0]}" == "$deb" ]] ||
  fail "README's apt install names './$readme_deb', which is not what package.sh wrote ($deb)"

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
  # The launcher's package travels with it (gpuprio_cli/exporter.py: `gpuprio exporter`).
  "$cmd" exporter --help | grep -q -- '--max-segments' ||
    fail "$name: gpuprio exporter is missing (gpuprio_cli/ not beside the launcher?)"
  # gpuprio_cli/trace_merge.py: `gpuprio trace merge` of a missing file names the file.
  "$cmd" trace merge "$work/no_trace.json" -o "$work/merged.$name.json" 2>"$work/merge.$name.err" &&
    fail "$name: gpuprio trace merge of a missing file succeeded"
  grep -q "cannot read '$work/no_trace.json'" "$work/merge.$name.err" ||
    fail "$name: gpuprio trace merge: $(cat "$work/merge.$name.err")"
  exported="$("$cmd" env --priority low | sed -n 's/^export LD_PRELOAD=//p')"
  [[ "$exported" == "$prefix"/*libgpuprio.so && -f "$exported" ]] ||
    fail "$name: gpuprio env preloads '$exported', not the library under $prefix"
  if ! DEMO_BIN="$runfiles" bash "$runfiles/tools/demo.sh" --installed "$cmd" >"$out" 2>&1
  then
    fail "$name: the demo failed"
  fi
  cat "$out"
  grep -q 'gpuprio: info: pid [0-9]* mode=schedule priority=normal budget=2000us' "$out" ||
    fail "$name: no start line from the installed library"
  grep -q 'gpuprio: info: calls api=' "$out" || fail "$name: no call summary from the library"
  # The priority scenario, natively and scheduled (the scheduled line may follow the library's
  # start line on the same output line).
  (($(grep -c 'high_latency_us=[0-9]* .*low_max_in_flight=' "$out") == 2)) ||
    fail "$name: no priority scenario result"
  grep -q 'gpuprio *[0-9]* of the [0-9]* low kernels' "$out" || fail "$name: no two-process result"
  grep -q '^demo: .*done$' "$out" || fail "$name: the demo did not finish"
}

# check_module NAME PYTHON PYTHONPATH: the installed module reports VERSION's version as
# __version__, and neither pkgutil nor help(gpuprio) takes the library for a module.
check_module() {
  local name="$1" python="$2" path="$3" answer
  answer="$(PYTHONPATH="$path" "$python" -c '
import gpuprio, pkgutil, pydoc
print(gpuprio.__version__)
print(" ".join(sorted(m.name for m in pkgutil.iter_modules(gpuprio.__path__))) or "-")
text = pydoc.render_doc(gpuprio, renderer=pydoc.plaintext)
contents = text.split("PACKAGE CONTENTS", 1)[1].split("\n\n", 1)[0] if "PACKAGE CONTENTS" in text else ""
print("libgpuprio" in contents)')" ||
    { fail "$name: the module's checks failed"; return; }
  [[ "$(sed -n 1p <<<"$answer")" == "$version" ]] ||
    fail "$name: gpuprio.__version__ is '$(sed -n 1p <<<"$answer")', not '$version' (VERSION)"
  grep -qw libgpuprio <<<"$(sed -n 2p <<<"$answer")" &&
    fail "$name: pkgutil lists a module libgpuprio: $(sed -n 2p <<<"$answer")"
  [[ "$(sed -n 3p <<<"$answer")" == False ]] ||
    fail "$name: help(gpuprio) lists libgpuprio in its PACKAGE CONTENTS"
}

echo "=== wheel: $(basename "$wheel") into a new venv ==="
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --no-index --disable-pip-version-check -q "$wheel"
"$work/venv/bin/python" -c 'import gpuprio; assert gpuprio.available() is False; print("import gpuprio: ok")'
check_module wheel "$work/venv/bin/python" ""
check_install wheel "$work/venv/bin/gpuprio" "$work/venv/lib"
dist_info=("$work"/venv/lib/python3*/site-packages/gpuprio-"$version".dist-info)
check_files wheel "${dist_info[0]}" LICENSE NOTICE THIRD_PARTY_NOTICES.md

echo "=== .deb: $(basename "$deb") unpacked into an empty root ==="
mkdir "$work/root"
dpkg-deb -x "$deb" "$work/root"
PYTHONPATH="$work/root/usr/lib/python3/dist-packages" python3 -c 'import gpuprio; print("import gpuprio: ok")'
check_module deb /usr/bin/python3 "$work/root/usr/lib/python3/dist-packages"
# The launcher runs under Debian's own Python, not the first python3 on PATH (a venv's, pyenv's):
# one that fails comes first here.
launcher="$work/root/usr/lib/gpuprio/gpuprio"
[[ "$(head -n 1 "$launcher")" == "#!/usr/bin/python3" ]] ||
  fail "deb: the launcher starts with '$(head -n 1 "$launcher")', not #!/usr/bin/python3"
mkdir "$work/bad_python"
printf '#!/bin/sh\necho "the python3 on PATH ran" >&2\nexit 97\n' >"$work/bad_python/python3"
chmod +x "$work/bad_python/python3"
PATH="$work/bad_python:$PATH" "$work/root/usr/bin/gpuprio" --version >/dev/null ||
  fail "deb: gpuprio --version failed with another python3 first on PATH"
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
