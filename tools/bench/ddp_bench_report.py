#!/usr/bin/env python3
"""The two-GPU benchmark's records and table (run_ddp_bench.sh): a ResNet-18 server on GPU 0
(torch_two_process.py high, the "high" part of a record) beside DDP ResNet-50 training on GPUs 0 and 1
(ddp_train_bench.py, the "low" part).

usage:
  ddp_bench_report.py record --config C --round R --gpuprio 0|1 --mps 0|1 [--skip WHY]
                             [--high-result F --high-err F --high-rc N] [--low-result F --low-err F --low-rc N]
  ddp_bench_report.py brief < RECORD
  ddp_bench_report.py report RUNS.jsonl OUT.json OUT.txt      (exit 1 when a native run failed)

Configurations: alone (the server only, native: the latency baseline), ddp-alone (the trainer only,
native: the throughput baseline), native (both, no gpuprio), gpuprio (both under libgpuprio.so,
GPUPRIO_MODE=schedule, the server GPUPRIO_PRIORITY=high, the trainer low, one domain of the run's own),
and gpuprio-b (gpuprio with run_ddp_bench.sh's B_ENV / LIB_B, when asked for).

What the table gives, per configuration:
  server   p50 and p99 of every measured request of the configuration's good runs (pooled over
           rounds), their ratios to alone's pooled p50 and p99, and each round's p50 and p99 over the
           same round's alone run ("paired"), median [min-max] over rounds.
  trainer  steps/s: for ddp-alone, over the trainer's own measured window; for the pairs, over the
           server's measured window only (the steps whose end falls between the server's first
           measured request's due time and its last request's end: the trainer runs before and after
           the server too, and those steps are not beside it); median [min-max] over rounds; its
           ratio to ddp-alone's median, and each round's over the same round's ddp-alone ("paired");
           per-step time p50/p99 pooled over the same steps.
  busy     the server's busy share of GPU 0, approximated as alone's pooled p50 latency x the request
           rate (the whole latency of a request counted as GPU time: for an eager ResNet-18, whose
           latency is mostly the host launching kernels, an upper bound of its GPU time). The sum of
           alone's request latencies over its measured windows is printed beside it (the mean
           instead of the median).
  targets  the trainer keeps >= 0.9 x (1 - busy share) of ddp-alone's steps/s (the median ratio),
           and the server's pooled p99 is within 1.1 x alone's: the p99 target is set for MPS, and a
           table of a run without MPS says so beside its verdict.
A pair is good when both processes succeeded, the trainer was stopped by the runner (the stop file,
after the server ended, not by its --seconds), each process ran with the priority its configuration
gives it, and the trainer's measured steps span the server's whole measured window.
"""

import json
import sys

from bench_stats import (first_ok, fmt, fmt_spread, header, js_of, pair_record, pair_record_args, percentile, ratio,
                         report_main, run_counts, server_brief, spread)
from torch_two_process import read_part

CONFIG_ORDER = ["alone", "ddp-alone", "native", "gpuprio", "gpuprio-b"]
PAIRS = ("native", "gpuprio", "gpuprio-b")
TRAINER_KEEP = 0.9   # the trainer keeps >= TRAINER_KEEP x (1 - busy share) of ddp-alone
SERVER_P99 = 1.1     # server p99 <= SERVER_P99 x alone (under MPS)


# --- record ---

def trainer_in_window(trainer, server):
    """The trainer's steps beside the server's measured requests: those whose end lies in the
    server's window [window_start_ns, window_end_ns]. steps/s over them (as over the trainer's own
    window: steps between the first and the last end, over the time between), the time of each (from
    the step end before it), and whether the trainer's measured steps cover the whole window (its
    first measured step ended before the window opened, its last after it closed). None where
    either side lacks the figures."""
    ends = trainer.get("step_end_ns") or []
    w0, w1 = server.get("window_start_ns"), server.get("window_end_ns")
    if not ends or w0 is None or w1 is None or w1 <= w0:
        return None
    idx = [i for i, t in enumerate(ends) if w0 <= t <= w1]
    res = {"window_s": (w1 - w0) / 1e9, "steps": len(idx), "covered": ends[0] <= w0 and ends[-1] >= w1,
           "steps_per_s": None, "step_ms": []}
    if len(idx) >= 2:
        first, last = ends[idx[0]], ends[idx[-1]]
        res["steps_per_s"] = (len(idx) - 1) / ((last - first) / 1e9)
    res["step_ms"] = [round((ends[i] - ends[i - 1]) / 1e6, 4) for i in idx if i > 0]
    res["step_p50_ms"], res["step_p99_ms"] = percentile(res["step_ms"], 0.5), percentile(res["step_ms"], 0.99)
    return res


