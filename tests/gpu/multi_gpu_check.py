#!/usr/bin/env python3
"""Multi-GPU programs whose result must not change under gpuprio (tests/gpu/run_multi_gpu_check.sh
runs each natively and under every configuration and compares the digests it prints).

  xdev   one process, two GPUs: a stream on GPU 0 runs matmuls, a stream on GPU 1 runs others,
         the GPU 1 stream waits for the GPU 0 stream (an event recorded on GPU 0, waited on GPU 1),
         copies GPU 0's result over and adds it; several iterations. Work on GPU 0 is long, so a
         copy issued before its wait is satisfied reads stale data and changes the digest.
  graph  the same through CUDA graphs: one captured on each GPU, replayed with the GPU 1 stream
         waiting for the GPU 0 stream and copying GPU 0's result between the two replays (a
         capture cannot wait for another device's uncaptured work).
  ddp    (under torchrun --nproc_per_node=2) DistributedDataParallel ResNet-18 training over NCCL,
         five SGD steps on fixed synthetic data; rank 0 prints the digest of the weights (and
         fails if the ranks' weights differ). --no-set-device: without torch.cuda.set_device and
         init_process_group's device_id, tensors placed by name only.

Each prints one line `digest=<sha256> ...` (plus timings) and exits 0, or exits 1 with the error.
"""
import argparse
import hashlib
import os
import sys
import time

import torch


def digest(tensors):
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().contiguous().cpu().numpy().tobytes())
    return h.hexdigest()


def xdev(iterations, size):
    torch.manual_seed(1)
    d0, d1 = torch.device("cuda:0"), torch.device("cuda:1")
    w0 = torch.randn(size, size, device=d0) / size**0.5
    w1 = torch.randn(size, size, device=d1) / size**0.5
    a = torch.randn(size, size, device=d0)
    b = torch.randn(size, size, device=d1)
    s0 = torch.cuda.Stream(device=d0)
    s1 = torch.cuda.Stream(device=d1)
    torch.cuda.synchronize(d0)
    torch.cuda.synchronize(d1)
    start = time.perf_counter()
    for _ in range(iterations):
        with torch.cuda.stream(s0):
            for _ in range(8):  # long on GPU 0: a wait issued too early lets the copy read old `a`
                a = torch.tanh(a @ w0)
        with torch.cuda.stream(s1):
            b = torch.tanh(b @ w1)
            s1.wait_stream(s0)
            b = b + a.to(d1, non_blocking=True)
        # The next iteration's GPU 0 work overwrites nothing the copy reads (new tensors), but
        # the allocator may reuse `a`'s memory once s0 frees it: keep it alive for s1.
        a.record_stream(s1)
    torch.cuda.synchronize(d0)
    torch.cuda.synchronize(d1)
    elapsed = time.perf_counter() - start
    return digest([a, b]), elapsed


def graph(iterations, size):
    torch.manual_seed(2)
    d0, d1 = torch.device("cuda:0"), torch.device("cuda:1")
    w0 = torch.randn(size, size, device=d0) / size**0.5
    w1 = torch.randn(size, size, device=d1) / size**0.5
    a = torch.randn(size, size, device=d0)
    a1 = torch.empty(size, size, device=d1)  # GPU 1's copy of `a`
    b = torch.randn(size, size, device=d1)
    s0 = torch.cuda.Stream(device=d0)
    s1 = torch.cuda.Stream(device=d1)
    torch.cuda.synchronize(d0)
    torch.cuda.synchronize(d1)
    # Warm-up on the capture streams first: a capture must not create cuBLAS handles or
    # workspaces (as torch.cuda.graphs asks).
    with torch.cuda.device(d0), torch.cuda.stream(s0):
        torch.tanh(a @ w0)
    with torch.cuda.device(d1), torch.cuda.stream(s1):
        torch.tanh(b @ w1) + a1
    torch.cuda.synchronize(d0)
    torch.cuda.synchronize(d1)
    g0, g1 = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    # Static buffers: the graphs update them in place. A capture cannot wait for another
    # device's uncaptured work, so the cross-device copy runs eagerly between the replays.
    with torch.cuda.device(d0):
        with torch.cuda.graph(g0, stream=s0):
            for _ in range(8):
                a.copy_(torch.tanh(a @ w0))
    with torch.cuda.device(d1):
        with torch.cuda.graph(g1, stream=s1):
            b.copy_(torch.tanh(b @ w1) + a1)
    # Capture ran nothing: start again from the same values.
    torch.manual_seed(3)
    a.copy_(torch.randn(size, size, device=d0))
    b.copy_(torch.randn(size, size, device=d1))
    torch.cuda.synchronize(d0)
    torch.cuda.synchronize(d1)
    start = time.perf_counter()
    for _ in range(iterations):
        with torch.cuda.stream(s0):
            g0.replay()
        with torch.cuda.stream(s1):
            s1.wait_stream(s0)
            a1.copy_(a, non_blocking=True)
            g1.replay()
        s0.wait_stream(s1)  # the next g0 overwrites `a`, which the copy reads
    torch.cuda.synchronize(d0)
    torch.cuda.synchronize(d1)
    elapsed = time.perf_counter() - start
    return digest([a, b]), elapsed


def ddp(steps, batch, image_size, set_device):
    import torch.distributed as dist
    import torchvision

    rank = int(os.environ["RANK"])
    local_rank = int(os.environ["LOCAL_RANK"])
    dev = torch.device("cuda", local_rank)
    if set_device:
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl", device_id=dev)
    else:
        # As many scripts do: no current device set, every tensor placed by name (threads of
        # the process then start on device 0 while the rank's work is on its own device).
        dist.init_process_group("nccl")
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10).to(dev)
    model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank])
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator(device="cpu").manual_seed(100 + rank)
    x = torch.randn(batch, 3, image_size, image_size, generator=gen).to(dev)
    y = torch.randint(0, 10, (batch,), generator=gen).to(dev)
    torch.cuda.synchronize(dev)
    start = time.perf_counter()
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    torch.cuda.synchronize(dev)
    elapsed = time.perf_counter() - start
    d = digest([p for p in model.parameters()])
    # Every rank must hold the same weights (DDP's promise); rank 0 reports.
    mine = torch.tensor(list(bytes.fromhex(d)), dtype=torch.uint8, device=dev)
    gathered = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, mine)
    same = all(torch.equal(g, gathered[0]) for g in gathered)
    dist.destroy_process_group()
    if rank != 0:
        return None, elapsed
    if not same:
        raise RuntimeError("the ranks' weights differ after training")
    return d, elapsed


def main():
    p = argparse.ArgumentParser()
    p.add_argument("check", choices=["xdev", "graph", "ddp"])
    p.add_argument("--iterations", type=int, default=5)
    p.add_argument("--size", type=int, default=2048)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--no-set-device", action="store_true",
                   help="ddp: no torch.cuda.set_device / device_id (tensors placed by name only)")
    args = p.parse_args()
    if args.check != "ddp" and torch.cuda.device_count() < 2:
        print("multi_gpu_check: needs two GPUs", file=sys.stderr)
        return 1
    if args.check == "xdev":
        d, t = xdev(args.iterations, args.size)
    elif args.check == "graph":
        d, t = graph(args.iterations, args.size)
    else:
        d, t = ddp(args.iterations, args.batch, args.image_size, not args.no_set_device)
    if d is not None:
        print(f"digest={d} seconds={t:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
