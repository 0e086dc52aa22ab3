#!/usr/bin/env python3
"""Records and tabulates the runs of run_two_process_bench.sh (interference, two processes).

usage:
  two_process_report.py record --group L --config C --round R --mps 0|1 --gpuprio 0|1
                               [--high-out F --high-err F --high-rc N] [--low-out F --low-err F --low-rc N]
                               [--skip REASON]            one JSON record on stdout
  two_process_report.py brief  < RECORD                   one line of figures for the progress log
  two_process_report.py report RUNS.jsonl OUT.json OUT.txt

A record holds the JSON line each process printed ("high", "low"), its exit code and stderr tail,
and whether the run counts (ok). In a pair the figures come from the high process: its latency and
the low kernels it counted over its own measured window (the low process publishes its counter
through the peer file); the low process's own JSON must be ok too (it ran, and stopped because the
high process told it to), otherwise the window may not have been full.

Per L the report gives, over rounds: the median and the spread (min-max) of high p50 and p99 for
native / gpuprio, and once for alone (which has no L); p99 / alone (against the median of all
alone runs); the low rate of native and gpuprio against the median of this L's low-alone runs,
and against low alone x (1 - the high chain's busy share). The busy share is the chain's GPU time per period, taken from the alone
runs: median chain latency / period (latency includes the launch and the synchronize's return, so
it slightly overstates the GPU time and the expected low rate is slightly low). Targets are printed
beside: gpuprio p99 / alone <= 1.5 at L = 0.2 ms and <= 2.0 at L = 2 ms; gpuprio low >= 90% of
low alone x (1 - busy).
Exit 0 when every native run succeeded (a gpuprio run may fail: that is recorded, not an error).
"""

import sys

from bench_stats import (chain_spreads, figure_bits, first_ok, fmt, fmt_spread, header, js_of, pair_record, pair_record_args,
                         process_part, ratio, report_main, run_counts, spread, target, target_state)

# Per L; "alone" and "alone-gpuprio" have no L. "gpuprio-low" (a diagnosis, only when asked for:
# PAIR_CONFIGS in run_two_process_bench.sh) runs the high process natively beside a low process
# whose every op is confined (GPUPRIO_ISOLATION=force): what the partition alone leaves the high
# process, without anything gpuprio does in it. "gpuprio-b" (an A/B comparison, only when asked for)
# is "gpuprio" with other settings (B_ENV) or a second build (LIB_B), in the same interleaved rounds.
PAIR_CONFIGS = ["low-alone", "native", "gpuprio", "gpuprio-b", "gpuprio-low"]
# Time-sliced (no MPS): the lower process's work runs on the whole GPU under a budget, and a slice
# already running delays the server.
P99_TARGETS = {0.2: 1.5, 2.0: 2.0}  # L (ms) -> gpuprio high p99 / alone at most
LOW_TARGET = 0.90  # gpuprio low rate / (low alone x (1 - busy)) at least
# Under MPS the lower process's work is confined to an SM partition (docs/isolation.md): the
# server keeps its solo speed at every L, and the batch job keeps what the partition gives it
# (one-wave kernels get 0.5: two waves on the partition).
MPS_P99_TARGET = 1.15  # gpuprio high p99 / alone at most, every L
MPS_LOW_TARGET = 0.80  # gpuprio low rate / low alone at least


# --- record ---

def make_record(a):
    rec = {"group_low_ms": float(a.group), "config": a.config, "round": int(a.round), "mps": bool(int(a.mps)),
           "gpuprio": bool(int(a.gpuprio))}

    def read_part(role):
        out = getattr(a, role + "_out")
        return None if out is None else process_part(out, getattr(a, role + "_err"), int(getattr(a, role + "_rc")))

    def check(role, js, rec):
        # Under gpuprio both processes must have had the library and their priority; natively neither.
        want = rec["gpuprio"] and not (a.config == "gpuprio-low" and role == "high")
        if bool(js.get("preloaded")) != want:
            return "preloaded=%s in a %s run" % (js.get("preloaded"), "gpuprio" if want else "native")
        if want and js.get("env_priority") != role:
            return "GPUPRIO_PRIORITY=%r, expected %r" % (js.get("env_priority"), role)
        if role == "low" and "high" in rec and js.get("low_stopped_by") not in ("peer", "stop-file"):
            return "the low process stopped by %r, not by the high process" % js.get("low_stopped_by")
        return None

    return pair_record(rec, a.skip, read_part, check)


# --- figures of one record ---

def high_js(r):
    return js_of(r, "high")


