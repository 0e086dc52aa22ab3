#!/usr/bin/env bash
# Builds, on the CPU machine, everything the GPU checks and benchmarks need, into .gpu/ (git-ignored;
# copy it into the checkout on the GPU machine):
#   .gpu/libgpuprio.so          bazel build -c opt //hook:libgpuprio.so
#   .gpu/driver_api_program     tests/gpu/driver_api_program.cu (+ embedded driver_api_kernels.cu)
#   .gpu/launch_rate            tools/bench/launch_rate.cu
#   .gpu/hold_probe             tools/bench/hold_probe.cu (tools/bench/run_hold_bench.sh)
#   .gpu/interference           tools/bench/interference.cu (the in-process form, and with --role
#                               high|low the two-process one: tools/bench/run_two_process_bench.sh)
#   .gpu/green_partitions       tools/bench/green_partitions.cu (the SM partitions green contexts give)
# The PyTorch two-process benchmark (tools/bench/torch_two_process.py) needs nothing built but the library.
# Idempotent: every run rebuilds all of it.
#
# Usage: bash tests/gpu/build_artifacts.sh [--skip-lib]
#   --skip-lib  build only the CUDA programs (for a native-only run before the library exists);
#               a libgpuprio.so already in .gpu/ is left as it is.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
say() { printf 'build_artifacts: %s\n' "$*"; }
die() { printf 'build_artifacts: error: %s\n' "$*" >&2; exit 1; }

skip_lib=0
for arg in "$@"; do
  case "$arg" in
    --skip-lib) skip_lib=1 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) die "unknown argument: $arg (see --help)" ;;
  esac
done

cuda="${CUDA_HOME:-/usr/local/cuda}"
nvcc="$cuda/bin/nvcc"
bin2c="$cuda/bin/bin2c"
[[ -x "$nvcc" ]] || die "nvcc not found at $nvcc (set CUDA_HOME)"
[[ -x "$bin2c" ]] || die "bin2c not found at $bin2c (set CUDA_HOME)"

grep -qxF '/.gpu/' .gitignore 2>/dev/null || die ".gitignore must list /.gpu/ so build outputs stay out of git"

out="$repo/.gpu"
gen="$out/gen"
mkdir -p "$out" "$gen"

# --- The library. ---
if ((skip_lib)); then
  say "--skip-lib: not building //hook:libgpuprio.so"
else
  command -v bazel >/dev/null || die "bazel not found (run tools/setup.sh)"
  if ! bazel query //hook:libgpuprio.so >/dev/null 2>"$gen/bazel_query.err"; then
    sed 's/^/  /' "$gen/bazel_query.err" >&2
    die "the Bazel target //hook:libgpuprio.so does not exist (yet); build it first, or pass --skip-lib to build only the CUDA programs"
  fi
  say "bazel build -c opt //hook:libgpuprio.so"
  bazel build -c opt //hook:libgpuprio.so
  # The -c opt output itself: bazel-bin may point at another configuration's (sanitizer) build.
  lib="$(bazel info -c opt bazel-bin)/hook/libgpuprio.so"
  [[ -f "$lib" ]] || die "bazel reported success but $lib is missing"
  if ldd "$lib" | grep -qE 'libasan|libtsan|libubsan'; then
    die "$lib is a sanitizer build"
  fi
  install -m 0755 "$lib" "$out/libgpuprio.so"
  say "copied $lib -> .gpu/libgpuprio.so"
fi

# --- The CUDA programs (sm_90 SASS + compute_90 PTX; run on the H100/H200). ---
arch=(-gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90)
common=(-std=c++17 -O2 -Xcompiler -Wall,-Wextra)

say "nvcc: driver_api_kernels.cu -> fatbin -> embedded image"
"$nvcc" "${arch[@]}" -fatbin -o "$gen/driver_api_kernels.fatbin" tests/gpu/driver_api_kernels.cu
# bin2c writes `const unsigned long long gp_driver_api_image[]`: 8-byte aligned, as
# cuModuleLoadData wants a fatbin image to be.
"$bin2c" --const --static --name gp_driver_api_image --type longlong "$gen/driver_api_kernels.fatbin" \
  >"$gen/driver_api_image.h.tmp"
mv -f "$gen/driver_api_image.h.tmp" "$gen/driver_api_image.h"

# Host code only: compiled as C++ by the host compiler, so no CUDA runtime registration code (nvcc
# would add some even for a file without kernels) and no libcudart.
cxx="${CXX:-g++}"
say "$cxx: driver_api_program.cu -> .gpu/driver_api_program (-lcuda, no CUDA runtime)"
"$cxx" -x c++ -std=c++17 -O2 -Wall -Wextra -I"$cuda/include" -I"$gen" \
  -o "$out/driver_api_program" tests/gpu/driver_api_program.cu -x none \
  -L"$cuda/lib64/stubs" -L"$cuda/lib64" -lcuda

say "nvcc: launch_rate.cu -> .gpu/launch_rate (-lcuda, static CUDA runtime)"
"$nvcc" "${common[@]}" "${arch[@]}" -cudart static \
  -o "$out/launch_rate" tools/bench/launch_rate.cu -lcuda -lpthread

say "nvcc: interference.cu -> .gpu/interference (-lcuda, static CUDA runtime)"
"$nvcc" "${common[@]}" "${arch[@]}" -cudart static \
  -o "$out/interference" tools/bench/interference.cu -lcuda -lpthread

say "nvcc: hold_probe.cu -> .gpu/hold_probe (static CUDA runtime)"
"$nvcc" "${common[@]}" "${arch[@]}" -cudart static \
  -o "$out/hold_probe" tools/bench/hold_probe.cu -lpthread -ldl

say "nvcc: green_partitions.cu -> .gpu/green_partitions (-lcuda, static CUDA runtime)"
"$nvcc" "${common[@]}" "${arch[@]}" -cudart static \
  -o "$out/green_partitions" tools/bench/green_partitions.cu -lcuda -lpthread

# Nothing here may depend on a libcuda other than the driver's libcuda.so.1.
for p in "$out/driver_api_program" "$out/launch_rate" "$out/interference" "$out/green_partitions"; do
  ldd_out="$(readelf -d "$p" | grep NEEDED || true)"
  grep -q 'libcuda.so.1' <<<"$ldd_out" || die "$p does not link libcuda.so.1: $ldd_out"
  if grep -q 'libcudart' <<<"$ldd_out"; then die "$p links a shared libcudart: $ldd_out"; fi
done

say "done:"
ls -l "$out" | sed 's/^/  /'
