#!/usr/bin/env python3
"""Checks the two-GPU benchmark without a GPU or torch: ddp_bench_report.py's record and report
code on synthetic results (ratios against figures worked out by hand), then run_ddp_bench.sh end
to end, in a scratch copy of the scripts (bench_selftest.scratch_tree) with a
stand-in for python (PYTHON: it answers the preflight, torch_two_process.py high and
`-m torch.distributed.run ... ddp_train_bench.py` itself and runs everything else, the report
included, with this python) and for nvidia-cuda-mps-control (bench_selftest's). Checked:
the configurations and their rotation, each process's environment (no NVLink multicast anywhere,
gpuprio's variables only where they belong, one domain a run), that the server starts after the
trainer's ready file and the trainer stops by the stop file after it, --mps (every process a
client of the same live daemon, gone at the end), --native-only, and the failures: a trainer that
fails before it is ready, one that never becomes ready, and workers left behind by torchrun. Prints
one line per check and 'N passed, N failed'.

usage: python3 tests/tools/ddp_bench_selftest.py
"""

import json
import os
import subprocess
import sys
import time

from bench_selftest import (BENCH, MPS_CHECK, check, mps_pids, part_args, run_steps, runner_env, scratch_tree,
                            stand_in_bin)
from bench_stats import js_of


# $PYTHON for run_ddp_bench.sh. Each stand-in process appends a JSON line to $STANDIN_LOG (what
# it was, its environment) and, through MPS_CHECK, "ROLE DAEMON-PID" to $STANDIN_SEEN.
# STANDIN_TRAINER_FAIL: "gpuprio" (a trainer under gpuprio exits 1 before it is ready) or "hang"
# (a trainer never becomes ready). STANDIN_ORPHAN=1: each trainer leaves a "worker" behind, in a
# session of its own, whose pid it wrote to --pid-dir (as torchrun's workers are).
STANDIN_PYTHON = r"""#!/usr/bin/env python3
import json, os, subprocess, sys, time
""" + MPS_CHECK + r"""
a = sys.argv[1:]
KEYS = ("LD_PRELOAD", "GPUPRIO_MODE", "GPUPRIO_PRIORITY", "GPUPRIO_DOMAIN", "NCCL_NVLS_ENABLE",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")

def note(role, **kw):
    rec = {"role": role, "pid": os.getpid(), "t_ns": time.monotonic_ns(),
           "env": {k: os.environ[k] for k in KEYS if k in os.environ}}
    rec.update(kw)
    with open(os.environ["STANDIN_LOG"], "a") as fh:
        fh.write(json.dumps(rec) + "\n")

def opt(args, name, default):
    return type(default)(args[args.index(name) + 1]) if name in args else default

def write_json(path, js):
    with open(path + ".tmp", "w") as fh:
        json.dump(js, fh)
    os.replace(path + ".tmp", path)

if a[:1] == ["-"]:
    sys.stdin.read()
    mps_daemon("preflight")
    note("preflight")
    print("python stand-in\ntorch stand-in CUDA 13.0 available True\ndevice 0: Stand-in H100\ndevice 1: Stand-in H100")
    sys.exit(0)
base = {"ok": True, "error": "", "preloaded": "gpuprio" in os.environ.get("LD_PRELOAD", ""),
        "env_priority": os.environ.get("GPUPRIO_PRIORITY", ""), "env_domain": os.environ.get("GPUPRIO_DOMAIN", ""),
        "device": "Stand-in H100", "torch": "stand-in", "pid": os.getpid()}
if len(a) >= 2 and a[0].endswith("torch_two_process.py") and a[1] == "high":
    started = time.monotonic_ns()
    mps_daemon("server")
    note("server", args=a)
    n, rate = opt(a, "--requests", 300), opt(a, "--rate", 20.0)
    lat = [2.0 + 0.1 * (i % 10) for i in range(n)]
    w0 = time.monotonic_ns()
    while time.monotonic_ns() < w0 + int(n / rate * 1e9):
        time.sleep(0.005)
    w1 = time.monotonic_ns()
    s = sorted(lat)
    write_json(opt(a, "--result", ""), dict(base, role="high", model="resnet18", impl="stand-in", dtype="fp16",
        rate_per_s=rate, requests=n, requests_done=n, latency_ms=lat, p50_ms=s[len(s) // 2], p99_ms=s[-1],
        window_s=(w1 - w0) / 1e9, window_start_ns=w0, window_end_ns=w1, started_ns=started))
    sys.exit(0)
if a[:2] == ["-m", "torch.distributed.run"]:
    i = next(k for k, v in enumerate(a) if v.endswith("ddp_train_bench.py"))
    t = a[i + 1:]
    mps_daemon("trainer")
    world = int(next(v.split("=", 1)[1] for v in a[:i] if v.startswith("--nproc_per_node=")))
    note("trainer", args=a, world=world)
    pid_dir = opt(t, "--pid-dir", "")
    if pid_dir:
        os.makedirs(pid_dir, exist_ok=True)
        open(os.path.join(pid_dir, "rank0.pid"), "w").write("%d\n" % os.getpid())
        if os.environ.get("STANDIN_ORPHAN") == "1":
            w = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", "ddp_train_bench.py", "worker"],
                                 start_new_session=True)
            open(os.path.join(pid_dir, "rank1.pid"), "w").write("%d\n" % w.pid)
            note("orphan", orphan=w.pid)
    fail = os.environ.get("STANDIN_TRAINER_FAIL", "")
    if fail == "gpuprio" and base["preloaded"]:
        print("stand-in trainer: failing under gpuprio", file=sys.stderr)
        sys.exit(1)
    if fail == "hang":
        time.sleep(600)
    time.sleep(0.2)
    ready, stop = opt(t, "--ready-file", ""), opt(t, "--stop-file", "")
    ready_ns = time.monotonic_ns()
    if ready:
        write_json(ready, {"t_ns": ready_ns})
    deadline, ends, stopped_by = time.monotonic() + opt(t, "--seconds", 30.0), [], "seconds"
    while True:
        time.sleep(0.01)
        ends.append(time.monotonic_ns())
        if stop and os.path.exists(stop):
            stopped_by = "stop-file"
            break
        if time.monotonic() >= deadline:
            break
    write_json(opt(t, "--result", ""), dict(base, role="trainer", model="resnet50", impl="stand-in", world_size=world,
        batch=opt(t, "--batch", 64), precision=opt(t, "--precision", "bf16"), image_size=224, backend="nccl",
        stopped_by=stopped_by, step_end_ns=ends, steps=len(ends), ready_ns=ready_ns,
        steps_per_s=(len(ends) - 1) / ((ends[-1] - ends[0]) / 1e9)))
    sys.exit(0)
os.execv(sys.executable, [sys.executable] + a)
"""


