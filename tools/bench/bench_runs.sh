# shellcheck shell=bash
# The run matrix the table runners share (run_interference_bench.sh, run_two_process_bench.sh,
# run_torch_bench.sh, run_ddp_bench.sh; run_hold_bench.sh and startup_bench.sh take their rounds from
# it too): the configurations asked for, rounds in rotated order, when a run is skipped, a run's
# record, .gpu/interference's common settings and calibration, and the table at the end. `source`
# it after tests/gpu/gpu_run_args.sh, or after setting what it uses: say, py, work and out. Sets
#   rounds            ROUNDS (3)
#   gpuprio_env       BENCH_GPUPRIO_ENV as an array: more VAR=VALUE for every gpuprio run or process,
#                     e.g. "GPUPRIO_COORDINATE=0" or "GPUPRIO_BUDGET_US=500"
#   b_env             B_ENV as an array: more VAR=VALUE for the runs of configuration gpuprio-b
#                     (run_library), e.g. "GPUPRIO_RESERVED_SMS=64"
#   runs              $work/runs.jsonl, empty: the runner appends one record a run
#   gpuprio_timeouts  0: gpuprio runs that timed out so far (count_timeout)
# The functions read the runner's name (OUT/NAME.json, OUT/NAME.txt), budget (seconds) and start
# ($SECONDS when the runs began).

rounds="${ROUNDS:-3}"
read -r -a gpuprio_env <<<"${BENCH_GPUPRIO_ENV:-}"
read -r -a b_env <<<"${B_ENV:-}"
if [[ -n "${LIB_B:-}" && ! -r "$LIB_B" ]]; then
  say "error: LIB_B ($LIB_B) is not a readable library" >&2
  exit 2
fi
runs="$work/runs.jsonl"
: >"$runs"
gpuprio_timeouts=0

# interference_settings: the settings both runners of .gpu/interference take from the environment,
# with the same defaults in both: warmup (WARMUP, 10), low_alone_seconds (LOW_ALONE_SECONDS, 3),
# low_shape (LOW_SHAPE: 2 blocks of 1024 threads per SM, each with half the SM's shared memory, so
# that no other block fits beside them) and extra (EXTRA_ARGS: more interference flags for every
# process).
interference_settings() {
  warmup="${WARMUP:-10}"
  low_alone_seconds="${LOW_ALONE_SECONDS:-3}"
  read -r -a low_shape <<<"${LOW_SHAPE:---low-blocks-per-sm 2 --low-threads 1024 --low-fill smem}"
  read -r -a extra <<<"${EXTRA_ARGS:-}"
}

# run_library CONFIG: sets run_lib, the library a gpuprio run of CONFIG preloads, and the array
# run_env, its more VAR=VALUE: for gpuprio-b (an A/B comparison in the same interleaved rounds)
# LIB_B when set and BENCH_GPUPRIO_ENV plus B_ENV; for any other configuration $lib and
# BENCH_GPUPRIO_ENV.
run_library() {
  run_lib="$lib"
  run_env=("${gpuprio_env[@]}")
  if [[ "$1" == gpuprio-b ]]; then
    run_lib="${LIB_B:-$lib}"
    run_env+=("${b_env[@]}")
  fi
}

