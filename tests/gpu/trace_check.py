#!/usr/bin/env python3
"""Tracer checks for gpuprio, run on the GPU machine by run_trace_check.sh.

Subcommands:
  workload NAME --result FILE [...]
      Runs one PyTorch workload in this process (needs torch + torchvision) and writes a result
      record to FILE. NAME is one of
        resnet50   ResNet-50 (weights=None, eval, fixed seed): --iters forwards of a --batch batch,
                   then one training step (forward, backward, SGD step)
        latency    ResNet-18 batch 1 inference: --warmup, then --iters timed iterations, each
                   ending in torch.cuda.synchronize(); mean / p50 / p99 per-iteration latency
        profiler   ResNet-18 forwards inside torch.profiler.profile(activities=[CPU, CUDA]),
                   exported with export_chrome_trace to --trace-out
      Exit 0 when the workload ran to the end.
  analyze-trace FILE [--min-linked F]
      Checks a gpuprio trace (docs/trace_format.md); prints the analysis as JSON; exit 0 on PASS.
  analyze-profiler FILE [--min-linked F]
      Checks a torch.profiler Chrome trace (kernels linked to aten ops); JSON; exit 0 on PASS.
  report --workdir DIR --out OUT [--native-only]
      Reads the runs run_trace_check.sh left in DIR (NAME.rc/.out/.err/.cmd/.result.json) and the
      traces, writes OUT/trace_check_summary.txt, OUT/trace_check.json, OUT/trace_overhead.md,
      OUT/trace_overhead.json and OUT/log.txt. Exit 0 only when every check passed.

Everything but `workload` uses the standard library only (the analysis runs anywhere; it is
self-tested without a GPU by tests/tools/trace_check_selftest.py).
"""

import argparse
import bisect
import gzip
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))

# Thresholds (fractions of kernels).
MIN_LINKED_GPUPRIO = 0.99  # gpuprio trace: kernel -> client thread
MIN_LINKED_PROFILER = 0.95  # torch.profiler trace: kernel -> aten op

# File names shared with run_trace_check.sh (work dir = WORK, output dir = OUT).
RESNET_TRACE = "resnet_trace.json"  # OUT: the gpuprio trace of check a (every op deferred)
RESNET_TRACE_FAST = "resnet_trace_fast.json"  # WORKDIR: check a with the fast path on
PROFILER_TRACE = "torch_profiler_trace.json"  # OUT: torch.profiler's trace under gpuprio (check c)
PROFILER_NATIVE_TRACE = "torch_profiler_trace.native.json"  # WORK: the same natively
BOTH_TORCH_TRACE = "profiler_both.torch_trace.json"  # WORK: check d, torch.profiler's trace
BOTH_GPUPRIO_TRACE = "profiler_both.gpuprio_trace.json"  # WORK: check d, gpuprio's trace
LATENCY_CONFIGS = ["native", "schedule", "trace", "trace-gz", "trace-all"]  # run names latency.CONFIG.rR
LATENCY_TRACE = "latency_trace.r{round}.json"  # WORK: the traced latency runs' gpuprio traces
RANGE_TRACE = "profiler_range.json"  # WORK: check e's trace (GPUPRIO_TRACE_RANGE=profiler_api)
LATENCY_TRACE_GZ = LATENCY_TRACE + ".gz"  # the trace-gz runs' (GPUPRIO_TRACE ending in .gz)

# Driver APIs whose ops produce GPU work (a kernel, copy or set slice): their flows must end on
# the GPU. Other ops (cuEventRecord, cuStreamWaitEvent, cuLaunchHostFunc, ...) may end at the
# dispatcher.
GPU_WORK_API_RE = re.compile(r"^cu(LaunchKernel|LaunchCooperativeKernel|Memcpy|Memset)")
KERNEL_LAUNCH_API_RE = re.compile(r"^cu(LaunchKernel|LaunchCooperativeKernel)")
DISPATCHER_NAME_RE = re.compile(r"gpuprio dispatcher", re.IGNORECASE)
CALLS_RE = re.compile(r"^gpuprio: info: calls api=(\S+)((?:\s+\w+=\d+)+)\s*$")  # hook/call_counters.h
CUPTI_LINE_RE = re.compile(r"cupti|nvtx|subscrib", re.IGNORECASE)


# --------------------------------------------------------------------------------------------------
# Small helpers.


def load_json(path):
    """A JSON file, gzip-compressed or not."""
    with open(path, "rb") as fh:
        head = fh.read(2)
    opener = gzip.open if head == b"\x1f\x8b" else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
        return json.load(fh)


def events_of(doc):
    if isinstance(doc, dict):
        evs = doc.get("traceEvents")
    else:
        evs = doc  # the JSON array form of the trace-event format
    if not isinstance(evs, list):
        raise ValueError("no traceEvents list")
    return [e for e in evs if isinstance(e, dict)]


def to_ns(ts):
    """Trace timestamps are microseconds (floats with 3 decimals): integer nanoseconds."""
    return int(round(float(ts) * 1000.0))


def norm_id(v):
    """Flow ids may be written as numbers or strings ("42", "0x2a")."""
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, (int, float)):
        return int(v)
    s = str(v).strip()
    try:
        return int(s, 0)
    except ValueError:
        return s


def flow_id(ev):
    if "id" in ev:
        return norm_id(ev["id"])
    id2 = ev.get("id2")
    if isinstance(id2, dict):
        return norm_id(id2.get("global", id2.get("local")))
    return None