def low_js(r):
    return js_of(r, "low")


def fig(r, key):
    """A figure of an ok record: latency from the high process, the low rate from the window the high
    process measured (pairs) or from the low process's own window (low alone)."""
    if not r.get("ok"):
        return None
    if key == "low_per_s":
        # Timed by completions where the program did (interference.cu), so that L = 100 ms, with
        # ~20 kernels in a window, is not off by a kernel; counted over the window otherwise.
        if r["config"] == "low-alone":
            return low_js(r).get("low_own_timed_per_s") or low_js(r).get("low_own_per_s")
        if r["config"] in ("native", "gpuprio", "gpuprio-b", "gpuprio-low"):
            return high_js(r).get("low_active_per_s") or high_js(r).get("low_kernels_per_s")
        return None
    if r["config"] == "low-alone":
        return None
    return high_js(r).get(key)


def brief(rec):
    if rec.get("skipped"):
        return "skipped"
    bits = figure_bits(rec, fig, (("high_p50_ms", "p50", ".3f"), ("high_p99_ms", "p99", ".3f"),
                                  ("low_per_s", "low/s", ".1f")))
    h = high_js(rec)
    if h.get("cut_short"):
        bits.append("cut short (n=%s)" % h.get("releases_done"))
    if not rec.get("ok"):
        bits.append("FAILED: %s" % (rec.get("error") or "")[:160])
    return " ".join(bits)


# --- report ---

def config_entry(rs, alone_p50, alone_p99, low_alone, expected_low):
    """Medians and spreads over the runs of one configuration (one L, or the alone runs)."""
    return {
        **run_counts(rs),
        "cut_short": sum(1 for r in rs if r.get("ok") and high_js(r).get("cut_short")),
        **chain_spreads(rs, fig, alone_p50, alone_p99),
        "low_per_s": spread([fig(r, "low_per_s") for r in rs]),
        "low_vs_low_alone": spread([ratio(fig(r, "low_per_s"), low_alone) for r in rs]),
        "low_vs_expected": spread([ratio(fig(r, "low_per_s"), expected_low) for r in rs
                                   if r["config"] != "low-alone"]),
    }


def build(runs):
    measured = [r for r in runs if r["config"] != "calibrate"]
    period = next((high_js(r).get("period_ms") for r in runs if r.get("ok") and high_js(r).get("period_ms")), None)
    # The alone chain does not depend on L: one baseline for every L, from all alone runs.
    alone_runs = [r for r in measured if r["config"] == "alone"]
    alone_p50 = spread([fig(r, "high_p50_ms") for r in alone_runs])["median"]
    alone_p99 = spread([fig(r, "high_p99_ms") for r in alone_runs])["median"]
    chain_ms = spread([fig(r, "high_mean_ms") for r in alone_runs])
    busy = ratio(chain_ms["median"], period)

    mps = any(r.get("mps") for r in measured)
    groups = []
    for low in sorted({r["group_low_ms"] for r in measured if r["config"] in PAIR_CONFIGS}):
        by_cfg = {c: [r for r in measured if r["group_low_ms"] == low and r["config"] == c] for c in PAIR_CONFIGS}
        low_alone = spread([fig(r, "low_per_s") for r in by_cfg["low-alone"]])["median"]
        expected_low = low_alone * (1 - busy) if low_alone is not None and busy is not None else None
        g = {"low_ms": low, "low_alone_per_s": low_alone, "expected_low_per_s": expected_low,
             "configs": {c: config_entry(rs, alone_p50, alone_p99, low_alone, expected_low) for c, rs in by_cfg.items()}}
        targets = []
        gp = g["configs"]["gpuprio"]
        if mps:
            limit = MPS_P99_TARGET
        else:
            limit = next((v for k, v in P99_TARGETS.items() if abs(k - low) < 1e-9), None)
        if limit is not None:
            targets.append(target("gpuprio high p99 / alone <= %g" % limit, gp["p99_vs_alone"]["median"], limit,
                                  at_most=True))
        if mps:
            targets.append(target("gpuprio low / low alone >= %g" % MPS_LOW_TARGET, gp["low_vs_low_alone"]["median"],
                                  MPS_LOW_TARGET))
        else:
            targets.append(target("gpuprio low >= %d%% of low alone x (1 - busy)" % round(LOW_TARGET * 100),
                                  gp["low_vs_expected"]["median"], LOW_TARGET))
        g["targets"] = targets
        groups.append(g)

    first_high, first_low = first_ok(runs, high_js), first_ok(runs, low_js)
    meta = {k: first_high.get(k) for k in ("device", "sms", "chain", "high_us", "period_ms", "releases", "warmup",
                                           "driver_version")}
    meta.update({k: first_low.get(k) for k in ("low_batch", "low_blocks_per_sm", "low_threads", "low_fill",
                                               "low_smem_per_block", "low_resident_blocks_per_sm")})
    cal = next((r for r in runs if r["config"] == "calibrate"), None)
    meta["cycles_per_us"] = high_js(cal).get("cycles_per_us") if cal else None
    meta["calibration_ok"] = bool(cal and cal.get("ok"))
    meta["mps"] = any(r.get("mps") for r in runs)
    meta["rounds"] = max((r["round"] for r in measured), default=0)
    return {
        "bench": "two_process_mps" if meta["mps"] else "two_process",
        "meta": meta,
        "chain_ms_alone": chain_ms,
        "busy_share": busy,
        "alone": config_entry(alone_runs, alone_p50, alone_p99, None, None),
        "alone_gpuprio": config_entry([r for r in measured if r["config"] == "alone-gpuprio"], alone_p50, alone_p99,
                                      None, None),
        "groups": groups,
        "runs": runs,
    }


