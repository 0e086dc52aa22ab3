#!/usr/bin/env bash
# Builds the libFuzzer entry points of tests/fuzz/ with clang (outside Bazel: Bazel builds with
# gcc, which has no libFuzzer) under ASan+UBSan, and runs them.
#
#   tools/fuzz/tracer_fuzz.sh [SECONDS] [TARGET...]   run each target for SECONDS (default 60)
#   tools/fuzz/tracer_fuzz.sh --build-only [TARGET...]
#   tools/fuzz/tracer_fuzz.sh --coverage [TARGET...]   line coverage of the fuzzed files
#   tools/fuzz/tracer_fuzz.sh --save-seeds [TARGET...]
#       the corpus, cut to one input per covered edge, written to tests/fuzz/TARGET.corpus
#
# Targets: activity_decoder, trace_join (default: both). Needs clang++ with libFuzzer (Debian:
# apt-get install clang; llvm-profdata and llvm-cov for --coverage), the CUDA headers (CUDA_HOME,
# default /usr/local/cuda), nlohmann-json3-dev, Abseil in third_party/abseil-src (tools/setup.sh)
# and Bazel (to list the sources to link). Abseil is compiled once into out/fuzz/absl.
#
# Under out/fuzz/: bin/, corpus/TARGET/ (what the runs found; tests/fuzz/TARGET.corpus seeds it),
# artifacts/TARGET/ (the input of any crash or broken property), logs/. A run prints one line per
# target: executions, executions/s, edges covered, crashes; it exits 1 if anything crashed.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
say() { printf 'fuzz: %s\n' "$*"; }
die() { printf 'fuzz: error: %s\n' "$*" >&2; exit 2; }

mode=run
seconds=60
case "${1:-}" in
  --build-only) mode=build; shift ;;
  --coverage) mode=coverage; shift ;;
  --save-seeds) mode=save; shift ;;
  -*) die "unknown option $1" ;;
  *) if [[ "${1:-}" =~ ^[0-9]+$ ]]; then seconds="$1"; shift; fi ;;
