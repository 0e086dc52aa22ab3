#!/usr/bin/env python3
"""Self-test of tests/gpu/trace_check.py and run_trace_check.sh without a GPU.

Standard library only; exits non-zero on failure. Synthetic traces in the docs/trace_format.md
format and in torch.profiler's (Kineto's) Chrome format, passing and failing, go through the
checker's analysis; the report is run on a synthetic work dir; and run_trace_check.sh runs end to
end with PYTHON pointing at this file, which then stands in for python3 (its `workload`
subcommands write synthetic results and traces, everything else goes to the real interpreter).

  python3 tests/tools/trace_check_selftest.py [-v]
"""

import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))

import trace_check as tc  # noqa: E402

PID = 4242
CLIENT_TID = 100
DISPATCHER_TID = 200
GPU_PID = 1000000
STREAM_TID = 7


# --------------------------------------------------------------------------------------------------
# Synthetic traces.


def make_gpuprio_trace(n_kernels=100, zero_op_id=(), no_f=(), s_off_client=(), dispatcher_name=True,
                       string_ids=False, ts_offset_us=0.0, extra_ops=True):
    """A gpuprio trace per docs/trace_format.md: n_kernels kernel ops (client slice -> dispatch
    slice -> kernel slice, flows s/t/f with id = op id), plus (extra_ops) one memcpy op issued on the caller and
    one cuEventRecord op that ends at the dispatcher (s and t, no f). Variations by kernel index:
    zero_op_id (kernel's args.op_id 0), no_f (no "f" step), s_off_client (the "s" step on the
    dispatcher thread instead of the client slice). ts_offset_us moves flow steps inside their
    slices instead of at their start."""
    ev = [
        {"ph": "M", "name": "process_name", "pid": PID, "tid": 0, "args": {"name": "python3"}},
        {"ph": "M", "name": "thread_name", "pid": PID, "tid": CLIENT_TID, "args": {"name": "python3"}},
        {"ph": "M", "name": "process_name", "pid": GPU_PID, "tid": 0, "args": {"name": "GPU 0"}},
        {"ph": "M", "name": "thread_name", "pid": GPU_PID, "tid": STREAM_TID, "args": {"name": "stream 7"}},
    ]
    if dispatcher_name:
        ev.append({"ph": "M", "name": "thread_name", "pid": PID, "tid": DISPATCHER_TID,
                   "args": {"name": "gpuprio dispatcher (GPU 0)"}})

    def fid(op):
        return hex(op) if string_ids else op

    def flow(ph, op, pid, tid, ts, **kw):
        e = {"ph": ph, "cat": "gpuprio.op", "name": "op", "id": fid(op), "pid": pid, "tid": tid,
             "ts": round(ts + ts_offset_us, 3)}
        e.update(kw)
        return e

    def op_events(i, op, api, name, cat, dispatched=True, gpu=True, kernel_op_id=None):
        t = 100.0 * i + 0.5
        out = [{"ph": "X", "cat": "client", "name": "cudaLaunchKernel" if cat == "kernel" else api,
                "pid": PID, "tid": CLIENT_TID, "ts": t, "dur": 5.0,
                "args": {"op_id": op, "priority": 0, "api": api, "on_caller": not dispatched}},
               {"ph": "b", "cat": "queue", "name": "queued p=0", "id": op, "pid": PID, "tid": CLIENT_TID,
                "ts": t + 1, "args": {"op_id": op, "priority": 0, "delay_us": float(i % 10)}},
               {"ph": "e", "cat": "queue", "name": "queued p=0", "id": op, "pid": PID, "tid": CLIENT_TID,
                "ts": t + 1 + i % 10}]
        if i in s_off_client:
            out.append(flow("s", op, PID, DISPATCHER_TID, t + 10))
        else:
            out.append(flow("s", op, PID, CLIENT_TID, t))
        if dispatched:
            out.append({"ph": "X", "cat": "dispatch", "name": api, "pid": PID, "tid": DISPATCHER_TID,
                        "ts": t + 10, "dur": 3.0, "args": {"op_id": op, "priority": 0, "correlation_id": op + 5000,
                                                           "result": 0}})
            out.append(flow("t", op, PID, DISPATCHER_TID, t + 10))
        if gpu:
            out.append({"ph": "X", "cat": cat, "name": name, "pid": GPU_PID, "tid": STREAM_TID,
                        "ts": t + 20, "dur": 50.0,
                        "args": {"op_id": op if kernel_op_id is None else kernel_op_id,
                                 "correlation_id": op + 5000, "priority": 0, "device": 0, "stream": STREAM_TID}})
            if i not in no_f:
                out.append(flow("f", op, GPU_PID, STREAM_TID, t + 20, bp="e"))
        return out

    for i in range(n_kernels):
        op = i + 1
        ev += op_events(i, op, "cuLaunchKernel", f"void gemm_kernel<{i}>(float*)", "kernel",
                        kernel_op_id=0 if i in zero_op_id else None)
    if extra_ops:
        ev += op_events(n_kernels, n_kernels + 1, "cuMemcpyHtoDAsync_v2", "Memcpy HtoD", "memcpy",
                        dispatched=False)
        ev += op_events(n_kernels + 1, n_kernels + 2, "cuEventRecord", "", "", gpu=False)
    ev.append({"ph": "X", "cat": "cuda_api", "name": "cudaStreamSynchronize", "pid": PID, "tid": CLIENT_TID,
               "ts": 100.0 * (n_kernels + 3), "dur": 40.0, "args": {"correlation_id": 99999}})
    ev.append({"ph": "C", "name": "queue depth GPU 0", "pid": PID, "ts": 1.0, "args": {"p=0": 1}})
    return {"traceEvents": ev, "displayTimeUnit": "ns", "baseTimeNanoseconds": 123456789,
            "otherData": {"gpuprio": {"version": 2, "pid": PID, "dropped_records": 0, "ops": n_kernels + 2,
                                      "ops_linked_to_gpu": n_kernels + 1, "gpu_records": n_kernels + 1,
                                      "gpu_records_linked_to_client": n_kernels + 1}}}