def make_record(a):
    rec = {"config": a.config, "round": int(a.round), "gpuprio": bool(int(a.gpuprio)), "mps": bool(int(a.mps))}
    pair = a.high_result is not None and a.low_result is not None

    def read(role):
        path = getattr(a, role + "_result")
        return None if path is None else read_part(path, int(getattr(a, role + "_rc")), getattr(a, role + "_err"))

    def check(role, js, rec):
        if bool(js.get("preloaded")) != rec["gpuprio"]:
            return "preloaded=%s in a %s run" % (js.get("preloaded"), "gpuprio" if rec["gpuprio"] else "native")
        if rec["gpuprio"] and js.get("env_priority") != role:
            return "GPUPRIO_PRIORITY=%r, expected %r" % (js.get("env_priority"), role)
        if role == "low" and js.get("world_size") != 2:
            return "the trainer ran %s ranks, not 2" % js.get("world_size")
        if role == "low" and pair and js.get("stopped_by") != "stop-file":
            return "the trainer stopped by %r before the server ended" % js.get("stopped_by")
        return None

    def coverage(rec):
        if rec["config"] in PAIRS and not pair:
            return ["the server was not started (the trainer never became ready)" if a.low_result else
                    "a pair without its trainer"]
        h, l = rec.get("high") or {}, rec.get("low") or {}
        if not (pair and h.get("ok") and l.get("ok")):
            return []
        win = trainer_in_window(js_of(rec, "low"), js_of(rec, "high"))
        rec["trainer_window"] = win
        if win is None:
            return ["no server window or no trainer step times to match"]
        if not win["covered"] or win["steps_per_s"] is None:
            return ["the trainer's measured steps do not span the server's window (%d steps in it)" % win["steps"]]
        return []

    return pair_record(rec, a.skip, read, check, coverage)


def trainer_rate(r):
    """A good run's trainer steps/s: ddp-alone's over its own window, a pair's over the server's."""
    if not r.get("ok"):
        return None
    if r["config"] == "ddp-alone":
        return js_of(r, "low").get("steps_per_s")
    if r["config"] in PAIRS:
        return (r.get("trainer_window") or {}).get("steps_per_s")
    return None


def trainer_steps_ms(r):
    if r["config"] == "ddp-alone":
        ends = js_of(r, "low").get("step_end_ns") or []
        return [(b - e) / 1e6 for e, b in zip(ends, ends[1:])]
    return (r.get("trainer_window") or {}).get("step_ms") or []


def brief(rec):
    tr = trainer_rate(rec)
    return server_brief(rec, "server ", None if tr is None else "trainer %.2f steps/s%s" % (
        tr, " (in the server's window)" if rec["config"] in PAIRS else ""))


# --- report ---

