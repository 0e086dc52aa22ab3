# Progress and failure output for the long steps of tools/setup.sh and tools/demo.sh (sourced, not
# run): a line per phase with the time since the script started, a "still ..." line while a quiet
# step runs, Bazel's own progress at most every 15 s, and on failure the lines that say why.
# The sourcing script sets progress_prefix ("setup", "demo") first.

progress_prefix="${progress_prefix:-gpuprio}"
progress_t0=$SECONDS
progress_heartbeat_s="${progress_heartbeat_s:-15}"

progress_elapsed() {
  local s=$((SECONDS - progress_t0))
  printf '%dm%02ds' $((s / 60)) $((s % 60))
}

# progress_note MESSAGE: "<prefix>: [1m05s] MESSAGE".
progress_note() { printf '%s: [%s] %s\n' "$progress_prefix" "$(progress_elapsed)" "$*"; }

# progress_wait PID LABEL: waits for PID, saying every progress_heartbeat_s seconds that LABEL is
# still running; returns PID's exit status.
progress_wait() {
  local pid="$1" label="$2" start=$SECONDS rc=0 i
  while kill -0 "$pid" 2>/dev/null; do
    for ((i = 0; i < progress_heartbeat_s * 5; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.2
    done
    kill -0 "$pid" 2>/dev/null && progress_note "still $label ($((SECONDS - start)) s)..."
  done
  wait "$pid" || rc=$?
  return "$rc"
}

# progress_run LABEL LOG CMD...: runs CMD with its output in LOG, with a heartbeat; on failure
# prints LOG's last 30 lines. Returns CMD's exit status.
progress_run() {
  local label="$1" log="$2" rc=0
  shift 2
  "$@" >"$log" 2>&1 &
  progress_wait $! "$label" || rc=$?
  if ((rc != 0)); then
    progress_note "$label failed (exit $rc); the last lines of its output:" >&2
    tail -n 30 "$log" | sed 's/^/    /' >&2
  fi
  return "$rc"
}

# progress_bazel_errors LOG: what a failed Bazel command said about the failure -- each ERROR
# block with the compiler's or linker's own lines (error:, note:, the source excerpt), long
# command lines cut -- else the last 30 lines of LOG.
progress_bazel_errors() {
  local log="$1" excerpt
  excerpt="$(awk '
    /^ERROR:/ { show = 1 }
    /^(INFO:|Target |FAILED:|Loading|Analyzing|\[[0-9,]+ \/ [0-9,]+\])/ && !/^ERROR:/ { show = 0 }
    show && shown < 120 {
      line = $0
      if (length(line) > 400) line = substr(line, 1, 400) " ...[cut]"
      print "    " line
      shown++
    }' "$log")"
  if [[ -n "$excerpt" ]]; then
    printf '%s\n' "$excerpt"
  else
    tail -n 30 "$log" | sed 's/^/    /'
  fi
}

# progress_bazel LOG BAZEL-ARGS...: `bazel BAZEL-ARGS` with its whole output in LOG, showing
# Bazel's progress lines ("[412 / 1,024] Compiling ...", and before the first action its loading
# and analysis, or its wait for another command's lock) at most every 15 s; on failure the
# excerpt of progress_bazel_errors and where the full output is. Returns Bazel's exit status.
progress_bazel() {
  local log="$1" command="$2" rc=0
  shift 2
  # Bazel's status goes through a file: the caller may run under set -e and pipefail.
  { bazel "$command" --curses=no --color=no --show_progress_rate_limit="$progress_heartbeat_s" \
      "$@" 2>&1; echo "$?" >"$log.rc"; } |
    tee "$log" |
    while IFS= read -r line; do
      case "$line" in
        \[[0-9]*" / "[0-9]*\]*) progress_note "bazel ${line:0:150}" ;;
        "INFO: Analyzed "*) progress_note "bazel ${line#INFO: }" ;;
        # Before the first action: fetching and loading (minutes on a cold machine), or another
        # Bazel command holding the lock.
        "Loading: "*|"Analyzing: "*|"Another command "*|"INFO: Repository "*)
          progress_note "bazel ${line:0:150}" ;;
      esac
    done
  rc="$(cat "$log.rc" 2>/dev/null || echo 1)"
  rm -f "$log.rc"
  if ((rc != 0)); then
    {
      progress_note "bazel $command failed (exit $rc); the errors (full output: $log):"
      progress_bazel_errors "$log"
    } >&2
  fi
  return "$rc"
}
