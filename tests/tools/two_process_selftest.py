#!/usr/bin/env python3
"""Checks the two-process benchmarks' record and report code on synthetic results, without a GPU
or torch: two_process_report.py (run_two_process_bench.sh) and the record/report half of
torch_two_process.py (run_torch_bench.sh). Then runs both runners end to end, with and without
--mps, in a scratch copy of the scripts with stand-ins for the CUDA programs and for
nvidia-cuda-mps-control (mps_daemon.sh): every process of an --mps run must find the stand-in
daemon alive, and the daemon must be gone when the runner is. run_torch_bench.sh --threads runs
torch_two_process.py's own threads code, on a stand-in torch module (which fails a job thread that
synchronises the whole device or works outside a stream of its own) and a stand-in for
tools/python/gpuprio.py (which records each thread's priority). Prints one line per check and
'N passed, N failed'.

usage: python3 tests/tools/two_process_selftest.py
"""

import json
import os
import subprocess
import sys

from bench_selftest import (BENCH, MPS_CHECK, check, mps_pids, part_args, run, run_steps, runner_env, scratch_tree,
                            stand_in_bin, write)
from bench_stats import js_of


def interference_json(**kw):
    js = {"bench": "interference", "ok": True, "period_ms": 10, "chain": 20, "high_us": 50, "sms": 132,
          "device": "Synthetic H100", "cycles_per_us": 1980.0, "low_batch": 20, "low_blocks_per_sm": 2,
          "low_threads": 1024, "low_fill": "smem", "low_smem_per_block": 116736, "low_resident_blocks_per_sm": 2,
          "preloaded": False, "env_priority": "", "error": ""}
    js.update(kw)
    return "interference: gpuprio_set_thread_priority not found (not used)\n" + json.dumps(js) + "\n"