def build(runs):
    by_round = {c: {r["round"]: r for r in runs if r["config"] == c and r.get("ok")} for c in ("alone", "ddp-alone")}
    rows = {}
    for c in CONFIG_ORDER:
        rs = [r for r in runs if r["config"] == c]
        good = [r for r in rs if r.get("ok")]
        lat = [v for r in good for v in js_of(r, "high").get("latency_ms", [])]
        steps = [v for r in good for v in trainer_steps_ms(r)]
        rows[c] = {
            **run_counts(rs),
            "cut_short": sum(1 for r in good if js_of(r, "high").get("cut_short")),
            "requests": len(lat), "p50_ms": percentile(lat, 0.5), "p99_ms": percentile(lat, 0.99),
            "max_ms": max(lat) if lat else None,
            "round_p50_ms": spread([js_of(r, "high").get("p50_ms") for r in good]),
            "round_p99_ms": spread([js_of(r, "high").get("p99_ms") for r in good]),
            "trainer_steps_per_s": spread([trainer_rate(r) for r in good]),
            "trainer_steps": len(steps),
            "trainer_step_p50_ms": percentile(steps, 0.5), "trainer_step_p99_ms": percentile(steps, 0.99),
        }
    alone, ddp_alone = rows["alone"], rows["ddp-alone"]["trainer_steps_per_s"]["median"]
    for c, row in rows.items():
        good = [r for r in runs if r["config"] == c and r.get("ok")]
        row["p50_vs_alone"] = ratio(row["p50_ms"], alone["p50_ms"]) if row["requests"] else None
        row["p99_vs_alone"] = ratio(row["p99_ms"], alone["p99_ms"]) if row["requests"] else None
        # Round by round against the same round's baseline: the rounds interleave the
        # configurations, so a machine that is slower for a while weighs on both sides of a ratio.
        for q in ("p50", "p99"):
            row["paired_%s_vs_alone" % q] = spread([
                ratio(js_of(r, "high").get(q + "_ms"), js_of(by_round["alone"].get(r["round"], {}), "high").get(q + "_ms"))
                for r in good if js_of(r, "high").get("latency_ms")])
        row["trainer_vs_alone"] = ratio(row["trainer_steps_per_s"]["median"], ddp_alone)
        row["paired_trainer_vs_alone"] = spread([
            ratio(trainer_rate(r), trainer_rate(by_round["ddp-alone"].get(r["round"], {})))
            for r in good if c in PAIRS or c == "ddp-alone"])
    # The server's busy share of GPU 0, from its alone runs.
    alone_runs = list(by_round["alone"].values())
    rate = next((js_of(r, "high").get("rate_per_s") for r in alone_runs), None)
    lat_sum = sum(sum(js_of(r, "high").get("latency_ms", [])) for r in alone_runs)
    win_sum = sum(js_of(r, "high").get("window_s") or 0 for r in alone_runs)
    busy = {"rate_per_s": rate, "alone_p50_ms": alone["p50_ms"],
            "share": alone["p50_ms"] / 1000.0 * rate if alone["p50_ms"] is not None and rate else None,
            "method": "alone p50 latency x rate",
            "latency_sum_share": lat_sum / 1000.0 / win_sum if win_sum > 0 else None}
    mps = sorted({bool(r.get("mps")) for r in runs})
    targets = {"trainer_min_ratio": TRAINER_KEEP * (1 - busy["share"]) if busy["share"] is not None else None,
               "server_max_p99_ratio": SERVER_P99, "server_target_applies": mps == [True], "configs": {}}
    for c in PAIRS:
        row = rows[c]
        if not row["runs"]:
            continue
        tr, p99 = row["trainer_vs_alone"], row["p99_vs_alone"]
        targets["configs"][c] = {
            "trainer_vs_alone": tr, "p99_vs_alone": p99,
            "trainer_met": None if tr is None or targets["trainer_min_ratio"] is None else tr >= targets["trainer_min_ratio"],
            "server_met": None if p99 is None else p99 <= SERVER_P99,
        }
    hj, lj = first_ok(runs, lambda r: js_of(r, "high")), first_ok(runs, lambda r: js_of(r, "low"))
    meta = {
        "device": hj.get("device") or lj.get("device"), "torch": hj.get("torch") or lj.get("torch"),
        "server_model": hj.get("model"), "server_impl": hj.get("impl"), "server_dtype": hj.get("dtype"),
        "rate_per_s": hj.get("rate_per_s"), "requests_per_run": hj.get("requests"),
        "server_graph": bool(hj.get("graph")),
        "trainer_model": lj.get("model"), "trainer_impl": lj.get("impl"), "batch_per_rank": lj.get("batch"),
        "image_size": lj.get("image_size"), "precision": lj.get("precision"), "world_size": lj.get("world_size"),
        "backend": lj.get("backend"), "nccl": lj.get("nccl"), "trainer_max_memory_gb": lj.get("max_memory_allocated_gb"),
        "rounds": max((r["round"] for r in runs), default=0), "mps": mps,
    }
    return {"bench": "ddp_bench", "meta": meta, "rows": rows, "busy": busy, "targets": targets,
            "runs": [strip_lists(r) for r in runs]}


def strip_lists(r):
    """The runs as recorded, less the per-request latencies and per-step times (the pooled figures
    hold them): counts instead."""
    r = json.loads(json.dumps(r))
    for role, key in (("high", "latency_ms"), ("high", "host_ms"), ("low", "step_end_ns")):
        js = js_of(r, role)
        if key in js:
            js[key + "_count"] = len(js.pop(key))
    win = r.get("trainer_window")
    if win and "step_ms" in win:
        win["step_ms_count"] = len(win.pop("step_ms"))
    return r


ROW = "%-10s %5s %5s %7s %7s %6s %6s %-19s %-19s %-21s %6s %-19s %-13s"


def verdict(met):
    return "-" if met is None else "met" if met else "NOT met"


