#!/usr/bin/env python3
"""Checks, without a GPU or torch, what can be checked of the PyTorch pairs of
tools/bench/torch_two_process.py (the decoder server, the ResNet-50 training batch job) and of the
MPS cost benchmark (tools/bench/run_mps_cost_bench.sh, mps_cost_report.py):
  - token_stats (time to first token, time per output token), low_batch / low_model, and the
    jobs' argument parsing (the defaults of today's command lines unchanged, the new choices);
  - the idle batch job (idle_low) with a stand-in for torch;
  - tools/bench/torch_kernel_geometry.py's residency, one-wave SMs, shares and reserve prediction;
  - tools/bench/trace_overlap.py on synthetic traces of a server and a batch job: requests, batch
    work carried in and admitted, the time beside the server's kernels;
  - record, brief and report on synthetic results of a decoder / training pair: TTFT and TPOT
    p50/p99 pooled over the rounds and against alone, the samples/s wording, the per-request lists
    left out of the report's runs; and a ResNet pair's table without any of it;
  - run_torch_bench.sh end to end with a stand-in python (the jobs answered, record and report for
    real) for PAIR=decoder DECODE_BATCH=8, PAIR=train --threads, PAIR=decoder-idle, HIGH_CPUS / LOW_CPUS and an unknown
    PAIR: the flags each job got, the low batch, the output names, the CPUs each process ran on;
  - mps_cost_report.py on synthetic runs (ratios against the same round's native run, the spread
    between rounds), and run_mps_cost_bench.sh end to end with stand-ins for .gpu/interference,
    .gpu/launch_rate, nvidia-cuda-mps-control and torch: every MPS run a client of a live daemon of
    the script's own, no other run; gpuprio only in the gpuprio runs; the daemon gone at the end.
Prints one line per check and 'N passed, N failed'; exit 1 on a failure.

usage: python3 tests/tools/torch_pairs_selftest.py
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

# bench_selftest puts tools/bench on sys.path.
from bench_selftest import (BENCH, check, finish, runner_env, scratch_tree, write,  # noqa: E402
                            write_program)
import torch_kernel_geometry as tkg  # noqa: E402  (no torch at import time)
import torch_two_process as ttp  # noqa: E402  (no torch at import time)
from bench_stats import js_of, percentile  # noqa: E402


def run(args, env=None, timeout=120):
    """ARGS as given (bench_selftest.run prefixes python): (exit status, stdout, stderr)."""
    p = subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


# --- the pure parts of torch_two_process.py ---

def parser():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    ttp.job_commands(sub)
    return p


def pure_parts(d):
    ttft, tpot = ttp.token_stats(1_000_000, [6_000_000, 7_000_000, 8_500_000, 10_000_000])
    check("token_stats: TTFT from the due time to the first token", abs(ttft - 5.0) < 1e-9, ttft)
    check("token_stats: TPOT the mean gap after the first token", abs(tpot - 4.0 / 3) < 1e-9, tpot)
    ttft, tpot = ttp.token_stats(0, [2_500_000])
    check("token_stats: one token has a TTFT and no TPOT", ttft == 2.5 and tpot is None, (ttft, tpot))

    p = parser()
    a = p.parse_args(["high", "--result", "r.json"])
    check("high: today's defaults (ResNet-18 server, ResNet-50 inference, rate 20, 340 requests)",
          a.server == "resnet18" and a.batch_job == "resnet50-infer" and a.rate == 20.0 and a.requests == 340
          and not a.high_graph, vars(a))
    a = p.parse_args(["low", "--result", "r.json"])
    check("low: batch 1024 by default for inference", ttp.low_batch(a) == 1024 and ttp.low_model(a) == "resnet50",
          vars(a))
    a = p.parse_args(["low", "--result", "r.json", "--batch", "512"])
    check("low: --batch as given", ttp.low_batch(a) == 512, vars(a))
    a = p.parse_args(["low", "--result", "r.json", "--batch-job", "resnet50-train"])
    check("low --batch-job resnet50-train: batch 256 by default, the training model",
          ttp.low_batch(a) == 256 and ttp.low_model(a) == "resnet50-train", vars(a))
    a = p.parse_args(["threads", "--high-result", "h", "--low-result", "l", "--server", "decoder", "--decode-batch", "8",
                      "--batch-job", "resnet50-train", "--gen-tokens", "64"])
    check("threads: the pair's options and the decoder's shape parse",
          a.server == "decoder" and a.decode_batch == 8 and a.gen_tokens == 64 and a.prompt_tokens == 32 and
          a.layers == 8 and a.d_model == 1024 and a.heads == 8 and a.vocab == 32000 and ttp.low_batch(a) == 256, vars(a))
    a = p.parse_args(["low", "--result", "r.json", "--batch-job", "idle"])
    check("low --batch-job idle parses; neither idle flag by default",
          a.batch_job == "idle" and not a.idle_after_warmup and not a.idle_empty_cache, vars(a))
    a = p.parse_args(["high", "--result", "r.json", "--batch-job", "resnet50-train", "--idle-after-warmup",
                      "--idle-empty-cache"])
    check("the idle flags parse for either job (TORCH_ARGS reaches both)",
          a.idle_after_warmup and a.idle_empty_cache, vars(a))
    try:
        with open(os.devnull, "w") as null:
            old, sys.stderr = sys.stderr, null
            try:
                p.parse_args(["high", "--result", "r", "--server", "gpt"])
            finally:
                sys.stderr = old
        bad = False
    except SystemExit:
        bad = True
    check("high: an unknown --server is refused", bad)


def idle_job(d):
    """idle_low with a stand-in for torch: one warm-up op, the peer told it is ready (one "batch",
    no images), the stop file obeyed, a result that says it ran and launched nothing."""
    launched = []

    class Tensor:
        def add_(self, v):
            launched.append("add_")
            return self

    class Cuda:
        @staticmethod
        def empty_cache():
            launched.append("empty_cache")

        @staticmethod
        def memory_reserved(dev):
            return 3 * 2**30

    class Torch:
        cuda = Cuda

        @staticmethod
        def ones(n, device=None):
            launched.append("ones")
            return Tensor()

    class Dev:
        type = "cuda"

    p = parser()
    peer_path = os.path.join(d, "idle.peer")
    stop = write(d, "idle.stop", "")
    a = p.parse_args(["low", "--result", "r.json", "--batch-job", "idle", "--peer", peer_path, "--stop-file", stop,
                      "--seconds", "30", "--idle-empty-cache"])
    syncs = []
    res = ttp.idle_low(a, Torch, Dev(), lambda: syncs.append(1), {"role": "low", "ok": False}, None)
    peer = ttp.Peer.open(peer_path, 5, "high")
    images, _, batches = peer.read()
    check("idle job: one warm-up op and a sync, the cache returned, nothing else launched",
          launched == ["ones", "add_", "empty_cache"] and syncs == [1], (launched, syncs))
    check("idle job: the peer says ready (one batch, no images)", images == 0 and batches == 1, (images, batches))
    check("idle job: stopped by the stop file at once, ok, no images, its reserved memory recorded",
          res["ok"] and res["stopped_by"] == "stop-file" and res["images"] == 0 and res["own_images_per_s"] == 0.0
          and res["own_window_s"] < 5 and res["memory_reserved_gb"] == 3.0, res)

    # The paths real runs take: the high job's stop word, through the peer file (two processes) and
    # through a LocalPeer (threads form), while the idle job waits.
    import threading
    for form in ("peer file", "LocalPeer"):
        path = os.path.join(d, "idle2.peer")
        a = p.parse_args(["low", "--result", "r.json", "--batch-job", "idle", "--seconds", "60"] +
                         (["--peer", path] if form == "peer file" else []))
        local = ttp.LocalPeer() if form == "LocalPeer" else None
        out = {}
        t = threading.Thread(target=lambda: out.update(ttp.idle_low(a, Torch, Dev(), lambda: None, {}, local)))
        t.start()
        peer = local.wait_running(10) if local else ttp.Peer.open(path, 10, "high")
        peer.stop()
        t.join(20)
        check("idle job (%s): ready, then stopped by the high job's stop word" % form,
              not t.is_alive() and out.get("stopped_by") == "peer" and out.get("own_window_s", 99) < 20, out)


# --- record / brief / report of the new pairs ---

def kernel_geometry(d):
    """torch_kernel_geometry.py's arithmetic: residency from the sm_90 limits, one wave's SMs, the
    shares and the prediction on a reserve, on kernels whose shapes the H100 traces showed."""
    check("geometry: 1024-thread blocks, two per SM (the thread limit)", tkg.blocks_per_sm(1024, 32, 0) == 2)
    check("geometry: 128 threads, 32 registers: 16 per SM (the warp limit)", tkg.blocks_per_sm(128, 32, 0) == 16)
    check("geometry: 231424 bytes of shared memory: one per SM", tkg.blocks_per_sm(384, 168, 231424) == 1)
    check("geometry: 118 registers and 81920 bytes: two per SM (shared memory before registers' four)",
          tkg.blocks_per_sm(128, 118, 81920) == 2)
    check("geometry: 96 registers in 256-register units: five per SM", tkg.blocks_per_sm(128, 96, 4096) == 5)
    check("geometry: a block too big for any limit still counts once", tkg.blocks_per_sm(1024, 255, 0) == 1)
    events = [{"cat": "kernel", "name": "wide", "dur": 30,
               "args": {"grid": [392, 1, 1], "block": [128, 1, 1], "registers per thread": 96,
                        "shared memory": 4096}},
              {"cat": "kernel", "name": "narrow", "dur": 70,
               "args": {"grid": [8, 1, 1], "block": [384, 1, 1], "registers per thread": 168,
                        "shared memory": 231424}},
              {"cat": "cuda_runtime", "name": "cudaLaunchKernel", "dur": 5, "args": {}}]
    rows = tkg.kernel_rows(events)
    check("geometry: only kernel events are rows", [r["name"] for r in rows] == ["wide", "narrow"], rows)
    s = tkg.summarize(rows, 132, units=1)
    check("geometry: the 392-block kernel needs 79 SMs for one wave, the 8-block one 8",
          [r["need"] for r in rows] == [79, 8] and s["widest_need"] == 79, rows)
    check("geometry: 70% of the GPU time needs at most 20 SMs", abs(s["share_needing_at_most"][20] - 0.7) < 1e-9,
          s["share_needing_at_most"])
    # On 20 SMs the wide kernel takes 4 waves (100 blocks a wave) instead of 1: 0.3 x 4 + 0.7.
    check("geometry: predicted GPU time on a 20-SM reserve from the waves",
          abs(s["predicted_on_reserve"][20] - 1.9) < 1e-9, s["predicted_on_reserve"])
    lines = tkg.report_lines("pair", s)
    check("geometry: the report names the widest need and each reserve",
          "widest kernel needs 79" in lines[0] and any("reserve of  20 SMs: GPU time 1.90x" in x for x in lines),
          lines)


def decoder_high(tag, pid, preloaded=False, prio="", low=None, scale=1.0, n=40):
    tpot = [round(scale * (0.30 + 0.001 * (i % 17)), 5) for i in range(n)]
    ttft = [round(scale * (2.0 + 0.01 * (i % 13)), 4) for i in range(n)]
    lat = [round(t + 31 * p, 4) for t, p in zip(ttft, tpot)]
    js = {"role": "high", "ok": True, "error": "", "preloaded": preloaded, "env_priority": prio, "pid": pid,
          "model": "decoder", "impl": "builtin decoder (this script's definition)", "torch": "stand-in",
          "dtype": "fp16", "image_size": 224, "device": "Synthetic H100", "graph": False, "decode_batch": 8,
          "prompt_tokens": 32, "gen_tokens": 32, "layers": 8, "d_model": 1024, "heads": 8, "vocab": 32000,
          "requests": n, "requests_done": n, "rate_per_s": 20.0, "latency_ms": lat, "host_ms": [1.0] * n,
          "ttft_ms": ttft, "tpot_ms": tpot, "p50_ms": percentile(lat, 0.5), "p99_ms": percentile(lat, 0.99),
          "ttft_p50_ms": percentile(ttft, 0.5), "ttft_p99_ms": percentile(ttft, 0.99),
          "tpot_p50_ms": percentile(tpot, 0.5), "tpot_p99_ms": percentile(tpot, 0.99), "cut_short": False}
    if low is not None:
        js.update(low_images_per_s=low, low_batches_in_window=12)
    return tag, js


def train_low(tag, pid, preloaded=False, prio="", stopped_by="peer", rate=None):
    js = {"role": "low", "ok": True, "error": "", "preloaded": preloaded, "env_priority": prio, "pid": pid,
          "model": "resnet50-train", "impl": "builtin", "torch": "stand-in", "dtype": "bf16 autocast",
          "image_size": 224, "device": "Synthetic H100", "batch": 256, "batch_job": "resnet50-train",
          "stopped_by": stopped_by, "max_memory_allocated_gb": 21.5}
    if rate is not None:
        js["own_images_per_s"] = rate
    return tag, js


def records_and_report(d):
    script = os.path.join(BENCH, "torch_two_process.py")
    lines = []

    def record(config, rnd, gpuprio, high=None, low=None, form=None):
        args = [sys.executable, script, "record", "--config", config, "--round", str(rnd), "--gpuprio", str(gpuprio)]
        if form:
            args += ["--form", form]
        for role, part in (("high", high), ("low", low)):
            if part is not None:
                tag, js = part
                args += ["--%s-result" % role, write(d, tag + ".json", json.dumps(js) + "\n"),
                         "--%s-err" % role, write(d, tag + ".err", ""), "--%s-rc" % role, "0"]
        rc, out, err = run(args)
        assert rc == 0, err
        lines.append(out)
        return json.loads(out)

    highs = {}
    for rnd in (1, 2):
        h = decoder_high("a%d" % rnd, 100 + rnd)
        highs.setdefault("alone", []).append(h[1])
        record("alone", rnd, 0, high=h)
        record("low-alone", rnd, 0, low=train_low("la%d" % rnd, 200 + rnd, stopped_by="seconds", rate=2400.0))
        h = decoder_high("n%d" % rnd, 300 + rnd, low=1500.0, scale=2.0)
        highs.setdefault("native", []).append(h[1])
        record("native", rnd, 0, high=h, low=train_low("nl%d" % rnd, 400 + rnd))
        h = decoder_high("g%d" % rnd, 500 + rnd, preloaded=True, prio="high", low=2000.0, scale=1.1)
        highs.setdefault("gpuprio", []).append(h[1])
        rec = record("gpuprio", rnd, 1, high=h, low=train_low("gl%d" % rnd, 600 + rnd, preloaded=True, prio="low"))
    check("record: a decoder / training gpuprio run is ok", rec["ok"], rec.get("error"))

    p = subprocess.run([sys.executable, script, "brief"], input=lines[-1], capture_output=True, text=True)
    check("brief: the low rate in samples/s, TTFT and TPOT of the decoder",
          "samples/s" in p.stdout and "ttft p50=" in p.stdout and "tpot p50=" in p.stdout, p.stdout + p.stderr)

    runs = write(d, "runs.jsonl", "".join(lines))
    oj, ot = os.path.join(d, "rep.json"), os.path.join(d, "rep.txt")
    rc, out, err = run([sys.executable, script, "report", runs, oj, ot])
    check("report: exit 0", rc == 0, err)
    rep = json.load(open(oj))
    txt = open(ot).read()
    rows = rep["rows"]
    pooled = [v for h in highs["native"] for v in h["tpot_ms"]]
    check("report: TPOT p50/p99 pooled over the rounds",
          rows["native"]["tpot_p50_ms"] == percentile(pooled, 0.5) and
          rows["native"]["tpot_p99_ms"] == percentile(pooled, 0.99), rows["native"])
    pooled_t = [v for h in highs["gpuprio"] for v in h["ttft_ms"]]
    check("report: TTFT p99 pooled over the rounds", rows["gpuprio"]["ttft_p99_ms"] == percentile(pooled_t, 0.99),
          rows["gpuprio"])
    r = rows["native"]["tpot_p99_vs_alone"]
    check("report: TPOT p99 against alone (the native pair's tokens twice as slow)", r is not None and
          abs(r - 2.0) < 0.02, r)
    check("report: request latency p50/p99 as for the ResNet server",
          rows["alone"]["p99_ms"] == percentile([v for h in highs["alone"] for v in h["latency_ms"]], 0.99),
          rows["alone"])
    check("report: the training job's rate against low-alone", abs(rows["gpuprio"]["low_vs_low_alone"] - 2000 / 2400)
          < 1e-9, rows["gpuprio"]["low_vs_low_alone"])
    check("report: meta says the pair", rep["meta"]["decode_batch"] == 8 and rep["meta"]["gen_tokens"] == 32 and
          rep["meta"]["low_batch_job"] == "resnet50-train", rep["meta"])
    check("report: the per-request lists are not in the runs",
          all("tpot_ms" not in js_of(r, "high") and "ttft_ms" not in js_of(r, "high") for r in rep["runs"]),
          rep["runs"][0])
    check("text: the decoder's and the training job's lines, a tokens line per configuration",
          "high: decoder (8 layers, d_model 1024, 8 heads, vocab 32000) batch 8" in txt and
          "low: ResNet-50 training, batch 256" in txt and txt.count("tokens: TTFT p50/p99") == 3, txt)

    # A ResNet pair: none of it.
    lines.clear()
    res18 = {"role": "high", "ok": True, "error": "", "preloaded": False, "env_priority": "", "pid": 1,
             "model": "resnet18", "impl": "builtin", "torch": "t", "dtype": "fp16", "image_size": 224,
             "device": "Synthetic H100", "graph": False, "requests": 10, "requests_done": 10, "rate_per_s": 20.0,
             "latency_ms": [2.0] * 10, "host_ms": [1.0] * 10, "p50_ms": 2.0, "p99_ms": 2.0}
    res50 = {"role": "low", "ok": True, "error": "", "preloaded": False, "env_priority": "", "pid": 2,
             "model": "resnet50", "impl": "builtin", "torch": "t", "dtype": "fp16", "image_size": 224, "batch": 1024,
             "stopped_by": "seconds", "own_images_per_s": 9000.0}
    record("alone", 1, 0, high=("ra", res18))
    record("low-alone", 1, 0, low=("rl", res50))
    p = subprocess.run([sys.executable, script, "brief"], input=lines[-1], capture_output=True, text=True)
    check("brief: a ResNet-50 inference rate in img/s", "low=9000.0 img/s" in p.stdout, p.stdout)
    rc, out, err = run([sys.executable, script, "report", write(d, "runs2.jsonl", "".join(lines)), oj, ot])
    txt = open(ot).read()
    check("text: a ResNet pair's table as before (no tokens, inference)",
          rc == 0 and "high: resnet18 batch 1 fp16" in txt and "tokens:" not in txt and
          "low: resnet50 batch 1024 fp16 inference" in txt, txt)


# --- run_torch_bench.sh end to end, stand-in python ---

TORCH_PYTHON = r"""#!/usr/bin/env python3
import json, os, sys, time
a = sys.argv[1:]
if a[:1] == ["-"]:
    sys.stdin.read()
    print("python stand-in\ntorch stand-in CUDA 12.x available True")
    sys.exit(0)
