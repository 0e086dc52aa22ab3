#!/usr/bin/env python3
"""Tabulates the in-process interference runs of run_interference_bench.sh (one record per line).

usage:
  interference_report.py brief < RECORD              one line of figures for the progress log
  interference_report.py report RUNS.jsonl OUT.json OUT.txt

Records are flat (bench_stats.flat_record): the program's JSON line plus plan, group_low_ms (L;
0 for the runs without low work), config, round, gpuprio, rc, ok, and gpuprio_log (what the library
said about isolation at GPUPRIO_LOG=info). Per L and configuration, over rounds, the median and
spread [min-max] of:
  p50, p99          the high chain's latency (ms), and p99 / alone (against the median p99 of every
                    native 'alone' run: the chain alone has no L);
  low act / alone   the low rate while the high thread was releasing (low_active_per_s, timed by
                    completions) over the median rate of this L's 'low-alone' runs;
  low idle / alone  the low rate in the idle tail after the activity window (low_idle_per_s) over
                    the same baseline; for 'low-alone-gpuprio' (the low thread alone, under gpuprio
                    at GPUPRIO_PRIORITY=low: no high thread at all) its whole rate;
  green             runs in which the library said `gpuprio: info: isolation: device ...` (a green
                    context), and confined (ops issued on twin streams, from the exit summary).
Targets, judged on the medians: low act / alone >= 0.8 for the isolating configurations
(gpuprio-active, gpuprio-always, gpuprio-rN); low idle / alone >= 0.97 where the low work should
be free again once the high thread is quiet (gpuprio-active, gpuprio-rN, low-alone-gpuprio;
'always' keeps it confined while the high thread exists).
Exit 0 when every native run succeeded (a gpuprio run may fail: that is recorded, not an error).
"""

import sys

from bench_stats import (chain_spreads, figure_bits, first_ok, fmt, fmt_spread, header, ratio, report_main, run_counts,
                         spread, target, target_state)

CONFIG_ORDER = ["alone", "alone-gpuprio", "low-alone", "low-alone-gpuprio", "none", "stream", "gpuprio-off", "gpuprio-active",
                "gpuprio-always"]
NO_LOW = ("alone", "alone-gpuprio", "calibrate")
LOW_ACTIVE_TARGET = 0.8
LOW_IDLE_TARGET = 0.97


def config_key(c):
    if c in CONFIG_ORDER:
        return (CONFIG_ORDER.index(c), 0)
    if c.startswith("gpuprio-r") and c[len("gpuprio-r"):].isdigit():
        return (len(CONFIG_ORDER), int(c[len("gpuprio-r"):]))
    return (len(CONFIG_ORDER) + 1, 0)


def positive(v):
    return v if isinstance(v, (int, float)) and v > 0 else None


def fig(r, key):
    """A figure of an ok record, None where the run does not have it."""
    if not r.get("ok"):
        return None
    c = r["config"]
    if key == "low_alone_per_s":
        if c != "low-alone":
            return None
        return positive(r.get("low_own_timed_per_s")) or positive(r.get("low_own_per_s"))
    if c == "low-alone":
        return None
    if c == "low-alone-gpuprio":
        # No high thread: the whole run is 'idle'.
        if key != "low_idle_per_s":
            return None
        return positive(r.get("low_own_timed_per_s")) or positive(r.get("low_own_per_s"))
    if key in ("low_active_per_s", "low_idle_per_s"):
        return None if c in NO_LOW else positive(r.get(key))
    return r.get(key)


def log_of(r):
    return r.get("gpuprio_log") or {}


def brief(r):
    if r.get("rc") == 125 and not r.get("ok"):
        return "skipped"
    bits = figure_bits(r, fig, (("high_p50_ms", "p50", ".3f"), ("high_p99_ms", "p99", ".3f"),
                                ("low_active_per_s", "low/s", ".1f"), ("low_idle_per_s", "idle/s", ".1f"),
                                ("low_alone_per_s", "low alone/s", ".1f")))
    if r.get("cut_short"):
        bits.append("cut short (n=%s)" % r.get("releases_done"))
    log = log_of(r)
    if log:
        bits.append("green=%s confined=%s" % ("yes" if log.get("green_context") else "no", log.get("confined")))
    if not r.get("ok"):
        bits.append("FAILED: %s" % (r.get("error") or "")[:160])
    return " ".join(bits)


