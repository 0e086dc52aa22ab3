#!/usr/bin/env python3
"""The MPS cost benchmark's table (run_mps_cost_bench.sh): a launch-bound server alone, without and
with MPS, natively and under gpuprio, in interleaved rounds.

usage:
  mps_cost_report.py brief < RECORD
  mps_cost_report.py report RUNS.jsonl OUT.json OUT.txt

The records are bench_stats.py's one-process records (flat_record) with the runner's fields server
(chain, chain-short, launch, torch), config (native, mps, gpuprio, gpuprio-mps; calibrate for the
clock calibration), round, mps and gpuprio. Each server's own figures:
  chain, chain-short  .gpu/interference --role high: high_p50_ms / high_p99_ms, the latency of a chain
                      from its release to its completion on the host, per run
  launch              .gpu/launch_rate: call_us_p50 / call_us_p99, the time of a launch call (means
                      over batches of 32 calls), per run; and launches_per_s
  torch               torch_two_process.py high: p50_ms / p99_ms of a request, per run; and the
                      per-request latencies (latency_ms), pooled over the rounds
Per server and configuration: p50 and p99 as median [min-max] over the rounds; paired: each round's
p50 and p99 over the same round's native run of the server, median [min-max] over rounds (the
rounds interleave the configurations, so a host that is slower for a while weighs on both sides);
round spread: (max - min) / median of the rounds' p99, in percent: how far apart the rounds are,
native's included, the noise a ratio is read against.
"""

import sys

from bench_stats import fmt, fmt_spread, percentile, ratio, report_main, spread

SERVER_ORDER = ["chain", "chain-short", "launch", "torch"]
CONFIG_ORDER = ["native", "mps", "gpuprio", "gpuprio-mps"]
# server: (p50 key, p99 key, unit)
FIGURES = {
    "chain": ("high_p50_ms", "high_p99_ms", "ms"),
    "chain-short": ("high_p50_ms", "high_p99_ms", "ms"),
    "launch": ("call_us_p50", "call_us_p99", "us"),
    "torch": ("p50_ms", "p99_ms", "ms"),
}
SERVER_TEXT = {
    "chain": "interference --role high: a chain of 20 kernels of 50 us every 10 ms; latency of a chain",
    "chain-short": "interference --role high --chain 100 --high-us 2: 100 kernels of 2 us (launch-bound); "
                   "latency of a chain",
    "launch": "launch_rate --threads 1 --api runtime: time of a launch call (batches of 32), and launches/s",
    "torch": "torch_two_process.py high: ResNet-18 batch 1 fp16 eager, open loop; latency of a request",
}


def figure(r, server, which):
    """A run's p50 (which 0) or p99 (which 1) in its server's unit, None when not measured."""
    if not r.get("ok") or server not in FIGURES:
        return None
    v = r.get(FIGURES[server][which])
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def relative_spread(s):
    """(max - min) / median of a spread, in percent; None for fewer than two values."""
    if not s or s["n"] < 2 or not s["median"]:
        return None
    return 100.0 * (s["max"] - s["min"]) / s["median"]


def brief(rec):
    if rec.get("skipped") or (not rec.get("ok") and rec.get("rc") == 125):
        return "skipped: %s" % (rec.get("error") or "")[:120]
    server = rec.get("server")
    bits = []
    if rec.get("ok") and server in FIGURES:
        p50, p99 = figure(rec, server, 0), figure(rec, server, 1)
        unit = FIGURES[server][2]
        bits.append("p50=%s p99=%s %s" % (fmt(p50, ".4f"), fmt(p99, ".4f"), unit))
        if server == "launch" and rec.get("launches_per_s") is not None:
            bits.append("%.0f launches/s" % rec["launches_per_s"])
    if rec.get("cycles_per_us") is not None and rec.get("config") == "calibrate":
        bits.append("cycles_per_us=%s" % rec["cycles_per_us"])
    if not rec.get("ok"):
        bits.append("FAILED: %s" % (rec.get("error") or "")[:200])
    return " ".join(bits)