def two_process(d):
    rep = os.path.join(BENCH, "two_process_report.py")
    lines = []

    def record(group, config, rnd, gpuprio, high=None, low=None, high_rc=0, low_rc=0, skip=None):
        args = [rep, "record", "--group", str(group), "--config", config, "--round", str(rnd), "--mps", "0",
                "--gpuprio", str(gpuprio)]
        if skip:
            args += ["--skip", skip]
        tag = "%s.%s.%s" % (config, group, rnd)
        if high is not None:
            args += ["--high-out", write(d, tag + ".h.out", high), "--high-err", write(d, tag + ".h.err", ""),
                     "--high-rc", str(high_rc)]
        if low is not None:
            args += ["--low-out", write(d, tag + ".l.out", low), "--low-err", write(d, tag + ".l.err", "boom\n"),
                     "--low-rc", str(low_rc)]
        rc, out, err = run(args)
        assert rc == 0, err
        lines.append(out)
        return json.loads(out)

    pre = {"preloaded": True}
    record(0, "calibrate", 0, 0, high=interference_json(role="high", high_p50_ms=1.0, high_p99_ms=1.0))
    for rnd in (1, 2, 3):
        # Chain alone: mean 1.0 ms per 10 ms period, so the busy share is 0.1.
        record(0, "alone", rnd, 0, high=interference_json(role="high", high_p50_ms=1.0, high_p99_ms=1.0 + 0.1 * rnd,
                                                          high_mean_ms=1.0))
        for L in (0.2, 2.0):
            record(L, "low-alone", rnd, 0, low=interference_json(role="low", low_own_per_s=1000 / L,
                                                                 low_stopped_by="seconds"))
            record(L, "native", rnd, 0,
                   high=interference_json(role="high", high_p50_ms=4.0, high_p99_ms=5.0, high_mean_ms=4.0,
                                          low_kernels_per_s=0.95 * 1000 / L),
                   low=interference_json(role="low", low_stopped_by="peer"))
            gp_high = interference_json(role="high", high_p50_ms=1.2, high_p99_ms=1.4 * rnd, high_mean_ms=1.2,
                                        low_kernels_per_s=0.85 * 1000 / L, env_priority="high", **pre)
            gp_low = interference_json(role="low", low_stopped_by="peer", env_priority="low", **pre)
            if L == 2.0 and rnd == 3:
                record(L, "gpuprio", rnd, 1, high=gp_high, low="", low_rc=124)  # a low process that hung
            else:
                record(L, "gpuprio", rnd, 1, high=gp_high, low=gp_low)
        record(0, "alone-gpuprio", rnd, 1, skip="skipped: gpuprio runs timed out twice")
    # A gpuprio run whose low process ran without the library does not count.
    r = record(0.2, "gpuprio", 9, 1, high=interference_json(role="high", env_priority="high", high_p50_ms=1, **pre),
               low=interference_json(role="low", low_stopped_by="peer"))
    check("record: a low process without the library fails a gpuprio run", not r["ok"] and "preloaded" in r["error"],
          r.get("error"))
    lines.pop()
    r = json.loads(lines[-1])
    check("record: a skipped run is recorded as such", r.get("skipped") and not r["ok"], r)
    rc, out, _ = run([rep, "brief"], stdin=lines[3])
    check("brief: figures of a pair", "p99=5.000" in out and "low/s=4750.0" in out, out)

    runs = write(d, "runs.jsonl", "".join(lines))
    oj, ot = os.path.join(d, "tp.json"), os.path.join(d, "tp.txt")
    rc, _, err = run([rep, "report", runs, oj, ot])
    check("report: exit 0 when every native run succeeded", rc == 0, err)
    rpt = json.load(open(oj))
    txt = open(ot).read()
    check("report: busy share from the alone chain", abs(rpt["busy_share"] - 0.1) < 1e-9, rpt["busy_share"])
    g = {x["low_ms"]: x for x in rpt["groups"]}
    gp = g[0.2]["configs"]["gpuprio"]
    # alone p99 median = 1.2; gpuprio p99s 1.4, 2.8, 4.2 -> ratios 1.17, 2.33, 3.5
    check("report: p99 / alone median and spread", abs(gp["p99_vs_alone"]["median"] - 2.8 / 1.2) < 1e-9 and
          abs(gp["p99_vs_alone"]["min"] - 1.4 / 1.2) < 1e-9 and gp["p99_vs_alone"]["n"] == 3, gp["p99_vs_alone"])
    check("report: low against alone x (1 - busy)", abs(gp["low_vs_expected"]["median"] - 0.85 / 0.9) < 1e-9,
          gp["low_vs_expected"])
    check("report: a failed gpuprio run is left out and listed", g[2.0]["configs"]["gpuprio"]["ok"] == 2 and
          "low:" in (g[2.0]["configs"]["gpuprio"]["errors"][0] or ""), g[2.0]["configs"]["gpuprio"])
    t = {tt["what"]: tt for tt in g[0.2]["targets"]}
    check("report: p99 target at 0.2 ms judged", t["gpuprio high p99 / alone <= 1.5"]["met"] is False, t)
    check("report: low target judged", t["gpuprio low >= 90% of low alone x (1 - busy)"]["met"] is True, t)
    check("report: the table names the targets", "MISSED" in txt and "met" in txt and "alone-gpuprio" in txt, txt)

    # Under MPS the lower process runs confined: the isolation targets, at every L.
    mps_lines = []
    for line in lines:
        rec = json.loads(line)
        rec["mps"] = True
        mps_lines.append(json.dumps(rec) + "\n")
    runs = write(d, "runs_mps.jsonl", "".join(mps_lines))
    rc, _, err = run([rep, "report", runs, oj, ot])
    g = {x["low_ms"]: x for x in json.load(open(oj))["groups"]}
    for L in (0.2, 2.0):
        t = {tt["what"]: tt for tt in g[L]["targets"]}
        check("report, MPS, L=%g: p99 target 1.15 judged" % L,
              t.get("gpuprio high p99 / alone <= 1.15", {}).get("met") is False, t)
        check("report, MPS, L=%g: low against low alone judged" % L,
              t.get("gpuprio low / low alone >= 0.8", {}).get("met") is True, t)

    lines.append(json.dumps({"group_low_ms": 0.2, "config": "native", "round": 4, "mps": False, "gpuprio": False,
                             "ok": False, "error": "high: timed out"}) + "\n")
    runs = write(d, "runs2.jsonl", "".join(lines))
    rc, _, err = run([rep, "report", runs, oj, ot])
    check("report: exit 1 when a native run failed", rc == 1 and "native run failed" in err, (rc, err))


