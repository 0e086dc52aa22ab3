#!/usr/bin/env bash
# Builds libgpuprio.so (bazel build -c opt) and writes, into OUT (default: out/packages of this
# checkout, wherever it is run from; the README's install lines name that place):
#   gpuprio-VERSION-py3-none-manylinux_2_N_x86_64.whl   pip install it (no index needed); N: the
#                                                       glibc 2.N the library needs
#   gpuprio_VERSION_amd64.deb                           apt install ./it, or dpkg -i
# then prints the two paths and how to install each (tools/packaging/make_packages.py;
# docs/build.md, "Packages"). --lib FILE packages a library built already instead of building one.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
progress_prefix=package
# shellcheck source=tools/progress.sh
source "$repo/tools/progress.sh"
lib=""
if [[ "${1:-}" == --lib ]]; then
  lib="$(realpath "${2:?--lib needs a file}")"
  shift 2
fi
out="$(realpath -m "${1:-$repo/out/packages}")"
if [[ -z "$lib" ]]; then
  progress_note "building libgpuprio.so (bazel build -c opt //hook:libgpuprio.so)"
  # The whole output stays in build_log, which is kept when the build fails; a failure shows the
  # compiler's own lines from it.
  build_log="$(mktemp "${TMPDIR:-/tmp}/gpuprio_package_build.XXXXXX.log")"
  progress_bazel "$build_log" build -c opt //hook:libgpuprio.so || exit 1
  rm -f "$build_log"
  progress_note "built"
  lib="$(bazel info -c opt bazel-bin 2>/dev/null)/hook/libgpuprio.so"
fi
written="$(python3 tools/packaging/make_packages.py --repo "$repo" --lib "$lib" --out "$out")"
echo "$written"
for path in $written; do
  case "$path" in
    *.whl) progress_note "the wheel: python3 -m venv ENV && ENV/bin/pip install --no-index $path" ;;
    *.deb) progress_note "the .deb: apt install $path" ;;
  esac
done