known = len(a) >= 2 and a[0].endswith("torch_two_process.py") and a[1] in ("high", "low", "threads")
if not known:
    os.execv(sys.executable, [sys.executable] + a)
with open(os.environ["STANDIN_SEEN"], "a") as fh:
    fh.write(json.dumps(a) + "\n")
with open(os.environ["STANDIN_SEEN"] + ".cpus", "a") as fh:
    fh.write(json.dumps([a[1], sorted(os.sched_getaffinity(0))]) + "\n")
def opt(name, default):
    return type(default)(a[a.index(name) + 1]) if name in a else default
base = {"ok": True, "error": "", "preloaded": "gpuprio" in os.environ.get("LD_PRELOAD", ""),
        "env_priority": os.environ.get("GPUPRIO_PRIORITY", ""), "impl": "builtin", "torch": "stand-in",
        "device": "Stand-in H100", "dtype": "fp16", "image_size": 224, "pid": os.getpid()}
threads = a[1] == "threads"
if threads:
    base.update(form="threads", priority_set=base["preloaded"], env_priority="")
decoder = opt("--server", "resnet18") == "decoder"
batch_job = opt("--batch-job", "resnet50-infer")
train = batch_job == "resnet50-train"
def high(peer):
    res = dict(base, role="high", model="decoder" if decoder else "resnet18", requests=20, requests_done=20,
               rate_per_s=20, latency_ms=[3.0] * 20, p50_ms=3.0, p99_ms=3.0)
    if decoder:
        res.update(decode_batch=opt("--decode-batch", 1), prompt_tokens=32, gen_tokens=32, layers=8, d_model=1024,
                   heads=8, vocab=32000, ttft_ms=[1.0] * 20, tpot_ms=[0.5] * 20, ttft_p50_ms=1.0, ttft_p99_ms=1.0,
                   tpot_p50_ms=0.5, tpot_p99_ms=0.5)
    if peer:
        res.update(low_images_per_s=900.0, low_batches_in_window=3)
    return res
