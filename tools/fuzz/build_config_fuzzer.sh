#!/usr/bin/env bash
# Builds the libFuzzer target of the configuration readers with Debian's clang (-fsanitize=fuzzer,
# with ASan and UBSan), outside Bazel: Bazel here builds with gcc, which has no libFuzzer.
#
#   tools/fuzz/build_config_fuzzer.sh [OUT_DIR]       # default: /tmp/gpuprio_fuzz
#   OUT_DIR/config_fuzzer -close_fd_mask=2 -max_total_time=60 OUT_DIR/corpus
# (-close_fd_mask=2: the target logs every bad value to stderr; libFuzzer keeps its own reports.)
#
# Abseil is compiled from third_party/abseil-src (the parts the readers use), without coverage
# instrumentation; only gpuprio's own files are instrumented for the fuzzer.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:-/tmp/gpuprio_fuzz}"
absl="$repo/third_party/abseil-src"
cxx="${CXX:-clang++}"
command -v "$cxx" >/dev/null || { echo "build_config_fuzzer: $cxx not found (apt-get install clang)" >&2; exit 1; }
[[ -d "$absl/absl" ]] || { echo "build_config_fuzzer: $absl missing (tools/setup.sh unpacks it)" >&2; exit 1; }

mkdir -p "$out/obj" "$out/corpus"
common=(-std=c++17 -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -I"$repo" -I"$absl")

absl_sources=(
  base/internal/raw_logging.cc base/internal/throw_delegate.cc base/internal/spinlock_wait.cc
  base/internal/spinlock.cc base/internal/sysinfo.cc base/internal/cycleclock.cc
  base/internal/unscaledcycleclock.cc base/internal/thread_identity.cc base/internal/low_level_alloc.cc
  base/log_severity.cc numeric/int128.cc
  strings/ascii.cc strings/charconv.cc strings/internal/charconv_bigint.cc
  strings/internal/charconv_parse.cc strings/internal/memutil.cc strings/internal/escaping.cc
  strings/escaping.cc strings/internal/utf8.cc strings/internal/ostringstream.cc strings/match.cc
  strings/numbers.cc strings/str_cat.cc strings/str_split.cc strings/string_view.cc
  strings/internal/str_format/arg.cc strings/internal/str_format/bind.cc
  strings/internal/str_format/extension.cc strings/internal/str_format/float_conversion.cc
  strings/internal/str_format/output.cc strings/internal/str_format/parser.cc
)
gpuprio_sources=(
  hook/config.cc cupti_tracer/tracer_config.cc scheduler/env_vars.cc scheduler/env_reader.cc
  scheduler/logging.cc scheduler/log_throttle.cc tools/fuzz/config_fuzzer.cc
)

objects=()
for src in "${absl_sources[@]}"; do
  obj="$out/obj/absl_${src//\//_}.o"
  [[ "$obj" -nt "$absl/absl/$src" ]] || "$cxx" "${common[@]}" -c "$absl/absl/$src" -o "$obj"
  objects+=("$obj")
done
for src in "${gpuprio_sources[@]}"; do
  obj="$out/obj/${src//\//_}.o"
  "$cxx" "${common[@]}" -fsanitize=fuzzer-no-link -c "$repo/$src" -o "$obj"
  objects+=("$obj")
done
"$cxx" "${common[@]}" -fsanitize=fuzzer "${objects[@]}" -lpthread -o "$out/config_fuzzer"
echo "built $out/config_fuzzer; run: $out/config_fuzzer -close_fd_mask=2 -max_total_time=60 $out/corpus"
