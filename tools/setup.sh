#!/usr/bin/env bash
# Installs everything gpuprio's build and tests need on Debian 12, idempotently:
# Debian packages (Bazel 4.2.3, its rule sets, Catch2, nlohmann/json and tmux for tests) and
# Abseil's source from Debian's archive, unpacked into third_party/abseil-src (git-ignored)
# without touching /etc/apt.
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

say "ready: Bazel $(dpkg-query -W -f='${Version}' bazel-bootstrap), Catch2 $(dpkg-query -W -f='${Version}' catch2), Abseil $absl_version, CUDA headers in $cuda"
say "next: tools/demo.sh or tools/test.sh (the first build compiles Abseil: several minutes on a small machine)"