# rotated ROUND CONFIG...: sets the array rotated to the configurations in round ROUND's order, the
# list turned left by ROUND - 1, so that no configuration always runs at the same place in a round.
rotated() {
  local round="$1" i
  shift
  local -a all=("$@")
  rotated=()
  for ((i = 0; i < ${#all[@]}; i++)); do rotated+=("${all[(i + round - 1) % ${#all[@]}]}"); done
}

# read_configs RUNNER VAR DEFAULT VALID...: sets the array configs to the words of $VAR (DEFAULT
# when it is unset or empty); one that is not among VALID is an error (exit 2).
read_configs() {
  local who="$1" var="$2" c v known
  read -r -a configs <<<"${!var:-$3}"
  shift 3
  for c in "${configs[@]}"; do
    known=0
    for v in "$@"; do [[ "$c" == "$v" ]] && known=1; done
    if ((!known)); then
      echo "$who: unknown configuration '$c' in $var" >&2
      exit 2
    fi
  done
}

# run_rounds RUN CONFIG...: ROUNDS rounds of RUN ROUND CONFIG, each round's configurations rotated.
run_rounds() {
  local run="$1" r c
  shift
  for ((r = 1; r <= rounds; r++)); do
    rotated "$r" "$@"
    for c in "${rotated[@]}"; do "$run" "$r" "$c"; done
  done
}

# run_skip WITH_LIB BUDGET_NAME: sets skip to why the next run is not made ("" when it is made). Once
# gpuprio runs have timed out twice the gpuprio ones are skipped, and once the runs have taken
# $budget seconds (BUDGET_NAME says which variable set it) every one is, so that neither a hanging
# mode nor slow runs push the script past one device call.
run_skip() {
  skip=""
  (($1 && gpuprio_timeouts >= 2)) && skip="skipped: gpuprio runs timed out twice"
  ((SECONDS - start > budget)) && skip="skipped: the runs took over $2=${budget}s"
  return 0
}

# count_timeout WITH_LIB RC...: a gpuprio run one of whose processes timed out (timeout's 124, or 137
# after its KILL) counts towards run_skip's two.
count_timeout() {
  (($1)) || return 0
  shift
  local rc
  for rc in "$@"; do
    if [[ "$rc" == 124 || "$rc" == 137 ]]; then
      gpuprio_timeouts=$((gpuprio_timeouts + 1))
      return 0
    fi
  done
  return 0
}

# record_run REPORT T0 WHAT ARGS...: REPORT's record of the run just made (REPORT record ARGS),
# appended to runs.jsonl, and the progress line "WHAT (N s) FIGURES": N seconds since T0 ($SECONDS
# when the run began), the figures REPORT's brief of the record.
record_run() {
  local report="$1" t0="$2" what="$3"
  shift 3
  "$py" "$report" record "$@" >>"$runs"
  say "$what ($((SECONDS - t0)) s) $(tail -n 1 "$runs" | "$py" "$report" brief)"
}

# record_pair REPORT T0 KIND WHAT HIGH LOW ARGS...: record_run of a two-process run, from the
# caller's tag, hpid, lpid, hrc, lrc and with_lib: ARGS, then for each process that was started
# --ROLE-KIND $work/TAG.ROLE.EXT (EXT json for KIND result, out for out), --ROLE-err and --ROLE-rc;
# the progress line "WHAT: HIGH rc=N LOW rc=N" ("-" for one not started); then count_timeout.
record_pair() {
  local report="$1" t0="$2" kind="$3" what="$4" high="$5" low="$6" ext=out
  shift 6
  [[ "$kind" == result ]] && ext=json
  local -a files=()
  [[ -n "$hpid" ]] && files+=("--high-$kind" "$work/$tag.high.$ext" --high-err "$work/$tag.high.err" --high-rc "$hrc")
  [[ -n "$lpid" ]] && files+=("--low-$kind" "$work/$tag.low.$ext" --low-err "$work/$tag.low.err" --low-rc "$lrc")
  record_run "$report" "$t0" "$what: $high rc=${hrc:--} $low rc=${lrc:--}" "$@" "${files[@]}"
  count_timeout "$with_lib" "$hrc" "$lrc"
}

# use_calibration RC REPORT: the SM clock rate the calibration run (one native alone run on the idle
# GPU, exit code RC) printed in $work/calibrate.out, as cycles_args for every later process: one
# calibrating beside a busy GPU would get its kernels' lengths wrong. Without a rate, REPORT's table
# of what ran (the calibration's record says why) and exit 1.
use_calibration() {
  local cycles
  cycles="$(grep -o '"cycles_per_us": *[0-9.]*' "$work/calibrate.out" 2>/dev/null | head -n 1 | cut -d: -f2 | tr -d ' ')"
  if [[ -z "$cycles" || "$cycles" == 0* ]]; then
    say "error: the calibration run failed (rc=$1): $(tail -n 3 "$work/calibrate.err")"
    "$py" "$2" report "$runs" "$out/$name.json" "$out/$name.txt"
    exit 1
  fi
  cycles_args=(--cycles-per-us "$cycles")
  say "calibrated: $cycles SM cycles per us"
}

# finish_report REPORT WHO [LINE...]: says how long the runs took, writes REPORT's table of the runs
# (OUT/NAME.json, OUT/NAME.txt) with a line naming the BENCH_GPUPRIO_ENV settings ("gpuprio WHO also
# had: ...") and each LINE after it, prints the table and exits with REPORT's status (0 when every
# native run succeeded).
finish_report() {
  local report="$1" who="$2" rc line
  shift 2
  say "all runs took $((SECONDS - start)) s"
  "$py" "$report" report "$runs" "$out/$name.json" "$out/$name.txt"
  rc=$?
  ((${#gpuprio_env[@]})) && echo "gpuprio $who also had: ${gpuprio_env[*]}" >>"$out/$name.txt"
  for line in "$@"; do echo "$line" >>"$out/$name.txt"; done
  cat "$out/$name.txt" 2>/dev/null
  exit "$rc"
}
