# shellcheck shell=bash
# Process handling for the benchmark runners that start more than one process per run
# (run_two_process_bench.sh, run_torch_bench.sh): `source` it after setting `work` (the run
# directory). Every process gets a session, so a process group, of its own and a timeout; whatever
# is left of a group is killed when the run is over, and on the way out of the script (trap EXIT
# calls procs_cleanup, which a runner that needs more cleanup calls from its own trap).
#
#   start_proc TAG TIMEOUT [VAR=VALUE ...] -- CMD ARGS...   stdout/stderr to $work/TAG.out/.err;
#                                                         sets started_pid (= its process group id)
#   finish_proc PID        waits for it; finished_rc = its exit code (124/137: timed out)
#   wait_exit PID SECONDS  waits up to SECONDS for it to exit by itself; 1 if it did not
#   wait_pair HPID LPID S  waits for the high process of a pair, ending it S seconds after the low one died
#   kill_group PGID        TERM, then KILL a second later
#   remove_segments PREFIX removes the gpuprio coordination segments of domains named PREFIX...
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
  # setsid execs (no fork: a background child of a script is not a group leader), so $! is the
  # new session's and process group's id; timeout's own setpgid then fails harmlessly.
  setsid timeout -k 5 "$tmo" env -u LD_PRELOAD -u GPUPRIO_MODE -u GPUPRIO_PRIORITY -u GPUPRIO_DOMAIN \
    -u GPUPRIO_COORDINATE -u GPUPRIO_TRACE "${envs[@]}" "$@" >"$work/$tag.out" 2>"$work/$tag.err" </dev/null &
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

procs_cleanup() {
  local g
  for g in "${live_groups[@]}"; do kill -KILL -- "-$g" 2>/dev/null; done
  live_groups=()
}

# remove_segments DOMAIN_PREFIX: the coordination segments (/dev/shm/gpuprio-v<layout>-<who>-<domain>-<hex>)
# of this script's own domains. Each run has a domain of its own, so each leaves a segment of ~260 KiB
# that no later process will open.
remove_segments() {
  rm -f /dev/shm/gpuprio-*-"$1"*
}
