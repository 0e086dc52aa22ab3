#!/usr/bin/env python3
"""How much of the GPU the PyTorch servers' kernels need: whether a reserve of SMs can hold them.

Runs the servers of tools/bench/torch_two_process.py alone under torch.profiler (the decoder: a
request of a prefill and one CUDA graph replay per token; ResNet-18 batch 1 fp16 eager), and for
every kernel takes its grid, block, registers and shared memory from the trace. One wave of a
kernel needs min(SMs, ceil(blocks / blocks resident per SM)) SMs, the residency from the sm_90
limits (2048 threads, 64 warps, 32 blocks, 64 K registers in 256-register units per warp, 228 KB
of shared memory with 1 KB reserved per block). Per server it prints the share of GPU time in
kernels that need at most N SMs, and the GPU time predicted on a reserve of R SMs from the waves
alone (memory bandwidth, which a reserve also divides, is not modelled: the prediction is a lower
bound). docs/isolation.md says what the numbers decide.

    python3 tools/bench/torch_kernel_geometry.py OUT [--units N]

Writes OUT/geometry.txt (the report) and OUT/geometry.json (per server: the per-kernel rows
aggregated by kernel and shape, and the shares). The traces themselves are deleted.
"""

import argparse
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# sm_90 (H100, H200) limits per SM.
MAX_THREADS = 2048
MAX_WARPS = 64
MAX_BLOCKS = 32
REGISTERS = 65536
REGISTER_UNIT = 256   # registers are allocated per warp in units of this many
SHARED_BYTES = 233472  # 228 KB
SHARED_RESERVED = 1024  # per block

RESERVES = (8, 16, 20, 32, 48, 64, 96)
NEED_LIMITS = (8, 16, 20, 32, 64, 100)


def blocks_per_sm(threads, registers, shared):
    """Blocks of THREADS threads, REGISTERS registers per thread and SHARED bytes resident on one
    SM at once (at least 1: a kernel that launched fits once)."""
    warps = max(1, math.ceil(threads / 32))
    blocks = min(MAX_BLOCKS, MAX_WARPS // warps, MAX_THREADS // (warps * 32))
    if registers:
        per_warp = math.ceil(registers * 32 / REGISTER_UNIT) * REGISTER_UNIT
        blocks = min(blocks, (REGISTERS // per_warp) // warps)
    blocks = min(blocks, SHARED_BYTES // (shared + SHARED_RESERVED))
    return max(blocks, 1)


def kernel_rows(trace_events):
    """One row per kernel event of a Chrome trace (torch.profiler's export)."""
    rows = []
    for e in trace_events:
        if e.get("cat") != "kernel":
            continue
        a = e.get("args", {})
        g, b = a.get("grid", [1, 1, 1]), a.get("block", [1, 1, 1])
        rows.append({"name": e.get("name", "?"), "us": float(e.get("dur", 0)),
                     "blocks": g[0] * g[1] * g[2], "threads": b[0] * b[1] * b[2],
                     "registers": a.get("registers per thread", 0), "shared": a.get("shared memory", 0)})
    return rows


def summarize(rows, sms, units):
    """The shares and predictions for one server's kernels on a device of SMS SMs."""
    for r in rows:
        r["resident"] = blocks_per_sm(r["threads"], r["registers"], r["shared"])
        r["need"] = min(sms, math.ceil(r["blocks"] / r["resident"]))
    total = sum(r["us"] for r in rows) or 1.0

    def waves(r, n):
        return math.ceil(r["blocks"] / (r["resident"] * n))

    predicted = {R: sum(r["us"] * waves(r, R) / waves(r, sms) for r in rows) / total
                 for R in RESERVES if R <= sms}
    shares = {n: sum(r["us"] for r in rows if r["need"] <= n) / total for n in NEED_LIMITS + (sms,)}
    by_shape = {}
    for r in rows:
        key = (r["name"], r["blocks"], r["threads"], r["registers"], r["shared"])
        s = by_shape.setdefault(key, dict(r, count=0, total_us=0.0))
        s["count"] += 1
        s["total_us"] += r["us"]
    top = sorted(by_shape.values(), key=lambda s: -s["total_us"])
    return {"sms": sms, "units": units, "kernels_per_unit": len(rows) / max(units, 1),
            "gpu_us_per_unit": total / max(units, 1), "predicted_on_reserve": predicted,
            "share_needing_at_most": shares, "widest_need": max((r["need"] for r in rows), default=0),
            "top": [{k: s[k] for k in ("name", "count", "total_us", "blocks", "threads", "registers",
                                        "shared", "resident", "need")} for s in top[:15]]}


def report_lines(name, s):
    lines = ["== %s: %.0f kernels, %.1f us of GPU time per unit (%d units), %d SMs, widest kernel needs %d" %
             (name, s["kernels_per_unit"], s["gpu_us_per_unit"], s["units"], s["sms"], s["widest_need"])]
    for R, x in s["predicted_on_reserve"].items():
        lines.append("  on a reserve of %3d SMs: GPU time %.2fx (waves only)" % (R, x))
    for n, x in s["share_needing_at_most"].items():
        lines.append("  GPU time in kernels needing <= %3d SMs: %.3f" % (n, x))
    lines.append("  top kernels by GPU time: total_us count blocks threads regs smem resident need name")
    for t in s["top"]:
        lines.append("   %9.1f %5d %6d %5d %4d %6d %3d %4d %s" % (
            t["total_us"], t["count"], t["blocks"], t["threads"], t["registers"], t["shared"],
            t["resident"], t["need"], t["name"][:70]))
    return lines


def profile(torch, out, name, step, units, sms):
    """STEP run UNITS times under the profiler (after 5 unprofiled runs): its summary."""
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    path = os.path.join(out, name + "_trace.json")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
        for _ in range(units):
            step()
        torch.cuda.synchronize()
    p.export_chrome_trace(path)
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    os.remove(path)
    return summarize(kernel_rows(events), sms, units)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--units", type=int, default=10, help="requests or inferences profiled per server")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    import torch  # only here: the self-test imports this file without torch
    sys.path.insert(0, HERE)
    import torch_two_process as ttp
    dev = torch.device("cuda")
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    results, lines = {}, []
    with torch.inference_mode():
        job = argparse.Namespace(decode_batch=1, prompt_tokens=32, gen_tokens=32, vocab=32000)
        decoder = ttp.make_decoder(torch, 8, 1024, 8, job.vocab, job.prompt_tokens + job.gen_tokens)
        decoder = decoder.to(dev).half().eval()
        request = ttp.decode_server(torch, dev, decoder, job, torch.cuda.synchronize)
        results["decoder"] = profile(torch, a.out, "decoder", request, a.units, sms)
        resnet, _ = ttp.make_model(torch, "resnet18", "auto")
        resnet = resnet.to(device=dev, memory_format=torch.channels_last).half().eval()
        x = torch.randn(1, 3, 224, 224, device=dev, dtype=torch.half).contiguous(
            memory_format=torch.channels_last)
        results["resnet18_b1"] = profile(torch, a.out, "resnet18_b1", lambda: resnet(x), a.units, sms)
    for name, s in results.items():
        lines += report_lines(name, s)
    with open(os.path.join(a.out, "geometry.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(a.out, "geometry.json"), "w") as f:
        json.dump(results, f, indent=1)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
