#!/usr/bin/env python3
"""Two-GPU benchmark, the batch side: DistributedDataParallel ResNet-50 training over NCCL, one rank
per GPU, run by torchrun (run_ddp_bench.sh starts it beside the ResNet-18 server of
torch_two_process.py on GPU 0, natively and under gpuprio).

usage:
  python3 -m torch.distributed.run --standalone --nproc_per_node=2 tools/bench/ddp_train_bench.py \\
      --result F [--ready-file F] [--stop-file F] [--seconds 30] [--batch 64] [--precision bf16|fp32] ...

Each rank: torch.cuda.set_device(LOCAL_RANK), dist.init_process_group("nccl", device_id=...) (the
communicator is made at once, not at the first collective), torchvision's resnet50(weights=None)
(random weights) in channels_last, wrapped in DistributedDataParallel, SGD (momentum 0.9). The
data are synthetic and fixed: one batch of --batch images (224x224 by default) and labels made on
the GPU once, from a seed per rank, and used for every step, so no loader or copy from the host
takes part. --precision bf16 (the default) runs the forward pass under torch.autocast(bfloat16)
(weights, gradients and optimizer state stay fp32; bf16 needs no loss scaling); fp32 runs it in
fp32 (TF32 as torch's defaults leave it). cuDNN autotuning is off, as in torch_two_process.py:
the algorithms are the heuristic ones, so every run runs the same kernels and the warm-up takes
no measured time.

A step is zero_grad, forward, loss (cross entropy), backward (DDP all-reduces the gradients in
buckets, overlapped with the backward pass) and optimizer step, then torch.cuda.synchronize(), and
its end is taken on CLOCK_MONOTONIC (time.monotonic_ns(), the clock the server's request times use,
so the runner can cut the trainer's steps to the server's measured window). After each step the
ranks agree whether to stop: each says whether its --seconds have passed or --stop-file exists, and
a one-element all-reduce (MAX) decides for all, so that every rank leaves at the same step (a rank
that left alone would hang its peer in the next gradient all-reduce). That all-reduce and its
copy to the host are part of the next step's time (tens of microseconds against tens of
milliseconds).

--warmup-steps steps first (cuDNN and cuBLAS set-up, NCCL's first all-reduces, the caching
allocator filling), not measured; then rank 0 writes --ready-file (the runner starts the server
once it appears), then the measured steps run until --seconds pass (counted from the end of the
warm-up) or --stop-file appears. Rank 0 writes --result (JSON): steps (measured), steps_per_s over
the measured window (steps between the first and the last measured step end, over the time between
them), per-step times (consecutive step ends) with their percentiles, every measured step end
(step_end_ns) for the runner's report, and what ran (device, torch, batch, precision, world size,
whether libgpuprio.so was preloaded and with which priority). A rank that fails writes nothing but
its traceback on stderr; rank 0's failure is written to --result too (ok false, error).

Each rank writes its pid to --pid-dir/rankN.pid (torchrun starts every worker in a session of its
own, so the runner's kill of torchrun's process group does not reach them: the runner kills what is
left by these pids) and leaves by itself when its parent (torchrun) is gone.

--backend gloo --device cpu: the same loop on the CPU, for a check of this script on a machine
without a GPU (any torch with torchvision; init_process_group then gets no device_id).
"""

import argparse
import datetime
import json
import os
import statistics
import sys
import threading
import time
import traceback

from bench_stats import percentile
from torch_two_process import environment, write_result


def log(rank, msg):
    print("ddp_train_bench rank %s [%d]: %s" % (rank, os.getpid(), msg), file=sys.stderr, flush=True)


def write_pid(pid_dir, rank):
    if not pid_dir:
        return
    os.makedirs(pid_dir, exist_ok=True)
    tmp = os.path.join(pid_dir, ".rank%d.pid.tmp" % rank)
    with open(tmp, "w") as fh:
        fh.write("%d\n" % os.getpid())
    os.replace(tmp, os.path.join(pid_dir, "rank%d.pid" % rank))