def entry(rs, alone_p50, alone_p99, low_alone):
    ok = [r for r in rs if r.get("ok")]
    return {
        **run_counts(rs),
        "cut_short": sum(1 for r in ok if r.get("cut_short")),
        "releases_done": spread([r.get("releases_done") for r in ok if not r["config"].startswith("low-alone")]),
        **chain_spreads(rs, fig, alone_p50, alone_p99),
        "low_active_per_s": spread([fig(r, "low_active_per_s") for r in rs]),
        "low_idle_per_s": spread([fig(r, "low_idle_per_s") for r in rs]),
        "low_alone_per_s": spread([fig(r, "low_alone_per_s") for r in rs]),
        "low_active_vs_alone": spread([ratio(fig(r, "low_active_per_s"), low_alone) for r in rs]),
        "low_idle_vs_alone": spread([ratio(fig(r, "low_idle_per_s"), low_alone) for r in rs]),
        "green_context": sum(1 for r in ok if log_of(r).get("green_context")),
        "confined": spread([log_of(r).get("confined") for r in ok if log_of(r)]),
        "isolation_lines": sorted({l for r in ok for l in log_of(r).get("isolation_lines", [])})[:4],
    }


def targets_for(config, e):
    out = []
    isolating = config in ("gpuprio-active", "gpuprio-always") or config.startswith("gpuprio-r")
    if isolating:
        out.append(target("low while high is active / low alone >= %g" % LOW_ACTIVE_TARGET,
                          e["low_active_vs_alone"]["median"], LOW_ACTIVE_TARGET))
    if (isolating and config != "gpuprio-always") or config == "low-alone-gpuprio":
        out.append(target("low while high is idle / low alone >= %g" % LOW_IDLE_TARGET,
                          e["low_idle_vs_alone"]["median"], LOW_IDLE_TARGET))
    return out


def build(runs):
    measured = [r for r in runs if r["config"] != "calibrate"]
    alone = [r for r in measured if r["config"] == "alone" and not r.get("gpuprio")]
    alone_p50 = spread([fig(r, "high_p50_ms") for r in alone])["median"]
    alone_p99 = spread([fig(r, "high_p99_ms") for r in alone])["median"]
    rows = []
    for c in sorted({r["config"] for r in measured if r["config"] in NO_LOW}, key=config_key):
        rows.append({"low_ms": None, "config": c,
                     **entry([r for r in measured if r["config"] == c], alone_p50, alone_p99, None)})
    groups = sorted({float(r["group_low_ms"]) for r in measured if r["config"] not in NO_LOW})
    baselines = {}
    for low in groups:
        of_l = [r for r in measured if float(r["group_low_ms"]) == low and r["config"] not in NO_LOW]
        low_alone = spread([fig(r, "low_alone_per_s") for r in of_l if r["config"] == "low-alone"])["median"]
        baselines[low] = low_alone
        for c in sorted({r["config"] for r in of_l}, key=config_key):
            e = entry([r for r in of_l if r["config"] == c], alone_p50, alone_p99, low_alone)
            e["targets"] = targets_for(c, e)
            rows.append({"low_ms": low, "config": c, **e})
    first = first_ok(measured, lambda r: not r["config"].startswith("low-alone") and r)
    meta = {k: first.get(k) for k in ("device", "sms", "chain", "high_us", "period_ms", "releases", "warmup",
                                      "driver_version")}
    lowrun = first_ok(runs, lambda r: r["config"] not in NO_LOW and r)
    meta.update({k: lowrun.get(k) for k in ("idle_tail_s", "tail_skip_s", "low_batch", "low_blocks_per_sm", "low_threads", "low_fill",
                                            "low_smem_per_block", "low_resident_blocks_per_sm")})
    cal = next((r for r in runs if r["config"] == "calibrate"), None)
    meta["cycles_per_us"] = cal.get("cycles_per_us") if cal else None
    meta["plan"] = next((r.get("plan") for r in runs if r.get("plan")), None)
    meta["rounds"] = max((int(r["round"]) for r in measured), default=0)
    return {"bench": "interference", "meta": meta, "alone_p50_ms": alone_p50, "alone_p99_ms": alone_p99,
            "low_alone_per_s": {format(k, "g"): v for k, v in baselines.items()}, "rows": rows, "runs": runs}


