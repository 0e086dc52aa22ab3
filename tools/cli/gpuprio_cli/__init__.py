"""The gpuprio command line, loaded by its launcher (tools/cli/gpuprio), beside which it lies.

One module per concern:
  main             the top-level parser and main(): usage errors as one line, exit 2
  util             usage errors, the parser class, exit codes, the launcher's place, the version,
                   text made safe for a terminal
  segment_layout   the shared segment's layout (the one copy of segment_layout.h here)
  segments         reading and checking the segments, slot locks and liveness
  run              `run` and `env`: option values, the library, LD_PRELOAD
  top_report       what `top` makes of two samples
  top              `top`: the live view, --once, --json
  clean_segments   `clean-segments`
  doctor_checks    `doctor`'s probes (library, driver, toolkit, MPS, isolation)
  doctor           `doctor`: the report
  trace_reader     the bounded streaming reader of trace files
  trace_summarize  `trace summarize`
  trace_merge      `trace merge`
  exporter         `exporter`: the segments as Prometheus metrics
  mps              `mps`: an MPS control daemon; run's and doctor's warning without one

Standard library only; Python 3.9 or newer.
"""
