#!/usr/bin/env python3
"""Prints the scheduler's exit-summary lines (GPUPRIO_LOG=info) of each run of a benchmark.

Usage: exit_summaries.py RUNS.jsonl   (the *_runs.jsonl of run_torch_bench.sh)
For each run with gpuprio, one header line (configuration, round) and the run's
"gpuprio: info: priority=..." and "gpuprio: info: dispatcher ..." lines, taken from the end of each
process's stderr that the benchmark keeps. Exits 1 if a run with gpuprio has none of them
(GPUPRIO_LOG was not info, or the tail kept was too short).
"""
import json
import sys

SUMMARY_PREFIXES = ("gpuprio: info: priority=", "gpuprio: info: dispatcher ")


def summary_lines(stderr_tail):
    return [line for line in stderr_tail.splitlines() if line.startswith(SUMMARY_PREFIXES)]


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    missing = 0
    with open(argv[1]) as runs:
        for text in runs:
            if not text.strip():
                continue
            run = json.loads(text)
            if not run.get("gpuprio"):
                continue
            print(f"== {run['config']} round {run['round']}")
            seen = []
            for role in ("high", "low"):
                part = run.get(role)
                if not isinstance(part, dict):
                    continue
                lines = summary_lines(part.get("stderr_tail", ""))
                if lines and lines == seen:
                    continue  # one process for both jobs (threads form): its summary once
                seen = lines
                for line in lines:
                    print(f"  {role}: {line}")
                if role == "high" and not lines:
                    missing += 1
                    print("  high: no exit summary in the kept stderr")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
