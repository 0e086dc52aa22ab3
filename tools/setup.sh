#!/usr/bin/env bash
# Installs everything gpuprio's build and tests need on Debian 12, idempotently:
# Debian packages (Bazel 4.2.3, its rule sets, Catch2, nlohmann/json and tmux for tests),
# Abseil's source from Debian's archive, unpacked into third_party/abseil-src (git-ignored), and
# Debian 11's glibc 2.31 and zlib, which libgpuprio.so links against and a test runs it under, in
# third_party/glibc_floor/bullseye (git-ignored), both without touching /etc/apt.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
progress_prefix=setup
# shellcheck source=tools/progress.sh
source "$repo/tools/progress.sh"
say() { progress_note "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

# tmux: the terminal in which //tests/tools:top_test runs `gpuprio top`'s live view.
# zlib1g-dev: .json.gz traces (libgpuprio.so links libz.so.1).
# python3-venv: //tests/tools:package_install_test pip-installs the wheel into a new venv.
packages=(bazel-bootstrap bazel-rules-java bazel-skylib bazel-platforms catch2 clang g++ python3 python3-venv
          nlohmann-json3-dev tmux zlib1g-dev)
absl_version="20220623.1"
absl_dir="$repo/third_party/abseil-src"
cuda="${CUDA_HOME:-/usr/local/cuda}"

# --- What cannot be installed from here: say exactly what is missing. ---
[[ -r /etc/debian_version ]] || die "this script supports Debian 12 (bookworm); /etc/debian_version is missing"
command -v apt-get >/dev/null || die "apt-get not found: install the packages by hand: ${packages[*]}"
missing=()
for f in include/cuda.h include/cudaTypedefs.h include/cudaProfilerTypedefs.h include/cupti.h lib64/libcupti.so.13; do
  [[ -e "$cuda/$f" ]] || missing+=("$cuda/$f")
done
if ((${#missing[@]})); then
  die "the CUDA 13.0 toolkit is required at $cuda (set CUDA_HOME to use another path); missing: ${missing[*]}"
fi

# --- Debian packages. ---
need=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
done
if ((${#need[@]})); then
  [[ $(id -u) -eq 0 ]] || die "packages missing (${need[*]}); run this script as root"
  say "installing Debian packages: ${need[*]}"
  say "apt-get update"
  apt-get update -q || die "apt-get update failed (its messages are above): check the network and /etc/apt/sources.list*"
  say "apt-get install (${#need[@]} packages)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" ||
    die "apt-get install failed (its messages are above)"
  say "Debian packages installed"
else
  say "Debian packages already installed: ${packages[*]}"
fi

# --- Abseil source, from Debian's archive, through a private apt configuration. ---
if [[ -f "$absl_dir/absl/base/config.h" && -f "$absl_dir/.gpuprio-version" &&
      "$(cat "$absl_dir/.gpuprio-version")" == "$absl_version" ]]; then
  say "Abseil $absl_version source already in third_party/abseil-src"
else
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/sources.list.d" "$work/lists/partial"
  cat >"$work/sources.list.d/bookworm-src.sources" <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  apt_opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$work/sources.list.d"
            -o "Dir::State::Lists=$work/lists" -o APT::Sandbox::User=root)
  say "fetching Abseil $absl_version source from Debian's archive (private apt lists in $work)"
  progress_run "reading the source package lists" "$work/update.log" \
    apt-get "${apt_opts[@]}" update -q || die "could not read Debian's source package lists (above)"
  progress_run "downloading Abseil's source package" "$work/source.log" \
    bash -c 'cd "$1" && shift && apt-get "$@" source --download-only -q abseil' _ "$work" \
    "${apt_opts[@]}" || die "could not download Abseil's source package (above)"
  orig="$(ls "$work"/abseil_"$absl_version".orig.tar.* 2>/dev/null | head -n1)"
  [[ -n "$orig" ]] || die "Debian's abseil source package did not download"
  rm -rf "$absl_dir" && mkdir -p "$absl_dir"
  tar -xf "$orig" -C "$absl_dir" --strip-components=1
  # Abseil's own WORKSPACE would fetch dependencies; the project's WORKSPACE provides them instead.
  printf 'workspace(name = "com_google_absl")\n' >"$absl_dir/WORKSPACE"
  echo "$absl_version" >"$absl_dir/.gpuprio-version"
  say "unpacked $(basename "$orig") into third_party/abseil-src"
fi

# --- glibc 2.31 (Debian 11, bullseye): what libgpuprio.so links against, and runs under in a test. ---
# Linking against an older glibc's libraries gives every reference its old symbol version, so the
# library loads on glibc 2.28 and later (docs/decisions/2026-11-27-glibc-floor.md). Only the .so
# files, libc_nonshared.a and the start files are kept, flat in $floor_dir/lib, with linker scripts
# (libc.so, libm.so, ...) that name their neighbours, so `-L` that directory is all a link needs; the
# same directory is the library path of the test that runs programs under bullseye's own loader.
floor_dir="$repo/third_party/glibc_floor/bullseye"
floor_layout="1"
if [[ -f "$floor_dir/lib/libc.so.6" && -f "$floor_dir/.gpuprio-layout" &&
      "$(cat "$floor_dir/.gpuprio-layout")" == "$floor_layout" ]]; then
  say "glibc $(sed -n 's/^libc6 //p' "$floor_dir/VERSIONS") (Debian 11) already in third_party/glibc_floor/bullseye"
else
  floor_work="$(mktemp -d)"
  trap 'rm -rf "${work:-}" "$floor_work"' EXIT
  mkdir -p "$floor_work/sources.list.d" "$floor_work/lists/partial" "$floor_work/cache/archives/partial"
  cat >"$floor_work/sources.list.d/bullseye.sources" <<SRC
Types: deb
URIs: http://deb.debian.org/debian
Suites: bullseye
Components: main
Architectures: amd64
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  # The host's dpkg status is not read (its newer libc6 would be the "candidate"), nor its caches.
  floor_opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$floor_work/sources.list.d"
              -o "Dir::State::Lists=$floor_work/lists" -o Dir::State::Status=/dev/null
              -o "Dir::Cache=$floor_work/cache" -o APT::Architectures=amd64 -o APT::Sandbox::User=root)
  say "fetching glibc 2.31 and zlib from Debian 11 (private apt lists in $floor_work)"
  progress_run "reading Debian 11's package lists" "$floor_work/update.log" \
    apt-get "${floor_opts[@]}" update -q || die "could not read Debian 11's package lists (above)"
  progress_run "downloading libc6, libc6-dev and zlib1g of Debian 11" "$floor_work/download.log" \
    bash -c 'cd "$1" && shift && apt-get "$@" download -q libc6 libc6-dev zlib1g' _ "$floor_work" \
    "${floor_opts[@]}" || die "could not download Debian 11's libc6, libc6-dev and zlib1g (above)"
  mkdir -p "$floor_work/root"
  for deb in "$floor_work"/*.deb; do dpkg-deb -x "$deb" "$floor_work/root"; done
  lib="$floor_work/lib"
  mkdir -p "$lib"
  libdir="$floor_work/root/lib/x86_64-linux-gnu"
  devdir="$floor_work/root/usr/lib/x86_64-linux-gnu"
  [[ -f "$libdir/libc-2.31.so" ]] || die "Debian 11's libc6 is not glibc 2.31 any more: $(ls "$libdir")"
  # Real files (cp -L: the packages' links are absolute), under the names the loader looks for.
  for so in ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 librt.so.1 libz.so.1; do
    cp -L "$libdir/$so" "$lib/$so" || die "Debian 11's packages have no $so"
  done
  for f in libc_nonshared.a Scrt1.o crt1.o crti.o crtn.o; do
    cp "$devdir/$f" "$lib/$f" || die "Debian 11's libc6-dev has no $f"
  done
  # The link-time names: linker scripts naming the files beside them (found through -L).
  printf '/* glibc 2.31 (Debian 11): tools/setup.sh */\nOUTPUT_FORMAT(elf64-x86-64)\nGROUP ( libc.so.6 libc_nonshared.a AS_NEEDED ( ld-linux-x86-64.so.2 ) )\n' >"$lib/libc.so"
  for pair in m:libm.so.6 pthread:libpthread.so.0 dl:libdl.so.2 rt:librt.so.1 z:libz.so.1; do
    printf '/* Debian 11: tools/setup.sh */\nGROUP ( %s )\n' "${pair#*:}" >"$lib/lib${pair%%:*}.so"
  done
  for p in libc6 libc6-dev zlib1g; do
    printf '%s %s\n' "$p" "$(dpkg-deb -f "$(ls "$floor_work/${p}"_*.deb)" Version)"
  done >"$floor_work/VERSIONS"
  rm -rf "$floor_dir" && mkdir -p "$floor_dir"
  mv "$lib" "$floor_dir/lib"
  mv "$floor_work/VERSIONS" "$floor_dir/VERSIONS"
  echo "$floor_layout" >"$floor_dir/.gpuprio-layout"
  say "unpacked glibc $(sed -n 's/^libc6 //p' "$floor_dir/VERSIONS") and zlib of Debian 11 into third_party/glibc_floor/bullseye"
fi

say "ready: Bazel $(dpkg-query -W -f='${Version}' bazel-bootstrap), Catch2 $(dpkg-query -W -f='${Version}' catch2), Abseil $absl_version, glibc 2.31 to link against, CUDA headers in $cuda"
say "next: tools/demo.sh or tools/test.sh (the first build compiles Abseil: several minutes on a small machine)"