def run_runner(root, d, tag, args, env):
    """run_ddp_bench.sh OUT ARGS with the stand-ins; returns its process, OUT, the stand-ins' notes,
    what they found of MPS, the MPS processes that are there now and were not before, and seconds."""
    out = os.path.join(d, "out_" + tag)
    log, seen = os.path.join(d, "log_" + tag), os.path.join(d, "seen_" + tag)
    open(log, "w").close()
    open(seen, "w").close()
    e = runner_env(root, ("GPUPRIO_LIB", "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS",
                          "DDP_CONFIGS"),
                   PYTHON=os.path.join(root, "bin", "python"), STANDIN_LOG=log, STANDIN_SEEN=seen,
                   ROUNDS="1", RATE="200", REQUESTS="40", DDP_SECONDS="1", SERVER_TIMEOUT="20", TRAINER_START_S="10")
    e.update(env)
    before = mps_pids()
    t0 = time.monotonic()
    p = subprocess.run(["bash", os.path.join(root, "tools", "bench", "run_ddp_bench.sh"), out] + args,
                       capture_output=True, text=True, env=e, timeout=300)
    secs = time.monotonic() - t0
    notes = [json.loads(l) for l in open(log) if l.strip()]
    seen_lines = [l.split() for l in open(seen).read().splitlines()]
    return p, out, notes, seen_lines, mps_pids() - before, secs


def report_of(out):
    path = os.path.join(out, "ddp_bench.json")
    return json.load(open(path)) if os.path.exists(path) else {"runs": []}