def torch_part(d):
    script = os.path.join(BENCH, "torch_two_process.py")
    lines = []

    def result(name, **kw):
        js = {"ok": True, "error": "", "preloaded": False, "env_priority": "", "impl": "builtin", "torch": "2.x",
              "device": "Synthetic H100", "dtype": "fp16", "image_size": 224}
        js.update(kw)
        return write(d, name, json.dumps(js))

    def record(config, rnd, gpuprio, high=None, low=None, high_rc=0, low_rc=0):
        args = [script, "record", "--config", config, "--round", str(rnd), "--gpuprio", str(gpuprio)]
        rc, out, err = run(args + part_args("result", high, low, high_rc, low_rc))
        assert rc == 0, err
        lines.append(out)
        return json.loads(out)

    def lat(base, n=400):
        return [base + 0.01 * (i % 100) for i in range(n)]  # 400 values: nearest-rank p99 = base + 0.98

    pre = {"preloaded": True}
    for rnd in (1, 2, 3):
        record("alone", rnd, 0, high=result("a%d" % rnd, role="high", model="resnet18", latency_ms=lat(2.0),
                                            p50_ms=2.5, p99_ms=2.99 + 0.1 * rnd, requests=400, rate_per_s=20))
        record("low-alone", rnd, 0, low=result("la%d" % rnd, role="low", model="resnet50", batch=1024,
                                               own_images_per_s=10000.0, stopped_by="seconds"))
        record("native", rnd, 0, high=result("n%d" % rnd, role="high", latency_ms=lat(20.0), p50_ms=20.5,
                                             p99_ms=20.99, low_images_per_s=9500.0 + rnd),
               low=result("nl%d" % rnd, role="low", stopped_by="peer"))
        record("gpuprio", rnd, 1,
               high=result("g%d" % rnd, role="high", latency_ms=lat(2.2), p50_ms=2.7, p99_ms=3.19 + 0.1 * rnd,
                           low_images_per_s=8000.0 + 100 * rnd, env_priority="high", steal_pct=0.5 * rnd,
                           involuntary_switches_per_request=0.25, voluntary_switches_per_request=4.0, **pre),
               low=result("gl%d" % rnd, role="low", stopped_by="peer", env_priority="low", **pre))
    r = record("gpuprio", 9, 1, high=os.path.join(d, "missing.json"), high_rc=124,
               low=result("gl9", role="low", stopped_by="seconds", env_priority="low", **pre))
    check("torch record: a missing result and a low process that stopped by itself fail the run",
          not r["ok"] and "timed out" in r["error"] and "stopped by 'seconds'" in r["error"], r.get("error"))
    runs = write(d, "truns.jsonl", "".join(lines))
    oj, ot = os.path.join(d, "t.json"), os.path.join(d, "t.txt")
    rc, _, err = run([script, "report", runs, oj, ot])
    check("torch report: exit 0 when every native run succeeded", rc == 0, err)
    rows = json.load(open(oj))["rows"]
    check("torch report: pooled requests over rounds", rows["alone"]["requests"] == 1200, rows["alone"]["requests"])
    check("torch report: pooled p99 / alone", abs(rows["gpuprio"]["p99_vs_alone"] - 3.18 / 2.98) < 1e-6,
          rows["gpuprio"]["p99_vs_alone"])
    check("torch report: low / low alone, median and spread",
          abs(rows["gpuprio"]["low_vs_low_alone"] - 0.82) < 1e-9 and
          abs(rows["gpuprio"]["round_low_vs_low_alone"]["max"] - 0.83) < 1e-9, rows["gpuprio"])
    check("torch report: the failed run is listed", rows["gpuprio"]["ok"] == 3 and len(rows["gpuprio"]["errors"]) == 1,
          rows["gpuprio"])
    check("torch report: latencies are not copied into the report's runs",
          all("latency_ms" not in ((r.get("high") or {}).get("json") or {}) for r in json.load(open(oj))["runs"]))
    check("torch report: p99 paired by round (each round's alone run), median and spread",
          abs(rows["gpuprio"]["paired_p99_vs_alone"]["median"] - 3.39 / 3.19) < 1e-9 and
          abs(rows["gpuprio"]["paired_p99_vs_alone"]["max"] - 3.29 / 3.09) < 1e-9 and
          abs(rows["gpuprio"]["paired_p50_vs_alone"]["median"] - 2.7 / 2.5) < 1e-9, rows["gpuprio"])
    check("torch report: host noise per configuration",
          rows["gpuprio"]["steal_pct"]["median"] == 1.0 and rows["gpuprio"]["steal_pct"]["max"] == 1.5 and
          rows["alone"]["steal_pct"]["n"] == 0, rows["gpuprio"])
    txt = open(ot).read()
    check("torch report: table", "gpuprio" in txt and "low-alone" in txt and "builtin" in txt and
          "two processes" in txt and "paired p50/al 1.08 [1.08-1.08]  p99/al 1.06 [1.06-1.06]" in txt and
          "host noise: steal 1.00 [0.50-1.50] %, high thread preempted 0.25 [0.25-0.25] times a request, blocked 4.0 [4.0-4.0] times" in txt, txt)

    # The threads form: one process, each thread's own priority instead of GPUPRIO_PRIORITY.
    def threads_record(config, gpuprio, high=None, low=None, rc=0):
        args = [script, "record", "--form", "threads", "--config", config, "--round", "1", "--gpuprio", str(gpuprio)]
        rc, out, err = run(args + part_args("result", high, low, rc, rc))
        assert rc == 0, err
        return json.loads(out)

    def thread_result(name, role, pid=7, **kw):
        base = {"role": role, "form": "threads", "pid": pid, "priority_set": True,
                "thread_priority": 1 if role == "high" else -1, "stopped_by": "peer", **pre}
        base.update(kw)
        return result(name, **base)

    r = threads_record("gpuprio", 1, high=thread_result("th1", "high"), low=thread_result("tl1", "low"))
    check("torch threads record: both priorities set, one process: ok", r["ok"] and r["form"] == "threads", r)
    r = threads_record("gpuprio", 1, high=thread_result("th2", "high"),
                       low=thread_result("tl2", "low", priority_set=False, priority_error="not loaded"))
    check("torch threads record: a thread whose priority was not set fails the run",
          not r["ok"] and "low: the thread's priority was not set (not loaded)" in r["error"], r.get("error"))
    r = threads_record("gpuprio", 1, high=thread_result("th3", "high", env_priority="high"),
                       low=thread_result("tl3", "low"))
    check("torch threads record: GPUPRIO_PRIORITY for the process fails the run",
          not r["ok"] and "GPUPRIO_PRIORITY='high' set for the process" in r["error"], r.get("error"))
    r = threads_record("native", 0, high=thread_result("th4", "high", preloaded=False, priority_set=False),
                       low=thread_result("tl4", "low", pid=8, preloaded=False, priority_set=False))
    check("torch threads record: two pids fail the run", not r["ok"] and "different processes" in r["error"],
          r.get("error"))
    r = threads_record("alone", 0, high=result("th5", role="high"))
    check("torch threads record: a result without form=threads fails the run",
          not r["ok"] and "two-process form" in r["error"], r.get("error"))


