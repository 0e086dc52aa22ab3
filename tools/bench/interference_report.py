#!/usr/bin/env python3
"""Tabulates the interference runs written by run_interference_bench.sh (one JSON record per line).

usage: interference_report.py RUNS.jsonl OUT.json OUT.txt

Rows are grouped by the low-priority kernel length L (group_low_ms; group 0 holds the gpuprio
'alone' run). Ratios, all against runs of the same invocation:
  high p50 / p99: against the native 'alone' run of the same L group (for the gpuprio 'alone' run:
                  against the median of all native 'alone' runs); > 1 is slower;
  low throughput: low kernels per second against the native 'none' run of the same L; < 1 is less.
Exit 0 when every native run succeeded (gpuprio runs may fail: that is recorded, not an error).
"""

import argparse
import json
import statistics
import sys

from bench_stats import fmt, ratio

CONFIG_ORDER = ["alone", "none", "stream", "gpuprio", "alone-gpuprio"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("runs")
    p.add_argument("out_json")
    p.add_argument("out_txt")
    a = p.parse_args()

    runs = []
    with open(a.runs) as fh:
        for line in fh:
            line = line.strip()
            if line:
                runs.append(json.loads(line))

    def ok(r):
        return bool(r.get("ok"))

    native_alone = [r for r in runs if r["config"] == "alone" and not r.get("gpuprio") and ok(r)]
    alone_median = None
    if native_alone:
        alone_median = {k: statistics.median(r[k] for r in native_alone) for k in ("high_p50_ms", "high_p99_ms")}

    rows = []
    for r in runs:
        group = r["group_low_ms"]
        if r["config"] == "alone-gpuprio":
            base = alone_median
        else:
            b = [x for x in runs if x["group_low_ms"] == group and x["config"] == "alone" and ok(x)]
            base = b[0] if b else None
        none = [x for x in runs if x["group_low_ms"] == group and x["config"] == "none" and ok(x)]
        none = none[0] if none else None
        good = ok(r)
        row = {
            "low_ms": group,
            "config": r["config"],
            "gpuprio": bool(r.get("gpuprio")),
            "ok": good,
            "rc": r.get("rc"),
            "error": r.get("error", ""),
            "releases_done": r.get("releases_done"),
            "cut_short": r.get("cut_short"),
            "high_p50_ms": r.get("high_p50_ms") if good else None,
            "high_p99_ms": r.get("high_p99_ms") if good else None,
            "high_max_ms": r.get("high_max_ms") if good else None,
            "low_kernels_per_s": r.get("low_kernels_per_s") if good and not r.get("alone") else None,
            "low_gpu_fraction": r.get("low_gpu_fraction") if good and not r.get("alone") else None,
            "gpuprio_priority_set": r.get("gpuprio_priority_set"),
        }
        row["high_p50_vs_alone"] = ratio(row["high_p50_ms"], base and base.get("high_p50_ms"))
        row["high_p99_vs_alone"] = ratio(row["high_p99_ms"], base and base.get("high_p99_ms"))
        row["low_tput_vs_none"] = ratio(row["low_kernels_per_s"], none and none.get("low_kernels_per_s"))
        rows.append(row)
    rows.sort(key=lambda x: (x["low_ms"] if x["config"] != "alone-gpuprio" else float("inf"),
                             CONFIG_ORDER.index(x["config"]) if x["config"] in CONFIG_ORDER else 99))

    first_ok = next((r for r in runs if ok(r)), {})
    meta = {k: first_ok.get(k) for k in ("device", "sms", "cycles_per_us", "chain", "high_us", "period_ms",
                                          "releases", "warmup", "low_batch", "low_blocks_per_sm", "low_threads",
                                          "low_fill")}
    fill = next((r for r in runs if ok(r) and not r.get("alone")), {})
    meta.update({k: fill.get(k) for k in ("low_smem_per_block", "low_resident_blocks_per_sm")})
    with open(a.out_json, "w") as fh:
        json.dump({"bench": "interference", "meta": meta, "rows": rows, "runs": runs}, fh, indent=1)
        fh.write("\n")

    lines = []
    lines.append("Interference (in-process): %s x %s us chain every %s ms on %s (%s SMs); "
                 "low: %s x SMs blocks of %s threads, fill=%s (smem/block %s, resident blocks/SM %s), batches of %s"
                 % (meta["chain"], meta["high_us"], meta["period_ms"], meta["device"], meta["sms"],
                    meta["low_blocks_per_sm"], meta["low_threads"], meta["low_fill"], meta["low_smem_per_block"],
                    meta["low_resident_blocks_per_sm"], meta["low_batch"]))
    lines.append("high ratios vs native alone of the same L; low throughput vs native none of the same L")
    hdr = "%-6s %-13s %4s %6s %8s %8s %8s %7s %7s %10s %6s %7s  %s" % (
        "L(ms)", "config", "ok", "n", "p50(ms)", "p99(ms)", "max(ms)", "p50/al", "p99/al", "low k/s", "lowGPU",
        "low/none", "note")
    lines.append(hdr)
    lines.append("-" * len(hdr))
    for r in rows:
        note = ""
        if not r["ok"]:
            note = (r["error"] or "failed").strip()[:60]
        elif r["cut_short"]:
            note = "cut short by max-seconds"
        if r["gpuprio"] and r["ok"] and not r["gpuprio_priority_set"]:
            note = (note + "; " if note else "") + "thread priority NOT set"
        lines.append("%-6s %-13s %4s %6s %8s %8s %8s %7s %7s %10s %6s %7s  %s" % (
            "-" if r["config"] == "alone-gpuprio" else format(r["low_ms"], "g"), r["config"],
            "yes" if r["ok"] else "NO", fmt(r["releases_done"], "d"), fmt(r["high_p50_ms"], ".3f"),
            fmt(r["high_p99_ms"], ".3f"), fmt(r["high_max_ms"], ".3f"), fmt(r["high_p50_vs_alone"], ".2f"),
            fmt(r["high_p99_vs_alone"], ".2f"), fmt(r["low_kernels_per_s"], ".1f"), fmt(r["low_gpu_fraction"], ".2f"),
            fmt(r["low_tput_vs_none"], ".2f"), note))
    with open(a.out_txt, "w") as fh:
        fh.write("\n".join(lines) + "\n")

    native_failed = [r for r in runs if not r.get("gpuprio") and not ok(r)]
    for r in native_failed:
        print("interference_report: native run failed: L=%s %s: %s" % (r["group_low_ms"], r["config"],
                                                                       r.get("error", "")), file=sys.stderr)
    return 1 if native_failed or not runs else 0


if __name__ == "__main__":
    sys.exit(main())