def percentile(values, q):
    """Nearest-rank percentile (q in [0, 100]) of a list; None when empty."""
    if not values:
        return None
    v = sorted(values)
    k = max(0, min(len(v) - 1, int(-(-q * len(v) // 100)) - 1))  # ceil(q/100 * n) - 1
    return v[k]


def ratio(a, b):
    return None if a is None or not b else a / b


def fraction(n, d):
    return None if not d else n / d


def pct(x):
    return "-" if x is None else f"{100.0 * x:.2f}%"


def read(path, default=""):
    try:
        with open(path, errors="replace") as fh:
            return fh.read()
    except OSError:
        return default


def tail_lines(text, n=25):
    lines = [l for l in text.splitlines() if l.strip()]
    return "\n".join(lines[-n:])


def parse_calls(text):
    """Sums the `gpuprio: info: calls api=... total=N ...` lines (GPUPRIO_LOG=info, at exit) by API."""
    totals = {}
    for line in text.splitlines():
        m = CALLS_RE.match(line.strip())
        if m:
            fields = dict(kv.split("=") for kv in m.group(2).split())
            totals[m.group(1)] = totals.get(m.group(1), 0) + int(fields.get("total", 0))
    return totals


class Tracks:
    """The complete slices ("ph":"X") of a trace by (pid, tid), for binding flow events to the
    slice that encloses them (what Perfetto and chrome://tracing do for "s", "t" and "f" with
    "bp":"e"; the contract puts every flow step at its slice's ts)."""

    def __init__(self, slices):
        self.by_track = {}
        for s in slices:
            self.by_track.setdefault((s["pid"], s["tid"]), []).append(s)
        self.starts = {}
        for key, lst in self.by_track.items():
            lst.sort(key=lambda s: (s["_b"], -s["_e"]))
            self.starts[key] = [s["_b"] for s in lst]

    def enclosing(self, pid, tid, t_ns, tol=1, scan=64):
        """The innermost slice on (pid, tid) with begin <= t <= end (1 ns tolerance), or None."""
        key = (pid, tid)
        lst = self.by_track.get(key)
        if not lst:
            return None
        i = bisect.bisect_right(self.starts[key], t_ns + tol) - 1
        # Sorted by begin (then longest first): scanning back from the last slice that begins by
        # t, the first one that still lasts until t is the innermost.
        for j in range(i, max(-1, i - scan), -1):
            if lst[j]["_e"] + tol >= t_ns:
                return lst[j]
        return None


# --------------------------------------------------------------------------------------------------
# The gpuprio trace (docs/trace_format.md).


def analyze_gpuprio_trace(doc, min_linked=MIN_LINKED_GPUPRIO):
    """Returns {"passed", "failures", ...numbers}. Asserts: there are kernel slices; at least
    min_linked of them have args.op_id != 0 and an incoming flow "f" whose id matches a flow "s"
    on a client-thread slice (cat "client"); every "s" of an op with GPU work (client slice api
    cuLaunchKernel*/cuLaunchCooperativeKernel*/cuMemcpy*/cuMemset*) has its "f"; slices of cat
    "dispatch" exist on a thread named like "gpuprio dispatcher"."""
    events = events_of(doc)
    thread_names = {}
    slices = []
    flows = {"s": [], "t": [], "f": []}
    queue_b = []
    cat_counts = {}
    for e in events:
        ph = e.get("ph")
        if ph == "M" and e.get("name") == "thread_name":
            thread_names[(e.get("pid"), e.get("tid"))] = str((e.get("args") or {}).get("name", ""))
        elif ph == "X":
            try:
                b = to_ns(e["ts"])
                d = to_ns(e.get("dur", 0))
            except (KeyError, TypeError, ValueError):
                continue
            s = {"pid": e.get("pid"), "tid": e.get("tid"), "_b": b, "_e": b + max(d, 0),
                 "cat": e.get("cat", ""), "name": e.get("name", ""), "args": e.get("args") or {}}
            slices.append(s)
            cat_counts[s["cat"]] = cat_counts.get(s["cat"], 0) + 1
        elif ph in flows:
            try:
                flows[ph].append({"pid": e.get("pid"), "tid": e.get("tid"), "ts": to_ns(e["ts"]),
                                  "id": flow_id(e), "bp": e.get("bp"), "cat": e.get("cat", "")})
            except (KeyError, TypeError, ValueError):
                continue
        elif ph == "b" and e.get("cat") == "queue":
            queue_b.append(e)
    tracks = Tracks(slices)

    # Bind every flow step to its slice.
    unbound = {"s": 0, "t": 0, "f": 0}
    ts_not_slice_start = 0
    for ph, lst in flows.items():
        for fl in lst:
            fl["slice"] = tracks.enclosing(fl["pid"], fl["tid"], fl["ts"])
            if fl["slice"] is None:
                unbound[ph] += 1
            elif abs(fl["slice"]["_b"] - fl["ts"]) > 1:
                ts_not_slice_start += 1

    client_s = {}  # flow id -> the client slice its "s" is on
    for fl in flows["s"]:
        if fl["slice"] is not None and fl["slice"]["cat"] == "client":
            client_s.setdefault(fl["id"], fl["slice"])
    f_ids = {fl["id"] for fl in flows["f"]}
    s_ids = {fl["id"] for fl in flows["s"]}
    incoming = {}  # id(kernel slice) -> flow ids of the "f" steps bound to it
    for fl in flows["f"]:
        if fl["slice"] is not None:
            incoming.setdefault(id(fl["slice"]), []).append(fl["id"])

    kernels = [s for s in slices if s["cat"] == "kernel"]
    n_op_id = n_flow = n_linked = n_flow_id_differs = 0
    unlinked_examples = []
    for k in kernels:
        op_id = norm_id(k["args"].get("op_id", 0)) or 0
        ids = incoming.get(id(k), [])
        to_client = [i for i in ids if i in client_s]
        n_op_id += op_id != 0
        n_flow += bool(to_client)
        if to_client and op_id not in to_client:
            n_flow_id_differs += 1
        if op_id != 0 and to_client:
            n_linked += 1
        elif len(unlinked_examples) < 5:
            unlinked_examples.append({"name": k["name"][:80], "ts_us": k["_b"] / 1000.0,
                                      "pid": k["pid"], "tid": k["tid"], "op_id": op_id,
                                      "incoming_flow_ids": ids[:3]})

    # "s" without "f", split by the op's API (from its client slice).
    s_without_f = {}
    s_without_f_gpu_work = 0
    for fl in flows["s"]:
        if fl["id"] in f_ids:
            continue
        api = str((fl["slice"] or {}).get("args", {}).get("api", "") or "?")
        s_without_f[api] = s_without_f.get(api, 0) + 1
        if api == "?" or GPU_WORK_API_RE.match(api):
            s_without_f_gpu_work += 1

    dispatcher_tracks = {k: v for k, v in thread_names.items() if DISPATCHER_NAME_RE.search(v)}
    dispatch_slices = [s for s in slices if s["cat"] == "dispatch"]
    on_dispatcher = [s for s in dispatch_slices if (s["pid"], s["tid"]) in dispatcher_tracks]
    t_on_dispatch = sum(1 for fl in flows["t"] if fl["slice"] is not None and fl["slice"]["cat"] == "dispatch")

    delays = {}
    for e in queue_b:
        a = e.get("args") or {}
        try:
            delays.setdefault(str(a.get("priority", "?")), []).append(float(a["delay_us"]))
        except (KeyError, TypeError, ValueError):
            pass
    per_priority = {p: {"ops_queued": len(v), "queue_delay_us": {
        "p50": percentile(v, 50), "p99": percentile(v, 99), "max": max(v)}} for p, v in sorted(delays.items())}

    other = doc.get("otherData") if isinstance(doc, dict) else None
    other = other.get("gpuprio", {}) if isinstance(other, dict) else {}
    r = {
        "events": len(events),
        "slices_by_cat": dict(sorted(cat_counts.items())),
        "kernels": len(kernels),
        "kernels_with_op_id": n_op_id,
        "kernels_with_flow_from_client": n_flow,
        "kernels_linked": n_linked,
        "kernels_linked_fraction": fraction(n_linked, len(kernels)),
        "kernels_flow_id_differs_from_op_id": n_flow_id_differs,
        "unlinked_kernel_examples": unlinked_examples,
        "flows": {ph: len(lst) for ph, lst in flows.items()},
        "flows_unbound": unbound,
        "flows_ts_not_at_slice_start": ts_not_slice_start,
        "flow_s_on_client_slice": sum(1 for fl in flows["s"] if fl["slice"] is not None and fl["slice"]["cat"] == "client"),
        "flow_t_on_dispatch_slice": t_on_dispatch,
        "flow_s_without_f": sum(s_without_f.values()),
        "flow_s_without_f_by_api": dict(sorted(s_without_f.items())),
        "flow_s_without_f_gpu_work": s_without_f_gpu_work,
        "flow_f_without_s": len(f_ids - s_ids),
        "dispatcher_threads": sorted(f"{k[0]}/{k[1]}: {v}" for k, v in dispatcher_tracks.items()),
        "dispatch_slices": len(dispatch_slices),
        "dispatch_slices_on_dispatcher_thread": len(on_dispatcher),
        "client_slices": cat_counts.get("client", 0),
        "client_slices_on_caller": sum(1 for s in slices if s["cat"] == "client" and s["args"].get("on_caller") is True),
        "per_priority": per_priority,
        "other_data": other,
        "min_linked": min_linked,
    }
    failures = []
    if not kernels:
        failures.append("no GPU kernel slices (cat \"kernel\") in the trace")
    elif r["kernels_linked_fraction"] < min_linked:
        failures.append(f"only {n_linked}/{len(kernels)} kernels ({pct(r['kernels_linked_fraction'])}) have "
                        f"op_id != 0 and a flow from a client slice (need >= {pct(min_linked)})")
    if s_without_f_gpu_work:
        failures.append(f"{s_without_f_gpu_work} flow 's' of ops with GPU work have no 'f' "
                        f"(by api: {r['flow_s_without_f_by_api']})")
    if not dispatcher_tracks:
        failures.append("no thread named like 'gpuprio dispatcher' (thread_name metadata)")
    elif not on_dispatcher:
        failures.append("no 'dispatch' slices on a gpuprio dispatcher thread")
    r["failures"] = failures
    r["passed"] = not failures
    return r


# --------------------------------------------------------------------------------------------------
# The torch.profiler trace (Kineto's Chrome export).


def _arg(args, *names):
    """args[name] with names compared without case, spaces and underscores ("External id",
    "external id", "external_id"); None when absent."""
    want = {n.lower().replace(" ", "").replace("_", "") for n in names}
    for k, v in args.items():
        if k.lower().replace(" ", "").replace("_", "") in want:
            return v
    return None


def analyze_profiler_trace(doc, min_linked=MIN_LINKED_PROFILER):
    """Kernels (cat "kernel") linked to aten ops: a kernel's "External id" equals the "External id"
    of some cpu_op. Asserts there are kernels and at least min_linked of them are linked. Also
    reports the kernels whose "correlation" matches a cuda_runtime/cuda_driver event and the ac2g
    flows."""
    events = events_of(doc)
    kernels, cpu_ops, runtime = [], [], []
    ac2g = {"s": set(), "f": set()}
    for e in events:
        cat = str(e.get("cat", "")).lower()
        ph = e.get("ph")
        if ph == "X" and cat == "kernel":
            kernels.append(e)
        elif ph == "X" and cat == "cpu_op":
            cpu_ops.append(e)
        elif ph == "X" and cat in ("cuda_runtime", "cuda_driver", "runtime", "driver"):
            runtime.append(e)
        elif cat == "ac2g" and ph in ac2g:
            ac2g[ph].add(flow_id(e))

    def ext(e):
        return norm_id(_arg(e.get("args") or {}, "External id", "external_id", "ext id"))

    def corr(e):
        return norm_id(_arg(e.get("args") or {}, "correlation", "correlation id", "correlation_id"))

    cpu_ext = {x for x in (ext(e) for e in cpu_ops) if x not in (None, 0)}
    rt_corr = {x for x in (corr(e) for e in runtime) if x not in (None, 0)}
    linked = with_ext = with_rt = 0
    unlinked_examples = []
    for k in kernels:
        x = ext(k)
        with_ext += x not in (None, 0)
        with_rt += corr(k) in rt_corr
        if x not in (None, 0) and x in cpu_ext:
            linked += 1
        elif len(unlinked_examples) < 5:
            unlinked_examples.append({"name": str(k.get("name", ""))[:80], "external_id": x,
                                      "correlation": corr(k)})
    rt_names = {}
    for e in runtime:
        key = f"{e.get('cat')}:{e.get('name')}"
        rt_names[key] = rt_names.get(key, 0) + 1
    first = kernels[0] if kernels else None
    r = {
        "events": len(events),
        "kernels": len(kernels),
        "cpu_ops": len(cpu_ops),
        "runtime_events": len(runtime),
        "runtime_events_by_name": dict(sorted(rt_names.items(), key=lambda kv: -kv[1])[:12]),
        "kernels_with_external_id": with_ext,
        "kernels_linked_to_cpu_op": linked,
        "kernels_linked_fraction": fraction(linked, len(kernels)),
        "kernels_with_runtime_correlation": with_rt,
        "ac2g_flows": {"s": len(ac2g["s"]), "f": len(ac2g["f"]), "both": len(ac2g["s"] & ac2g["f"])},
        "first_kernel_name": None if first is None else str(first.get("name", ""))[:120],
        "first_kernel_keys": None if first is None else sorted(first.keys()),
        "first_kernel_arg_keys": None if first is None else sorted((first.get("args") or {}).keys()),
        "unlinked_kernel_examples": unlinked_examples,
        "min_linked": min_linked,
    }
    failures = []
    if not kernels:
        failures.append("no kernel events (cat \"kernel\") in the profiler trace")
    elif r["kernels_linked_fraction"] < min_linked:
        failures.append(f"only {linked}/{len(kernels)} kernels ({pct(r['kernels_linked_fraction'])}) have an "
                        f"External id of a cpu_op (need >= {pct(min_linked)}); first kernel's arg keys: "
                        f"{r['first_kernel_arg_keys']}")
    r["failures"] = failures
    r["passed"] = not failures
    return r


def analyze_file(path, analyze, **kw):
    """analyze(load_json(path)), with a failure record when the file is missing or not JSON."""
    r = {"file": path}
    try:
        r["bytes"] = os.path.getsize(path)
        doc = load_json(path)
    except (OSError, ValueError, EOFError) as e:
        r.update(passed=False, failures=[f"{os.path.basename(path)}: cannot be read as JSON "
                                         f"({type(e).__name__}: {str(e)[:200]})"])
        return r
    try:
        r.update(analyze(doc, **kw))
    except (ValueError, TypeError, AttributeError) as e:
        r.update(passed=False, failures=[f"{os.path.basename(path)}: unexpected shape ({type(e).__name__}: {e})"])
    return r


# --------------------------------------------------------------------------------------------------
# Workloads (need torch; run by run_trace_check.sh, each in its own process).


def _torch():
    import torch
    import torchvision

    if not torch.cuda.is_available():
        raise RuntimeError("torch.cuda.is_available() is False")
    torch.manual_seed(0)
    return torch, torchvision


def workload_resnet50(a):
    torch, torchvision = _torch()
    model = torchvision.models.resnet50(weights=None).cuda().eval()  # random init, no download
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(a.batch, 3, 224, 224, generator=gen).cuda()
    target = torch.randint(0, 1000, (a.batch,), generator=gen).cuda()
    with torch.no_grad():
        for _ in range(a.iters):
            y = model(x)
    torch.cuda.synchronize()
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(x), target)
    loss.backward()
    opt.step()
    torch.cuda.synchronize()
    return {"forwards": a.iters, "batch": a.batch, "train_steps": 1, "loss": float(loss),
            "logits_finite": bool(torch.isfinite(y).all()), "torch": torch.__version__}


def workload_latency(a):
    torch, torchvision = _torch()
    model = torchvision.models.resnet18(weights=None).cuda().eval()
    x = torch.randn(1, 3, 224, 224).cuda()
    times = []
    with torch.inference_mode():
        for _ in range(a.warmup):
            model(x)
        torch.cuda.synchronize()
        for _ in range(a.iters):
            t0 = time.perf_counter()
            model(x)
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1e3)
    return {"iters": a.iters, "warmup": a.warmup, "mean_ms": statistics.fmean(times),
            "p50_ms": percentile(times, 50), "p99_ms": percentile(times, 99), "min_ms": min(times),
            "max_ms": max(times), "torch": torch.__version__}


def workload_profiler(a):
    torch, torchvision = _torch()
    from torch.profiler import ProfilerActivity, profile

    model = torchvision.models.resnet18(weights=None).cuda().eval()
    x = torch.randn(a.batch, 3, 224, 224).cuda()
    with torch.no_grad():
        for _ in range(3):  # warm-up outside the profiler (cuDNN/cuBLAS setup)
            model(x)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(a.iters):
                model(x)
            torch.cuda.synchronize()
    prof.export_chrome_trace(a.trace_out)
    return {"iters": a.iters, "batch": a.batch, "trace": a.trace_out, "torch": torch.__version__}


def workload_profiler_range(a):
    """ResNet-18 batch 1: warm-up, then a.iters iterations between torch.cuda.profiler.start() and
    stop() (cuProfilerStart/Stop), then as many again. Records whether GPUPRIO_TRACE existed
    (written at the stop, GPUPRIO_TRACE_RANGE=profiler_api) before the last iterations ended."""
    torch, torchvision = _torch()
    model = torchvision.models.resnet18(weights=None).cuda().eval()
    x = torch.randn(1, 3, 224, 224).cuda()
    path = os.environ.get("GPUPRIO_TRACE", "")
    with torch.inference_mode():
        for _ in range(a.warmup):
            model(x)
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        for _ in range(a.iters):
            model(x)
        torch.cuda.profiler.stop()
        written_at = None
        t0 = time.perf_counter()
        for _ in range(a.iters):
            model(x)
            torch.cuda.synchronize()
        while written_at is None and time.perf_counter() - t0 < 20:
            if path and os.path.exists(path):
                written_at = time.perf_counter() - t0
            else:
                time.sleep(0.05)
    return {"iters_in_range": a.iters, "iters_total": a.warmup + 2 * a.iters,
            "trace_written_before_exit": written_at is not None,
            "trace_written_after_stop_s": written_at, "torch": torch.__version__}


WORKLOADS = {"resnet50": workload_resnet50, "latency": workload_latency, "profiler": workload_profiler,
             "profiler_range": workload_profiler_range}


def cmd_workload(a):
    rec = {"workload": a.name, "ok": False, "error": None, "pid": os.getpid(),
           "ld_preload": os.environ.get("LD_PRELOAD", ""), "gpuprio_mode": os.environ.get("GPUPRIO_MODE", ""),
           "gpuprio_trace": os.environ.get("GPUPRIO_TRACE", "")}
    t0 = time.time()
    try:
        rec.update(WORKLOADS[a.name](a))
        rec["ok"] = True
    except Exception as e:  # recorded, and the exit code says it failed
        import traceback

        rec["error"] = f"{type(e).__name__}: {e}"
        traceback.print_exc()
    rec["elapsed_s"] = round(time.time() - t0, 3)
    with open(a.result, "w") as fh:
        json.dump(rec, fh, indent=1)
    print("trace_check: workload " + json.dumps(rec), flush=True)
    return 0 if rec["ok"] else 1


# --------------------------------------------------------------------------------------------------
# Report.


def load_run(workdir, name):
    base = os.path.join(workdir, name)
    rc_text = read(base + ".rc").strip()
    run = {"name": name, "rc": int(rc_text) if rc_text.lstrip("-").isdigit() else None,
           "stderr": read(base + ".err"), "stdout": read(base + ".out"), "cmd": read(base + ".cmd").strip(),
           "wall_s": None}
    wall = read(base + ".wall").strip()
    run["wall_s"] = float(wall) if re.fullmatch(r"[0-9.]+", wall or "x") else None
    try:
        with open(base + ".result.json") as fh:
            run["result"] = json.load(fh)
    except (OSError, ValueError):
        run["result"] = {}
    run["ran"] = run["rc"] is not None
    run["ok"] = run["rc"] == 0 and bool(run["result"].get("ok"))
    return run


def run_error(run):
    """One line saying why a run failed, plus the tail of its stderr."""
    if not run["ran"]:
        return f"{run['name']}: did not run"
    if run["rc"] == 125:
        return f"{run['name']}: skipped ({tail_lines(run['stderr'], 1)})"
    why = {124: "timed out", 137: "killed (timeout or memory)"}.get(run["rc"], f"rc={run['rc']}")
    err = run["result"].get("error") if run["result"] else None
    return (f"{run['name']}: {why}" + (f", {err}" if err else "")
            + "\n      stderr tail:\n" + "\n".join("        " + l for l in tail_lines(run["stderr"]).splitlines()))


def run_gpuprio_summarize(trace_path):
    """`gpuprio trace summarize FILE --json`, for the record (another issue writes it)."""
    cli = os.path.join(REPO, "tools", "cli", "gpuprio")
    if not os.path.exists(trace_path):
        return {"error": "no trace file"}
    try:
        p = subprocess.run([sys.executable, cli, "trace", "summarize", trace_path, "--json"],
                           capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"error": f"{type(e).__name__}: {e}"}
    rec = {"rc": p.returncode, "stderr_tail": tail_lines(p.stderr, 5)}
    try:
        rec["json"] = json.loads(p.stdout)
    except ValueError:
        rec["stdout_tail"] = tail_lines(p.stdout, 5)
    return rec


NO_DISPATCH = "no 'dispatch' slices on a gpuprio dispatcher thread"


def check_a(workdir, trace, name="a_trace_resnet50", run_name="resnet50_trace",
            require_dispatch=True):
    """The traced ResNet-50 run. With the fast path on (require_dispatch False) an idle process
    issues its work on the client threads, so dispatcher slices are not required there."""
    run = load_run(workdir, run_name)
    c = {"name": name, "run": {k: run[k] for k in ("rc", "wall_s", "result", "cmd")}, "failures": []}
    if not run["ok"]:
        c["failures"].append(run_error(run))
    if run["ran"]:
        c["trace"] = analyze_file(trace, analyze_gpuprio_trace)
        c["failures"] += [f for f in c["trace"]["failures"] if require_dispatch or f != NO_DISPATCH]
        calls = parse_calls(run["stderr"])
        launches = {k: v for k, v in calls.items() if KERNEL_LAUNCH_API_RE.match(k)}
        c["gpuprio_calls"] = calls
        c["kernel_launches_caught"] = sum(launches.values()) if calls else None
        c["summarize"] = run_gpuprio_summarize(trace)
    c["passed"] = not c["failures"]
    t = c.get("trace", {})
    c["note"] = (f"kernels {t.get('kernels', '-')}, linked {t.get('kernels_linked', '-')} "
                 f"({pct(t.get('kernels_linked_fraction'))}); launches caught by gpuprio "
                 f"{c.get('kernel_launches_caught', '-')}; dispatch slices on dispatcher "
                 f"{t.get('dispatch_slices_on_dispatcher_thread', '-')}; s without f "
                 f"{t.get('flow_s_without_f', '-')} (gpu work {t.get('flow_s_without_f_gpu_work', '-')}); "
                 f"dropped {t.get('other_data', {}).get('dropped_records', '-')}")
    return c


def check_b(workdir, native_only):
    configs = LATENCY_CONFIGS[:1] if native_only else LATENCY_CONFIGS
    runs = {cfg: [] for cfg in configs}
    for r in range(1, 100):
        names = [f"latency.{cfg}.r{r}" for cfg in configs]
        if not any(os.path.exists(os.path.join(workdir, n + ".rc")) for n in names):
            break
        for cfg, n in zip(configs, names):
            runs[cfg].append(load_run(workdir, n))
    c = {"name": "b_overhead", "failures": [], "configs": {}}
    for cfg, lst in runs.items():
        if not lst:
            c["failures"].append(f"latency.{cfg}: no runs")
        for run in lst:
            if not run["ok"]:
                c["failures"].append(run_error(run))
        ok = [run["result"] for run in lst if run["ok"]]
        med = {m: (statistics.median(x[m] for x in ok) if ok else None) for m in ("mean_ms", "p50_ms", "p99_ms")}
        c["configs"][cfg] = {"rounds": len(lst), "rounds_ok": len(ok), "median": med,
                             "per_round": [{m: run["result"].get(m) for m in ("mean_ms", "p50_ms", "p99_ms")}
                                           | {"rc": run["rc"], "wall_s": run["wall_s"]} for run in lst]}
    for cfg, base in (("schedule", "native"), ("trace", "native"), ("trace", "schedule"),
                      ("trace-gz", "native"), ("trace-gz", "schedule"),
                      ("trace-all", "native"), ("trace-all", "schedule")):
        if cfg in c["configs"] and base in c["configs"]:
            a, b = c["configs"][cfg]["median"], c["configs"][base]["median"]
            c.setdefault("ratios", {})[f"{cfg}/{base}"] = {m: ratio(a[m], b[m]) for m in a}
    # The traced runs' traces: sizes, and the first one checked like check a (reported only).
    sizes = []
    for r in range(1, len(runs.get("trace", [])) + 1):
        p = os.path.join(workdir, LATENCY_TRACE.format(round=r))
        sizes.append(os.path.getsize(p) if os.path.exists(p) else None)
    if "trace" in runs:
        c["trace_file_bytes"] = sizes
    if "trace-gz" in runs:
        c["trace_gz_file_bytes"] = [
            os.path.getsize(p) if os.path.exists(p) else None
            for p in (os.path.join(workdir, LATENCY_TRACE_GZ.format(round=r))
                      for r in range(1, len(runs["trace-gz"]) + 1))]
        p1 = os.path.join(workdir, LATENCY_TRACE.format(round=1))
        if os.path.exists(p1):
            t = analyze_file(p1, analyze_gpuprio_trace)
            c["trace_r1"] = {k: t.get(k) for k in ("passed", "failures", "kernels", "kernels_linked",
                                                     "kernels_linked_fraction", "flow_s_without_f", "other_data")}
    c["passed"] = not c["failures"]
    rt = c.get("ratios", {})
    c["note"] = ", ".join(f"{k} p50 x{v['p50_ms']:.3f}" for k, v in rt.items() if v.get("p50_ms") is not None) or "-"
    return c


def overhead_markdown(b):
    lines = ["# Tracer overhead: ResNet-18 batch 1 inference, per-iteration latency", "",
             "Median over rounds of each run's mean / p50 / p99 (ms; torch.cuda.synchronize per iteration).", "",
             "| config | rounds ok | mean ms | p50 ms | p99 ms | mean vs native | p50 vs native | p99 vs native "
             "| mean vs schedule | p50 vs schedule | p99 vs schedule |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]

    def f(v, spec=".3f"):
        return "-" if v is None else format(v, spec)

    labels = {"native": "native", "schedule": "GPUPRIO_MODE=schedule", "trace": "schedule + GPUPRIO_TRACE",
              "trace-gz": "schedule + GPUPRIO_TRACE=....json.gz", "trace-all": "schedule + GPUPRIO_TRACE + GPUPRIO_TRACE_ALL_APIS=1"}
    for cfg, e in b["configs"].items():
        m = e["median"]
        vs_n = b.get("ratios", {}).get(f"{cfg}/native", {}) if cfg != "native" else {k: 1.0 for k in m}
        vs_s = b.get("ratios", {}).get(f"{cfg}/schedule", {}) if cfg != "schedule" else {k: 1.0 for k in m}
        if cfg == "native":
            vs_s = {}
        lines.append(f"| {labels.get(cfg, cfg)} | {e['rounds_ok']}/{e['rounds']} | {f(m['mean_ms'])} | "
                     f"{f(m['p50_ms'])} | {f(m['p99_ms'])} | "
                     + " | ".join(f(vs_n.get(k)) for k in ("mean_ms", "p50_ms", "p99_ms")) + " | "
                     + " | ".join(f(vs_s.get(k)) for k in ("mean_ms", "p50_ms", "p99_ms")) + " |")
    lines += ["", "Per round (mean / p50 / p99 ms, process wall s):", ""]
    for cfg, e in b["configs"].items():
        rounds = "; ".join(f"{f(r['mean_ms'])} / {f(r['p50_ms'])} / {f(r['p99_ms'])} ({f(r['wall_s'], '.1f')} s)"
                           for r in e["per_round"])
        lines.append(f"- {labels.get(cfg, cfg)}: {rounds}")
    if b.get("trace_file_bytes"):
        lines.append("")
        lines.append("Trace files of the traced runs: " + ", ".join(
            "-" if s is None else f"{s / 2**20:.1f} MiB" for s in b["trace_file_bytes"]))
    if b.get("trace_gz_file_bytes"):
        lines.append("Trace files of the .json.gz runs: " + ", ".join(
            "-" if s is None else f"{s / 2**20:.2f} MiB" for s in b["trace_gz_file_bytes"]))
    if b.get("trace_r1"):
        t = b["trace_r1"]
        lines.append(f"Round 1's trace: {t.get('kernels')} kernels, {t.get('kernels_linked')} linked "
                     f"({pct(t.get('kernels_linked_fraction'))}), dropped records "
                     f"{(t.get('other_data') or {}).get('dropped_records', '-')}")
    if b["failures"]:
        lines += ["", "Failures:", ""] + [f"- {x.splitlines()[0]}" for x in b["failures"]]
    return "\n".join(lines) + "\n"


def check_profiler(workdir, out, name, run_name, trace_path):
    run = load_run(workdir, run_name)
    c = {"name": name, "run": {k: run[k] for k in ("rc", "wall_s", "result", "cmd")}, "failures": []}
    if not run["ok"]:
        c["failures"].append(run_error(run))
    if run["ran"]:
        c["trace"] = analyze_file(trace_path, analyze_profiler_trace)
        c["failures"] += c["trace"]["failures"]
    c["passed"] = not c["failures"]
    t = c.get("trace", {})
    c["note"] = (f"kernels {t.get('kernels', '-')}, linked to cpu_op {t.get('kernels_linked_to_cpu_op', '-')} "
                 f"({pct(t.get('kernels_linked_fraction'))}), ac2g flows {t.get('ac2g_flows', {}).get('both', '-')}")
    return c


def check_d(workdir):
    run = load_run(workdir, "profiler.both")
    c = {"name": "d_profiler_and_trace", "run": {k: run[k] for k in ("rc", "wall_s", "result", "cmd")},
         "failures": []}
    if not run["ok"]:
        c["failures"].append(run_error(run))
    if run["ran"]:
        c["torch_trace"] = analyze_file(os.path.join(workdir, BOTH_TORCH_TRACE), analyze_profiler_trace)
        gp = os.path.join(workdir, BOTH_GPUPRIO_TRACE)
        c["gpuprio_trace"] = (analyze_file(gp, analyze_gpuprio_trace) if os.path.exists(gp)
                              else {"note": "gpuprio wrote no trace file"})
        lines = [l.strip() for l in run["stderr"].splitlines() if CUPTI_LINE_RE.search(l)]
        c["stderr_cupti_lines"] = len(lines)
        c["stderr_cupti_first"] = lines[:10]
    c["passed"] = not c["failures"]  # only "exited 0"; the rest is reported
    tt, gt = c.get("torch_trace", {}), c.get("gpuprio_trace", {})
    c["note"] = (f"torch.profiler kernels {tt.get('kernels', '-')} (linked {pct(tt.get('kernels_linked_fraction'))}); "
                 f"gpuprio trace kernels {gt.get('kernels', '-')}; stderr lines on CUPTI/NVTX "
                 f"{c.get('stderr_cupti_lines', '-')}")
    return c


OPS_RE = re.compile(r"gpuprio: info: priority=\S+(?: \(\w+\))? ops=(\d+)")


def check_e(workdir):
    """GPUPRIO_TRACE_RANGE=profiler_api with torch.cuda.profiler.start/stop: the trace is written
    at the stop while the program runs and holds the range's ops only."""
    run = load_run(workdir, "profiler_range")
    c = {"name": "e_profiler_range", "run": {k: run[k] for k in ("rc", "wall_s", "result", "cmd")},
         "failures": []}
    if not run["ok"]:
        c["failures"].append(run_error(run))
    res = run["result"]
    if run["ok"] and not res.get("trace_written_before_exit"):
        c["failures"].append("profiler_range: no trace file within 20 s of cuProfilerStop")
    path = os.path.join(workdir, RANGE_TRACE)
    # The process's ops, from its exit summary (GPUPRIO_LOG=info), against the trace's.
    total_ops = sum(int(m.group(1)) for m in OPS_RE.finditer(run["stderr"]))
    c["process_ops"] = total_ops
    if run["ok"]:
        if not os.path.exists(path):
            c["failures"].append("profiler_range: no trace file")
        else:
            t = analyze_file(path, analyze_gpuprio_trace)
            ops = (t.get("other_data") or {}).get("ops")
            c["trace"] = {k: t.get(k) for k in ("kernels", "kernels_linked", "kernels_linked_fraction", "other_data")}
            c["trace_ops"] = ops
            iters, total_iters = res.get("iters_in_range"), res.get("iters_total")
            if not ops or not t.get("kernels"):
                c["failures"].append(f"profiler_range: the trace has {ops} ops and {t.get('kernels')} kernels")
            elif total_ops and iters and total_iters:
                # The range is iters of total_iters identical iterations (plus setup outside it).
                c["trace_ops_share"] = ops / total_ops
                if ops / total_ops > 1.5 * iters / total_iters:
                    c["failures"].append(f"profiler_range: the trace holds {ops} of the process's {total_ops} "
                                         f"ops, more than its {iters} of {total_iters} iterations")
    c["passed"] = not c["failures"]
    c["note"] = (f"trace ops {c.get('trace_ops', '-')} of the process's {total_ops or '-'}; written "
                 f"{res.get('trace_written_after_stop_s', '-')} s after the stop; kernels "
                 f"{c.get('trace', {}).get('kernels', '-')}")
    return c


def cmd_report(a):
    wd, out = a.workdir, a.out
    os.makedirs(out, exist_ok=True)
    checks = []
    if not a.native_only:
        checks.append(check_a(wd, os.path.join(out, RESNET_TRACE)))
        checks.append(check_a(wd, os.path.join(wd, RESNET_TRACE_FAST), name="a_trace_fast_path",
                              run_name="resnet50_trace_fast", require_dispatch=False))
    b = check_b(wd, a.native_only)
    checks.append(b)
    checks.append(check_profiler(wd, out, "c_profiler_native", "profiler.native",
                                 os.path.join(wd, PROFILER_NATIVE_TRACE)))
    if not a.native_only:
        checks.append(check_profiler(wd, out, "c_profiler_gpuprio", "profiler.gpuprio",
                                     os.path.join(out, PROFILER_TRACE)))
        checks.append(check_d(wd))
        checks.append(check_e(wd))
    passed = all(c["passed"] for c in checks)

    with open(os.path.join(out, "trace_overhead.json"), "w") as fh:
        json.dump(b, fh, indent=1, sort_keys=True)
    with open(os.path.join(out, "trace_overhead.md"), "w") as fh:
        fh.write(overhead_markdown(b))
    with open(os.path.join(out, "trace_check.json"), "w") as fh:
        json.dump({"passed": passed, "native_only": a.native_only, "checks": checks}, fh, indent=1, sort_keys=True)

    lines = [f"gpuprio trace check: {'PASS' if passed else 'FAIL'}" + (" (native only)" if a.native_only else ""), ""]
    for c in checks:
        lines.append(f"{'PASS' if c['passed'] else 'FAIL'}  {c['name']:22} {c['note']}")
    lines.append("")
    s = next((c.get("summarize") for c in checks if c["name"] == "a_trace_resnet50"), None)
    if s is not None:
        j = s.get("json")
        if isinstance(j, dict):
            keys = ("ops", "ops_linked_to_gpu", "kernels", "kernels_linked_to_client", "dropped_records")
            lines.append("gpuprio trace summarize (for the record): " + ", ".join(f"{k}={j.get(k)}" for k in keys))
            for p, v in sorted((j.get("per_priority") or {}).items()):
                lines.append(f"  priority {p}: {json.dumps(v, sort_keys=True)}")
        else:
            lines.append(f"gpuprio trace summarize (for the record): not available "
                         f"({s.get('error') or 'rc=%s %s' % (s.get('rc'), s.get('stderr_tail', ''))})")
        lines.append("")
    d = next((c for c in checks if c["name"] == "d_profiler_and_trace"), None)
    if d is not None and d.get("stderr_cupti_first"):
        lines.append("check d, stderr lines on CUPTI/NVTX (first few):")
        lines += [f"  {l[:200]}" for l in d["stderr_cupti_first"][:5]]
        lines.append("")
    lines.append(overhead_markdown(b))
    failures = [f for c in checks for f in c["failures"]]
    if failures:
        lines.append("failures:")
        lines += [f"  - {f}" for f in failures]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "trace_check_summary.txt"), "w") as fh:
        fh.write(text)

    with open(os.path.join(out, "log.txt"), "w") as fh:
        for name in sorted(os.path.basename(p)[:-3] for p in os.listdir(wd) if p.endswith(".rc")):
            run = load_run(wd, name)
            fh.write(f"===== {name} rc={run['rc']} wall={run['wall_s']} s cmd: {run['cmd']}\n")
            fh.write("----- stdout\n" + run["stdout"][-20000:])
            fh.write("\n----- stderr (last 100 kB)\n" + run["stderr"][-100000:] + "\n")
    sys.stdout.write(text)
    return 0 if passed else 1


# --------------------------------------------------------------------------------------------------


def cmd_analyze(a, analyze):
    r = analyze_file(a.file, analyze, min_linked=a.min_linked)
    json.dump(r, sys.stdout, indent=1, sort_keys=True)
    print()
    print(("PASS" if r["passed"] else "FAIL: " + "; ".join(r["failures"])), file=sys.stderr)
    return 0 if r["passed"] else 1


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("workload")
    w.add_argument("name", choices=sorted(WORKLOADS))
    w.add_argument("--result", required=True)
    w.add_argument("--iters", type=int, default=None)
    w.add_argument("--warmup", type=int, default=50)
    w.add_argument("--batch", type=int, default=8)
    w.add_argument("--trace-out")
    g = sub.add_parser("analyze-trace")
    g.add_argument("file")
    g.add_argument("--min-linked", type=float, default=MIN_LINKED_GPUPRIO)
    t = sub.add_parser("analyze-profiler")
    t.add_argument("file")
    t.add_argument("--min-linked", type=float, default=MIN_LINKED_PROFILER)
    r = sub.add_parser("report")
    r.add_argument("--workdir", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--native-only", action="store_true")
    a = p.parse_args(argv)
    if a.cmd == "workload":
        if a.iters is None:
            a.iters = {"resnet50": 3, "latency": 500, "profiler": 10}[a.name]
        if a.name == "profiler" and not a.trace_out:
            p.error("workload profiler needs --trace-out")
        return cmd_workload(a)
    if a.cmd == "analyze-trace":
        return cmd_analyze(a, analyze_gpuprio_trace)
    if a.cmd == "analyze-profiler":
        return cmd_analyze(a, analyze_profiler_trace)
    return cmd_report(a)


if __name__ == "__main__":
    sys.exit(main())