esac
targets=("$@")
((${#targets[@]})) || targets=(activity_decoder trace_join)

cxx="${CXX_FUZZ:-clang++}"
cuda="${CUDA_HOME:-/usr/local/cuda}"
absl_src="$repo/third_party/abseil-src"
out="$repo/out/fuzz"
command -v "$cxx" >/dev/null || die "$cxx not found (Debian: apt-get install clang)"
[[ -f "$cuda/include/cupti.h" ]] || die "no CUPTI headers in $cuda/include (set CUDA_HOME)"
[[ -f "$absl_src/absl/base/config.h" ]] || die "no Abseil in $absl_src (run tools/setup.sh)"
[[ -f /usr/include/nlohmann/json.hpp ]] ||
  die "no nlohmann/json.hpp (apt-get install nlohmann-json3-dev)"

common=(-std=c++17 -g -O1 -fno-omit-frame-pointer -I"$repo" -I"$absl_src" -I"$cuda/include")
sanitize=("-fsanitize=address,undefined" "-fno-sanitize-recover=undefined")
mkdir -p "$out/bin" "$out/logs"

# The files each target fuzzes (for --coverage), and the Bazel library of its cases and checks.
fuzzed_files() {
  case "$1" in
    activity_decoder) echo cupti_tracer/activity_decoder.cc ;;
    trace_join) echo cupti_tracer/trace_join.cc cupti_tracer/chrome_trace_writer.cc \
      cupti_tracer/json_writer.cc ;;
    *) die "unknown target $1 (activity_decoder, trace_join)" ;;
  esac
}
support_library() {
  case "$1" in
    activity_decoder) echo //tests/tracer:activity_decoder_fuzzing ;;
    trace_join) echo //tests/tracer:trace_join_fuzzing ;;
  esac
}
# gpuprio's own .cc files that library needs, as Bazel sees them (so a new dependency of the
# fuzzed code needs no change here; Abseil comes from the archive below).
sources=()
find_sources() {
  local query
  query="$(bazel query --noshow_progress "kind('source file', deps($(support_library "$1")))" \
    2>"$out/logs/$1_query.log")" || die "bazel query failed (see $out/logs/$1_query.log)"
  mapfile -t sources < <(sed -n 's|^//\([^:]*\):\(.*\.cc\)$|\1/\2|p' <<<"$query")
  ((${#sources[@]})) || die "bazel query found no sources for $1"
}
for target in "${targets[@]}"; do fuzzed_files "$target" >/dev/null; done

check_libfuzzer() {
  [[ -x "$out/bin/probe" ]] && return
  printf '%s\n' '#include <cstddef>' '#include <cstdint>' \
    'extern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }' >"$out/probe.cc"
  "$cxx" -fsanitize=fuzzer,address "$out/probe.cc" -o "$out/bin/probe" 2>"$out/logs/probe.log" ||
    die "$cxx cannot build a libFuzzer binary (see $out/logs/probe.log)"
}

# Every Abseil library source the fuzzers may need, compiled once into one archive (the linker
# takes only what is used).
build_absl() {
  local lib="$out/absl/libabsl.a"
  [[ -f "$lib" ]] && return
  say "compiling Abseil into $lib (once, a few minutes)"
  mkdir -p "$out/absl/obj"
  (cd "$absl_src" &&
    find absl/base absl/container absl/hash absl/numeric absl/strings absl/status absl/types \
      absl/profiling absl/debugging absl/synchronization absl/time -name '*.cc' \
      ! -name '*_test.cc' ! -name '*_benchmark.cc' ! -name '*test_*' ! -name '*_testing.cc' \
      ! -name '*mock*' ! -name 'print_hash_of.cc' | sort) >"$out/absl/sources"
  local compile
  compile="$(printf '%q ' "$cxx" "${common[@]}" "${sanitize[@]}" -w)"
  while read -r src; do
    printf '%s -c %q -o %q\n' "$compile" "$absl_src/$src" "$out/absl/obj/${src//\//_}.o"
  done <"$out/absl/sources" >"$out/absl/commands"
  xargs -d '\n' -n 1 -P "$(nproc)" bash -c <"$out/absl/commands" || die "compiling Abseil failed"
  ar rcs "$lib" "$out"/absl/obj/*.o
}

# build TARGET SUFFIX EXTRA_FLAGS...: out/fuzz/bin/TARGET_fuzzerSUFFIX
build() {
  local target="$1" suffix="$2"
  shift 2
  local bin="$out/bin/${target}_fuzzer$suffix"
  say "building $bin"
  find_sources "$target"
  "$cxx" "${common[@]}" "${sanitize[@]}" -fsanitize=fuzzer "$@" "tests/fuzz/${target}_fuzzer.cc" \
    "${sources[@]}" "$out/absl/libabsl.a" -o "$bin" \
    2>"$out/logs/${target}${suffix}_build.log" ||
    die "building $target failed (see $out/logs/${target}${suffix}_build.log)"
}

# tests/fuzz/TARGET.corpus (one input per line, in hex) unpacked into out/fuzz/seeds/TARGET/.
unpack_seeds() {
  local target="$1" dir="$out/seeds/$1" n=0 line
  rm -rf "$dir"
  mkdir -p "$dir"
  [[ -f "tests/fuzz/$target.corpus" ]] || return 0
  while read -r line; do
    [[ -z "$line" || "$line" == \#* ]] && continue
    # shellcheck disable=SC2001  # each pair of hex digits becomes \xHH
    printf '%b' "$(sed 's/../\\x&/g' <<<"$line")" >"$dir/seed-$n"
    n=$((n + 1))
  done <"tests/fuzz/$target.corpus"
}

run() {
  local target="$1" corpus="$out/corpus/$1" artifacts="$out/artifacts/$1/"
  local log="$out/logs/$1_run.log" rc
  mkdir -p "$corpus" "$artifacts"
  unpack_seeds "$target"
  say "running $target for $seconds s (log: $log)"
  set +e
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=detect_leaks=1 \
    "$out/bin/${target}_fuzzer" -max_total_time="$seconds" -print_final_stats=1 -timeout=10 \
    -rss_limit_mb=4096 -artifact_prefix="$artifacts" "$corpus" "$out/seeds/$target" >"$log" 2>&1
  rc=$?
  set -e
  local execs rate cov crashes
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
  rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)"
  cov="$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)"
  crashes="$(find "$artifacts" -type f | wc -l)"
  printf '%s: %s executions in %s s, %s/s, %s edges, corpus %s inputs, %s crashes (rc %s)\n' \
    "$target" "${execs:-?}" "$seconds" "${rate:-?}" "${cov:-?}" \
    "$(find "$corpus" -type f | wc -l)" "$crashes" "$rc"
  [[ $rc -eq 0 && $crashes -eq 0 ]]
}

coverage() {
  local target="$1" bin="$out/bin/$1_fuzzer_cov" profile="$out/coverage/$1"
  build "$target" _cov -fprofile-instr-generate -fcoverage-mapping
  unpack_seeds "$target"
  mkdir -p "$out/corpus/$target"
  rm -rf "$profile"
  mkdir -p "$profile"
  LLVM_PROFILE_FILE="$profile/%p.profraw" "$bin" -runs=0 "$out/corpus/$target" \
    "$out/seeds/$target" >"$out/logs/$1_coverage.log" 2>&1 || die "replaying $target failed"
  llvm-profdata merge -sparse "$profile"/*.profraw -o "$profile/merged.profdata"
  # shellcheck disable=SC2046
  llvm-cov report "$bin" -instr-profile="$profile/merged.profdata" $(fuzzed_files "$target")
}

save_seeds() {
  local target="$1" dir="$out/minimized/$1" file="tests/fuzz/$1.corpus" f
  unpack_seeds "$target"
  mkdir -p "$out/corpus/$target"
  rm -rf "$dir"
  mkdir -p "$dir"
  # -use_counters=0: one input per covered edge, not per hit-count bucket.
  "$out/bin/${target}_fuzzer" -merge=1 -use_counters=0 "$dir" "$out/corpus/$target" \
    "$out/seeds/$target" >"$out/logs/$1_merge.log" 2>&1 || die "minimizing $target failed"
  {
    echo "# Seed inputs of tests/fuzz/${target}_fuzzer.cc, one per line, in hex: one input per"
    echo "# edge the fuzzing covered (tools/fuzz/tracer_fuzz.sh --save-seeds). Fuzzing starts from"
    echo "# them; tests/fuzz:${target}_fuzzer_replay_test runs every one in every test run."
    for f in "$dir"/*; do od -An -v -tx1 "$f" | tr -d ' \n'; echo; done | sort
  } >"$file"
  say "$file: $(grep -vc '^#' "$file") inputs"
}

check_libfuzzer
build_absl
status=0
for target in "${targets[@]}"; do
  case "$mode" in
    build) build "$target" "" ;;
    run) build "$target" "" && { run "$target" || status=1; } ;;
    coverage) coverage "$target" ;;
    save) build "$target" "" && save_seeds "$target" ;;
  esac
done
exit "$status"
