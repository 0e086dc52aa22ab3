#!/usr/bin/env bash
# Runs every test target three times: plain, under AddressSanitizer+UBSan, and under
# ThreadSanitizer; builds everything with clang's thread-safety analysis (thread_safety: one check
# that passes or fails); runs the README's first command, tools/demo.sh, on this machine (demo:
# one check; without a GPU its fake-driver path); then prints one line "N passed, N failed"
# counting Catch2 test cases over all targets and configurations, plus those two checks. Exits non-zero if anything failed. Leaves no
# Bazel server behind. Arguments name a subset of the configurations, e.g. `tools/test.sh plain`.
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
trap 'bazel shutdown >/dev/null 2>&1 || true' EXIT

configs=("${@}")
((${#configs[@]})) || configs=(plain asan tsan thread_safety demo)

status=0
summaries=()
for config in "${configs[@]}"; do
  if [[ "$config" == thread_safety ]]; then
    # Every ABSL_GUARDED_BY / ABSL_*_LOCKS_REQUIRED annotation checked by clang; a violation is a
    # compile error (.bazelrc, config thread_safety).
    echo "=== bazel build //... --config=thread_safety ==="
    if bazel build --config=thread_safety --keep_going //... 2>&1 |
        grep -v '^\(Loading\|Analyzing\|INFO: From\)'; [[ ${PIPESTATUS[0]} -eq 0 ]]; then
      summaries+=("thread_safety: 1 passed, 0 failed (clang -Wthread-safety build of //...)")
    else
      status=1
      summaries+=("thread_safety: 0 passed, 1 failed (clang -Wthread-safety build of //...)")
    fi
    echo "${summaries[-1]}"
    continue
  fi
  if [[ "$config" == demo ]]; then
    # The README's first command, on its GPU-free path (the fake driver): it must never break
    # unnoticed. One check that passes or fails.
    echo "=== tools/demo.sh ==="
    if bash tools/demo.sh; then
      summaries+=("demo: 1 passed, 0 failed (tools/demo.sh)")
    else
      status=1
      summaries+=("demo: 0 passed, 1 failed (tools/demo.sh)")
    fi
    echo "${summaries[-1]}"
    continue
  fi
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