ROW = "%-5s %-13s %5s %-26s %-26s %-22s %-26s %-20s %-18s"


def row_line(label, cfg, e):
    return ROW % (label, cfg, "%d/%d" % (e["ok"], e["runs"]), fmt_spread(e["high_p50_ms"], ".3f"),
                  fmt_spread(e["high_p99_ms"], ".3f"), fmt_spread(e["p99_vs_alone"], ".2f"),
                  fmt_spread(e["low_per_s"], ".1f"), fmt_spread(e["low_vs_low_alone"], ".3f"),
                  fmt_spread(e["low_vs_expected"], ".3f"))


def text(rep):
    m = rep["meta"]
    lines = []
    lines.append("Interference, two processes%s: %s x %s us chain every %s ms on %s (%s SMs), %s rounds"
                 % (" under MPS" if m["mps"] else " (no MPS: time-sliced)", m["chain"], m["high_us"], m["period_ms"],
                    m["device"], m["sms"], m["rounds"]))
    lines.append("low: %s x SMs blocks of %s threads, fill=%s (smem/block %s, resident blocks/SM %s), batches of %s; "
                 "clock %s cycles/us (one calibration, alone)"
                 % (m["low_blocks_per_sm"], m["low_threads"], m["low_fill"], m["low_smem_per_block"],
                    m["low_resident_blocks_per_sm"], m["low_batch"], fmt(m["cycles_per_us"], ".1f")))
    c = rep["chain_ms_alone"]
    lines.append("high busy share = chain alone %s ms / %s ms period = %s"
                 % (fmt_spread(c, ".3f"), m["period_ms"], fmt(rep["busy_share"], ".3f")))
    lines.append("values: median over rounds [min-max]; p99/alone against the median p99 of all alone runs; "
                 "low against low alone of the same L, and against low alone x (1 - busy)")
    lines += header(ROW, "L(ms)", "config", "ok", "p50 (ms)", "p99 (ms)", "p99/alone", "low kernels/s",
                    "low/low-alone", "low/(al*(1-busy))")

    def add(label, cfg, e):
        if not e["runs"]:
            return
        lines.append(row_line(label, cfg, e))
        if e["cut_short"]:
            lines.append("      (%d of these cut short by max-seconds: fewer releases)" % e["cut_short"])
        for err in e["errors"]:
            lines.append("      failed: %s" % (err or "")[:150])

    add("-", "alone", rep["alone"])
    add("-", "alone-gpuprio", rep["alone_gpuprio"])
    for g in rep["groups"]:
        for cfg in PAIR_CONFIGS:
            add(format(g["low_ms"], "g"), cfg, g["configs"][cfg])
    lines.append("")
    lines.append("targets (gpuprio, medians over rounds):")
    for g in rep["groups"]:
        for t in g["targets"]:
            lines.append("  L=%-5s %-46s %8s  %s" % (format(g["low_ms"], "g"), t["what"], fmt(t["value"], ".3f"),
                                                     target_state(t)))
    return "\n".join(lines) + "\n"


def main():
    def group(r):
        r.add_argument("--group", required=True)

    return report_main("two_process_report", lambda r: "L=%s %s round %s" % (r["group_low_ms"], r["config"], r["round"]),
                       brief, build, text, record=(pair_record_args("out", mps=True, more=group), make_record))


if __name__ == "__main__":
    sys.exit(main())