def low(stopped_by):
    return dict(base, role="low", model="resnet50-train" if train else "resnet50", batch=opt("--batch", 0),
                batch_job=batch_job, own_images_per_s=0.0 if batch_job == "idle" else 1000.0,
                stopped_by=stopped_by)
def put(path, res):
    with open(path, "w") as fh:
        json.dump(res, fh)
if threads:
    jobs = opt("--jobs", "high,low").split(",")
    if "high" in jobs:
        put(opt("--high-result", ""), high("low" in jobs))
    if "low" in jobs:
        put(opt("--low-result", ""), low("peer" if "high" in jobs else "seconds"))
elif a[1] == "high":
    put(opt("--result", ""), high("--peer" in a))
else:
    stop, deadline = opt("--stop-file", ""), time.time() + opt("--seconds", 5.0)
    while stop and not os.path.exists(stop) and time.time() < deadline:
        time.sleep(0.05)
    put(opt("--result", ""), low("stop-file" if stop and os.path.exists(stop) else "seconds"))
"""


def scratch_repo(d, programs=None):
    """tools/bench as it is here, tests/gpu/gpu_run_args.sh, .gpu/ with an empty library and the
    given stand-in programs (bench_selftest.scratch_tree), and bin/ (for PATH) with the stand-in
    python."""
    root = scratch_tree(d, programs or {})
    os.makedirs(os.path.join(root, "bin"))
    write_program(os.path.join(root, "bin", "python-standin"), TORCH_PYTHON)
    return root


def clean_env(root, **kw):
    """runner_env without the runners' own settings, whatever the caller's environment has."""
    return runner_env(root, drop=("PAIR", "DECODE_BATCH", "LOW_BATCH", "TORCH_ARGS", "TORCH_CONFIGS",
                                  "SERVERS", "MPS_COST_CONFIGS", "BENCH_GPUPRIO_ENV"), **kw)


def trace_overlap(d):
    """tools/bench/trace_overlap.py on two synthetic traces: the server found by priority in
    either order, each request's batch work split into carried in and admitted, the time beside
    the server's own kernels, one trace alone, and two traces it cannot tell apart."""
    import gzip
    ms = 1_000_000

    def trace(path, slices, base):
        events = [{"ph": "X", "pid": 1000000, "tid": 7, "name": "k", "cat": "kernel",
                   "ts": (s - base) / 1000, "dur": (e - s) / 1000, "args": {"priority": p}}
                  for s, e, p in slices]
        events.append({"ph": "X", "pid": 42, "tid": 42, "name": "cudaLaunchKernel", "cat": "client",
                       "ts": 0, "dur": 1, "args": {"priority": 99}})  # a CPU slice: never GPU work
        doc = {"traceEvents": events, "baseTimeNanoseconds": base,
               "otherData": {"gpuprio": {"version": 2}}}
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "wt") as fh:
            json.dump(doc, fh)
        return path

    # Eight requests of ten 0.5 ms kernels, one every 50 ms; requests 0 and 7 are cut (warm-up
    # skip 0 here, the last one always), so rows are requests 0-6.
    server = [(r * 50 * ms + k * ms, r * 50 * ms + k * ms + ms // 2, 1) for r in range(8) for k in range(10)]
    batch = [(4 * 50 * ms - 2 * ms, 4 * 50 * ms + 3 * ms, -1),              # carried into request 4
             (6 * 50 * ms + 2 * ms + ms // 2, 6 * 50 * ms + 3 * ms + ms // 4, -1),  # admitted into 6
             (20 * ms, 30 * ms, -1)]                                        # between requests
    s_path = trace(os.path.join(d, "server.json.gz"), server, 5 * ms)  # a different base each
    b_path = trace(os.path.join(d, "batch.json"), batch, 7 * ms)
    out_json = os.path.join(d, "overlap.json")
    rc, so, se = run([sys.executable, os.path.join(BENCH, "trace_overlap.py"), b_path, s_path, "--skip", "0",
                      "--json", out_json])
    res = json.load(open(out_json)) if rc == 0 else {"summary": {}, "requests": []}
    sm, rows = res["summary"], res["requests"]
    check("trace_overlap: the server is the higher-priority trace, whatever the order",
          rc == 0 and sm.get("server_trace") == s_path and sm.get("batch_priority") == -1, so + se)
    check("trace_overlap: 7 requests of 5 ms busy over 9.5 ms",
          len(rows) == 7 and all(r["busy_ns"] == 5 * ms and r["span_ns"] == 9.5 * ms for r in rows), rows)
    check("trace_overlap: the kernel running at request 4's start is carried in: 3 ms of it, 1.5 ms "
          "beside the server's kernels",
          rows[4]["carried_ns"] == 3 * ms and rows[4]["carried_ops"] == 1 and rows[4]["admitted_ns"] == 0 and
          rows[4]["contended_ns"] == 1.5 * ms, rows[4] if len(rows) > 4 else rows)
    check("trace_overlap: the kernel started inside request 6 is admitted: 0.75 ms, 0.25 ms beside "
          "the server's kernels",
          rows[6]["admitted_ns"] == 0.75 * ms and rows[6]["admitted_ops"] == 1 and rows[6]["carried_ns"] == 0 and
          rows[6]["contended_ns"] == 0.25 * ms, rows[6] if len(rows) > 6 else rows)
    check("trace_overlap: work between requests counts for none",
          all(r["carried_ns"] == 0 and r["admitted_ns"] == 0 for i, r in enumerate(rows) if i not in (4, 6)) and
          sm.get("with_carried_in") == 1 and sm.get("with_admitted") == 1, sm)
    rc, so, se = run([sys.executable, os.path.join(BENCH, "trace_overlap.py"), s_path, "--skip", "0"])
    check("trace_overlap: one trace gives the server's requests alone",
          rc == 0 and "requests 7: with batch work carried in 0, with batch work admitted during them 0" in so and
          "GPU busy (sum of its kernels) per request ms p50/p90: 5.000 / 5.000" in so, so + se)
    check("trace_overlap: steps inside requests: each 0.5 ms kernel, 0.5 ms of idle GPU before it",
          "server steps inside requests (cut at 20 us of idle GPU): 72; GPU span us p50/p90 500.0 / 500.0, "
          "its kernels' time 500.0 / 500.0; idle GPU before each (the host's share) 500.0 / 500.0" in so, so)
    same = trace(os.path.join(d, "same.json"), [(ms, 2 * ms, 1)], 0)
    rc, so, se = run([sys.executable, os.path.join(BENCH, "trace_overlap.py"), s_path, same])
    check("trace_overlap: two traces of one top priority: exit 2, said why",
          rc == 2 and "cannot tell the server from the batch job" in se, so + se)


def torch_runner(d):
    root = scratch_repo(d)
    runner = os.path.join(root, "tools", "bench", "run_torch_bench.sh")
    py = os.path.join(root, "bin", "python-standin")

    def go(tag, args, **env):
        seen = write(d, "seen_" + tag, "")
        out = os.path.join(d, "out_" + tag)
        e = clean_env(root, PYTHON=py, STANDIN_SEEN=seen, ROUNDS="1", LOW_SECONDS="1", **env)
        p = subprocess.run(["bash", runner, out] + args, capture_output=True, text=True, env=e, timeout=240)
        calls = [json.loads(l) for l in open(seen).read().splitlines()]
        return p, out, calls

    p, out, calls = go("decoder", [], PAIR="decoder", DECODE_BATCH="8")
    names = sorted(os.listdir(out)) if os.path.isdir(out) else []
    check("PAIR=decoder DECODE_BATCH=8: exit 0, output named torch_two_process_decoder_b8.*",
          p.returncode == 0 and "torch_two_process_decoder_b8.json" in names and
          "torch_two_process_decoder_b8.txt" in names, p.stdout[-2000:] + p.stderr[-1000:] + str(names))
    runs = json.load(open(os.path.join(out, "torch_two_process_decoder_b8.json")))["runs"] if p.returncode == 0 else []
    check("PAIR=decoder: the four configurations ran and are ok",
          sorted(r["config"] for r in runs) == ["alone", "gpuprio", "low-alone", "native"] and
          all(r["ok"] for r in runs), runs)
    check("PAIR=decoder: every job got --server decoder --decode-batch 8, the low one batch 1024",
          len(calls) == 6 and all("--server" in c and c[c.index("--server") + 1] == "decoder" and
                                  c[c.index("--decode-batch") + 1] == "8" for c in calls) and
          all(c[c.index("--batch") + 1] == "1024" for c in calls if c[1] == "low"), calls)
    txt = open(os.path.join(out, "torch_two_process_decoder_b8.txt")).read() if p.returncode == 0 else ""
    check("PAIR=decoder: the table has the tokens lines", "tokens: TTFT" in txt and "decoder (" in txt, txt)

    p, out, calls = go("train_threads", ["--threads"], PAIR="train")
    names = sorted(os.listdir(out)) if os.path.isdir(out) else []
    check("PAIR=train --threads: exit 0, output named torch_threads_train.*",
          p.returncode == 0 and "torch_threads_train.json" in names, p.stdout[-2000:] + p.stderr[-1000:] + str(names))
    check("PAIR=train --threads: every process got --batch-job resnet50-train --batch 256, no --server decoder",
          len(calls) == 4 and all(c[1] == "threads" and c[c.index("--batch-job") + 1] == "resnet50-train" and
                                  c[c.index("--batch") + 1] == "256" and "--server" not in c for c in calls), calls)

    p, out, calls = go("default", [], TORCH_CONFIGS="alone")
    names = sorted(os.listdir(out)) if os.path.isdir(out) else []
    check("no PAIR: today's names and flags (no pair flags, batch 1024)",
          p.returncode == 0 and "torch_two_process.json" in names and len(calls) == 1 and
          "--server" not in calls[0] and "--batch-job" not in calls[0], p.stdout[-1500:] + str(calls))

    # HIGH_CPUS / LOW_CPUS: each process of a pair on its own CPUs (taskset), alone runs too.
    cpus = sorted(os.sched_getaffinity(0))
    high_cpu, low_cpu = str(cpus[0]), str(cpus[-1])
    p, out, calls = go("cpus", [], TORCH_CONFIGS="alone native", HIGH_CPUS=high_cpu, LOW_CPUS=low_cpu)
    seen_cpus = [json.loads(l) for l in open(os.path.join(d, "seen_cpus.cpus")).read().splitlines()] \
        if os.path.exists(os.path.join(d, "seen_cpus.cpus")) else []
    check("HIGH_CPUS / LOW_CPUS: the high processes ran on CPU %s only, the low one on CPU %s only" %
          (high_cpu, low_cpu),
          p.returncode == 0 and sorted(r for r, _ in seen_cpus) == ["high", "high", "low"] and
          all(c == [int(high_cpu if r == "high" else low_cpu)] for r, c in seen_cpus),
          p.stdout[-1500:] + p.stderr[-500:] + str(seen_cpus))
    txt = open(os.path.join(out, "torch_two_process.txt")).read() if p.returncode == 0 else ""
    check("HIGH_CPUS / LOW_CPUS: the table's last line says where each process ran",
          "high process on CPUs %s, low on %s (taskset)" % (high_cpu, low_cpu) in txt, txt[-600:])

    p, out, calls = go("idle", [], PAIR="decoder-idle")
    names = sorted(os.listdir(out)) if os.path.isdir(out) else []
    check("PAIR=decoder-idle: exit 0, output named torch_two_process_decoder-idle.*, alone, native and gpuprio "
          "by default (no low-alone), every job got --server decoder --batch-job idle",
          p.returncode == 0 and "torch_two_process_decoder-idle.json" in names and len(calls) == 5 and
          all(c[c.index("--server") + 1] == "decoder" and c[c.index("--batch-job") + 1] == "idle" for c in calls),
          p.stdout[-1500:] + p.stderr[-500:] + str(names) + str(calls))
    txt = open(os.path.join(out, "torch_two_process_decoder-idle.txt")).read() if p.returncode == 0 else ""
    check("PAIR=decoder-idle: the table says the low job was idle", "low: idle: its CUDA context" in txt, txt[:1500])

    p, out, calls = go("bogus", [], PAIR="llama")
    check("an unknown PAIR: exit 2, nothing run", p.returncode == 2 and not calls and "unknown PAIR" in p.stderr,
          p.stdout + p.stderr)


# --- the MPS cost benchmark ---

def mps_record(server, config, rnd, p50, p99, ok=True, **kw):
    fig = {"chain": ("high_p50_ms", "high_p99_ms"), "chain-short": ("high_p50_ms", "high_p99_ms"),
           "launch": ("call_us_p50", "call_us_p99"), "torch": ("p50_ms", "p99_ms")}[server]
    r = {"server": server, "config": config, "round": rnd, "mps": config.endswith("mps"),
         "gpuprio": config.startswith("gpuprio"), "ok": ok, "rc": 0 if ok else 1, fig[0]: p50, fig[1]: p99,
         "device": "Synthetic H100"}
    if not ok:
        r["error"] = "boom"
    r.update(kw)
    return r


def mps_report(d):
    rep_py = os.path.join(BENCH, "mps_cost_report.py")
    runs = [{"server": "chain", "config": "calibrate", "round": 0, "ok": True, "rc": 0, "cycles_per_us": 1980.0}]
    for rnd, slow in ((1, 1.0), (2, 1.5), (3, 1.2)):  # a slower host in round 2 weighs on both sides
        runs.append(mps_record("chain-short", "native", rnd, 1.0 * slow, 2.0 * slow))
        runs.append(mps_record("chain-short", "mps", rnd, 1.1 * slow, 2.4 * slow))
        runs.append(mps_record("launch", "native", rnd, 2.0, 3.0, launches_per_s=400000.0))
        runs.append(mps_record("launch", "mps", rnd, 2.2, 3.3, launches_per_s=360000.0))
        runs.append(mps_record("torch", "native", rnd, 2.0, 3.0, latency_ms=[2.0, 3.0] * 10))
        runs.append(mps_record("torch", "gpuprio-mps", rnd, 2.5, 4.0, ok=rnd != 2, latency_ms=[2.5, 4.0] * 10))
    path = write(d, "mps_runs.jsonl", "".join(json.dumps(r) + "\n" for r in runs))
    oj, ot = os.path.join(d, "mps.json"), os.path.join(d, "mps.txt")
    rc, out, err = run([sys.executable, rep_py, "report", path, oj, ot])
    check("mps_cost_report: exit 0 with a failed gpuprio run", rc == 0, err)
    rep = json.load(open(oj))
    rows = {(r["server"], r["config"]): r for r in rep["rows"]}
    r = rows[("chain-short", "mps")]
    check("mps_cost_report: paired p99 against the same round's native (1.2 in every round)",
          r["paired_p99_vs_native"]["n"] == 3 and abs(r["paired_p99_vs_native"]["min"] - 1.2) < 1e-9 and
          abs(r["paired_p99_vs_native"]["max"] - 1.2) < 1e-9, r)
    check("mps_cost_report: p99 median over rounds, and against native's median",
          abs(r["p99"]["median"] - 2.4 * 1.2) < 1e-9 and abs(r["p99_vs_native"] - 1.2) < 1e-9, r)
    n = rows[("chain-short", "native")]
    check("mps_cost_report: the spread between rounds ((max - min) / median of p99)",
          abs(n["p99_round_spread_pct"] - 100.0 * (3.0 - 2.0) / 2.4) < 1e-9, n)
    launch = rows[("launch", "mps")]
    check("mps_cost_report: the launch rate against native", abs(launch["rate_vs_native"] - 0.9) < 1e-9, launch)
    t = rows[("torch", "gpuprio-mps")]
    check("mps_cost_report: a failed run counted, the others pooled",
          t["ok"] == 2 and t["runs"] == 3 and t["pooled_requests"] == 40 and t["pooled_p99_ms"] == 4.0 and
          t["errors"] == ["boom"], t)
    check("mps_cost_report: the per-request lists are not in the runs",
          all("latency_ms" not in r for r in rep["runs"]), rep["runs"][5])
    txt = open(ot).read()
    check("mps_cost_report: the table", "chain-short" in txt and "gpuprio-mps" in txt and "launches/s" in txt and
          "failed: boom" in txt and "1980" in txt, txt)
    p = subprocess.run([sys.executable, rep_py, "brief"], input=json.dumps(runs[2]), capture_output=True, text=True)
    check("mps_cost_report brief", "p50=1.1000 p99=2.4000 ms" in p.stdout, p.stdout + p.stderr)
    # A native run failing: exit 1.
    runs.append(mps_record("launch", "native", 4, None, None, ok=False))
    rc, out, err = run([sys.executable, rep_py, "report", write(d, "mps_runs2.jsonl", "".join(
        json.dumps(r) + "\n" for r in runs)), oj, ot])
    check("mps_cost_report: exit 1 when a run without gpuprio failed", rc == 1 and "native run failed" in err, err)


# Every stand-in CUDA program prints one JSON line with what it found: seen_mps (the pid of the
# stand-in daemon of $CUDA_MPS_PIPE_DIRECTORY when it is alive, else "none") and preloaded.
MPS_PROBE = r"""
def seen_mps():
    pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "")
    try:
        pid = int(open(os.path.join(pipe, "daemon.pid")).read())
        os.kill(pid, 0)
        return str(pid)
    except (OSError, ValueError):
        return "none"
"""

INTERFERENCE = r"""#!/usr/bin/env python3
import json, os, sys
""" + MPS_PROBE + r"""
a = sys.argv[1:]
chain = int(a[a.index("--chain") + 1]) if "--chain" in a else 20
calibrated = "--cycles-per-us" in a
print(json.dumps({"bench": "interference", "ok": True, "role": "high", "high_p50_ms": 1.0 + chain / 100.0,
                  "high_p99_ms": 1.5 + chain / 100.0, "cycles_per_us": 1980.0, "chain": chain,
                  "calibrated": calibrated, "device": "Stand-in H100", "seen_mps": seen_mps(),
                  "preloaded": "gpuprio" in os.environ.get("LD_PRELOAD", ""), "error": ""}))
"""

LAUNCH_RATE = r"""#!/usr/bin/env python3
import json, os, sys
""" + MPS_PROBE + r"""
print(json.dumps({"bench": "launch_rate", "ok": True, "call_us_p50": 2.0, "call_us_p99": 3.0,
                  "launches_per_s": 400000.0, "seen_mps": seen_mps(),
                  "preloaded": "gpuprio" in os.environ.get("LD_PRELOAD", ""), "error": ""}))
"""

# python for run_mps_cost_bench.sh: -c (the torch check) answers STANDIN_TORCH (1: found), the torch
# server writes its result, anything else (record, report, brief) runs for real.
MPS_PYTHON = r"""#!/usr/bin/env python3
import json, os, sys
""" + MPS_PROBE + r"""
a = sys.argv[1:]
if a[:1] == ["-c"]:
    print("stand-in torch check")
    sys.exit(0 if os.environ.get("STANDIN_TORCH") == "1" else 1)
if len(a) >= 2 and a[0].endswith("torch_two_process.py") and a[1] == "high":
    path = a[a.index("--result") + 1]
    with open(path, "w") as fh:
        json.dump({"role": "high", "ok": True, "p50_ms": 2.0, "p99_ms": 3.0, "latency_ms": [2.0, 3.0] * 5,
                   "seen_mps": seen_mps(), "preloaded": "gpuprio" in os.environ.get("LD_PRELOAD", ""),
                   "error": ""}, fh)
    sys.exit(0)
os.execv(sys.executable, [sys.executable] + a)
"""

# nvidia-cuda-mps-control: -d starts a "daemon" (a process named nvidia-cuda-mps, as the real one's
# name is cut to) in a session of its own, its pid in the pipe directory; quit on stdin ends it.
MPS_CONTROL = r"""#!/usr/bin/env python3
import os, signal, subprocess, sys, time
pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "")
if not pipe or not os.path.isdir(pipe):
    print("stand-in mps control: no pipe directory"); sys.exit(1)
pidf = os.path.join(pipe, "daemon.pid")
if sys.argv[1:] == ["-d"]:
    code = "open('/proc/self/comm', 'w').write('nvidia-cuda-mps')\nimport time\ntime.sleep(300)\n"
    p = subprocess.Popen([sys.executable, "-c", code], start_new_session=True, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(os.environ["STANDIN_DAEMONS"], "a") as fh:
        fh.write("%d\n" % p.pid)
    with open(pidf + ".tmp", "w") as fh:
        fh.write(str(p.pid))
    os.replace(pidf + ".tmp", pidf)
    time.sleep(0.2)
    sys.exit(0)
cmd = sys.stdin.read().strip()
pid = int(open(pidf).read())
if cmd == "get_server_list":
    print(pid)
elif cmd == "quit":
    os.kill(pid, signal.SIGTERM)
    print("quit sent")
"""


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def mps_runner(d):
    root = scratch_repo(d, {"interference": INTERFERENCE, "launch_rate": LAUNCH_RATE})
    bindir = os.path.join(root, "bin")
    write_program(os.path.join(bindir, "nvidia-cuda-mps-control"), MPS_CONTROL)
    write_program(os.path.join(bindir, "python-mps"), MPS_PYTHON)
    with open(os.path.join(bindir, "id"), "w") as fh:
        fh.write('#!/bin/sh\nif [ "$1" = -u ]; then echo 0; else exec %s "$@"; fi\n' % (shutil.which("id") or "id"))
    os.chmod(os.path.join(bindir, "id"), 0o755)
    runner = os.path.join(root, "tools", "bench", "run_mps_cost_bench.sh")
    daemons = write(d, "daemons", "")

    def go(tag, args, **env):
        out = os.path.join(d, "out_mps_" + tag)
        e = clean_env(root, PYTHON=os.path.join(bindir, "python-mps"), STANDIN_DAEMONS=daemons, RELEASES="20",
                      **env)
        p = subprocess.run(["bash", runner, out] + args, capture_output=True, text=True, env=e, timeout=300)
        path = os.path.join(out, "mps_cost.json")
        runs = json.load(open(path))["runs"] if os.path.exists(path) else []
        return p, out, runs

    p, out, runs = go("full", [], ROUNDS="2", STANDIN_TORCH="1")
    measured = [r for r in runs if r.get("config") != "calibrate"]
    check("run_mps_cost_bench: exit 0, 4 servers x 4 configurations x 2 rounds, all ok",
          p.returncode == 0 and len(measured) == 32 and all(r["ok"] for r in measured),
          p.stdout[-3000:] + p.stderr[-1000:])
    check("run_mps_cost_bench: every MPS run a client of a live daemon, no other run",
          measured and all((r.get("seen_mps") != "none") == r["mps"] for r in measured),
          [(r["config"], r["server"], r.get("seen_mps")) for r in measured])
    check("run_mps_cost_bench: gpuprio preloaded in the gpuprio runs only",
          measured and all(bool(r.get("preloaded")) == r["gpuprio"] for r in measured),
          [(r["config"], r.get("preloaded")) for r in measured])
    check("run_mps_cost_bench: the chain servers calibrated, chain-short 100 kernels",
          all(r.get("calibrated") for r in measured if r["server"].startswith("chain")) and
          all(r.get("chain") == 100 for r in measured if r["server"] == "chain-short"),
          [(r["server"], r.get("chain"), r.get("calibrated")) for r in measured])
    pids = [int(x) for x in open(daemons).read().split()]
    check("run_mps_cost_bench: a daemon per round (the MPS configurations side by side), all gone at the end",
          len(pids) == 2 and not any(alive(pid) for pid in pids), (pids, [alive(x) for x in pids]))
    names = os.listdir(out) if os.path.isdir(out) else []
    check("run_mps_cost_bench: the table, the runs and each daemon's output",
          {"mps_cost.json", "mps_cost.txt", "mps_cost_runs.jsonl"} <= set(names) and
          sum(1 for n in names if n.endswith("_mps_control.txt")) == 2, names)

    open(daemons, "w").close()
    p, out, runs = go("notorch", ["--native-only"], ROUNDS="1", STANDIN_TORCH="0")
    measured = [r for r in runs if r.get("config") != "calibrate"]
    txt = open(os.path.join(out, "mps_cost.txt")).read() if os.path.exists(os.path.join(out, "mps_cost.txt")) else ""
    check("run_mps_cost_bench --native-only without torch: native and mps of 3 servers, torch left out and said",
          p.returncode == 0 and sorted({r["config"] for r in measured}) == ["mps", "native"] and
          len(measured) == 6 and "torch server was left out" in txt, p.stdout[-2000:] + txt)

    p, out, runs = go("bad", [], SERVERS="chain gpt")
    check("run_mps_cost_bench: an unknown server, exit 2", p.returncode == 2 and "unknown server" in p.stderr,
          p.stdout + p.stderr)
    for pid in [int(x) for x in open(daemons).read().split()]:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def main():
    d = tempfile.mkdtemp(prefix="torch_pairs_selftest.")
    try:
        for step in (pure_parts, idle_job, kernel_geometry, records_and_report, trace_overlap, torch_runner, mps_report,
                     mps_runner):
            sub = os.path.join(d, step.__name__)
            os.makedirs(sub)
            try:
                step(sub)
            except Exception as e:  # a step that breaks is a failure, the others still run
                import traceback
                check("%s ran to its end" % step.__name__, False, "%s: %s\n%s" % (type(e).__name__, e,
                                                                                  traceback.format_exc()))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
