#!/usr/bin/env python3
"""Checks run_interference_bench.sh and interference_report.py without a GPU: the runner is run
end to end (every plan) in a scratch copy of the scripts, with a stand-in for .gpu/interference
that answers like the program from its arguments and environment (slow low work where gpuprio does
not isolate, a run that hangs, a run that fails), and the report's figures are checked against
what the stand-in was told to produce. Also checks run_launch_bench.sh's isolation check with a
stand-in launch_rate. Prints one line per check and 'N passed, N failed'.

usage: python3 tests/tools/interference_selftest.py
"""

import json
import os
import subprocess
import sys

from bench_selftest import check, run_steps, scratch_tree

# The stand-in: prints one JSON line like interference.cu's. Low rates: 1000/L per second alone;
# beside the chain 0.9 of that under gpuprio-active/always (isolated), 0.5 natively; in the tail
# 0.99 (active), 0.88 (always), 1.0 elsewhere; the low role alone under gpuprio at
# GPUPRIO_PRIORITY=low 0.98. p99: 1.0 ms alone, 1.1 active, 1.05 always, 2 x L
# natively. GPUPRIO_RESERVED_SMS=N: p99 1 + 8/N, low 1 - N/132. With STANDIN_HANG=CONFIG that
# configuration sleeps past its timeout; STANDIN_FAIL=CONFIG exits 1.
STANDIN = r'''#!/usr/bin/env python3
import json, os, sys, time
a = sys.argv[1:]
def opt(name, default):
    return type(default)(a[a.index(name) + 1]) if name in a else default
low = opt("--low-ms", 0.0); role = opt("--role", "both"); pm = opt("--priority-mode", "none")
iso = os.environ.get("GPUPRIO_ISOLATION", ""); res = os.environ.get("GPUPRIO_RESERVED_SMS", "")
pre = "gpuprio" in os.environ.get("LD_PRELOAD", "")
cfg = "low-alone" if role == "low" else ("alone" if low == 0 else (("gpuprio-" + iso) if pre else pm))
if res: cfg = "gpuprio-r" + res
if os.environ.get("STANDIN_HANG") == cfg: time.sleep(600)
if os.environ.get("STANDIN_FAIL") == cfg:
    print("interference: boom", file=sys.stderr); sys.exit(1)
base = 1000.0 / low if low else 0
p99, act, idle = 1.0, 0.0, 0.0
if low and role != "low":
    if res:
        n = int(res); p99, act, idle = 1 + 8.0 / n, base * (1 - n / 132.0), base * 0.99
    elif iso == "active": p99, act, idle = 1.1, base * 0.9, base * 0.99
    elif iso == "always": p99, act, idle = 1.05, base * 0.9, base * 0.88
    else: p99, act, idle = 2 * low, base * 0.5, base
js = {"bench": "interference", "ok": True, "priority_mode": pm, "low_ms": low, "alone": low == 0 and role != "low",
      "releases": opt("--releases", 150), "releases_done": opt("--releases", 150), "warmup": opt("--warmup", 10),
      "cut_short": low == 100 and not pre, "period_ms": opt("--period-ms", 10.0), "chain": 20, "high_us": 50,
      "high_p50_ms": p99 * 0.9, "high_p99_ms": p99, "high_max_ms": p99 * 1.2, "high_mean_ms": p99 * 0.9,
      "low_active_per_s": act, "low_idle_per_s": idle,
      "low_own_timed_per_s": (base * (0.98 if pre and os.environ.get("GPUPRIO_PRIORITY") == "low" else 1)) if role == "low" else 0,
      "low_own_per_s": base if role == "low" else 0, "idle_tail_s": opt("--idle-tail-s", 0.0),
      "tail_skip_s": opt("--tail-skip-s", 0.5), "low_batch": 20, "low_blocks_per_sm": opt("--low-blocks-per-sm", 4),
      "low_threads": opt("--low-threads", 256), "low_fill": "smem", "low_smem_per_block": 116736,
      "low_resident_blocks_per_sm": 2, "sms": 132, "device": "Stand-in H100",
      "cycles_per_us": opt("--cycles-per-us", 1755.0), "preloaded": pre, "error": ""}
if pre:
    if iso in ("active", "always") and low:
        print("gpuprio: info: isolation: device 0: 112 of 132 SMs for confined work (%s reserved)" % (res or 16), file=sys.stderr)
        print("gpuprio: info: calls api=cuLaunchKernel total=900 dlsym=0 gpa=900 gpa_ptsz=0 exported=0 confined=400", file=sys.stderr)
    else:
        print("gpuprio: info: calls api=cuLaunchKernel total=900 dlsym=0 gpa=900 gpa_ptsz=0 exported=0 confined=0", file=sys.stderr)
print(json.dumps(js))
'''