def report_code(d):
    """ddp_bench_report.py on synthetic result files, through `record` (as the runner calls it) and
    `report`; the computed ratios checked against figures worked out by hand."""
    here = os.path.join(BENCH, "ddp_bench_report.py")
    d = os.path.join(d, "report")
    os.makedirs(d)

    def close(a, b):
        return a is not None and b is not None and abs(a - b) < 1e-9

    n = [0]

    def write(obj):
        n[0] += 1
        path = os.path.join(d, "%d.json" % n[0])
        with open(path, "w") as fh:
            json.dump(obj, fh)
        return path

    base_ns = 10**12

    def server(p50, p99, gpuprio=False, priority="high", t0=0.0, **kw):
        # 90 requests at p50 and 10 at p99: nearest rank puts v[50] at p50 and v[98] at p99 (and
        # over three rounds pooled, v[150] and v[296]); 100 requests at 20/s are a 5 s window.
        lat = [p50] * 90 + [p99] * 10
        js = {"role": "high", "ok": True, "error": "", "model": "resnet18", "impl": "torchvision stand-in",
              "dtype": "fp16", "device": "Synthetic H100", "torch": "stand-in", "rate_per_s": 20.0,
              "requests": 100, "requests_done": 100, "latency_ms": lat, "p50_ms": p50, "p99_ms": p99,
              "window_s": 5.0, "window_start_ns": base_ns + int(t0 * 1e9),
              "window_end_ns": base_ns + int((t0 + 5.0) * 1e9), "preloaded": gpuprio,
              "env_priority": priority if gpuprio else "", "cut_short": False}
        js.update(kw)
        return write(js)

    def trainer(period_ms, t_from, t_to, gpuprio=False, priority="low", stopped_by="stop-file", **kw):
        ends = []
        t = base_ns + int(t_from * 1e9)
        while t <= base_ns + int(t_to * 1e9):
            ends.append(t)
            t += int(period_ms * 1e6)
        js = {"role": "trainer", "ok": True, "error": "", "model": "resnet50", "impl": "torchvision stand-in",
              "device": "Synthetic H100", "torch": "stand-in", "world_size": 2, "batch": 64, "image_size": 224,
              "precision": "bf16", "backend": "nccl", "nccl": "2.x", "preloaded": gpuprio,
              "env_priority": priority if gpuprio else "", "stopped_by": stopped_by, "step_end_ns": ends,
              "steps": len(ends), "steps_per_s": (len(ends) - 1) / ((ends[-1] - ends[0]) / 1e9)}
        js.update(kw)
        return write(js)

    def record(config, rnd, gpuprio=0, mps=1, high=None, low=None, high_rc=0, low_rc=0, skip=None):
        args = [sys.executable, here, "record", "--config", config, "--round", str(rnd), "--gpuprio", str(gpuprio),
                "--mps", str(mps)]
        if skip:
            args += ["--skip", skip]
        args += part_args("result", high, low, high_rc, low_rc, err=os.path.join(d, "none.err"))
        p = subprocess.run(args, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError("record failed: %s" % p.stderr)
        return json.loads(p.stdout)

    # Three rounds. alone: p50 3.0, p99 4.0 / 4.0 / 5.0. ddp-alone: 10 steps/s (100 ms a step),
    # round 3 at 12.5 (80 ms). native: p50 6.0, p99 12 / 10 / 8, trainer 8 steps/s (125 ms).
    # gpuprio: p50 3.0 / 3.15 / 3.3, p99 4.2 / 4.4 / 5.0, trainer 9.5238 steps/s (105 ms), round 3 at
    # 12.5 (80 ms).
    runs = []
    alone_p99 = {1: 4.0, 2: 4.0, 3: 5.0}
    nat_p99 = {1: 12.0, 2: 10.0, 3: 8.0}
    gp = {1: (3.0, 4.2), 2: (3.15, 4.4), 3: (3.3, 5.0)}
    for rnd in (1, 2, 3):
        runs.append(record("alone", rnd, high=server(3.0, alone_p99[rnd])))
        runs.append(record("ddp-alone", rnd, low=trainer(80.0 if rnd == 3 else 100.0, 0, 10, stopped_by="seconds")))
        runs.append(record("native", rnd, high=server(6.0, nat_p99[rnd], t0=10), low=trainer(125.0, 0, 20)))
        runs.append(record("gpuprio", rnd, gpuprio=1, high=server(*gp[rnd], gpuprio=True, t0=10),
                           low=trainer(80.0 if rnd == 3 else 105.0, 0, 20, gpuprio=True)))
    check("record: every synthetic run ok", all(r.get("ok") for r in runs), [r.get("error") for r in runs])
    win = runs[2].get("trainer_window") or {}
    check("record: native trainer in the server's window, 8 steps/s over 41 steps",
          close(win.get("steps_per_s"), 8.0) and win.get("steps") == 41 and win.get("covered"), win)
    check("record: per-step times in the window are 125 ms",
          win.get("step_ms") and all(close(v, 125.0) for v in win["step_ms"]), win.get("step_ms", [])[:3])

    # Runs that must fail, and not be counted.
    bad = {
        "trainer stopped by its seconds": record("native", 4, high=server(3.0, 4.0, t0=10),
                                                 low=trainer(100.0, 0, 20, stopped_by="seconds")),
        "trainer ended inside the window": record("native", 4, high=server(3.0, 4.0, t0=10), low=trainer(100.0, 0, 12)),
        "server GPUPRIO_PRIORITY low": record("gpuprio", 4, gpuprio=1, high=server(3.0, 4.0, True, "low", t0=10),
                                              low=trainer(100.0, 0, 20, True)),
        "trainer not preloaded in a gpuprio run": record("gpuprio", 4, gpuprio=1, high=server(3.0, 4.0, True, t0=10),
                                                         low=trainer(100.0, 0, 20)),
        "trainer failed (rc 1, no result)": record("gpuprio", 4, gpuprio=1, high=server(3.0, 4.0, True, t0=10),
                                                   low=os.path.join(d, "missing.json"), low_rc=1),
        "the server not started beside a trainer": record("native", 4, low=trainer(100.0, 0, 10)),
        "trainer of one rank": record("ddp-alone", 4, low=trainer(100.0, 0, 10, stopped_by="seconds", world_size=1)),
    }
    for what, r in bad.items():
        check("record: fails when %s" % what, not r.get("ok") and r.get("error"), r.get("error"))
    skipped = record("gpuprio", 4, gpuprio=1, skip="skipped: the runs took over DDP_BUDGET=450s")
    check("record: a skipped run", skipped.get("skipped") and not skipped.get("ok"), skipped)

    p = subprocess.run([sys.executable, here, "brief"], input=json.dumps(runs[2]), capture_output=True, text=True)
    check("brief: server and trainer figures", "p50=6.000" in p.stdout and "8.00 steps/s" in p.stdout, p.stdout)

    # The report over the good runs plus the gpuprio failures (not fatal: exit 0).
    gp_bad = [bad["server GPUPRIO_PRIORITY low"], bad["trainer failed (rc 1, no result)"], skipped]
    path = os.path.join(d, "runs.jsonl")
    with open(path, "w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in runs + gp_bad)
    out_json, out_txt = os.path.join(d, "ddp_bench.json"), os.path.join(d, "ddp_bench.txt")
    p = subprocess.run([sys.executable, here, "report", path, out_json, out_txt], capture_output=True, text=True)
    check("report: exit 0 with failed gpuprio runs only", p.returncode == 0, p.stderr)
    rep = json.load(open(out_json))
    txt = open(out_txt).read()
    rows = rep["rows"]
    # Pooled: alone p99 = v[296] of 20 x 4.0 and 10 x 5.0 = 5.0; native p99 = 12.0 (2.4x); gpuprio
    # p50 = v[150] of 90 each of 3.0, 3.15, 3.3 = 3.15 (1.05x), p99 = v[296] of 10 each of 4.2,
    # 4.4, 5.0 = 5.0 (1.0x).
    check("report: alone pooled p50 3.0, p99 5.0", close(rows["alone"]["p50_ms"], 3.0) and
          close(rows["alone"]["p99_ms"], 5.0), rows["alone"])
    check("report: native p50/alone 2.0, p99/alone 2.4",
          close(rows["native"]["p50_vs_alone"], 2.0) and close(rows["native"]["p99_vs_alone"], 2.4), rows["native"])
    check("report: gpuprio p50/alone 1.05, p99/alone 1.0",
          close(rows["gpuprio"]["p50_vs_alone"], 1.05) and close(rows["gpuprio"]["p99_vs_alone"], 1.0),
          rows["gpuprio"])
    pn = rows["native"]["paired_p99_vs_alone"]
    check("report: native paired p99 3.0 / 2.5 / 1.6: median 2.5 [1.6-3.0]",
          pn["n"] == 3 and close(pn["median"], 2.5) and close(pn["min"], 1.6) and close(pn["max"], 3.0), pn)
    pg = rows["gpuprio"]["paired_p99_vs_alone"]
    check("report: gpuprio paired p99 1.05 / 1.1 / 1.0: median 1.05 [1.0-1.1]",
          pg["n"] == 3 and close(pg["median"], 1.05) and close(pg["min"], 1.0) and close(pg["max"], 1.1), pg)
    pg50 = rows["gpuprio"]["paired_p50_vs_alone"]
    check("report: gpuprio paired p50 median 1.05 [1.0-1.1]",
          close(pg50["median"], 1.05) and close(pg50["min"], 1.0) and close(pg50["max"], 1.1), pg50)
    da = rows["ddp-alone"]["trainer_steps_per_s"]
    check("report: ddp-alone steps/s median 10 [10-12.5]",
          close(da["median"], 10.0) and close(da["max"], 12.5) and da["n"] == 3, da)
    check("report: native trainer 8 steps/s, 0.8 of ddp-alone",
          close(rows["native"]["trainer_steps_per_s"]["median"], 8.0) and
          close(rows["native"]["trainer_vs_alone"], 0.8), rows["native"])
    tn = rows["native"]["paired_trainer_vs_alone"]
    check("report: native paired trainer 0.8 / 0.8 / 0.64", close(tn["median"], 0.8) and close(tn["min"], 0.64), tn)
    g = 1000.0 / 105.0
    tg = rows["gpuprio"]["paired_trainer_vs_alone"]
    check("report: gpuprio trainer median %.4f steps/s, %.4f of ddp-alone; paired all %.4f / 1.0" % (g, g / 10, g / 10),
          close(rows["gpuprio"]["trainer_steps_per_s"]["median"], g) and
          close(rows["gpuprio"]["trainer_vs_alone"], g / 10) and close(tg["min"], g / 10) and close(tg["max"], 1.0),
          (rows["gpuprio"]["trainer_steps_per_s"], tg))
    check("report: trainer step p50/p99 in the window 125 ms (native)",
          close(rows["native"]["trainer_step_p50_ms"], 125.0) and close(rows["native"]["trainer_step_p99_ms"], 125.0),
          rows["native"])
    busy = rep["busy"]
    # 3.0 ms x 20/s; latency sum (270 + 40 + 270 + 40 + 270 + 50 = 940 ms) over 15 s.
    check("report: busy share 0.06 (p50 x rate), 0.0627 (latency sum)",
          close(busy["share"], 0.06) and close(busy["latency_sum_share"], 0.94 / 15), busy)
    t = rep["targets"]
    check("report: trainer target 0.9 x 0.94 = 0.846", close(t["trainer_min_ratio"], 0.846), t)
    check("report: native misses both targets, gpuprio meets both",
          t["configs"]["native"]["trainer_met"] is False and t["configs"]["native"]["server_met"] is False and
          t["configs"]["gpuprio"]["trainer_met"] is True and t["configs"]["gpuprio"]["server_met"] is True, t)
    check("report: failed and skipped gpuprio runs listed, not counted",
          rows["gpuprio"]["runs"] == 6 and rows["gpuprio"]["ok"] == 3 and len(rows["gpuprio"]["errors"]) == 3 and
          rows["gpuprio"]["requests"] == 300, rows["gpuprio"])
    check("report: the table's rows and target lines",
          "native" in txt and "gpuprio    trainer 0.952: met; server p99 1.00x: met" in txt and
          "NOT met" in txt and "under MPS" in txt and "busy share of GPU 0: 0.060" in txt, txt)
    check("report: per-request lists left out of the JSON's runs",
          all("latency_ms" not in js_of(r, "high") and "step_end_ns" not in js_of(r, "low") for r in rep["runs"]))

    # Without MPS the p99 verdict is shown for reference; a failed native run makes the exit 1.
    nomps = [dict(r, mps=False) for r in runs] + [bad["trainer ended inside the window"]]
    with open(path, "w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in nomps)
    p = subprocess.run([sys.executable, here, "report", path, out_json, out_txt], capture_output=True, text=True)
    txt = open(out_txt).read()
    check("report: a failed native run: exit 1, said on stderr", p.returncode == 1 and "native run failed" in p.stderr,
          (p.returncode, p.stderr))
    check("report: without MPS the p99 target is marked as not applying",
          "no MPS" in txt and "shown for reference" in txt and not json.load(open(out_json))["targets"]["server_target_applies"],
          txt)


def plain(root, d):
    p, out, notes, seen, left, _ = run_runner(root, d, "plain", [], {"ROUNDS": "2"})
    runs = report_of(out)["runs"]
    what = p.stdout[-3000:] + p.stderr[-1500:]
    check("plain: exit 0, 8 runs, every one ok", p.returncode == 0 and len(runs) == 8 and all(r["ok"] for r in runs),
          what)
    order = [(r["round"], r["config"]) for r in runs]
    check("plain: configurations rotated per round", order == [
        (1, "alone"), (1, "ddp-alone"), (1, "native"), (1, "gpuprio"),
        (2, "ddp-alone"), (2, "native"), (2, "gpuprio"), (2, "alone")], order)
    names = set(os.listdir(out))
    check("plain: output files", {"ddp_bench.json", "ddp_bench.txt", "ddp_bench_runs.jsonl", "ddp_preflight.txt",
                                  "ddp_bench_logs.tgz"} <= names and not any("mps" in n for n in names), names)
    procs = [n for n in notes if n["role"] in ("preflight", "server", "trainer")]
    check("plain: every process without NVLink multicast",
          procs and all(n["env"].get("NCCL_NVLS_ENABLE") == "0" and n["env"].get("TORCH_SYMM_MEM_DISABLE_MULTICAST") == "1"
                        and n["env"].get("NVSHMEM_DISABLE_NVLS") == "1" for n in procs), procs[:2])
    check("plain: the preflight without LD_PRELOAD", notes and notes[0]["role"] == "preflight" and
          "LD_PRELOAD" not in notes[0]["env"], notes[:1])
    gp = [r for r in runs if r["config"] == "gpuprio"]
    nat = [r for r in runs if r["config"] != "gpuprio"]
    check("plain: gpuprio runs: server high, trainer low, preloaded, one domain a run, a new one each run",
          len(gp) == 2 and all(js_of(r, "high").get("env_priority") == "high" and js_of(r, "low").get("env_priority") == "low"
                               and js_of(r, "high").get("preloaded") and js_of(r, "low").get("preloaded") and
                               js_of(r, "high")["env_domain"] and js_of(r, "high")["env_domain"] == js_of(r, "low")["env_domain"]
                               for r in gp) and js_of(gp[0], "high")["env_domain"] != js_of(gp[1], "high")["env_domain"],
          [(js_of(r, "high").get("env_domain"), js_of(r, "low").get("env_domain")) for r in gp])
    check("plain: other runs without gpuprio's variables",
          all(not js_of(r, role).get("preloaded") and not js_of(r, role).get("env_priority") and not js_of(r, role).get("env_domain")
              for r in nat for role in ("high", "low") if js_of(r, role)), nat[:1])
    pairs = [r for r in runs if r["config"] in ("native", "gpuprio")]
    check("plain: in each pair the server started after the trainer's ready file, the trainer stopped by the stop file",
          len(pairs) == 4 and all(js_of(r, "high")["started_ns"] > js_of(r, "low")["ready_ns"] and
                                  js_of(r, "low")["stopped_by"] == "stop-file" and r.get("trainer_window", {}).get("covered")
                                  for r in pairs), [(r["config"], r.get("error")) for r in pairs])
    servers = [n for n in notes if n["role"] == "server"]
    trainers = [n for n in notes if n["role"] == "trainer"]
    check("plain: the server on cuda:0 at RATE, REQUESTS", len(servers) == 6 and all(
        n["args"][n["args"].index("--device") + 1] == "cuda:0" and "--peer" not in n["args"] and
        n["args"][n["args"].index("--requests") + 1] == "40" for n in servers), servers[:1])
    check("plain: the trainer under torchrun, 2 ranks, defaults batch 64 bf16, ddp-alone without a stop file",
          len(trainers) == 6 and all(n["world"] == 2 and "--standalone" in n["args"] and
                                     n["args"][n["args"].index("--batch") + 1] == "64" and
                                     n["args"][n["args"].index("--precision") + 1] == "bf16" for n in trainers) and
          all("--stop-file" not in r_args for r_args in [n["args"] for n in trainers if "--ready-file" not in n["args"]]),
          trainers[:1])
    txt = open(os.path.join(out, "ddp_bench.txt")).read() if os.path.exists(os.path.join(out, "ddp_bench.txt")) else ""
    check("plain: the table, its targets and its last lines", "targets:" in txt and "no MPS" in txt and
          "settings: REQUESTS=40" in txt and "gpuprio    trainer" in txt, txt)


def mps(root, d):
    p, out, notes, seen, left, _ = run_runner(root, d, "mps", ["--mps"], {"STANDIN_WANT_MPS": "1"})
    runs = report_of(out)["runs"]
    check("--mps: exit 0, every run ok, records say mps", p.returncode == 0 and len(runs) == 4 and
          all(r["ok"] and r["mps"] for r in runs), p.stdout[-2500:] + p.stderr[-1000:])
    daemons = {s[1] for s in seen}
    # preflight, alone, ddp-alone, native (2), gpuprio (2)
    check("--mps: the preflight and every process found the same live daemon",
          len(seen) == 7 and seen[0][0] == "preflight" and len(daemons) == 1 and "none" not in daemons, seen)
    names = set(os.listdir(out))
    check("--mps: the daemon quit, its output kept; the table says MPS",
          not left and "ddp_bench_mps_control.txt" in names and "MPS daemon stopped" in p.stdout and
          "under MPS" in open(os.path.join(out, "ddp_bench.txt")).read(), (left, names, p.stdout[-1500:]))


def failures(root, d):
    p, out, notes, seen, left, secs = run_runner(root, d, "gpfail", [], {"STANDIN_TRAINER_FAIL": "gpuprio"})
    runs = {r["config"]: r for r in report_of(out)["runs"]}
    g = runs.get("gpuprio", {})
    check("a trainer failing under gpuprio: recorded, no server started, exit 0 (native runs ok)",
          p.returncode == 0 and not g.get("ok") and "server was not started" in (g.get("error") or "") and
          "r1 gpuprio: the trainer ended before it was ready" in p.stdout and
          "trainer" in (g.get("error") or "") and
          not any(n["role"] == "server" and n["env"].get("LD_PRELOAD") for n in notes) and
          all(runs[c]["ok"] for c in ("alone", "ddp-alone", "native")) and secs < 60,
          (secs, g.get("error"), p.stdout[-2000:]))

    p, out, notes, seen, left, secs = run_runner(root, d, "hang", [], {"STANDIN_TRAINER_FAIL": "hang",
                                                                        "TRAINER_START_S": "2", "DDP_CONFIGS": "native"})
    runs = report_of(out)["runs"]
    trainers = [n["pid"] for n in notes if n["role"] == "trainer"]
    gone = all(not os.path.exists("/proc/%d" % pid) for pid in trainers)
    check("a trainer that never becomes ready: given up after TRAINER_START_S, killed, recorded, exit 1",
          p.returncode == 1 and len(runs) == 1 and not runs[0]["ok"] and "did not become ready" in p.stdout and
          not any(n["role"] == "server" for n in notes) and gone and secs < 15, (secs, p.stdout[-2000:], runs))

    p, out, notes, seen, left, secs = run_runner(root, d, "orphan", ["--native-only"], {"STANDIN_ORPHAN": "1"})
    runs = report_of(out)["runs"]
    orphans = [n["orphan"] for n in notes if n["role"] == "orphan"]
    alive = [pid for pid in orphans if os.path.exists("/proc/%d" % pid) and
             open("/proc/%d/stat" % pid).read().rsplit(") ", 1)[1].split()[0] != "Z"]
    check("--native-only: alone, ddp-alone, native only, all ok",
          p.returncode == 0 and sorted(r["config"] for r in runs) == ["alone", "ddp-alone", "native"] and
          all(r["ok"] for r in runs), (p.stdout[-2000:], [r.get("error") for r in runs]))
    check("workers left behind by torchrun are killed by their pids", len(orphans) == 2 and not alive and
          p.stdout.count("trainer workers still running after torchrun ended: killing") == 2, (orphans, alive, p.stdout[-1500:]))
    for pid in alive:  # not to outlive the test if the check failed
        os.kill(pid, 9)


def runner(d):
    root = scratch_tree(d, {})
    stand_in_bin(root, {"python": STANDIN_PYTHON})
    plain(root, d)
    mps(root, d)
    failures(root, d)


def main():
    return run_steps(report_code, runner)


if __name__ == "__main__":
    sys.exit(main())