def make_profiler_trace(n_kernels=100, unlinked=(), key="External id", no_ext=()):
    """A torch.profiler (Kineto) Chrome trace: per kernel one aten cpu_op, one cuda_runtime
    cudaLaunchKernel and the kernel, with "External id" / "correlation" and an ac2g flow.
    unlinked: kernels whose External id matches no cpu_op; no_ext: kernels without the arg."""
    ev = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python3"}}]
    for i in range(n_kernels):
        ext, corr, t = 10 + i, 5000 + i, 100.0 * i
        ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::conv2d", "pid": 1, "tid": 1, "ts": t, "dur": 20,
                   "args": {key: ext, "Sequence number": i, "Ev Idx": i}})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                   "ts": t + 5, "dur": 4, "args": {"cbid": 211, "correlation": corr, key: ext}})
        kargs = {"queued": 0, "device": 0, "stream": 7, "correlation": corr, "registers per thread": 32}
        if i not in no_ext:
            kargs[key] = ext + 100000 if i in unlinked else ext
        ev.append({"ph": "X", "cat": "kernel", "name": f"void k{i}()", "pid": 0, "tid": 7, "ts": t + 30,
                   "dur": 10, "args": kargs})
        ev.append({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": 1, "tid": 1, "ts": t + 5})
        ev.append({"ph": "f", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": 0, "tid": 7, "ts": t + 30, "bp": "e"})
    ev.append({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 7, "ts": 1, "dur": 1,
               "args": {"correlation": 1}})
    return {"schemaVersion": 1, "deviceProperties": [], "traceEvents": ev, "traceName": "x.json"}


def write_json(path, doc):
    """Gzipped when the name ends in .gz, as gpuprio writes such a trace."""
    import gzip

    with (gzip.open(path, "wt") if path.endswith(".gz") else open(path, "w")) as fh:
        json.dump(doc, fh)


# --------------------------------------------------------------------------------------------------
# The stand-in python3 for run_trace_check.sh (used when this file runs as `PYTHON=this workload ...`).


def fake_python(argv):
    """argv = [trace_check.py, 'workload', NAME, options...] -> synthetic run; else the real python3."""
    if len(argv) < 2 or argv[1] != "workload":
        os.execv(sys.executable, [sys.executable] + argv)
    name = argv[2]
    opts = {}
    rest = argv[3:]
    for i in range(0, len(rest) - 1):
        if rest[i].startswith("--"):
            opts[rest[i][2:]] = rest[i + 1]
    preload = bool(os.environ.get("LD_PRELOAD"))
    if preload and os.environ.get("FAKE_HANG_GPUPRIO") == "1":
        import time

        time.sleep(60)
    if preload and os.environ.get("GPUPRIO_LOG") == "info":
        print("gpuprio: info: calls api=cuLaunchKernel total=90 dlsym=0 gpa=90 gpa_ptsz=0 exported=0", file=sys.stderr)
        print("gpuprio: info: calls api=cuLaunchKernelEx total=10 dlsym=0 gpa=10 gpa_ptsz=0 exported=0", file=sys.stderr)
        print("gpuprio: info: calls api=cuMemcpyHtoDAsync_v2 total=1 dlsym=0 gpa=1 gpa_ptsz=0 exported=0", file=sys.stderr)
    if name == "profiler_range":
        # 20 warm-up + 2 x 10 iterations of 10 ops, 30 setup ops; the range holds 10 iterations.
        print("gpuprio: info: priority=0 (normal) ops=430 on_caller=100.0% queued=0", file=sys.stderr)
        if os.environ.get("GPUPRIO_TRACE"):
            write_json(os.environ["GPUPRIO_TRACE"], make_gpuprio_trace(98))
    elif os.environ.get("GPUPRIO_TRACE"):
        write_json(os.environ["GPUPRIO_TRACE"], make_gpuprio_trace(100))
        if name == "profiler":
            print("gpuprio: info: CUPTI is taken by another subscriber; tracing with NVTX", file=sys.stderr)
    rec = {"workload": name, "ok": True, "error": None, "gpuprio_mode": os.environ.get("GPUPRIO_MODE", "")}
    if name == "latency":
        base = 2.0 if not preload else (2.4 if os.environ.get("GPUPRIO_TRACE") else 2.2)
        rec.update(mean_ms=base, p50_ms=base - 0.1, p99_ms=base + 1.0)
    if name == "profiler":
        write_json(opts["trace-out"], make_profiler_trace(50))
    if name == "profiler_range":
        iters = int(opts.get("iters", "10"))
        rec.update(iters_in_range=iters, iters_total=int(opts.get("warmup", "20")) + 2 * iters,
                   trace_written_before_exit=bool(os.environ.get("GPUPRIO_TRACE")),
                   trace_written_after_stop_s=0.05)
    write_json(opts["result"], rec)
    print("trace_check: workload " + json.dumps(rec))
    return 0


# --------------------------------------------------------------------------------------------------
# Tests.


class GpuprioTraceTest(unittest.TestCase):
    def analyze(self, **kw):
        return tc.analyze_gpuprio_trace(make_gpuprio_trace(**kw))

    def test_good_trace_passes(self):
        r = self.analyze()
        self.assertTrue(r["passed"], r["failures"])
        self.assertEqual(r["kernels"], 100)
        self.assertEqual(r["kernels_linked"], 100)
        self.assertEqual(r["kernels_linked_fraction"], 1.0)
        self.assertEqual(r["dispatch_slices_on_dispatcher_thread"], 101)  # 100 kernels + cuEventRecord
        self.assertEqual(r["flow_t_on_dispatch_slice"], 101)
        self.assertEqual(r["flow_s_without_f"], 1)  # the cuEventRecord op: allowed
        self.assertEqual(r["flow_s_without_f_by_api"], {"cuEventRecord": 1})
        self.assertEqual(r["flow_s_without_f_gpu_work"], 0)
        self.assertEqual(r["flow_f_without_s"], 0)
        self.assertEqual(r["flows_ts_not_at_slice_start"], 0)
        self.assertEqual(r["client_slices_on_caller"], 1)  # the memcpy
        self.assertEqual(r["slices_by_cat"]["memcpy"], 1)
        self.assertEqual(r["per_priority"]["0"]["ops_queued"], 102)
        self.assertEqual(r["per_priority"]["0"]["queue_delay_us"]["max"], 9.0)
        self.assertEqual(r["other_data"]["dropped_records"], 0)

    def test_threshold_is_99_percent(self):
        r = self.analyze(zero_op_id={5})
        self.assertTrue(r["passed"], r["failures"])  # 99/100
        self.assertEqual(r["kernels_linked"], 99)
        r = self.analyze(zero_op_id={5, 6})
        self.assertFalse(r["passed"])  # 98/100
        self.assertIn("98/100", r["failures"][0])
        self.assertEqual(r["unlinked_kernel_examples"][0]["op_id"], 0)

    def test_kernel_without_flow_fails(self):
        r = self.analyze(no_f={3, 4})
        self.assertFalse(r["passed"])
        self.assertEqual(r["kernels_linked"], 98)
        self.assertEqual(r["flow_s_without_f_gpu_work"], 2)
        self.assertTrue(any("GPU work" in f for f in r["failures"]), r["failures"])

    def test_missing_f_of_one_kernel_fails_even_at_99_percent(self):
        r = self.analyze(no_f={3})
        self.assertEqual(r["kernels_linked"], 99)
        self.assertFalse(r["passed"])
        self.assertEqual(len(r["failures"]), 1)

    def test_s_not_on_client_slice_is_not_linked(self):
        r = self.analyze(s_off_client={1, 2})
        self.assertFalse(r["passed"])
        self.assertEqual(r["kernels_linked"], 98)
        self.assertEqual(r["flow_s_on_client_slice"], 100)  # 102 ops' s, 2 on the dispatcher

    def test_no_dispatcher_thread_fails(self):
        r = self.analyze(dispatcher_name=False)
        self.assertFalse(r["passed"])
        self.assertIn("gpuprio dispatcher", r["failures"][0])

    def test_no_kernels_fails(self):
        r = self.analyze(n_kernels=0)
        self.assertFalse(r["passed"])
        self.assertIn("no GPU kernel slices", r["failures"][0])

    def test_string_flow_ids_and_steps_inside_slices(self):
        r = self.analyze(string_ids=True, ts_offset_us=0.7)
        self.assertTrue(r["passed"], r["failures"])
        self.assertEqual(r["kernels_linked"], 100)
        self.assertGreater(r["flows_ts_not_at_slice_start"], 0)

    def test_files(self):
        d = tempfile.mkdtemp()
        try:
            p = os.path.join(d, "t.json")
            write_json(p, make_gpuprio_trace(10))
            self.assertTrue(tc.analyze_file(p, tc.analyze_gpuprio_trace)["passed"])
            with gzip.open(p + ".gz", "wt") as fh:
                json.dump(make_gpuprio_trace(10), fh)
            self.assertTrue(tc.analyze_file(p + ".gz", tc.analyze_gpuprio_trace)["passed"])
            with open(p, "w") as fh:
                fh.write('{"traceEvents": [')  # truncated: the writer died
            r = tc.analyze_file(p, tc.analyze_gpuprio_trace)
            self.assertFalse(r["passed"])
            self.assertIn("cannot be read as JSON", r["failures"][0])
            r = tc.analyze_file(os.path.join(d, "missing.json"), tc.analyze_gpuprio_trace)
            self.assertFalse(r["passed"])
            write_json(p, {"no": "events"})
            self.assertFalse(tc.analyze_file(p, tc.analyze_gpuprio_trace)["passed"])
            # The command line: exit code follows the result.
            write_json(p, make_gpuprio_trace(10))
            self.assertEqual(run_quiet([sys.executable, TC, "analyze-trace", p]), 0)
            write_json(p, make_gpuprio_trace(10, zero_op_id={1}))
            self.assertEqual(run_quiet([sys.executable, TC, "analyze-trace", p]), 1)
            self.assertEqual(run_quiet([sys.executable, TC, "analyze-trace", p, "--min-linked", "0.9"]), 0)
        finally:
            shutil.rmtree(d)

    def test_helpers(self):
        self.assertEqual(tc.percentile([3, 1, 2], 50), 2)
        self.assertEqual(tc.percentile(list(range(1, 101)), 99), 99)
        self.assertEqual(tc.percentile(list(range(1, 501)), 99), 495)
        self.assertIsNone(tc.percentile([], 50))
        self.assertEqual(tc.norm_id("0x2a"), 42)
        self.assertEqual(tc.norm_id("42"), 42)
        self.assertEqual(tc.norm_id(42.0), 42)
        self.assertEqual(tc.to_ns(1.2345), 1235 if round(1234.5) == 1235 else 1234)
        calls = tc.parse_calls("x\ngpuprio: info: calls api=cuLaunchKernel total=7 dlsym=0 gpa=7 gpa_ptsz=0 exported=0\n"
                               "gpuprio: info: calls api=cuLaunchKernel total=3 dlsym=3 gpa=0 gpa_ptsz=0 exported=0\n")
        self.assertEqual(calls, {"cuLaunchKernel": 10})


class ProfilerTraceTest(unittest.TestCase):
    def test_good_trace_passes(self):
        r = tc.analyze_profiler_trace(make_profiler_trace(100))
        self.assertTrue(r["passed"], r["failures"])
        self.assertEqual(r["kernels"], 100)
        self.assertEqual(r["kernels_linked_to_cpu_op"], 100)
        self.assertEqual(r["kernels_with_runtime_correlation"], 100)
        self.assertEqual(r["ac2g_flows"]["both"], 100)
        self.assertIn("External id", r["first_kernel_arg_keys"])
        self.assertIn("args", r["first_kernel_keys"])

    def test_field_name_variants(self):
        for key in ("external id", "external_id"):
            r = tc.analyze_profiler_trace(make_profiler_trace(20, key=key))
            self.assertTrue(r["passed"], (key, r["failures"]))

    def test_threshold_is_95_percent(self):
        r = tc.analyze_profiler_trace(make_profiler_trace(100, unlinked=set(range(5))))
        self.assertTrue(r["passed"], r["failures"])  # 95/100
        r = tc.analyze_profiler_trace(make_profiler_trace(100, unlinked=set(range(3)), no_ext={50, 51, 52}))
        self.assertFalse(r["passed"])  # 94/100
        self.assertEqual(r["kernels_with_external_id"], 97)
        self.assertIn("94/100", r["failures"][0])
        self.assertIn("first kernel's arg keys", r["failures"][0])

    def test_no_kernels_fails(self):
        r = tc.analyze_profiler_trace(make_profiler_trace(0))
        self.assertFalse(r["passed"])


def run_quiet(cmd, env=None):
    return subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env).returncode


TC = os.path.join(ROOT, "tests", "gpu", "trace_check.py")
SH = os.path.join(ROOT, "tests", "gpu", "run_trace_check.sh")


def put_run(wd, name, rc=0, result=None, stderr="", wall=5):
    base = os.path.join(wd, name)
    for ext, text in ((".rc", f"{rc}\n"), (".err", stderr), (".out", ""), (".cmd", f"cmd of {name}"), (".wall", f"{wall}\n")):
        with open(base + ext, "w") as fh:
            fh.write(text)
    if result is not None:
        write_json(base + ".result.json", result)


class ReportTest(unittest.TestCase):
    def setUp(self):
        self.d = tempfile.mkdtemp()
        self.wd = os.path.join(self.d, "work")
        self.out = os.path.join(self.d, "out")
        os.makedirs(self.wd)
        os.makedirs(self.out)
        ok = {"ok": True}
        calls = "gpuprio: info: calls api=cuLaunchKernel total=95 dlsym=0 gpa=95 gpa_ptsz=0 exported=0\n"
        put_run(self.wd, "resnet50_trace", result=ok, stderr=calls)
        write_json(os.path.join(self.out, tc.RESNET_TRACE), make_gpuprio_trace(100))
        # The fast-path run: the same trace is fine (its check only drops the dispatcher rule).
        put_run(self.wd, "resnet50_trace_fast", result=ok, stderr=calls)
        write_json(os.path.join(self.wd, tc.RESNET_TRACE_FAST), make_gpuprio_trace(100))
        for r in (1, 2, 3):
            for cfg, m in (("native", 2.0), ("schedule", 2.2), ("trace", 2.4 + r * 0.01),
                           ("trace-gz", 2.45), ("trace-all", 2.6)):
                put_run(self.wd, f"latency.{cfg}.r{r}", result={"ok": True, "mean_ms": m, "p50_ms": m - 0.1,
                                                                "p99_ms": m + 1})
        write_json(os.path.join(self.wd, tc.LATENCY_TRACE.format(round=1)), make_gpuprio_trace(30))
        write_json(os.path.join(self.wd, tc.LATENCY_TRACE_GZ.format(round=1)), make_gpuprio_trace(30))
        put_run(self.wd, "profiler_range",
                result={"ok": True, "iters_in_range": 10, "iters_total": 40, "trace_written_before_exit": True,
                        "trace_written_after_stop_s": 0.2},
                stderr="gpuprio: info: priority=0 (normal) ops=430 on_caller=100.0% queued=0\n")
        write_json(os.path.join(self.wd, tc.RANGE_TRACE), make_gpuprio_trace(98))
        put_run(self.wd, "profiler.native", result=ok)
        write_json(os.path.join(self.wd, tc.PROFILER_NATIVE_TRACE), make_profiler_trace(50))
        put_run(self.wd, "profiler.gpuprio", result=ok)
        write_json(os.path.join(self.out, tc.PROFILER_TRACE), make_profiler_trace(50))
        put_run(self.wd, "profiler.both", result=ok, stderr="gpuprio: info: CUPTI is in use; NVTX fallback\n")
        write_json(os.path.join(self.wd, tc.BOTH_TORCH_TRACE), make_profiler_trace(0))  # kernels lost: reported only

    def tearDown(self):
        shutil.rmtree(self.d)

    def report(self, *extra):
        import contextlib
        import io

        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = tc.main(["report", "--workdir", self.wd, "--out", self.out, *extra])
        return rc, buf.getvalue()

    def test_all_pass(self):
        rc, text = self.report()
        self.assertEqual(rc, 0, text)
        self.assertTrue(text.startswith("gpuprio trace check: PASS"), text)
        for name in ("a_trace_resnet50", "b_overhead", "c_profiler_native", "c_profiler_gpuprio", "d_profiler_and_trace",
                     "e_profiler_range"):
            self.assertIn(f"PASS  {name}", text)
        self.assertIn("trace ops 100 of the process's 430", text)
        self.assertIn("launches caught by gpuprio 95", text)
        self.assertIn("gpuprio trace kernels -", text)  # check d wrote no gpuprio trace
        with open(os.path.join(self.out, "trace_overhead.json")) as fh:
            b = json.load(fh)
        self.assertAlmostEqual(b["ratios"]["schedule/native"]["mean_ms"], 1.1)
        self.assertAlmostEqual(b["ratios"]["trace/native"]["mean_ms"], 2.42 / 2.0)
        self.assertAlmostEqual(b["ratios"]["trace/schedule"]["p99_ms"], 3.42 / 3.2)
        self.assertEqual(b["trace_r1"]["kernels"], 30)
        self.assertAlmostEqual(b["ratios"]["trace-gz/native"]["mean_ms"], 2.45 / 2.0)
        self.assertEqual(b["trace_gz_file_bytes"][1:], [None, None])
        self.assertGreater(b["trace_gz_file_bytes"][0], 0)
        md = tc.read(os.path.join(self.out, "trace_overhead.md"))
        self.assertIn("| schedule + GPUPRIO_TRACE | 3/3 | 2.420 | 2.320 | 3.420 | 1.210 |", md)
        with open(os.path.join(self.out, "trace_check.json")) as fh:
            j = json.load(fh)
        self.assertTrue(j["passed"])
        d = [c for c in j["checks"] if c["name"] == "d_profiler_and_trace"][0]
        self.assertEqual(d["stderr_cupti_lines"], 1)
        self.assertIn("===== profiler.both rc=0", tc.read(os.path.join(self.out, "log.txt")))

    def test_failed_run_fails_with_stderr_tail(self):
        put_run(self.wd, "profiler.gpuprio", rc=1, result={"ok": False, "error": "RuntimeError: CUDA error"},
                stderr="Traceback (most recent call last):\nRuntimeError: CUDA error: unspecified launch failure\n")
        rc, text = self.report()
        self.assertEqual(rc, 1)
        self.assertIn("FAIL  c_profiler_gpuprio", text)
        self.assertIn("unspecified launch failure", text)
        self.assertIn("PASS  c_profiler_native", text)

    def test_bad_trace_and_timed_out_latency_round(self):
        write_json(os.path.join(self.out, tc.RESNET_TRACE), make_gpuprio_trace(100, zero_op_id=set(range(10))))
        put_run(self.wd, "latency.trace.r2", rc=124, stderr="")
        rc, text = self.report()
        self.assertEqual(rc, 1)
        self.assertIn("FAIL  a_trace_resnet50", text)
        self.assertIn("90/100", text)
        self.assertIn("FAIL  b_overhead", text)
        self.assertIn("latency.trace.r2: timed out", text)
        with open(os.path.join(self.out, "trace_overhead.json")) as fh:
            b = json.load(fh)
        self.assertEqual(b["configs"]["trace"]["rounds_ok"], 2)

    def test_profiler_range_fails_without_the_trace_or_with_every_op(self):
        put_run(self.wd, "profiler_range",
                result={"ok": True, "iters_in_range": 10, "iters_total": 40, "trace_written_before_exit": False},
                stderr="gpuprio: info: priority=0 (normal) ops=100 on_caller=100.0% queued=0\n")
        rc, text = self.report()
        self.assertEqual(rc, 1, text)
        self.assertIn("FAIL  e_profiler_range", text)
        self.assertIn("no trace file within 20 s of cuProfilerStop", text)
        self.assertIn("more than its 10 of 40 iterations", text)

    def test_profiler_d_failure_is_only_exit_code(self):
        put_run(self.wd, "profiler.both", rc=139, stderr="Segmentation fault\n")
        rc, text = self.report()
        self.assertEqual(rc, 1)
        self.assertIn("FAIL  d_profiler_and_trace", text)


class ShellEndToEndTest(unittest.TestCase):
    """run_trace_check.sh with this file as PYTHON (synthetic workloads)."""

    def setUp(self):
        self.d = tempfile.mkdtemp()
        self.fake = os.path.join(self.d, "fake_python")
        with open(self.fake, "w") as fh:
            fh.write(f"#!/bin/sh\nexec {sys.executable} {os.path.abspath(__file__)} --fake-python \"$@\"\n")
        os.chmod(self.fake, 0o755)
        self.lib = os.path.join(self.d, "libgpuprio.so")
        shutil.copy(find_preloadable(), self.lib)

    def tearDown(self):
        shutil.rmtree(self.d)

    def run_sh(self, out, *args, **env_extra):
        env = dict(os.environ, PYTHON=self.fake, GPUPRIO_LIB=self.lib, ROUNDS="2", ITERS="10", WARMUP="1")
        env.update(env_extra)
        env.pop("LD_PRELOAD", None)
        p = subprocess.run(["bash", SH, out, *args], capture_output=True, text=True, env=env, timeout=300)
        return p.returncode, p.stdout + p.stderr

    def test_pass(self):
        out = os.path.join(self.d, "out dir")  # a space: paths must be quoted
        rc, text = self.run_sh(out)
        self.assertEqual(rc, 0, text)
        self.assertIn("gpuprio trace check: PASS", text)
        names = sorted(os.listdir(out))
        self.assertEqual(names, ["log.txt", "resnet_trace.json", "torch_profiler_trace.json", "trace_check.json",
                                 "trace_check_summary.txt", "trace_overhead.json", "trace_overhead.md"])
        with open(os.path.join(out, "trace_overhead.json")) as fh:
            b = json.load(fh)
        self.assertEqual(b["configs"]["trace"]["rounds_ok"], 2)
        self.assertAlmostEqual(b["ratios"]["trace/schedule"]["mean_ms"], 2.4 / 2.2)
        with open(os.path.join(out, "trace_check.json")) as fh:
            j = json.load(fh)
        d = [c for c in j["checks"] if c["name"] == "d_profiler_and_trace"][0]
        self.assertEqual(d["gpuprio_trace"]["kernels"], 100)
        self.assertEqual(d["stderr_cupti_lines"], 1)
        a = [c for c in j["checks"] if c["name"] == "a_trace_resnet50"][0]
        self.assertEqual(a["kernel_launches_caught"], 100)
        self.assertIn("GPUPRIO_TRACE=" + out, a["run"]["cmd"])
        log = tc.read(os.path.join(out, "log.txt"))
        self.assertIn("===== latency.trace.r2", log)

    def test_native_only(self):
        out = os.path.join(self.d, "native")
        rc, text = self.run_sh(out, "--native-only", GPUPRIO_LIB="/nonexistent/lib.so")
        self.assertEqual(rc, 0, text)
        self.assertIn("gpuprio trace check: PASS (native only)", text)
        self.assertNotIn("a_trace_resnet50", text)
        self.assertIn("PASS  c_profiler_native", text)

    def test_hanging_gpuprio_runs_are_skipped(self):
        out = os.path.join(self.d, "hang")
        rc, text = self.run_sh(out, FAKE_HANG_GPUPRIO="1", TRACE_CHECK_TIMEOUT="2")
        self.assertEqual(rc, 1, text)
        self.assertIn("TIMED OUT", text)
        self.assertIn("skipped: gpuprio runs timed out twice", text)
        self.assertIn("PASS  c_profiler_native", text)
        self.assertIn("FAIL  a_trace_resnet50", text)

    def test_usage(self):
        p = subprocess.run(["bash", SH], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        p = subprocess.run(["bash", SH, os.path.join(self.d, "o"), "--bogus"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        env = dict(os.environ, GPUPRIO_LIB="/nonexistent/lib.so")
        p = subprocess.run(["bash", SH, os.path.join(self.d, "o")], capture_output=True, text=True, env=env)
        self.assertEqual(p.returncode, 1)
        self.assertIn("missing", p.stdout)


def find_preloadable():
    """A harmless shared library to stand in for libgpuprio.so in LD_PRELOAD."""
    for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib/aarch64-linux-gnu"):
        p = os.path.join(d, "libm.so.6")
        if os.path.exists(p):
            return p
    raise unittest.SkipTest("no libm.so.6 found")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--fake-python":
        sys.exit(fake_python(sys.argv[2:]))
    unittest.main()