LAUNCH_STANDIN = r'''#!/usr/bin/env python3
import json, os, sys
if os.environ.get("GPUPRIO_LOG") == "info" and os.environ.get("STANDIN_GREEN"):
    print("gpuprio: info: isolation: device 0: 112 of 132 SMs for confined work (16 reserved)", file=sys.stderr)
print(json.dumps({"bench": "launch_rate", "ok": True, "launches_per_s": 1e6, "call_us_mean": 1.0,
                  "call_us_p50": 1.0, "call_us_p99": 2.0, "preloaded": "gpuprio" in os.environ.get("LD_PRELOAD", "")}))
'''


def run_bench(root, out, plan, env=None):
    e = dict(os.environ, PYTHON=sys.executable, ROUNDS="3", TAIL_S="2.5")
    e.pop("LD_PRELOAD", None)
    e.update(env or {})
    p = subprocess.run(["bash", os.path.join(root, "tools", "bench", "run_interference_bench.sh"), out,
                        "--plan", plan], capture_output=True, text=True, env=e, timeout=600)
    return p


def run_main(root, out, label, env):
    """Runs the main plan into `out`, checks its exit status; returns its table and rows by (L, config)."""
    p = run_bench(root, out, "main", env)
    check("%s: exit 0 with every native run ok" % label, p.returncode == 0, p.stdout[-3000:] + p.stderr)
    rep = json.load(open(os.path.join(out, "interference.json")))
    txt = open(os.path.join(out, "interference.txt")).read()
    return txt, {(r["low_ms"], r["config"]): r for r in rep["rows"]}


def main_plan(root, d):
    out = os.path.join(d, "out_main")
    txt, rows = run_main(root, out, "main", {"MAX_SECONDS": "1", "MAX_SECONDS_LONG": "1", "TAIL_S": "1",
                                             "LOW_MS": "0.2 100"})
    act = rows.get((0.2, "gpuprio-active"), {})
    check("main: every configuration of the plan has a row", all((0.2, c) in rows for c in
          ("low-alone", "none", "stream", "gpuprio-off", "gpuprio-active", "gpuprio-always")) and
          (None, "alone") in rows and (None, "alone-gpuprio") in rows, sorted(map(str, rows)))
    check("main: three rounds of each", act.get("runs") == 3 and rows[(None, "alone")]["runs"] == 3, act)
    check("main: low active / low alone", abs(act["low_active_vs_alone"]["median"] - 0.9) < 1e-6, act)
    check("main: low idle / low alone", abs(act["low_idle_vs_alone"]["median"] - 0.99) < 1e-6, act)
    check("main: p99 / alone", abs(act["p99_vs_alone"]["median"] - 1.1) < 1e-6, act["p99_vs_alone"])
    check("main: green context and confined ops counted", act["green_context"] == 3 and
          act["confined"]["median"] == 400, act)
    check("main: L=100 runs get the long release count", rows[(100.0, "gpuprio-active")]["releases_done"]["median"]
          == 300, rows[(100.0, "gpuprio-active")]["releases_done"])
    check("main: native L=100 runs are marked cut short", "cut short" in txt, txt)
    check("main: targets judged (active met, idle met)", all(x["met"] for x in act["targets"]) and
          len(act["targets"]) == 2,
          act["targets"])
    alw = rows[(0.2, "gpuprio-always")]
    check("main: 'always' has no idle target", len(alw["targets"]) == 1, alw["targets"])
    check("main: the table shows the isolation lines and targets", "gpuprio: info: isolation: device 0" in txt and
          "met" in txt and "low idle/alone" in txt, txt)
    cmds = os.listdir(out)
    check("main: outputs are the json and the table", sorted(cmds) == ["interference.json", "interference.txt"], cmds)


def chosen_configs(root, d):
    _, rows = run_main(root, os.path.join(d, "out_configs"), "configs",
                       {"MAX_SECONDS": "1", "TAIL_S": "1", "LOW_MS": "2",
                        "CONFIGS": "low-alone low-alone-gpuprio gpuprio-active"})
    check("configs: only the configurations asked for", sorted(c for (l, c) in rows if l == 2.0) ==
          ["gpuprio-active", "low-alone", "low-alone-gpuprio"], sorted(map(str, rows)))
    lg = rows[(2.0, "low-alone-gpuprio")]
    check("configs: low alone under gpuprio against low alone, with the idle target",
          abs(lg["low_idle_vs_alone"]["median"] - 0.98) < 1e-6 and len(lg["targets"]) == 1 and
          lg["targets"][0]["met"], lg)


