# shellcheck shell=bash
# The runners' --mps (run_two_process_bench.sh, run_torch_bench.sh): an MPS control daemon of their
# own, so a run neither depends on nor disturbs one the machine already has, and it never outlives the
# script. `source` it after tests/gpu/gpu_run_args.sh (it uses say).

mps_started=0
mps_out=""
mps_name=""
mps_daemons_before=""
mps_root=""  # the daemon's /tmp directory (pipes and logs), removed by mps_stop

# The MPS control daemon and server: both names are cut to "nvidia-cuda-mps" (15 characters) in
# the kernel's process name, which is what pgrep -x compares.
mps_pids() { pgrep -x nvidia-cuda-mps 2>/dev/null | tr '\n' ' '; }

# mps_start OUT NAME: as root, starts nvidia-cuda-mps-control -d with CUDA_MPS_PIPE_DIRECTORY and
# CUDA_MPS_LOG_DIRECTORY under a fresh /tmp directory, both exported, so every CUDA process started
# afterwards is a client of it; the control's output goes to OUT/NAME_mps_control.txt. Exits the
# script (1) when it cannot.
mps_start() {
  mps_out="$1"
  mps_name="$2"
  [[ "$(id -u)" == 0 ]] || { say "error: --mps must run as root (the MPS control daemon)"; exit 1; }
  command -v nvidia-cuda-mps-control >/dev/null || { say "error: nvidia-cuda-mps-control not found"; exit 1; }
  mps_daemons_before="$(mps_pids)"
  [[ -n "$mps_daemons_before" ]] && say "warning: MPS processes already running (pids $mps_daemons_before); starting our own daemon anyway"
  mps_root="$(mktemp -d /tmp/gpuprio_mps.XXXXXX)"
  export CUDA_MPS_PIPE_DIRECTORY="$mps_root/pipe" CUDA_MPS_LOG_DIRECTORY="$mps_root/log"
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  # From here on mps_stop has something to do: a daemon that started but reported a failure is
  # still asked to quit.
  mps_started=1
  if ! nvidia-cuda-mps-control -d >"$mps_out/${mps_name}_mps_control.txt" 2>&1; then
    say "error: nvidia-cuda-mps-control -d failed: $(tail -n 3 "$mps_out/${mps_name}_mps_control.txt")"
    exit 1
  fi
  say "MPS control daemon started (pipe $CUDA_MPS_PIPE_DIRECTORY)"
}

# mps_stop: quits the daemon, kills by pid what is left of it 10 s later, and copies its log to
# OUT/NAME_mps_log, then removes the daemon's directory; nothing when no daemon was started, so a
# trap EXIT can always call it.
mps_stop() {
  ((mps_started)) || return 0
  mps_started=0
  {
    echo "--- get_server_list before quit:"
    echo get_server_list | timeout 10 nvidia-cuda-mps-control 2>&1
    echo "--- quit:"
    echo quit | timeout 10 nvidia-cuda-mps-control 2>&1
  } >>"$mps_out/${mps_name}_mps_control.txt" 2>&1
  # The daemon and its server are ours if they were not there before we started one: wait for
  # them to go, and kill by pid only those still there after that.
  local pid left=""
  for _ in $(seq 1 50); do
    left=""
    for pid in $(mps_pids); do
      grep -qw "$pid" <<<"$mps_daemons_before" || left+=" $pid"
    done
    [[ -z "$left" ]] && break
    sleep 0.2
  done
  if [[ -n "$left" ]]; then
    say "MPS processes still there 10 s after quit:$left; killing them"
    for pid in $left; do kill -KILL "$pid" 2>/dev/null; done
  fi
  cp -r "$CUDA_MPS_LOG_DIRECTORY" "$mps_out/${mps_name}_mps_log" 2>/dev/null
  [[ -n "$mps_root" ]] && rm -rf "$mps_root"
  mps_root=""
  say "MPS daemon stopped$([[ -n "$left" ]] && echo " (killed:$left)")"
  CUDA_MPS_PIPE_DIRECTORY=""
}
