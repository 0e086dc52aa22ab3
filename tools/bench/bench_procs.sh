# shellcheck shell=bash
# Process handling for the benchmark runners that start more than one process per run
# (run_two_process_bench.sh, run_torch_bench.sh): `source` it after tests/gpu/gpu_run_args.sh (it
# uses work, the run directory, and say). Every process gets a session, so a process group, of its
# own and a timeout; whatever is left of a group is killed when the run is over, and on the way out
# of the script (cleanup_at_exit).
#
#   start_proc TAG TIMEOUT [VAR=VALUE ...] -- CMD ARGS...   stdout/stderr to $work/TAG.out/.err;
#                                                         sets started_pid (= its process group id)
#   finish_proc PID        waits for it; finished_rc = its exit code (124/137: timed out)
#   wait_exit PID SECONDS  waits up to SECONDS for it to exit by itself; 1 if it did not
#   wait_pair HPID LPID S  waits for the high process of a pair, ending it S seconds after the low one died
#   finish_pair HPID LPID STOP_FILE GRACE WAIT WHAT   the end of a high/low run; sets hrc and lrc
#   kill_group PGID        TERM, then KILL a second later
#   remove_segments PREFIX removes the gpuprio coordination segments of domains named PREFIX...
#   cleanup_at_exit PREFIX on every way out: procs_cleanup, remove_segments PREFIX, mps_stop
# LD_PRELOAD and the GPUPRIO_ variables that pick a mode, priority or domain are removed from every
# process's environment; a gpuprio run passes its own as VAR=VALUE.

declare -a live_groups=()

# alive PID: the process exists and is not a zombie (kill -0 also succeeds on a zombie, which is
# what a finished child is until it is waited for).
alive() {
  local st
  st="$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)"
  [[ -n "$st" && "$st" != Z ]]
}

kill_group() {
  kill -TERM -- "-$1" 2>/dev/null || return 0
  for _ in $(seq 1 10); do
    kill -0 -- "-$1" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL -- "-$1" 2>/dev/null
  return 0
}

start_proc() {
  local tag="$1" tmo="$2"
  shift 2
  local -a envs=()
  while [[ $# -gt 0 && "$1" != "--" ]]; do envs+=("$1"); shift; done
  shift
  echo "${envs[*]} $*" >"$work/$tag.cmd"
  # The MPS client priority gpuprio set (and marked) in this script's own process, if it runs
  # under gpuprio, is not the process's to inherit: each process's gpuprio decides its own.
  local -a mps_unset=()
  if [[ "${GPUPRIO_MPS_CLIENT_PRIORITY_SET:-}" == 1 && "${CUDA_MPS_CLIENT_PRIORITY:-}" == 1 ]]; then
    mps_unset=(-u CUDA_MPS_CLIENT_PRIORITY -u GPUPRIO_MPS_CLIENT_PRIORITY_SET)
  fi
  # setsid execs (no fork: a background child of a script is not a group leader), so $! is the
  # new session's and process group's id; timeout's own setpgid then fails harmlessly.
  setsid timeout -k 5 "$tmo" env -u LD_PRELOAD -u GPUPRIO_MODE -u GPUPRIO_PRIORITY -u GPUPRIO_DOMAIN \
    -u GPUPRIO_COORDINATE -u GPUPRIO_TRACE "${mps_unset[@]}" "${envs[@]}" "$@" >"$work/$tag.out" 2>"$work/$tag.err" </dev/null &
  started_pid=$!
  live_groups+=("$started_pid")
}

finish_proc() {
  wait "$1"
  finished_rc=$?
  # Anything the process left in its group (it should be nothing) goes with it.
  kill -KILL -- "-$1" 2>/dev/null
  local -a keep=()
  local g
  for g in "${live_groups[@]}"; do [[ "$g" == "$1" ]] || keep+=("$g"); done
  live_groups=("${keep[@]}")
}

wait_exit() {
  local pid="$1" steps=$(($2 * 10)) i
  for ((i = 0; i < steps; i++)); do
    alive "$pid" || return 0
    sleep 0.1
  done
  ! alive "$pid"
}

# wait_pair HIGH_PID LOW_PID GRACE: waits for the high process of a pair. The low process ends only
# after the high one told it to, so a low process that ends first has failed: the high one then
# gets GRACE more seconds (to notice, or to finish writing its result) instead of waiting out its
# timeout for a peer that is gone.
wait_pair() {
  local h="$1" l="$2" grace="$3"
  while alive "$h"; do
    if ! alive "$l"; then
      wait_exit "$h" "$grace" || kill_group "$h"
      return 0
    fi
    sleep 0.2
  done
}

# finish_pair HIGH_PID LOW_PID STOP_FILE GRACE WAIT WHAT: the end of a run of a high and a low
# process, either of which may not have been started (PID ""). Waits for the high one (wait_pair,
# GRACE), then creates STOP_FILE and gives the low one WAIT seconds to end by itself before killing
# it (and saying so: "WHAT: low process still running ..."). Sets hrc and lrc to their exit codes,
# "" for a process not started.
finish_pair() {
  local h="$1" l="$2" stop="$3" grace="$4" wait_s="$5" what="$6"
  hrc="" lrc=""
  if [[ -n "$h" ]]; then
    [[ -n "$l" ]] && wait_pair "$h" "$l" "$grace"
    finish_proc "$h"
    hrc=$finished_rc
  fi
  if [[ -n "$l" ]]; then
    # The high process has set the peer's stop word, unless it failed first: the stop file covers that.
    : >"$stop"
    if [[ -n "$h" ]] && ! wait_exit "$l" "$wait_s"; then
      say "$what: low process still running $wait_s s after the high one ended: killing it"
      kill_group "$l"
    fi
    finish_proc "$l"
    lrc=$finished_rc
  fi
}

procs_cleanup() {
  local g
  for g in "${live_groups[@]}"; do kill -KILL -- "-$g" 2>/dev/null; done
  live_groups=()
}

# remove_segments DOMAIN_PREFIX: the coordination segments (/dev/shm/gpuprio-v<layout>-<who>[.<hex>]/<domain>-<hex>)
# of this script's own domains. Each run has a domain of its own, so each leaves a segment of ~260 KiB
# that no later process will open.
remove_segments() {
  rm -f /dev/shm/gpuprio-v*/"$1"*
}

# cleanup_at_exit DOMAIN_PREFIX: whatever ends the script (its end, exit, INT, TERM, HUP), no process
# group of ours, no coordination segment of its domains (named DOMAIN_PREFIX...), no work dir
# (tests/gpu/gpu_run_args.sh's remove_work) and, where tools/bench/mps_daemon.sh is sourced, no MPS
# daemon of ours stays behind.
cleanup_at_exit() {
  procs_domain_prefix="$1"
  trap procs_exit EXIT
  trap 'say "interrupted"; exit 130' INT TERM HUP
}

procs_exit() {
  procs_cleanup
  remove_segments "$procs_domain_prefix"
  if declare -F mps_stop >/dev/null; then mps_stop; fi
  if declare -F remove_work >/dev/null; then remove_work; fi
}
