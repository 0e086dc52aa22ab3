#!/usr/bin/env bash
# Runs every test target three times: plain, under AddressSanitizer+UBSan, and under
# ThreadSanitizer; then prints one line "N passed, N failed" counting Catch2 test cases over all
# targets and configurations. Exits non-zero if anything failed. Leaves no Bazel server behind.
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
trap 'bazel shutdown >/dev/null 2>&1 || true' EXIT

configs=("${@}")
((${#configs[@]})) || configs=(plain asan tsan)

status=0
summaries=()
for config in "${configs[@]}"; do
  flags=()
  [[ "$config" == plain ]] || flags=("--config=$config")
  if [[ "$config" == tsan ]]; then
    flags+=("--test_env=TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$repo/tests/fake_cuda/tsan_dlopen.supp")
  fi
  echo "=== bazel test //... ${flags[*]:-} ==="
  console="$(mktemp)"
  bazel test "${flags[@]}" --test_output=errors //... 2>&1 | tee "$console" |
    grep -v '^\(Loading\|Analyzing\|INFO: From\)'
  rc=${PIPESTATUS[0]}
  # Exit code 4: build fine, no test targets; anything else non-zero is a failure.
  [[ $rc -eq 0 ]] || status=1
  summary="$(python3 tools/catch2_summary.py --label "$config" \
    "$(bazel info bazel-testlogs "${flags[@]}" 2>/dev/null)" "$rc" "$console")"
  rm -f "$console"
  echo "$summary"
  summaries+=("$summary")
done

python3 tools/catch2_summary.py --total "${summaries[@]}"
total_rc=$?
[[ $status -eq 0 && $total_rc -eq 0 ]]