# --- The runners end to end, with and without --mps ---

# .gpu/interference in its two-process roles: the low process of a pair runs until the stop file.
INTERFERENCE = r"""#!/usr/bin/env python3
import json, os, sys, time
""" + MPS_CHECK + r"""
a = sys.argv[1:]
def opt(name, default):
    return type(default)(a[a.index(name) + 1]) if name in a else default
role, low = opt("--role", "high"), opt("--low-ms", 0.0)
mps_daemon(role)
pre = "gpuprio" in os.environ.get("LD_PRELOAD", "")
js = {"bench": "interference", "ok": True, "role": role, "low_ms": low, "period_ms": 10, "chain": 20, "high_us": 50,
      "sms": 132, "device": "Stand-in H100", "cycles_per_us": opt("--cycles-per-us", 1980.0), "low_batch": 20,
      "low_blocks_per_sm": 2, "low_threads": 1024, "low_fill": "smem", "low_smem_per_block": 116736,
      "low_resident_blocks_per_sm": 2, "preloaded": pre, "env_priority": os.environ.get("GPUPRIO_PRIORITY", ""),
      "error": ""}
if role == "high":
    js.update(high_p50_ms=1.0, high_p99_ms=1.5, high_mean_ms=1.0, high_max_ms=2.0,
              low_kernels_per_s=(900.0 / low if low else 0))
else:
    stop, deadline = opt("--stop-file", ""), time.time() + opt("--seconds", 5.0)
    while stop and not os.path.exists(stop) and time.time() < deadline:
        time.sleep(0.05)
    js.update(low_own_per_s=1000.0 / low, low_stopped_by="stop-file" if stop and os.path.exists(stop) else "seconds")
print(json.dumps(js))
"""

# $PYTHON for run_torch_bench.sh: the preflight ("-") and torch_two_process.py high / low are
# answered here (no torch); record, brief and report run for real.
TORCH_PYTHON = r"""#!/usr/bin/env python3
import json, os, sys, time
""" + MPS_CHECK + r"""
a = sys.argv[1:]
if a[:1] == ["-"]:
    sys.stdin.read()
    mps_daemon("preflight")
    print("python stand-in\ntorch stand-in CUDA 12.x available True")
    sys.exit(0)
if len(a) >= 2 and a[0].endswith("torch_two_process.py") and a[1] == "threads":
    # The script's own threads code, on the stand-in torch (faketorch/ beside bin/).
    mps_daemon("threads")
    fake = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "faketorch")
    env = dict(os.environ, PYTHONPATH=fake + os.pathsep + os.environ.get("PYTHONPATH", ""))
    os.execve(sys.executable, [sys.executable] + a, env)
if len(a) < 2 or not a[0].endswith("torch_two_process.py") or a[1] not in ("high", "low"):
    os.execv(sys.executable, [sys.executable] + a)
role = a[1]
def opt(name, default):
    return type(default)(a[a.index(name) + 1]) if name in a else default
mps_daemon(role)
res = {"ok": True, "error": "", "role": role, "preloaded": "gpuprio" in os.environ.get("LD_PRELOAD", ""),
       "env_priority": os.environ.get("GPUPRIO_PRIORITY", ""), "impl": "builtin", "torch": "stand-in",
       "device": "Stand-in H100", "dtype": "fp16", "image_size": 224}
if role == "high":
    lat = [2.0 + 0.01 * (i % 100) for i in range(100)]
    res.update(model="resnet18", latency_ms=lat, p50_ms=2.5, p99_ms=2.99, requests=100, requests_done=100,
               rate_per_s=20)
    if "--peer" in a:
        res.update(low_images_per_s=9000.0, low_batches_in_window=3)
else:
    stop, deadline = opt("--stop-file", ""), time.time() + opt("--seconds", 5.0)
    while stop and not os.path.exists(stop) and time.time() < deadline:
        time.sleep(0.05)
    res.update(model="resnet50", batch=1024, own_images_per_s=10000.0,
               stopped_by="stop-file" if stop and os.path.exists(stop) else "seconds")
with open(opt("--result", ""), "w") as fh:
    json.dump(res, fh)
"""

