#!/usr/bin/env python3
"""GPU check: gpuprio's fallback when another tool already holds CUPTI (docs/architecture.md: one CUPTI client per process).

torch.profiler is entered before the process makes its first CUDA call, so Kineto subscribes to
CUPTI first; gpuprio, asked to trace (GPUPRIO_TRACE), then finds CUPTI taken at its first
scheduled call. Asserts: the program exits 0; gpuprio says so exactly once on stderr; it writes
no trace file; torch.profiler's own trace has kernels and >= 95% of them are linked to an aten op.

  python3 tests/gpu/cupti_taken_check.py OUT_DIR [--lib .gpu/libgpuprio.so]
Writes OUT_DIR/cupti_taken.txt; exit 0 on PASS.
"""
import argparse
import json
import os
import subprocess
import sys

CHILD = r'''
import sys, torch
from torch.profiler import profile, ProfilerActivity
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    x = torch.randn(256, 256, device="cuda")
    for _ in range(20):
        x = torch.relu(x @ x) / 256.0
    torch.cuda.synchronize()
prof.export_chrome_trace(sys.argv[1])
'''


def external_id(args):
    for key in ("External id", "external id", "external_id"):
        if key in args:
            return args[key]
    return None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--lib", default=os.path.join(os.path.dirname(__file__), "../../.gpu/libgpuprio.so"))
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    gp_trace = os.path.join(a.out, "cupti_taken.gpuprio_trace.json")
    prof_trace = os.path.join(a.out, "cupti_taken.torch_trace.json")
    env = dict(os.environ, LD_PRELOAD=os.path.abspath(a.lib), GPUPRIO_MODE="schedule",
               GPUPRIO_TRACE=gp_trace, GPUPRIO_DIRECT_ISSUE="0", PYTHONUNBUFFERED="1")
    r = subprocess.run([sys.executable, "-c", CHILD, prof_trace], env=env, capture_output=True,
                       text=True, timeout=240)
    failures = []
    if r.returncode != 0:
        failures.append(f"exit {r.returncode}: {r.stderr[-1500:]}")
    said = [l for l in r.stderr.splitlines() if l.startswith("gpuprio:") and "NVTX" in l]
    if len(said) != 1:
        failures.append(f"expected one gpuprio line about the NVTX fallback, got {len(said)}")
    if os.path.exists(gp_trace):
        failures.append("gpuprio wrote a trace although CUPTI was taken")
    kernels = linked = 0
    try:
        events = json.load(open(prof_trace))["traceEvents"]
        cpu_ids = {external_id(e.get("args", {})) for e in events if e.get("cat") == "cpu_op"}
        for e in events:
            if e.get("cat") == "kernel":
                kernels += 1
                linked += external_id(e.get("args", {})) in cpu_ids
    except (OSError, ValueError, KeyError) as e:
        failures.append(f"torch.profiler trace unreadable: {e}")
    if kernels == 0 or linked < 0.95 * kernels:
        failures.append(f"torch.profiler kernels {kernels}, linked to aten ops {linked}")
    lines = [f"cupti taken check: {'PASS' if not failures else 'FAIL'}",
             f"torch.profiler kernels {kernels}, linked to aten ops {linked}",
             "gpuprio said: " + (said[0] if said else "-")] + [f"failure: {f}" for f in failures]
    text = "\n".join(lines) + "\n"
    open(os.path.join(a.out, "cupti_taken.txt"), "w").write(text)
    print(text, end="")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