ROW = "%-5s %-14s %5s %-24s %-24s %-19s %-19s %-19s %-6s %s"


def text(rep):
    m = rep["meta"]
    lines = [
        "Interference, one process (plan %s): %s x %s us chain every %s ms on %s (%s SMs), %s rounds"
        % (m["plan"], m["chain"], m["high_us"], m["period_ms"], m["device"], m["sms"], m["rounds"]),
        "low: %s x SMs blocks of %s threads, fill=%s (smem/block %s, resident blocks/SM %s), batches of %s; "
        "clock %s cycles/us; idle tail %s s, first %s s not measured"
        % (m["low_blocks_per_sm"], m["low_threads"], m["low_fill"], m["low_smem_per_block"],
           m["low_resident_blocks_per_sm"], m["low_batch"], fmt(m["cycles_per_us"], ".1f"), m["idle_tail_s"],
           m["tail_skip_s"]),
        "values: median over rounds [min-max]; p99/alone against the median p99 of the native alone runs "
        "(%s ms); low rates (timed by completions) against low alone of the same L" % fmt(rep["alone_p99_ms"], ".3f"),
    ]
    lines += header(ROW, "L(ms)", "config", "ok", "p50 (ms)", "p99 (ms)", "p99/alone", "low act/alone",
                    "low idle/alone", "green", "confined")
    for row in rep["rows"]:
        if not row["runs"]:
            continue
        if row["config"] == "low-alone":
            act = "%s/s" % fmt_spread(row["low_alone_per_s"], ".1f")
            idle = ""
        else:
            act, idle = fmt_spread(row["low_active_vs_alone"], ".3f"), fmt_spread(row["low_idle_vs_alone"], ".3f")
        lines.append(ROW % (
            "-" if row["low_ms"] is None else format(row["low_ms"], "g"), row["config"],
            "%d/%d" % (row["ok"], row["runs"]), fmt_spread(row["high_p50_ms"], ".3f"),
            fmt_spread(row["high_p99_ms"], ".3f"), fmt_spread(row["p99_vs_alone"], ".2f"), act, idle,
            "%d/%d" % (row["green_context"], row["ok"]) if row["config"].startswith(("gpuprio", "alone-gp")) else "-",
            fmt_spread(row["confined"], ".0f")))
        if row["cut_short"]:
            lines.append("      (%d of these cut short by max-seconds: releases done %s)"
                         % (row["cut_short"], fmt_spread(row["releases_done"], ".0f")))
        for err in row["errors"]:
            lines.append("      failed: %s" % (err or "")[:150])
    iso = sorted({l for row in rep["rows"] for l in row["isolation_lines"]})
    if iso:
        lines += ["", "what the library said about isolation:"] + ["  " + l for l in iso]
    lines += ["", "targets (medians over rounds):"]
    for row in rep["rows"]:
        for t in row.get("targets", []):
            lines.append("  L=%-5s %-15s %-44s %8s  %s" % (format(row["low_ms"], "g"), row["config"], t["what"],
                                                            fmt(t["value"], ".3f"), target_state(t)))
    return "\n".join(lines) + "\n"


def main():
    return report_main("interference_report", lambda r: "L=%s %s round %s" % (r["group_low_ms"], r["config"], r.get("round")),
                       brief, build, text)


if __name__ == "__main__":
    sys.exit(main())