def watch_parent(rank):
    """Leaves (exit 3) once this process's parent is gone: a torchrun killed by the runner's timeout
    cannot take its workers, which are in sessions of their own, with it. getppid() changes only
    when the parent process dies, whatever thread of it started this one."""
    parent = os.getppid()

    def watch():
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                log(rank, "parent %d gone: leaving" % parent)
                os._exit(3)
    threading.Thread(target=watch, name="ddp-bench-parent-watch", daemon=True).start()


def write_ready(path, rank):
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump({"pid": os.getpid(), "rank": rank, "t_ns": time.monotonic_ns()}, fh)
        fh.write("\n")
    os.replace(tmp, path)


def nccl_version(torch):
    v = torch.cuda.nccl.version()  # a tuple (2, 27, 3); an int in old releases
    return ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)


def train(a, rank, local_rank, world, res):
    """The benchmark proper; fills res (rank 0's result) as it goes."""
    t0 = time.monotonic()
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    import torchvision

    torch.backends.cudnn.benchmark = False
    if a.device == "cuda":
        torch.cuda.set_device(local_rank)
        dev = torch.device("cuda", local_rank)
    else:
        dev = torch.device(a.device)
    kwargs = {"device_id": dev} if dev.type == "cuda" else {}
    dist.init_process_group(a.backend, timeout=datetime.timedelta(seconds=a.nccl_timeout_s), **kwargs)
    if dist.get_world_size() != world:
        raise RuntimeError("WORLD_SIZE %d but the process group has %d ranks" % (world, dist.get_world_size()))
    fmt = {"channels_last": torch.channels_last, "contiguous": torch.contiguous_format}[a.memory_format]
    torch.manual_seed(0)  # the same initial weights on every rank (DDP also broadcasts rank 0's)
    model = torchvision.models.resnet50(weights=None).to(device=dev, memory_format=fmt)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank] if dev.type == "cuda" else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=a.lr, momentum=0.9)
    gen = torch.Generator(device="cpu").manual_seed(1000 + rank)
    x = torch.randn(a.batch, 3, a.image_size, a.image_size, generator=gen).to(dev).contiguous(memory_format=fmt)
    y = torch.randint(0, 1000, (a.batch,), generator=gen).to(dev)
    bf16 = a.precision == "bf16"
    sync = (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else (lambda: None)
    flag = torch.zeros(1, dtype=torch.int32, device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=bf16):
            out = ddp(x)
        loss = F.cross_entropy(out.float(), y)
        loss.backward()
        opt.step()
        return loss

    def all_stop(mine):
        """True on every rank once any rank wants to stop (a MAX all-reduce, synchronous)."""
        flag.fill_(1 if mine else 0)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return int(flag.item()) != 0

    res.update({
        "model": "resnet50", "impl": "torchvision %s" % torchvision.__version__, "torch": torch.__version__,
        "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else str(dev),
        "params": sum(p.numel() for p in model.parameters()),
        "nccl": nccl_version(torch) if a.backend == "nccl" else None,
    })
    sync()
    res["load_s"] = round(time.monotonic() - t0, 3)
    log(rank, "resnet50 DDP over %s, %d ranks, batch %d, %s, on %s; set up in %.1f s"
        % (a.backend, world, a.batch, a.precision, res["device"], res["load_s"]))

    t0 = time.monotonic()
    for _ in range(a.warmup_steps):
        step()
        sync()
    all_stop(False)  # every rank is through its warm-up
    res["warmup_s"] = round(time.monotonic() - t0, 3)
    if dev.type == "cuda":
        res["max_memory_allocated_gb"] = round(torch.cuda.max_memory_allocated(dev) / 2**30, 2)
    log(rank, "warm-up: %d steps in %.2f s" % (a.warmup_steps, res["warmup_s"]))
    if rank == 0 and a.ready_file:
        write_ready(a.ready_file, rank)

    start = time.monotonic_ns()
    deadline = start + int(a.seconds * 1e9)
    ends = []
    loss = None
    while True:
        loss = step()
        sync()
        t = time.monotonic_ns()
        ends.append(t)
        stop_file = bool(a.stop_file) and os.path.exists(a.stop_file)
        if all_stop(stop_file or t >= deadline):
            res["stopped_by"] = "stop-file" if stop_file else "seconds" if t >= deadline else "other rank"
            break
        if rank == 0 and len(ends) % 200 == 0:
            log(rank, "%d steps, %.2f steps/s so far" % (len(ends), (len(ends) - 1) / ((t - ends[0]) / 1e9)))
    res["final_loss"] = float(loss.detach().float().item())
    dist.destroy_process_group()

    step_ms = [(b - e) / 1e6 for e, b in zip(ends, ends[1:])]
    res["steps"] = len(ends)
    res["first_step_ms"] = (ends[0] - start) / 1e6
    res["window_start_ns"], res["window_end_ns"] = ends[0], ends[-1]
    res["window_s"] = (ends[-1] - ends[0]) / 1e9
    res["steps_per_s"] = (len(ends) - 1) / res["window_s"] if res["window_s"] > 0 else None
    res["images_per_s"] = res["steps_per_s"] * a.batch * world if res["steps_per_s"] else None
    for q, k in ((0.5, "step_p50_ms"), (0.9, "step_p90_ms"), (0.99, "step_p99_ms")):
        res[k] = percentile(step_ms, q)
    res["step_max_ms"] = max(step_ms) if step_ms else None
    res["step_mean_ms"] = statistics.fmean(step_ms) if step_ms else None
    res["step_end_ns"] = ends
    log(rank, "stopped by %s after %d measured steps: %s steps/s, step p50 %s ms"
        % (res["stopped_by"], len(ends), "-" if res["steps_per_s"] is None else "%.2f" % res["steps_per_s"],
           "-" if res["step_p50_ms"] is None else "%.1f" % res["step_p50_ms"]))
    if res["steps_per_s"] is None:
        res["error"] = "fewer than two measured steps"
    else:
        res["ok"] = True


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--result", required=True, help="rank 0's result (JSON)")
    p.add_argument("--ready-file", help="written by rank 0 once the warm-up is over")
    p.add_argument("--stop-file", help="the ranks stop after the step during which it appeared")
    p.add_argument("--seconds", type=float, default=30.0, help="measured seconds at most (after the warm-up)")
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--batch", type=int, default=64, help="images per rank per step")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--precision", choices=["bf16", "fp32"], default="bf16",
                   help="bf16: forward under torch.autocast(bfloat16); fp32: no autocast")
    p.add_argument("--memory-format", choices=["channels_last", "contiguous"], default="channels_last")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--backend", default="nccl", help="nccl; gloo (with --device cpu) for a check without a GPU")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--nccl-timeout-s", type=float, default=120.0)
    p.add_argument("--pid-dir", help="each rank writes its pid to DIR/rankN.pid")
    a = p.parse_args()

    try:
        rank, local_rank, world = (int(os.environ[k]) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE"))
    except (KeyError, ValueError):
        print("ddp_train_bench: RANK, LOCAL_RANK, WORLD_SIZE unset: run under "
              "python3 -m torch.distributed.run --nproc_per_node=2", file=sys.stderr)
        return 2
    write_pid(a.pid_dir, rank)
    watch_parent(rank)
    res = {"role": "trainer", "ok": False, "error": "", "rank": rank, "world_size": world, "batch": a.batch,
           "image_size": a.image_size, "precision": a.precision, "memory_format": a.memory_format,
           "backend": a.backend, "warmup_steps": a.warmup_steps, "seconds": a.seconds, "lr": a.lr,
           "cudnn_benchmark": False}
    res.update(environment())
    try:
        train(a, rank, local_rank, world, res)
    except Exception as e:
        res["ok"] = False
        res["error"] = "%s: %s" % (type(e).__name__, e)
        res["traceback"] = traceback.format_exc()[-3000:]
        log(rank, "failed: %s" % res["error"])
    if rank == 0:
        write_result(a.result, res)
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