# torch for the threads form: what torch_two_process.py uses of it, with "GPU work" that sleeps
# (the GIL released, as torch's operators release it). A job thread (any thread but the main one)
# fails when it calls torch.cuda.synchronize() (that would wait for the other job too) or works
# outside a stream of its own. STANDIN_TORCH_FAIL=low makes the ResNet-50 (batch > 1) fail.
FAKE_TORCH = r"""
import contextlib, os, threading, time
from types import SimpleNamespace

__version__ = "stand-in"
float16, float32, channels_last = "float16", "float32", "channels_last"
backends = SimpleNamespace(cudnn=SimpleNamespace(benchmark=True))
_tls = threading.local()


def _job_thread():
    return threading.current_thread() is not threading.main_thread()


def _gpu(n):
    capture = getattr(_tls, "capture", None)
    if capture is not None:  # recorded into the graph being captured, run at its replays
        capture.append(n)
        return
    if _job_thread() and getattr(_tls, "stream", None) is None:
        raise RuntimeError("stand-in torch: GPU work of a job thread on the default stream")
    if n > 1 and os.environ.get("STANDIN_TORCH_FAIL") == "low":
        raise RuntimeError("stand-in torch: the low model fails")
    time.sleep(0.0005 + 2e-6 * n)


class Tensor:
    def __init__(self, n):
        self.n = n
    def to(self, *a, **k):
        return self
    def pin_memory(self):
        return self
    def contiguous(self, **k):
        return self
    def float(self):
        return self
    def copy_(self, other, **k):
        return self
    def cpu(self):
        _gpu(0)
        return self
    def __add__(self, other):
        return self


def randn(*shape, **k):
    return Tensor(shape[0])


def manual_seed(s):
    pass


def device(name):
    return SimpleNamespace(type=name.split(":")[0])


def inference_mode():
    return contextlib.nullcontext()


class _Module:
    def __init__(self, *a, **k):
        pass
    def __call__(self, x):
        return self.forward(x)
    def forward(self, x):
        return x
    def to(self, *a, **k):
        return self
    def eval(self):
        return self
    def parameters(self):
        return iter([])


class _Sequential(_Module):
    def __init__(self, *mods):
        self.mods = mods
    def forward(self, x):
        for m in self.mods:
            x = m(x)
        return x


class _Linear(_Module):
    def forward(self, x):
        _gpu(x.n)
        return x


nn = SimpleNamespace(Module=_Module, Sequential=_Sequential, Linear=_Linear, Conv2d=_Module,
                     BatchNorm2d=_Module, ReLU=_Module, MaxPool2d=_Module, AdaptiveAvgPool2d=_Module,
                     Flatten=_Module)


class _Stream:
    def __init__(self, device=None, priority=0):
        self.priority = max(-1, min(0, priority))  # torch clamps to the device's range
    def synchronize(self):
        pass
    def wait_stream(self, other):
        pass


class _CUDAGraph:
    def __init__(self):
        self.work = None
    def replay(self):
        if not self.work:
            raise RuntimeError("stand-in torch: replay of a graph that captured no work")
        for n in self.work:
            _gpu(n)
        seen = os.environ.get("STANDIN_SEEN")
        if seen:
            with open(seen, "a") as fh:
                fh.write("replay %d\n" % len(self.work))


@contextlib.contextmanager
def _graph(g, capture_error_mode="global"):
    if capture_error_mode != "thread_local" and _job_thread():
        raise RuntimeError("stand-in torch: a global-mode capture beside another job thread")
    _tls.capture = []
    try:
        yield
    finally:
        g.work, _tls.capture = _tls.capture, None


@contextlib.contextmanager
def _stream(s):
    before = getattr(_tls, "stream", None)
    _tls.stream = s
    try:
        yield
    finally:
        _tls.stream = before


def _synchronize():
    if _job_thread():
        raise RuntimeError("stand-in torch: torch.cuda.synchronize() in a job thread")


cuda = SimpleNamespace(Stream=_Stream, stream=_stream, synchronize=_synchronize, is_available=lambda: True,
                       current_stream=lambda d=None: getattr(_tls, "stream", None) or _Stream(),
                       CUDAGraph=_CUDAGraph, graph=_graph,
                       get_device_name=lambda d=None: "Stand-in H100", max_memory_allocated=lambda d=None: 2**30)
"""

# tools/python/gpuprio.py in the scratch tree: "loaded" when LD_PRELOAD names gpuprio, unless
# STANDIN_NO_PRIORITY=1; a thread's setting is its own; each setting is appended to $STANDIN_SEEN as
# "priority VALUE TID". Setting it from the main thread raises: each job thread must set its own.
GPUPRIO_HELPER = r"""
import os, threading
PRIORITY_UNSET = -1000
_tls = threading.local()


def available():
    return "gpuprio" in os.environ.get("LD_PRELOAD", "") and os.environ.get("STANDIN_NO_PRIORITY") != "1"


def set_thread_priority(p):
    if threading.current_thread() is threading.main_thread():
        raise RuntimeError("stand-in gpuprio: priority set from the main thread")
    if not available():
        raise RuntimeError("stand-in gpuprio: not loaded")
    _tls.p = p
    with open(os.environ["STANDIN_SEEN"], "a") as fh:
        fh.write("priority %d %d\n" % (p, threading.get_native_id()))


def get_thread_priority():
    return getattr(_tls, "p", PRIORITY_UNSET)
"""