def text(rep):
    m, busy, tg = rep["meta"], rep["busy"], rep["targets"]
    form = {(True,): "under MPS (a control daemon of the runner's own)",
            (False,): "no MPS (the server and rank 0 time-sliced on GPU 0)"}.get(tuple(m["mps"]), "MIXED MPS and not")
    lines = [
        "Two GPUs, %s: on %s (torch %s)" % (form, m["device"], m["torch"]),
        "server: %s (%s) batch 1 %s on GPU 0, open loop at %s requests/s, %s measured a run; latency from the due "
        "time to the logits on the host%s" % (m["server_model"], m["server_impl"], m["server_dtype"], m["rate_per_s"],
                                              m["requests_per_run"], "; CUDA graph replay" if m["server_graph"] else ""),
        "trainer: DDP %s (%s), %s ranks on GPUs 0 and 1 over %s%s, batch %s a rank at %s px, %s, SGD (peak memory "
        "%s GB a rank); %s rounds, configurations interleaved" % (
            m["trainer_model"], m["trainer_impl"], m["world_size"], m["backend"],
            " %s" % m["nccl"] if m["nccl"] else "", m["batch_per_rank"], m["image_size"],
            {"bf16": "bf16 autocast", "fp32": "fp32"}.get(m["precision"], m["precision"]),
            fmt(m["trainer_max_memory_gb"], "g"), m["rounds"]),
        "p50/p99: pooled over rounds; /al: over alone's pooled value; paired: each round's over the same round's "
        "baseline, median [min-max] over rounds; steps/s: ddp-alone over its own window, the pairs over the "
        "server's measured window, median [min-max] over rounds; step p50/p99: per-step times of those steps",
    ]
    lines += header(ROW, "config", "ok", "reqs", "p50 ms", "p99 ms", "p50/al", "p99/al", "paired p50/al",
                    "paired p99/al", "trainer steps/s", "/ddp", "paired /ddp", "step p50/p99")
    for c in CONFIG_ORDER:
        row = rep["rows"][c]
        if not row["runs"]:
            continue
        paired = c not in ("alone", "ddp-alone")
        lines.append(ROW % (
            c, "%d/%d" % (row["ok"], row["runs"]), row["requests"] or "-", fmt(row["p50_ms"], ".3f"),
            fmt(row["p99_ms"], ".3f"), fmt(row["p50_vs_alone"], ".2f"), fmt(row["p99_vs_alone"], ".2f"),
            fmt_spread(row["paired_p50_vs_alone"], ".2f") if paired else "-",
            fmt_spread(row["paired_p99_vs_alone"], ".2f") if paired else "-",
            fmt_spread(row["trainer_steps_per_s"], ".2f"), fmt(row["trainer_vs_alone"], ".3f"),
            fmt_spread(row["paired_trainer_vs_alone"], ".3f") if paired else "-",
            "%s/%s" % (fmt(row["trainer_step_p50_ms"], ".1f"), fmt(row["trainer_step_p99_ms"], ".1f"))))
        if row["cut_short"]:
            lines.append("           (%d run(s) cut short by the server's --max-seconds)" % row["cut_short"])
        for err in row["errors"]:
            lines.append("           failed: %s" % (err or "")[:160])
    few = sorted({row["requests"] for row in rep["rows"].values() if 0 < row["requests"] < 1000})
    if few:
        lines.append("(p99 over %s measured requests a configuration: fewer than 1000, so it rests on few samples)"
                     % "/".join(str(v) for v in few))
    lines.append("server busy share of GPU 0: %s (%s: %s ms x %s/s; an upper bound of its GPU time, the whole "
                 "latency counted); sum of alone's request latencies over its windows: %s" % (
                     fmt(busy["share"], ".3f"), busy["method"], fmt(busy["alone_p50_ms"], ".3f"),
                     fmt(busy["rate_per_s"], "g"), fmt(busy["latency_sum_share"], ".3f")))
    lines.append("targets: trainer >= %s x (1 - %s) = %s of ddp-alone; server p99 <= %s x alone (under MPS%s)" % (
        TRAINER_KEEP, fmt(busy["share"], ".3f"), fmt(tg["trainer_min_ratio"], ".3f"), SERVER_P99,
        "" if tg["server_target_applies"] else "; these runs were not: shown for reference"))
    for c, t in tg["configs"].items():
        lines.append("  %-10s trainer %s: %s; server p99 %sx: %s%s" % (
            c, fmt(t["trainer_vs_alone"], ".3f"), verdict(t["trainer_met"]), fmt(t["p99_vs_alone"], ".2f"),
            verdict(t["server_met"]), "" if tg["server_target_applies"] else " (no MPS)"))
    return "\n".join(lines) + "\n"


def main():
    return report_main("ddp_bench", lambda r: "%s round %s" % (r["config"], r["round"]), brief, build, text,
                       record=(pair_record_args("result", CONFIG_ORDER, mps=True), make_record))


if __name__ == "__main__":
    sys.exit(main())
