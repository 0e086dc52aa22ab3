#!/usr/bin/env python3
"""Aggregates the launch_rate runs written by run_launch_bench.sh (one JSON record per line).

usage: launch_bench_report.py RUNS.jsonl OUT.json OUT.txt [--launches K] [--reps R]

For each (mode, threads, api): medians over the successful repetitions of the launch rate and of the
per-call times (mean, p50, p99), and ratios against the native configuration of the same run
(rate: mode/native, < 1 is slower; call time: mode/native, > 1 is slower). Exit 0 when every native
run succeeded (other modes may fail: that is recorded, not an error).
"""

import argparse
import sys

from bench_stats import fmt as f, header, ratio, read_jsonl, spread, write_report

METRICS = ["launches_per_s", "call_us_mean", "call_us_p50", "call_us_p99"]
MODES = ["native", "passthrough", "schedule", "sched-nocoord", "deferred", "sched-low", "sched-trace"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("runs")
    p.add_argument("out_json")
    p.add_argument("out_txt")
    p.add_argument("--launches", type=int, default=None)
    p.add_argument("--reps", type=int, default=None)
    a = p.parse_args()

    runs = read_jsonl(a.runs)

    groups = {}
    for r in runs:
        groups.setdefault((r["mode"], r["threads"], r["api"]), []).append(r)

    configs = []
    for (mode, threads, api), rs in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][2], MODES.index(kv[0][0]) if kv[0][0] in MODES else 9)):
        good = [r for r in rs if r.get("ok")]
        c = {"mode": mode, "threads": threads, "api": api, "runs": len(rs), "ok_runs": len(good),
             "errors": sorted({(r.get("error") or f"rc={r.get('rc')}").strip() for r in rs if not r.get("ok")})}
        for m in METRICS:
            vals = [r[m] for r in good if m in r]
            c[m + "_median"] = spread(vals)["median"]
            c[m + "_all"] = vals
        configs.append(c)

    by_key = {(c["mode"], c["threads"], c["api"]): c for c in configs}
    for c in configs:
        base = by_key.get(("native", c["threads"], c["api"]))
        c["ratio_vs_native"] = {}
        for m in METRICS:
            c["ratio_vs_native"][m] = ratio(c[m + "_median"], base[m + "_median"] if base else None)

    native_ok = all(r.get("ok") for r in runs if r["mode"] == "native") and any(r["mode"] == "native" for r in runs)
    device = next((r.get("device") for r in runs if r.get("device")), None)
    result = {"bench": "launch_rate", "launches_per_thread": a.launches, "reps": a.reps,
              "native_all_ok": native_ok, "configs": configs, "runs": runs}

    lines = [f"empty-kernel launch benchmark: {a.launches} launches per thread, median of {a.reps} interleaved runs"
             + (f", {device}" if device else ""),
             "rate = launches/s over all threads incl. final stream sync; call = client-side time per launch call "
             "(mean, and p50/p99 over batches of 32 calls); x = ratio against native of the same run", ""]
    lines += header("%7s %-8s %-12s %5s %12s %6s %12s %6s %8s %8s %6s  %s", "threads", "api", "mode", "ok", "launches/s",
                    "x", "call mean us", "x", "p50 us", "p99 us", "x p99", "errors")
    for c in configs:
        rt = c["ratio_vs_native"]
        lines.append(
            f"{c['threads']:>7} {c['api']:8} {c['mode']:12} {str(c['ok_runs']) + '/' + str(c['runs']):>5} "
            f"{f(c['launches_per_s_median'], ',.0f'):>12} {f(rt['launches_per_s'], '.3f'):>6} "
            f"{f(c['call_us_mean_median'], '.3f'):>12} {f(rt['call_us_mean'], '.3f'):>6} "
            f"{f(c['call_us_p50_median'], '.3f'):>8} {f(c['call_us_p99_median'], '.3f'):>8} "
            f"{f(rt['call_us_p99'], '.3f'):>6}  {'; '.join(e[:80] for e in c['errors'])}")
    if not native_ok:
        lines.append("")
        lines.append("FAIL: a native run failed (see launch_bench.json, runs[].stderr_tail)")
    write_report(result, "\n".join(lines) + "\n", a.out_json, a.out_txt)
    return 0 if native_ok else 1


if __name__ == "__main__":
    sys.exit(main())