def scratch_repo(d):
    """The runners' scratch tree (bench_selftest.scratch_tree), with the stand-in torch and gpuprio.py
    helper, and bin/ for PATH (a python for run_torch_bench.sh; `id -u` answers $STANDIN_UID, 0 by
    default)."""
    root = scratch_tree(d, {"interference": INTERFERENCE})
    os.makedirs(os.path.join(root, "tools", "python"))
    write(os.path.join(root, "tools", "python"), "gpuprio.py", GPUPRIO_HELPER)
    os.makedirs(os.path.join(root, "faketorch", "torch"))
    write(os.path.join(root, "faketorch", "torch"), "__init__.py", FAKE_TORCH)
    stand_in_bin(root, {"python": TORCH_PYTHON}, uid='"${STANDIN_UID:-0}"')
    return root


def run_runner(root, d, script, tag, args, env):
    """Runs a runner; returns its process, OUT, what each stand-in process found and the MPS
    processes that are there now and were not before."""
    out = os.path.join(d, "out_" + tag)
    seen = os.path.join(d, "seen_" + tag)
    open(seen, "w").close()
    e = runner_env(root, STANDIN_SEEN=seen, ROUNDS="1")
    e.update(env)
    before = mps_pids()
    p = subprocess.run(["bash", os.path.join(root, "tools", "bench", script), out] + args, capture_output=True,
                       text=True, env=e, timeout=240)
    seen_lines = [l.split() for l in open(seen).read().splitlines()]
    return p, out, seen_lines, mps_pids() - before


def mps_runners(d):
    root = scratch_repo(d)
    tp = dict(PYTHON=sys.executable, LOW_MS="2", MAX_SECONDS="1", LOW_ALONE_SECONDS="1", PEER_WAIT="5")

    p, out, seen, left = run_runner(root, d, "run_two_process_bench.sh", "tp_mps", ["--mps"],
                                    dict(tp, STANDIN_WANT_MPS="1"))
    runs = json.load(open(os.path.join(out, "two_process_mps.json")))["runs"] if p.returncode in (0, 1) else []
    check("two-process --mps: exit 0, every run ok", p.returncode == 0 and runs and all(r["ok"] for r in runs),
          p.stdout[-2500:] + p.stderr[-1000:])
    daemons = {s[1] for s in seen}
    # calibrate, alone, low-alone, native (2), gpuprio (2), alone-gpuprio
    check("two-process --mps: every process found the same live daemon", len(seen) == 8 and len(daemons) == 1 and
          "none" not in daemons, seen)
    check("two-process --mps: records say mps", runs and all(r.get("mps") for r in runs), runs[:1])
    ctl = os.path.join(out, "two_process_mps_mps_control.txt")
    check("two-process --mps: the daemon quit, its output and log kept", not left and os.path.exists(ctl) and
          "quit sent" in open(ctl).read() and
          os.path.exists(os.path.join(out, "two_process_mps_mps_log", "control.log")) and
          "MPS daemon stopped" in p.stdout and "killed" not in p.stdout, (left, p.stdout[-1500:]))

    p, out, seen, left = run_runner(root, d, "run_two_process_bench.sh", "tp_stuck", ["--mps", "--native-only"],
                                    dict(tp, STANDIN_MPS_STUCK="1"))
    check("two-process --mps: a daemon that ignores quit is killed", p.returncode == 0 and not left and
          "still there 10 s after quit" in p.stdout, (left, p.stdout[-1500:]))

    p, out, seen, left = run_runner(root, d, "run_two_process_bench.sh", "tp_fail", ["--mps"],
                                    dict(tp, STANDIN_MPS_FAIL="1"))
    check("two-process --mps: a daemon that does not start: exit 1 before any run", p.returncode == 1 and
          not seen and "nvidia-cuda-mps-control -d failed" in p.stdout and not left, (seen, p.stdout[-1500:]))

    p, out, seen, left = run_runner(root, d, "run_two_process_bench.sh", "tp_user", ["--mps"],
                                    dict(tp, STANDIN_UID="1000"))
    check("two-process --mps: not root: exit 1", p.returncode == 1 and "must run as root" in p.stdout and not seen,
          p.stdout[-800:])

    tb = dict(PYTHON=os.path.join(root, "bin", "python"), REQUESTS="100", LOW_SECONDS="0.5", TORCH_TIMEOUT="20")
    p, out, seen, left = run_runner(root, d, "run_torch_bench.sh", "torch_mps", ["--mps"],
                                    dict(tb, STANDIN_WANT_MPS="1"))
    names = sorted(os.listdir(out))
    runs = json.load(open(os.path.join(out, "torch_two_process_mps.json")))["runs"] \
        if "torch_two_process_mps.json" in names else []
    check("torch --mps: exit 0, every run ok", p.returncode == 0 and runs and all(r["ok"] for r in runs),
          p.stdout[-2500:] + p.stderr[-1000:])
    daemons = {s[1] for s in seen}
    # preflight, alone, low-alone, native (2), gpuprio (2)
    check("torch --mps: the preflight and every process found the same live daemon",
          len(seen) == 7 and seen[0][0] == "preflight" and len(daemons) == 1 and "none" not in daemons, seen)
    check("torch --mps: output names", {"torch_two_process_mps.json", "torch_two_process_mps.txt",
                                        "torch_two_process_mps_runs.jsonl", "torch_two_process_mps_mps_control.txt",
                                        "torch_two_process_mps_mps_log"} <= set(names) and
          "torch_two_process.json" not in names, names)
    ctl = os.path.join(out, "torch_two_process_mps_mps_control.txt")
    check("torch --mps: the table says MPS; the daemon quit", runs and "under MPS" in
          open(os.path.join(out, "torch_two_process_mps.txt")).read() and not left and
          "quit sent" in open(ctl).read(), (left, p.stdout[-1500:]))

    p, out, seen, left = run_runner(root, d, "run_torch_bench.sh", "torch_plain", [], tb)
    names = sorted(os.listdir(out))
    check("torch without --mps: exit 0, no daemon, the usual names", p.returncode == 0 and len(seen) == 7 and
          all(s[1] == "none" for s in seen) and "torch_two_process.json" in names and
          not any("mps" in n for n in names) and "MPS control" not in p.stdout, (names, seen, p.stdout[-1500:]))

    p, out, seen, left = run_runner(root, d, "run_torch_bench.sh", "torch_user", ["--mps"],
                                    dict(tb, STANDIN_UID="1000"))
    check("torch --mps: not root: exit 1 before the preflight", p.returncode == 1 and
          "must run as root" in p.stdout and not seen, p.stdout[-800:])
    torch_threads(root, d, tb)