def other_plans(root, d):
    out = os.path.join(d, "out_res")
    p = run_bench(root, out, "reserved", {"MAX_SECONDS": "1", "TAIL_S": "1", "LOW_MS": "20"})
    check("reserved: exit 0", p.returncode == 0, p.stdout[-2000:] + p.stderr)
    rep = json.load(open(os.path.join(out, "interference_reserved.json")))
    rows = {(r["low_ms"], r["config"]): r for r in rep["rows"]}
    check("reserved: one row per N, in order", [r["config"] for r in rep["rows"] if r["low_ms"] == 20.0] ==
          ["low-alone", "gpuprio-r8", "gpuprio-r16", "gpuprio-r32", "gpuprio-r64"], [r["config"] for r in rep["rows"]])
    r64 = rows[(20.0, "gpuprio-r64")]
    check("reserved: N reaches the library", abs(r64["p99_vs_alone"]["median"] - 1.125) < 1e-6 and
          abs(r64["low_active_vs_alone"]["median"] - (1 - 64 / 132.0)) < 1e-6, r64)

    out = os.path.join(d, "out_sparse")
    p = run_bench(root, out, "sparse", {"SPARSE_PERIOD_MS": "600", "SPARSE_RELEASES": "3", "TAIL_S": "1",
                                        "STANDIN_FAIL": "gpuprio-always"})
    check("sparse: exit 0 although the gpuprio-always runs failed", p.returncode == 0, p.stdout[-2000:] + p.stderr)
    rep = json.load(open(os.path.join(out, "interference_sparse.json")))
    rows = {(r["low_ms"], r["config"]): r for r in rep["rows"]}
    check("sparse: period and releases reach the program", rep["meta"]["period_ms"] == 600 and
          rows[(20.0, "gpuprio-active")]["releases_done"]["median"] == 3, rep["meta"])
    check("sparse: failed runs are listed", rows[(20.0, "gpuprio-always")]["ok"] == 0 and
          "boom" in (rows[(20.0, "gpuprio-always")]["errors"][0] or ""), rows[(20.0, "gpuprio-always")])

    out = os.path.join(d, "out_hang")
    p = run_bench(root, out, "main", {"STANDIN_HANG": "gpuprio-off", "MAX_SECONDS": "1", "TAIL_S": "1",
                                      "LOW_MS": "0.2", "BENCH_TIMEOUT": "2"})
    rows = {(r["low_ms"], r["config"]): r for r in json.load(open(os.path.join(out, "interference.json")))["rows"]}
    off, gpa = rows[(0.2, "gpuprio-off")], rows[(0.2, "gpuprio-active")]
    check("a hanging gpuprio configuration times out twice, then every gpuprio run is skipped; exit 0",
          p.returncode == 0 and off["ok"] == 0 and any("timed out" in (e or "") for e in off["errors"]) and
          any("skipped" in (e or "") for e in off["errors"]) and gpa["ok"] < 3 and
          rows[(0.2, "none")]["ok"] == 3, (p.returncode, off["errors"], gpa["errors"]))

    out = os.path.join(d, "out_native")
    p = run_bench(root, out, "main", {"STANDIN_FAIL": "stream", "MAX_SECONDS": "1", "TAIL_S": "1", "LOW_MS": "2",
                                      "ROUNDS": "1"})
    check("a failed native run: exit 1", p.returncode == 1 and "native run failed" in p.stderr, p.stderr[-800:])
    p = run_bench(root, os.path.join(d, "x"), "nonsense")
    check("an unknown plan: exit 2", p.returncode == 2, p.stdout + p.stderr)


def launch_isolation(root, d):
    e = dict(os.environ, PYTHON=sys.executable, REPS="1", MODES="native schedule", LAUNCHES="10")
    e.pop("LD_PRELOAD", None)
    script = os.path.join(root, "tools", "bench", "run_launch_bench.sh")
    out = os.path.join(d, "out_launch")
    p = subprocess.run(["bash", script, out], capture_output=True, text=True, env=e, timeout=300)
    iso = open(os.path.join(out, "launch_isolation.txt")).read()
    check("launch: a lone process without a green context passes", p.returncode == 0 and "FAIL" not in iso,
          p.stdout[-1500:] + p.stderr)
    runs = json.load(open(os.path.join(out, "launch_bench.json")))["runs"]
    check("launch: records keep their fields", all(set(("mode", "threads", "api", "rep", "rc", "ok")) <= set(r)
                                                   for r in runs) and len(runs) == 8, runs[:1])
    e["STANDIN_GREEN"] = "1"
    out = os.path.join(d, "out_launch2")
    p = subprocess.run(["bash", script, out], capture_output=True, text=True, env=e, timeout=300)
    iso = open(os.path.join(out, "launch_isolation.txt")).read()
    check("launch: a green context in a lone process fails the run", p.returncode == 1 and
          "FAIL (a green context" in iso, iso)


def runner(d):
    root = scratch_tree(d, {"interference": STANDIN, "launch_rate": LAUNCH_STANDIN})
    main_plan(root, d)
    chosen_configs(root, d)
    other_plans(root, d)
    launch_isolation(root, d)


def main():
    return run_steps(runner)


if __name__ == "__main__":
    sys.exit(main())
