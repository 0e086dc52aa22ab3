#!/usr/bin/env bash
# Run on the GPU machine: every cu* name libgpuprio.so exports must be a symbol the real
# libcuda.so.1 exports too (hook/driver_api.def was written from the CUDA 13.0 headers; this is
# the check that those names are the driver's). Usage: check_exports.sh LIBGPUPRIO [OUTFILE]
set -euo pipefail
lib="${1:?usage: check_exports.sh LIBGPUPRIO [OUTFILE]}"
out="${2:-/dev/stdout}"
driver="$(ldconfig -p | awk '/libcuda\.so\.1 .*x86-64/ {print $NF; exit}')"
[[ -n "$driver" ]] || { echo "check_exports: libcuda.so.1 not found by ldconfig" >&2; exit 1; }
ours="$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TW]$/ && $3 ~ /^cu/ {print $3}' | sort -u)"
theirs="$(nm -D --defined-only "$driver" | awk '$3 ~ /^cu/ {print $3}' | sort -u)"
missing="$(comm -23 <(echo "$ours") <(echo "$theirs"))"
{
  echo "driver: $(readlink -f "$driver")"
  echo "libgpuprio exports $(echo "$ours" | wc -l) cu* names; the driver exports $(echo "$theirs" | wc -l)"
  if [[ -n "$missing" ]]; then
    echo "NOT in the driver:"; echo "$missing" | sed 's/^/  /'
  else
    echo "every exported cu* name exists in the driver: OK"
  fi
} >"$out"
[[ -z "$missing" ]]