def torch_threads(root, d, tb):
    """run_torch_bench.sh --threads on the stand-in torch and gpuprio helper (the script's own
    threads code runs): one process per run, each thread's own priority under gpuprio, none natively."""
    # At 200 requests/s and few warm-ups a run takes well under a second.
    tt = dict(tb, RATE="200", LOW_BATCH="64", TORCH_ARGS="--impl builtin --warmup 3 --warm-releases 2 --warmup-batches 1")
    for tag, args, env, name in (("threads", ["--threads"], {}, "torch_threads"),
                                 ("threads_mps", ["--threads", "--mps"], {"STANDIN_WANT_MPS": "1"},
                                  "torch_threads_mps")):
        p, out, seen, left = run_runner(root, d, "run_torch_bench.sh", tag, args, dict(tt, **env))
        names = sorted(os.listdir(out))
        rpt = json.load(open(os.path.join(out, name + ".json"))) if name + ".json" in names else {"runs": []}
        runs = {r["config"]: r for r in rpt["runs"]}
        what = "torch %s:" % " ".join(args)
        check(what + " exit 0, the four configurations ok, in the threads form",
              p.returncode == 0 and sorted(runs) == ["alone", "gpuprio", "low-alone", "native"] and
              all(r["ok"] and r.get("form") == "threads" for r in runs.values()),
              p.stdout[-2500:] + p.stderr[-1000:])
        check(what + " output names", {name + ".json", name + ".txt", name + "_runs.jsonl"} <= set(names) and
              not any(n.startswith("torch_two_process") for n in names) and
              (("mps" in name) == any(n.endswith("_mps_control.txt") for n in names)), names)
        procs = [s for s in seen if s[0] != "priority"]
        daemons = {s[1] for s in procs}
        check(what + " the preflight and one process per run",
              [s[0] for s in procs] == ["preflight"] + ["threads"] * 4 and
              (daemons == {"none"} if "mps" not in name else len(daemons) == 1 and "none" not in daemons), seen)
        jobs = {c: (js_of(r, "high"), js_of(r, "low")) for c, r in runs.items()}
        check(what + " both jobs of a pair in one process, in two threads",
              all(h.get("pid") == l.get("pid") and h.get("tid") != l.get("tid") and h.get("stream") and l.get("stream")
                  for c, (h, l) in jobs.items() if c in ("native", "gpuprio")) and
              jobs.get("alone", ({}, {}))[1] == {} and jobs.get("low-alone", ({}, {}))[0] == {}, jobs)
        gh, gl = jobs.get("gpuprio", ({}, {}))
        check(what + " gpuprio: each thread set its own priority, no process priority",
              gh.get("priority_set") and gh.get("thread_priority") == 1 and gl.get("priority_set") and
              gl.get("thread_priority") == -1 and gh.get("env_priority") == "" == gl.get("env_priority") and
              gh.get("env_mode") == "schedule" and
              sorted(s[1] for s in seen if s[0] == "priority") == ["-1", "1"] and
              len({s[2] for s in seen if s[0] == "priority"}) == 2, (gh, gl, seen))
        check(what + " natively nothing set",
              all(js.get("priority_wanted") is None and not js.get("priority_set") and not js.get("preloaded")
                  for c, pair in jobs.items() if c != "gpuprio" for js in pair if js), jobs)
        rep_rows = json.load(open(os.path.join(out, name + ".json")))["rows"] if name + ".json" in names else {}
        check(what + " the host phase: per request, within the latency, in the table",
              all(0 <= (r.get("host_p50_ms") or -1) <= r["p50_ms"] and r["host_p99_ms"] <= r["max_ms"]
                  for c, r in rep_rows.items() if c in ("alone", "native", "gpuprio")) and
              len(js_of(runs.get("gpuprio", {}), "high").get("host_ms", [])) == 0,
              {c: (r.get("host_p50_ms"), r.get("p50_ms")) for c, r in rep_rows.items()})
        txt = open(os.path.join(out, name + ".txt")).read() if name + ".txt" in names else ""
        check(what + " the table names the form", "host p50/p99" in txt and "one process" in txt and
              ("under MPS" in txt if "mps" in name else "one CUDA context" in txt) and not left, txt)

    # --high-graph: the high thread replays one captured graph per request (warm-ups and measured
    # requests alike), beside the low thread; TORCH_HIGH_STREAM_PRIORITY gives its stream a CUDA
    # priority (the stand-in clamps to -1, as torch clamps to the device's range).
    p, out, seen, left = run_runner(root, d, "run_torch_bench.sh", "threads_graph", ["--threads"],
                                    dict(tt, TORCH_CONFIGS="gpuprio", TORCH_HIGH_STREAM_PRIORITY="-5",
                                         TORCH_ARGS=tt["TORCH_ARGS"] + " --high-graph"))
    runs = {r["config"]: r for r in json.load(open(os.path.join(out, "torch_threads.json")))["runs"]} \
        if p.returncode in (0, 1) else {}
    txt = open(os.path.join(out, "torch_threads.txt")).read() if runs else ""
    replays = [s for s in seen if s[0] == "replay"]
    gh = js_of(runs.get("gpuprio", {}), "high")
    check("torch --threads --high-graph: the run ok, a replay per request, the table says so",
          runs.get("gpuprio", {}).get("ok") and gh.get("graph") is True and
          len(replays) == 3 + gh.get("requests_done", 0) + 2 and "CUDA graph replay" in txt,
          (p.stdout[-2000:], replays[:3], len(replays), gh.get("requests_done")))
    gl = js_of(runs.get("gpuprio", {}), "low")
    check("torch --threads: TORCH_HIGH_STREAM_PRIORITY sets the high stream's priority, not the low one's",
          gh.get("stream") == "own (priority -1)" and gl.get("stream") == "own (priority 0)",
          (gh.get("stream"), gl.get("stream")))

    # A gpuprio run whose threads cannot set their priority fails; the native runs do not.
    p, out, seen, left = run_runner(root, d, "run_torch_bench.sh", "threads_noprio", ["--threads"],
                                    dict(tt, STANDIN_NO_PRIORITY="1"))
    runs = {r["config"]: r for r in json.load(open(os.path.join(out, "torch_threads.json")))["runs"]} \
        if p.returncode in (0, 1) else {}
    check("torch --threads: priorities not set: the gpuprio run fails, exit still 0",
          p.returncode == 0 and runs and not runs["gpuprio"]["ok"] and
          "priority was not set" in runs["gpuprio"].get("error", "") and runs["native"]["ok"],
          p.stdout[-2000:])