def build(runs):
    measured = [r for r in runs if r.get("config") != "calibrate"]
    servers = [s for s in SERVER_ORDER if any(r.get("server") == s for r in measured)]
    rows = []
    for server in servers:
        native_by_round = {r.get("round"): r for r in measured
                           if r.get("server") == server and r.get("config") == "native" and r.get("ok")}
        native_row = None
        for config in CONFIG_ORDER:
            rs = [r for r in measured if r.get("server") == server and r.get("config") == config]
            if not rs:
                continue
            good = [r for r in rs if r.get("ok")]
            row = {"server": server, "config": config, "unit": FIGURES[server][2], "runs": len(rs), "ok": len(good),
                   "errors": [r.get("error") for r in rs if not r.get("ok")],
                   "p50": spread([figure(r, server, 0) for r in good]),
                   "p99": spread([figure(r, server, 1) for r in good])}
            for q, which in (("p50", 0), ("p99", 1)):
                row["paired_%s_vs_native" % q] = spread([
                    ratio(figure(r, server, which), figure(native_by_round.get(r.get("round"), {}), server, which))
                    for r in good])
            row["p99_round_spread_pct"] = relative_spread(row["p99"])
            if server == "launch":
                row["launches_per_s"] = spread([r.get("launches_per_s") for r in good])
            if server == "torch":
                lat = [v for r in good for v in r.get("latency_ms") or []]
                row["pooled_requests"] = len(lat)
                row["pooled_p50_ms"], row["pooled_p99_ms"] = percentile(lat, 0.5), percentile(lat, 0.99)
            if config == "native":
                native_row = row
            for q in ("p50", "p99"):
                row["%s_vs_native" % q] = ratio(row[q]["median"], (native_row or {}).get(q, {}).get("median"))
            if server == "launch":
                row["rate_vs_native"] = ratio(row["launches_per_s"]["median"],
                                              ((native_row or {}).get("launches_per_s") or {}).get("median"))
            rows.append(row)
    calib = [r for r in runs if r.get("config") == "calibrate"]
    device = next((r.get("device") for r in measured if r.get("ok") and r.get("device")), None)
    meta = {"servers": servers, "rounds": max((int(r.get("round") or 0) for r in measured), default=0),
            "device": device, "cycles_per_us": calib[0].get("cycles_per_us") if calib else None,
            "calibration_ok": calib[0].get("ok") if calib else None}
    return {"bench": "mps_cost", "meta": meta, "rows": rows, "runs": [strip(r) for r in runs]}


def strip(r):
    """The run as recorded, less the torch server's per-request lists (the rows hold what they give)."""
    r = dict(r)
    if "latency_ms" in r:
        r["latency_ms_count"] = len(r.pop("latency_ms"))
    r.pop("host_ms", None)
    return r


def text(rep):
    m = rep["meta"]
    lines = [
        "MPS cost: a launch-bound server alone on %s, without and with MPS, natively and under gpuprio "
        "(GPUPRIO_PRIORITY=high); %s rounds, configurations interleaved" % (m.get("device") or "-", m["rounds"]),
        "p50/p99: each run's, median [min-max] over rounds; /native: median over rounds against native; paired: "
        "each round's against the same round's native run, median [min-max]; round spread: (max - min) / median "
        "of the rounds' p99",
    ]
    for s in m["servers"]:
        lines.append("  %-11s %s" % (s, SERVER_TEXT.get(s, "")))
    if m.get("cycles_per_us") is not None:
        lines.append("  chain kernels calibrated at %s SM cycles per us" % m["cycles_per_us"])
    hdr = "%-11s %-11s %5s %-4s %-26s %-26s %7s %7s %-20s %-20s %8s" % (
        "server", "config", "ok", "unit", "p50 [min-max]", "p99 [min-max]", "p50/nat", "p99/nat",
        "paired p50/nat", "paired p99/nat", "spread%")
    lines += [hdr, "-" * len(hdr)]
    for row in rep["rows"]:
        lines.append("%-11s %-11s %5s %-4s %-26s %-26s %7s %7s %-20s %-20s %8s" % (
            row["server"], row["config"], "%d/%d" % (row["ok"], row["runs"]), row["unit"],
            fmt_spread(row["p50"], ".4f"), fmt_spread(row["p99"], ".4f"), fmt(row.get("p50_vs_native"), ".3f"),
            fmt(row.get("p99_vs_native"), ".3f"), fmt_spread(row["paired_p50_vs_native"], ".3f"),
            fmt_spread(row["paired_p99_vs_native"], ".3f"), fmt(row.get("p99_round_spread_pct"), ".1f")))
        if row.get("launches_per_s") and row["launches_per_s"]["n"]:
            lines.append("%24s launches/s %s (%s of native)" % (
                "", fmt_spread(row["launches_per_s"], ".0f"), fmt(row.get("rate_vs_native"), ".3f")))
        if row.get("pooled_requests"):
            lines.append("%24s pooled over rounds: %d requests, p50 %s ms, p99 %s ms" % (
                "", row["pooled_requests"], fmt(row["pooled_p50_ms"], ".3f"), fmt(row["pooled_p99_ms"], ".3f")))
        for err in row["errors"]:
            lines.append("%24s failed: %s" % ("", (err or "")[:160]))
    return "\n".join(lines) + "\n"


def main():
    return report_main("mps_cost_report", lambda r: "%s %s round %s" % (r.get("server"), r.get("config"),
                                                                        r.get("round")),
                       brief, build, text)


if __name__ == "__main__":
    sys.exit(main())