def exit_summaries(d):
    script = os.path.join(BENCH, "exit_summaries.py")
    level = "gpuprio: info: priority=1 (high) ops=10 on_caller=100.0% queued=0 calls=10 in_call_us mean=3.00 (driver 2.00) max=9.0"
    disp = "gpuprio: info: dispatcher device=0 cpu_ms=1.50 sleeps=7"
    tail = "torch_two_process high [1]: done\n" + level + "\n" + disp + "\n"
    runs = [
        {"config": "alone", "round": 1, "gpuprio": False, "high": {"stderr_tail": "x"}},
        # threads form: both parts carry the one process's stderr
        {"config": "gpuprio", "round": 1, "gpuprio": True,
         "high": {"stderr_tail": tail}, "low": {"stderr_tail": tail}},
        # processes form: each its own
        {"config": "gpuprio", "round": 2, "gpuprio": True,
         "high": {"stderr_tail": tail}, "low": {"stderr_tail": disp.replace("1.50", "9.00") + "\n"}},
    ]
    path = write(d, "summaries_runs.jsonl", "".join(json.dumps(r) + "\n" for r in runs))
    rc, out, err = run([script, path])
    check("exit summaries: exit 0 when every gpuprio run has one", rc == 0, (rc, err))
    check("exit summaries: native runs left out, one header per gpuprio run",
          out.count("== ") == 2 and "== alone" not in out, out)
    check("exit summaries: one process's summary printed once",
          out.split("== gpuprio round 2")[0].count("calls=10") == 1, out)
    check("exit summaries: each process's own summary", "low: gpuprio: info: dispatcher device=0 cpu_ms=9.00" in out, out)
    runs[1]["high"]["stderr_tail"] = "no summary here\n"
    path = write(d, "summaries_missing_runs.jsonl", "".join(json.dumps(r) + "\n" for r in runs))
    rc, out, err = run([script, path])
    check("exit summaries: exit 1 when a gpuprio run has none", rc == 1 and "no exit summary" in out, (rc, out))


def main():
    return run_steps(two_process, torch_part, mps_runners, exit_summaries)


if __name__ == "__main__":
    sys.exit(main())
