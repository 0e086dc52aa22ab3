#!/usr/bin/env python3
"""PyTorch benchmark: a latency-critical ResNet-18 beside a ResNet-50 batch job, as two processes
or as two threads of one process.

usage:
  torch_two_process.py high --result F [--peer F] [--rate 20] [--requests N] ...   the serving process
  torch_two_process.py low  --result F [--peer F] [--stop-file F] [--seconds S] ... the batch process
  torch_two_process.py threads [--jobs high,low] --high-result F --low-result F [high and low options]
                                                                      both jobs, one thread each
  torch_two_process.py record [--form threads] --config C --round R --gpuprio 0|1 [--high-result F ...]
  torch_two_process.py brief < RECORD
  torch_two_process.py report RUNS.jsonl OUT.json OUT.txt
(run_torch_bench.sh runs all of it; record, brief and report need no torch.)

high: ResNet-18, batch 1, eval, inference_mode, fp16 and channels_last by default. Requests are
released open loop at --rate per second: request i is due at t0 + i / rate whatever happened to
the ones before, and its latency runs from that due time to its logits on the host (copied with
.cpu(), then torch.cuda.synchronize()), so a request that had to wait for an earlier one counts
that wait too. --warmup inferences (not timed) first, then it waits for the low process (with
--peer), then --warm-releases unmeasured releases, then --requests measured ones, or fewer if
--max-seconds of releases run out first (cut_short). After the warm-up, gc.freeze() puts what
torch, the model and the warm-up allocated out of the garbage collector's reach, as servers do, so a
full collection during the measured requests walks only their own objects. Over the measured window
the result also records the machine's CPU steal (/proc/stat) and how often the high thread was
preempted (getrusage), the host noise a p99 is read against.

low: ResNet-50 inference, batch --batch (1024), fp16, channels_last, back to back; each batch is
followed by torch.cuda.synchronize() and its completion published (images done, CLOCK_MONOTONIC
time). Inference at batch 1024 in fp16 needs a few GB of activations (training at that batch would
not fit beside another job as easily), and it is the usual shape of an offline scoring job.
--warmup-batches first (not counted), then it runs until --seconds pass, the high process sets the
stop word in the peer file, or --stop-file appears. Its own rate ("low alone") is images between
its first and last measured completion over the time between them.

The peer file (--peer, created by the low process under a temporary name and renamed once filled
in, 4 KiB, little-endian): magic, a sequence word, images done, time of the last completion (ns,
CLOCK_MONOTONIC, the clock time.monotonic_ns() reads), the stop word, the low pid, batches done.
The low process is the only writer of the counters and brackets each update with the sequence
word (odd while writing); a reader retries until it sees the same even value on both sides. The
high process reads (images, time) at the start and the end of its measured window; the low rate in
the window is the images between those two completions over the time between them, which does not
depend on where in a batch the window's ends fall.

threads: one process loads both models (in its main thread), then runs the high job and the low
job, each in a thread of its own on a CUDA stream of its own (torch.cuda.Stream, priority 0: no
stream priorities, unless TORCH_HIGH_STREAM_PRIORITY gives the high job's stream one), and writes
the same two results as the two processes would. Each job's synchronisation is its own stream's (stream.synchronize(); the copy of the logits syncs the
current stream), never torch.cuda.synchronize(), which would also wait for the other job's work.
The peer file's counters are kept in memory (LocalPeer) and read the same way. --jobs high or
--jobs low runs one thread only (the alone and low-alone baselines of this form). Under gpuprio
(libgpuprio.so in LD_PRELOAD) each job thread first sets its own priority through
tools/python/gpuprio.py (high 1, low -1; no GPUPRIO_PRIORITY is needed) and reads it back; the
result says whether that worked (priority_set). Natively nothing is set. Latency is measured as in
the high process; in this form it also takes in waits for the GIL (see run_threads). The low job's
peak memory (torch.cuda.max_memory_allocated) is the process's here, the small high job's included.

Models: torchvision.models.resnet18/50(weights=None) when torchvision is importable (--impl auto),
else the definitions below (same architecture: ResNet v1.5, random weights). The result says
which. cuDNN autotuning is off (torch.backends.cudnn.benchmark = False): algorithm choice is the
heuristic one and takes no measured time; the warm-up covers lazy initialisation and allocation.
"""

import argparse
import contextlib
import gc
import importlib.util
import json
import mmap
import os
import resource
import statistics
import struct
import sys
import threading
import time
import traceback

from bench_stats import (fmt, fmt_spread, js_of, pair_record, pair_record_args, percentile, ratio, report_main,
                         server_brief, spread)

PEER_BYTES = 4096
PEER_MAGIC = 0x3172656570687467  # "gthpeer1", little-endian
OFF_MAGIC, OFF_SEQ, OFF_IMAGES, OFF_TDONE, OFF_STOP, OFF_PID, OFF_BATCHES = 0, 8, 16, 24, 32, 40, 48


def cpu_times():
    """(steal, total) jiffies of every CPU since boot (/proc/stat), or None where unreadable."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    # user nice system idle iowait irq softirq steal [guest guest_nice, already in user and nice]
    return (fields[7] if len(fields) > 7 else 0), sum(fields[:8])


def thread_switches():
    """(involuntary, voluntary) context switches of the calling thread so far (getrusage
    RUSAGE_THREAD): how often it was preempted, and how often it blocked (a wait for the GIL, a
    lock, a synchronize that sleeps); None where unavailable."""
    try:
        u = resource.getrusage(resource.RUSAGE_THREAD)
    except (AttributeError, OSError):
        return None
    return u.ru_nivcsw, u.ru_nvcsw


def log(role, msg):
    print("torch_two_process %s [%d]: %s" % (role, os.getpid(), msg), file=sys.stderr, flush=True)


# --- the peer file ---

class Peer:
    def __init__(self, mm):
        self.mm = mm

    def _get(self, off, fmt="<Q"):
        return struct.unpack_from(fmt, self.mm, off)[0]

    def _put(self, off, v, fmt="<Q"):
        struct.pack_into(fmt, self.mm, off, v)

    @classmethod
    def create(cls, path):
        tmp = "%s.tmp.%d" % (path, os.getpid())
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.ftruncate(fd, PEER_BYTES)
            mm = mmap.mmap(fd, PEER_BYTES, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        p = cls(mm)
        p._put(OFF_PID, os.getpid(), "<q")
        p._put(OFF_MAGIC, PEER_MAGIC)
        os.rename(tmp, path)
        return p

    @classmethod
    def open(cls, path, wait_s, role):
        """Waits until the file exists and the low process has completed a measured batch."""
        deadline = time.monotonic() + wait_s
        p = None
        while time.monotonic() < deadline:
            if p is None and os.path.exists(path):
                fd = os.open(path, os.O_RDWR)
                try:
                    if os.fstat(fd).st_size >= PEER_BYTES:
                        p = cls(mmap.mmap(fd, PEER_BYTES, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE))
                finally:
                    os.close(fd)
                if p is not None and p._get(OFF_MAGIC) != PEER_MAGIC:
                    raise RuntimeError("%s is not a peer file" % path)
            if p is not None and p.read()[2] >= 1:
                return p
            time.sleep(0.01)
        if p is not None:
            p.stop()  # not measured: let it go
            raise RuntimeError("the low process completed no batch within %.0f s" % wait_s)
        raise RuntimeError("%s did not appear within %.0f s (low process not started or failed)" % (path, wait_s))

    def publish(self, images, t_ns, batches):
        # Seqlock: only this process writes these words. On x86 stores are seen in program order,
        # and each pack_into is one plain copy, so a reader that saw an even, unchanged sequence
        # word on both sides read one consistent update.
        seq = self._get(OFF_SEQ)
        self._put(OFF_SEQ, seq + 1)
        self._put(OFF_IMAGES, images)
        self._put(OFF_TDONE, t_ns, "<q")
        self._put(OFF_BATCHES, batches)
        self._put(OFF_SEQ, seq + 2)

    def read(self):
        """(images done, time of the last completion in ns, batches done)."""
        while True:
            s1 = self._get(OFF_SEQ)
            v = (self._get(OFF_IMAGES), self._get(OFF_TDONE, "<q"), self._get(OFF_BATCHES))
            if s1 % 2 == 0 and self._get(OFF_SEQ) == s1:
                return v

    def stop(self):
        self._put(OFF_STOP, 1)

    def stop_requested(self):
        return self._get(OFF_STOP) != 0


class LocalPeer:
    """The peer file's counters and stop word for the threads form, in memory: the low thread
    publishes, the high thread reads, either may stop. The lock makes each update one consistent
    triple, as the sequence word does in the file."""

    def __init__(self):
        self._lock = threading.Lock()
        self._counters = (0, 0, 0)
        self._stop = threading.Event()
        self.low_ended = threading.Event()  # set when the low thread returns, whatever happened

    def publish(self, images, t_ns, batches):
        with self._lock:
            self._counters = (images, t_ns, batches)

    def read(self):
        with self._lock:
            return self._counters

    def stop(self):
        self._stop.set()

    def stop_requested(self):
        return self._stop.is_set()

    def wait_running(self, wait_s):
        """As Peer.open: returns once the low thread completed a measured batch; raises at once when
        it ended without one (it failed), instead of waiting out wait_s."""
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if self.read()[2] >= 1:
                return self
            if self.low_ended.is_set():
                raise RuntimeError("the low thread ended before completing a measured batch")
            time.sleep(0.01)
        self.stop()
        raise RuntimeError("the low thread completed no batch within %.0f s" % wait_s)


# --- models ---

def builtin_resnet(nn, name):
    """ResNet-18 / ResNet-50 (He et al. 2016) with the stride of a downsampling bottleneck on its
    3x3 convolution ("v1.5", the form torchvision builds), for machines without torchvision."""
    depths, bottleneck = {"resnet18": ([2, 2, 2, 2], False), "resnet50": ([3, 4, 6, 3], True)}[name]

    def conv_bn(cin, cout, k, stride=1, relu=True):
        mods = [nn.Conv2d(cin, cout, k, stride, k // 2, bias=False), nn.BatchNorm2d(cout)]
        return mods + [nn.ReLU(inplace=True)] if relu else mods

    class Block(nn.Module):
        def __init__(self, cin, width, stride):
            super().__init__()
            self.cout = width * 4 if bottleneck else width
            if bottleneck:
                body = conv_bn(cin, width, 1) + conv_bn(width, width, 3, stride) + conv_bn(width, self.cout, 1, relu=False)
            else:
                body = conv_bn(cin, width, 3, stride) + conv_bn(width, width, 3, relu=False)
            self.body = nn.Sequential(*body)
            # A projection where the shape changes, identity elsewhere.
            self.shortcut = None
            if stride != 1 or cin != self.cout:
                self.shortcut = nn.Sequential(*conv_bn(cin, self.cout, 1, stride, relu=False))
            self.relu = nn.ReLU(inplace=True)

        def forward(self, x):
            skip = x if self.shortcut is None else self.shortcut(x)
            return self.relu(self.body(x) + skip)

    mods = conv_bn(3, 64, 7, 2) + [nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for stage, depth in enumerate(depths):
        for i in range(depth):
            block = Block(cin, 64 << stage, 2 if stage > 0 and i == 0 else 1)
            mods.append(block)
            cin = block.cout
    mods += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 1000)]
    return nn.Sequential(*mods)


def make_model(torch, name, impl):
    if impl in ("auto", "torchvision"):
        try:
            import torchvision
            return getattr(torchvision.models, name)(weights=None), "torchvision %s" % torchvision.__version__
        except ImportError:
            if impl == "torchvision":
                raise
    return builtin_resnet(torch.nn, name), "builtin (this script's definition; torchvision not importable)"


def make_decoder(torch, layers, d_model, heads, vocab, max_len):
    """A decoder-only transformer (pre-LayerNorm, learned positions, GELU MLP of 4 d_model, untied
    head, random weights) with a static KV cache: prefill(prompt, caches) writes the prompt's keys and
    values at positions 0..P-1 (eager, causal attention over the prompt) and returns the next token
    (greedy); decode(tok, pos, caches, positions) is one step at the position in the device tensor
    pos (shape (1,)): it writes that position's keys and values and attends to every position up to
    it (a mask from pos, so that one captured graph serves every position)."""
    nn, F = torch.nn, torch.nn.functional
    if d_model % heads:
        raise ValueError("--d-model %d is not a multiple of --heads %d" % (d_model, heads))
    head_dim = d_model // heads

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
            self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
            self.proj = nn.Linear(d_model, d_model, bias=False)
            self.up = nn.Linear(d_model, 4 * d_model, bias=False)
            self.down = nn.Linear(4 * d_model, d_model, bias=False)

        def forward(self, x, k_cache, v_cache, at, mask):
            """x (B, T, d_model) at positions at (T,); mask None: the prompt (T tokens from 0)."""
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, heads, head_dim).permute(2, 0, 3, 1, 4)
            k_cache.index_copy_(2, at, k)
            v_cache.index_copy_(2, at, v)
            if mask is None:
                att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                att = F.scaled_dot_product_attention(q, k_cache, v_cache, attn_mask=mask)
            x = x + self.proj(att.transpose(1, 2).reshape(b, t, d_model))
            return x + self.down(F.gelu(self.up(self.ln2(x))))

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok_emb = nn.Embedding(vocab, d_model)
            self.pos_emb = nn.Embedding(max_len, d_model)
            self.layers = nn.ModuleList([Layer() for _ in range(layers)])
            self.ln = nn.LayerNorm(d_model)
            self.head = nn.Linear(d_model, vocab, bias=False)
            self.max_len, self.heads, self.head_dim = max_len, heads, head_dim

        def new_caches(self, batch, device, dtype):
            shape = (batch, heads, max_len, head_dim)
            return [(torch.zeros(shape, device=device, dtype=dtype), torch.zeros(shape, device=device, dtype=dtype))
                    for _ in self.layers]

        def prefill(self, prompt, caches):
            at = torch.arange(prompt.shape[1], device=prompt.device)
            x = self.tok_emb(prompt) + self.pos_emb(at)[None]
            for layer, (kc, vc) in zip(self.layers, caches):
                x = layer(x, kc, vc, at, None)
            return self.head(self.ln(x[:, -1])).argmax(-1)

        def decode(self, tok, pos, caches, positions):
            x = self.tok_emb(tok)[:, None] + self.pos_emb(pos)[None]
            mask = (positions <= pos).view(1, 1, 1, -1)
            for layer, (kc, vc) in zip(self.layers, caches):
                x = layer(x, kc, vc, pos, mask)
            return self.head(self.ln(x[:, 0])).argmax(-1)

    return Decoder()


def token_stats(due_ns, token_ns):
    """A request's time to first token (from its due time to the first token on the host) and time
    per output token (the mean gap between its tokens after the first: (last - first) / (n - 1)),
    in ms; TPOT is None for a request of one token."""
    ttft = (token_ns[0] - due_ns) / 1e6
    tpot = (token_ns[-1] - token_ns[0]) / 1e6 / (len(token_ns) - 1) if len(token_ns) > 1 else None
    return ttft, tpot


def decode_server(torch, dev, model, a, sync):
    """The decoder's request: prefill of a fixed random prompt of --prompt-tokens (eager), whose last
    position gives the first token, then --gen-tokens - 1 decode steps, each ONE replay of a CUDA
    graph captured once for the batch (--decode-batch) over static buffers: the step reads the last
    token and its position from device tensors, writes the next token back and advances the position
    itself. After the prefill and after each replay the token is copied to the host and the stream
    synchronised (a server streams its tokens). Returns request(): (time the last replay call
    returned, [time each token was on the host]) in monotonic ns. Called in inference mode."""
    b, p, n = a.decode_batch, a.prompt_tokens, a.gen_tokens
    if b < 1 or p < 1 or n < 3:
        raise ValueError("the decoder needs --decode-batch >= 1, --prompt-tokens >= 1 and --gen-tokens >= 3")
    caches = model.new_caches(b, dev, next(model.parameters()).dtype)
    prompt = torch.randint(0, a.vocab, (b, p), device=dev)
    tok = torch.zeros(b, dtype=torch.long, device=dev)
    pos = torch.full((1,), p, dtype=torch.long, device=dev)
    positions = torch.arange(model.max_len, device=dev)
    tok_host = torch.empty(b, dtype=torch.long)
    if dev.type == "cuda":
        tok_host = tok_host.pin_memory()

    def step():
        tok.copy_(model.decode(tok, pos, caches, positions))
        pos.add_(1)

    here = torch.cuda.current_stream(dev)
    side = torch.cuda.Stream(device=dev)
    side.wait_stream(here)
    with torch.cuda.stream(side):  # warm-up before capture, as torch.cuda.graph requires
        tok.copy_(model.prefill(prompt, caches))
        for _ in range(3):
            step()
    here.wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    # thread_local: the batch thread keeps launching while this thread captures.
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        step()
    sync()

    def request():
        tok.copy_(model.prefill(prompt, caches))
        pos.fill_(p)
        tok_host.copy_(tok, non_blocking=True)
        sync()
        times = [time.monotonic_ns()]
        launched = times[0]
        for _ in range(n - 1):
            graph.replay()
            launched = time.monotonic_ns()
            tok_host.copy_(tok, non_blocking=True)
            sync()
            times.append(time.monotonic_ns())
        return launched, times
    return request


def train_step(torch, dev, model, batch, image_size, backward_hook=None):
    """One training step of the ResNet-50 batch job: forward under bf16 autocast, cross-entropy on
    random labels, backward, AdamW (weights fp32). backward_hook(), when given, is called once in
    each thread that runs the backward pass's first node (autograd's device thread: see run_threads)."""
    F = torch.nn.functional
    x = torch.randn(batch, 3, image_size, image_size, device=dev).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (batch,), device=dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    seen = set()

    def hook(grad):
        tid = threading.get_native_id()
        if tid not in seen:
            seen.add(tid)
            backward_hook()
        return None

    def step():
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        if backward_hook is not None:
            loss.register_hook(hook)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return step


def setup(a, role, name):
    """Imports torch, builds the model on the device; returns (torch, device, dtype, model, sync, info).
    name: resnet18, resnet50 (inference: eval, in --dtype), resnet50-train (train mode, fp32 weights:
    the steps run under bf16 autocast) or decoder (make_decoder, in --dtype)."""
    t0 = time.monotonic()
    import torch
    torch.backends.cudnn.benchmark = False
    dev = torch.device(a.device)
    dtype = {"fp16": torch.float16, "fp32": torch.float32}[a.dtype]
    torch.manual_seed(0)
    dtype_name = a.dtype
    if name == "decoder":
        model = make_decoder(torch, a.layers, a.d_model, a.heads, a.vocab, a.prompt_tokens + a.gen_tokens)
        impl = "builtin decoder (this script's definition)"
        model = model.to(device=dev, dtype=dtype).eval()
    elif name == "resnet50-train":
        model, impl = make_model(torch, "resnet50", a.impl)
        model = model.to(device=dev, memory_format=torch.channels_last).train()
        dtype_name = "bf16 autocast"
    else:
        model, impl = make_model(torch, name, a.impl)
        model = model.to(device=dev, dtype=dtype, memory_format=torch.channels_last).eval()
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    sync()
    info = {
        "model": name, "impl": impl, "torch": torch.__version__, "dtype": dtype_name, "image_size": a.image_size,
        "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else str(dev),
        "params": sum(p.numel() for p in model.parameters()), "load_s": round(time.monotonic() - t0, 3),
    }
    log(role, "%s (%s), %s, %.1f M parameters, on %s; loaded in %.1f s"
        % (name, impl, dtype_name, info["params"] / 1e6, info["device"], info["load_s"]))
    return torch, dev, dtype, model, sync, info


def environment():
    return {
        "preloaded": "gpuprio" in os.environ.get("LD_PRELOAD", ""),
        "env_priority": os.environ.get("GPUPRIO_PRIORITY", ""),
        "env_domain": os.environ.get("GPUPRIO_DOMAIN", ""),
        "env_mode": os.environ.get("GPUPRIO_MODE", ""),
        "pid": os.getpid(),
    }


def graph_infer(torch, dev, model, x_host, sync):
    """infer() as one CUDA graph replay: a request then costs its GPU time and one launch, whatever
    the host does meanwhile (a GIL shared with a batch thread included), which tells a slower
    request's GPU-side causes from its host-side ones."""
    static_x = x_host.to(dev).contiguous(memory_format=torch.channels_last)
    here = torch.cuda.current_stream(dev)
    side = torch.cuda.Stream(device=dev)
    side.wait_stream(here)
    with torch.cuda.stream(side):  # warm-up before capture, as torch.cuda.graph requires
        for _ in range(3):
            model(static_x)
    here.wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    # thread_local: the batch thread keeps launching while this thread captures.
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        static_out = model(static_x)
    sync()

    def infer():
        static_x.copy_(x_host, non_blocking=True)
        graph.replay()
        launched = time.monotonic_ns()
        static_out.float().cpu()
        sync()
        return launched
    return infer


def run_high(a, loaded=None, local_peer=None, extra=None):
    """The high job; loaded (setup's tuple, with the job stream's synchronize as sync), local_peer
    and extra (fields for the result) come from run_threads in the threads form."""
    res = {"role": "high", "ok": False, "error": ""}
    res.update(environment())
    res.update(extra or {})
    decoder = a.server == "decoder"
    torch, dev, dtype, model, sync, info = loaded or setup(a, "high", a.server)
    res.update(info)
    if not decoder:
        x_host = torch.randn(1, 3, a.image_size, a.image_size).to(dtype)
        if dev.type == "cuda":
            x_host = x_host.pin_memory()

    def infer():
        """One request; returns when its last launch call returned (monotonic ns): the host phase,
        which a GIL or a driver lock shared with the batch thread lengthens, ends there."""
        x = x_host.to(dev, non_blocking=True).contiguous(memory_format=torch.channels_last)
        y = model(x)
        launched = time.monotonic_ns()
        y.float().cpu()
        sync()
        return launched

    res["graph"] = bool(a.high_graph) and not decoder
    with torch.inference_mode():
        if decoder:
            infer = decode_server(torch, dev, model, a, sync)
            res.update(decode_batch=a.decode_batch, prompt_tokens=a.prompt_tokens, gen_tokens=a.gen_tokens,
                       layers=a.layers, d_model=a.d_model, heads=a.heads, vocab=a.vocab)
            log("high", "decoder: batch %d, prompt %d tokens (eager prefill), %d tokens a request, each after the "
                "first one CUDA graph replay" % (a.decode_batch, a.prompt_tokens, a.gen_tokens))
        elif a.high_graph:
            infer = graph_infer(torch, dev, model, x_host, sync)
            log("high", "forward pass captured as a CUDA graph: one replay per request")
        t0 = time.monotonic()
        for _ in range(a.warmup):
            infer()
        res["warmup_s"] = round(time.monotonic() - t0, 3)
        log("high", "warm-up: %d inferences in %.2f s" % (a.warmup, res["warmup_s"]))
        # What torch, the model and the warm-up left is never garbage: out of the collector's
        # reach, a full collection during the measured requests walks only what they allocate (a
        # server's usual setting; every configuration alike, the baselines included).
        gc.collect()
        gc.freeze()
        peer = None
        if local_peer is not None:
            log("high", "waiting for the low thread (at most %.0f s)" % a.peer_wait_s)
            peer = local_peer.wait_running(a.peer_wait_s)
            log("high", "low thread running")
        elif a.peer:
            log("high", "waiting for the low process (at most %.0f s)" % a.peer_wait_s)
            peer = Peer.open(a.peer, a.peer_wait_s, "high")
            log("high", "low process running")
        try:
            period_ns = int(1e9 / a.rate)
            total = a.warm_releases + a.requests
            start = time.monotonic_ns() + 20_000_000
            max_seconds = a.max_seconds if a.max_seconds is not None else 1.5 * total / a.rate + 5.0
            deadline = start + int(max_seconds * 1e9)
            lat_ms, host_ms, late = [], [], 0
            ttft_ms, tpot_ms = [], []
            w0 = p0 = None
            for i in range(total):
                due = start + i * period_ns
                # Sleep to 1 ms before the due time, then spin: time.sleep alone wakes up to
                # ~0.1 ms late, which would be added to every latency.
                while True:
                    left = due - time.monotonic_ns()
                    if left <= 0:
                        break
                    if left > 1_500_000:
                        time.sleep((left - 1_000_000) / 1e9)
                if time.monotonic_ns() > deadline:
                    res["cut_short"] = True
                    break
                if i == a.warm_releases:
                    w0 = due
                    p0 = peer.read() if peer else None
                    cpu0, sw0 = cpu_times(), thread_switches()
                if time.monotonic_ns() - due > period_ns:
                    late += i >= a.warm_releases
                launched = infer()
                # The decoder's request returns its tokens' times as well.
                launched, tokens = launched if isinstance(launched, tuple) else (launched, None)
                if i >= a.warm_releases:
                    lat_ms.append((time.monotonic_ns() - due) / 1e6)
                    host_ms.append((launched - due) / 1e6)
                    if tokens:
                        ttft, tpot = token_stats(due, tokens)
                        ttft_ms.append(ttft)
                        if tpot is not None:
                            tpot_ms.append(tpot)
                    if len(lat_ms) % 100 == 0:
                        log("high", "%d/%d requests, p50 so far %.3f ms" % (len(lat_ms), a.requests,
                                                                          percentile(lat_ms, 0.5)))
            w1 = time.monotonic_ns()
            p1 = peer.read() if peer else None
            cpu1, sw1 = cpu_times(), thread_switches()
        finally:
            if peer:
                peer.stop()
    res["cut_short"] = res.get("cut_short", False)
    res["requests"] = a.requests
    res["requests_done"] = len(lat_ms)
    res["rate_per_s"] = a.rate
    res["releases_late_by_a_period"] = late
    res["latency_ms"] = [round(v, 4) for v in lat_ms]
    # From the due time to the request's last launch returning: the host's share of each latency.
    res["host_ms"] = [round(v, 4) for v in host_ms]
    res["host_p50_ms"], res["host_p99_ms"] = percentile(host_ms, 0.5), percentile(host_ms, 0.99)
    for q, k in ((0.5, "p50_ms"), (0.9, "p90_ms"), (0.99, "p99_ms")):
        res[k] = percentile(lat_ms, q)
    res["max_ms"] = max(lat_ms) if lat_ms else None
    res["mean_ms"] = statistics.fmean(lat_ms) if lat_ms else None
    if decoder:
        res["ttft_ms"] = [round(v, 4) for v in ttft_ms]
        res["tpot_ms"] = [round(v, 5) for v in tpot_ms]
        for name, vals in (("ttft", ttft_ms), ("tpot", tpot_ms)):
            res[name + "_p50_ms"], res[name + "_p99_ms"] = percentile(vals, 0.5), percentile(vals, 0.99)
    if w0 is not None:
        res["window_s"] = (w1 - w0) / 1e9
        res["window_start_ns"], res["window_end_ns"] = w0, w1
        # The host's noise over the measured window: the CPU time the hypervisor took from this
        # machine's CPUs (steal), and how often the high thread itself was preempted.
        if cpu0 and cpu1 and cpu1[1] > cpu0[1]:
            res["steal_pct"] = round(100.0 * (cpu1[0] - cpu0[0]) / (cpu1[1] - cpu0[1]), 3)
        if sw0 is not None and sw1 is not None and lat_ms:
            res["involuntary_switches_per_request"] = round((sw1[0] - sw0[0]) / len(lat_ms), 3)
            res["voluntary_switches_per_request"] = round((sw1[1] - sw0[1]) / len(lat_ms), 3)
    if p0 and p1:
        images, span_ns, batches = p1[0] - p0[0], p1[1] - p0[1], p1[2] - p0[2]
        res["low_batches_in_window"] = batches
        res["low_images_per_s"] = images / (span_ns / 1e9) if images > 0 and span_ns > 0 else 0.0
    if not lat_ms:
        res["error"] = "no measured request completed"
    else:
        res["ok"] = True
    return res


def run_low(a, loaded=None, local_peer=None, extra=None):
    """The low job; the arguments after a as run_high's."""
    train = a.batch_job == "resnet50-train"
    batch = low_batch(a)
    res = {"role": "low", "ok": False, "error": "", "batch": batch, "batch_job": a.batch_job}
    res.update(environment())
    res.update(extra or {})
    torch, dev, dtype, model, sync, info = loaded or setup(a, "low", low_model(a))
    res.update(info)
    if a.batch_job == "idle":
        return idle_low(a, torch, dev, sync, res, local_peer)
    if train:
        # Training needs autograd: no inference mode; the step's own hook (threads form, gpuprio)
        # gives autograd's device thread the low priority too.
        step = train_step(torch, dev, model, batch, a.image_size, getattr(a, "backward_hook", None))
    else:
        x = torch.randn(batch, 3, a.image_size, a.image_size, device=dev, dtype=dtype)
        x = x.contiguous(memory_format=torch.channels_last)

        def step():
            model(x)
    with contextlib.nullcontext() if train else torch.inference_mode():
        t0 = time.monotonic()
        for _ in range(a.warmup_batches):
            step()
            sync()
        res["warmup_s"] = round(time.monotonic() - t0, 3)
        if dev.type == "cuda":
            res["max_memory_allocated_gb"] = round(torch.cuda.max_memory_allocated(dev) / 2**30, 2)
        log("low", "warm-up: %d batches of %d in %.2f s" % (a.warmup_batches, batch, res["warmup_s"]))
        if a.idle_after_warmup:
            res["idle_after_warmup"] = True
            return idle_low(a, torch, dev, sync, res, local_peer)
        peer = local_peer if local_peer is not None else Peer.create(a.peer) if a.peer else None
        deadline = time.monotonic_ns() + int(a.seconds * 1e9)
        images = batches = 0
        first = last = None
        stopped_by = "seconds"
        while True:
            step()
            sync()
            t = time.monotonic_ns()
            images += batch
            batches += 1
            if peer:
                peer.publish(images, t, batches)
            first = first or (images, t)
            last = (images, t)
            stopped_by = stop_reason(a, peer) or stopped_by
            if stopped_by != "seconds" or t >= deadline:
                break
    res["stopped_by"] = stopped_by
    if extra and "backward_threads" in extra:  # filled in by the backward passes (threads form)
        res["backward_threads"] = extra["backward_threads"]
    res["batches"] = batches
    res["images"] = images
    res["own_window_s"] = (last[1] - first[1]) / 1e9
    res["own_images_per_s"] = (last[0] - first[0]) / res["own_window_s"] if res["own_window_s"] > 0 else None
    log("low", "stopped by %s after %d batches; own rate %s images/s"
        % (stopped_by, batches, "-" if res["own_images_per_s"] is None else "%.1f" % res["own_images_per_s"]))
    if res["own_images_per_s"] is None:
        res["error"] = "fewer than two measured batches"
    else:
        res["ok"] = True
    return res


def stop_reason(a, peer):
    """Why the low job should stop now: "peer" (the high job asked), "stop-file" (the runner's
    file exists), or None."""
    if peer and peer.stop_requested():
        return "peer"
    if a.stop_file and os.path.exists(a.stop_file):
        return "stop-file"
    return None


def idle_low(a, torch, dev, sync, res, local_peer):
    """The idle batch job: a CUDA context with its model loaded and nothing launched after one warm-up
    op, until stopped. It tells what a second client merely attached to the GPU (under MPS: one more
    client of the server) costs the high job, apart from any work of its own."""
    torch.ones(1, device=dev).add_(1)
    sync()
    if a.idle_empty_cache and dev.type == "cuda":
        torch.cuda.empty_cache()  # the caching allocator's free blocks go back to the driver
        res["memory_reserved_gb"] = round(torch.cuda.memory_reserved(dev) / 2**30, 2)
    peer = local_peer if local_peer is not None else Peer.create(a.peer) if a.peer else None
    t0 = time.monotonic_ns()
    if peer:
        peer.publish(0, t0, 1)  # ready: the high job waits for one completed "batch"
    deadline = t0 + int(a.seconds * 1e9)
    stopped_by = "seconds"
    while time.monotonic_ns() < deadline:
        stopped_by = stop_reason(a, peer) or stopped_by
        if stopped_by != "seconds":
            break
        time.sleep(0.02)  # rare wake-ups: in the threads form each takes the interpreter lock
    res.update(stopped_by=stopped_by, batches=0, images=0, own_window_s=(time.monotonic_ns() - t0) / 1e9,
               own_images_per_s=0.0, ok=True)
    log("low", "idle: stopped by %s after %.1f s" % (stopped_by, res["own_window_s"]))
    return res


def low_model(a):
    """setup's name for the low job's model."""
    return "resnet50-train" if a.batch_job == "resnet50-train" else "resnet50"


def low_batch(a):
    """--batch, or the batch job's default: 1024 images for inference, 256 for training (its
    activations, kept for the backward pass, take some 20 GB at 256 in bf16)."""
    return a.batch if a.batch else (256 if a.batch_job == "resnet50-train" else 1024)


def guarded(role, fn, *args, extra=None):
    """fn's result, or a failed result saying why: an exception is recorded, not lost (the runner
    reads the result file)."""
    try:
        return fn(*args, extra=extra)
    except Exception as e:
        return failure(role, e, extra)


def failure(role, e, extra=None):
    """The result of a job that raised e (called in the except clause, for the traceback)."""
    res = {"role": role, "ok": False, "error": "%s: %s" % (type(e).__name__, e),
           "traceback": traceback.format_exc()[-3000:]}
    res.update(environment())
    res.update(extra or {})
    log(role, "failed: %s" % res["error"])
    return res


def write_result(path, res):
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(res, fh)
        fh.write("\n")
    os.replace(tmp, path)


def run_role(a):
    res = guarded(a.cmd, run_high if a.cmd == "high" else run_low, a)
    write_result(a.result, res)
    return 0 if res.get("ok") else 1


# --- the threads form ---

THREAD_PRIORITY = {"high": 1, "low": -1}  # gpuprio's PRIORITY_HIGH / PRIORITY_LOW
HELPER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python", "gpuprio.py")


def load_helper():
    """tools/python/gpuprio.py as a module (by its path, so no other module named gpuprio can stand
    in for it), or the reason it could not be loaded."""
    try:
        spec = importlib.util.spec_from_file_location("gpuprio", HELPER)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod, ""
    except Exception as e:
        return None, "%s not loadable: %s: %s" % (HELPER, type(e).__name__, e)


def set_own_priority(role, helper, helper_error):
    """Under gpuprio: sets the calling thread's priority and reads it back. The fields say what was
    wanted and whether it took; natively nothing is called (priority_wanted None)."""
    info = {"priority_wanted": None, "priority_set": False, "thread_priority": None, "priority_error": ""}
    if not environment()["preloaded"]:
        return info
    want = THREAD_PRIORITY[role]
    info["priority_wanted"] = want
    try:
        if helper is None:
            raise RuntimeError(helper_error)
        # available() looks the C API up in the process's global scope, where LD_PRELOAD put it; a
        # preload that failed (ld.so says so on stderr and goes on) leaves it absent.
        if not helper.available():
            raise RuntimeError("libgpuprio.so is not loaded in this process (LD_PRELOAD=%s)"
                               % os.environ.get("LD_PRELOAD", ""))
        helper.set_thread_priority(want)
        info["thread_priority"] = helper.get_thread_priority()
        info["priority_set"] = info["thread_priority"] == want
        if not info["priority_set"]:
            info["priority_error"] = "set %d, read back %r" % (want, info["thread_priority"])
    except Exception as e:
        info["priority_error"] = "%s: %s" % (type(e).__name__, e)
    log(role, "thread priority %d: %s" % (want, "set" if info["priority_set"] else info["priority_error"]))
    return info


def backward_priority(helper, extra):
    """Sets the low priority for the calling thread (autograd's, in the backward pass of the threads
    form's training job) and notes it in the low result: backward_threads, {tid: read back}."""
    tid = threading.get_native_id()
    try:
        helper.set_thread_priority(THREAD_PRIORITY["low"])
        got = helper.get_thread_priority()
    except Exception as e:
        got = "%s: %s" % (type(e).__name__, e)
    extra.setdefault("backward_threads", {})[str(tid)] = got
    log("low", "backward thread %d: priority %r" % (tid, got))


def job_args(a, role):
    """The namespace run_high / run_low expect, from the threads command's options."""
    ja = argparse.Namespace(**vars(a))
    ja.result = a.high_result if role == "high" else a.low_result
    ja.peer = ja.stop_file = None  # the peer is a LocalPeer; the main thread stops the low job
    return ja


def run_threads(a):
    """Both jobs (or the one --jobs names) in threads of this process, each on a stream of its own.

    How the GIL enters the figures: torch releases the GIL inside every operator call (a kernel
    launch, the copy of the logits) and inside stream.synchronize(), so the low thread holds it only
    while Python code of its forward pass runs between two launches, and not while it waits for its
    batch on the GPU. The high thread's latency is still measured as in the high process, from the
    request's due time to its logits on the host (time.monotonic_ns() in the high thread), so what
    the high thread waits for the GIL (at most the interpreter's switch interval, recorded, and in
    practice the gap between two of the low thread's launches) is part of the latency, as it would
    be for a server that shares its process with a batch job. The other way round, the high thread
    holds the GIL while it spins the last millisecond before a due time; a low thread that wants to
    launch then waits, which the batch it already queued on the GPU covers.
    """
    jobs = [j for j in a.jobs.split(",") if j]
    if not jobs or any(j not in ("high", "low") for j in jobs) or len(set(jobs)) != len(jobs):
        raise SystemExit("--jobs: high, low or high,low, not %r" % a.jobs)
    for j in ("high", "low"):
        if j in jobs and not getattr(a, j + "_result"):
            raise SystemExit("--jobs %s needs --%s-result" % (a.jobs, j))
    helper, helper_error = load_helper() if environment()["preloaded"] else (None, "")
    # The interpreter's switch interval (how long a thread that wants the GIL waits before the
    # holder must hand it over): TORCH_SWITCH_INTERVAL_S, in the environment so that B_ENV can A/B
    # it; Python's 5 ms when unset.
    if os.environ.get("TORCH_SWITCH_INTERVAL_S"):
        sys.setswitchinterval(float(os.environ["TORCH_SWITCH_INTERVAL_S"]))
    results, threads = {}, {}
    peer = LocalPeer() if len(jobs) == 2 else None
    try:
        # Loaded here, one model after the other, so that the threads do not import torch at the
        # same time, and the load does not count in either job's time.
        loaded = {"high": setup(job_args(a, "high"), "high", a.server) if "high" in jobs else None,
                  "low": setup(job_args(a, "low"), "low", low_model(a)) if "low" in jobs else None}
    except Exception as e:
        for j in jobs:
            results[j] = failure(j, e, {"form": "threads"})
        loaded = None
    if loaded:
        def job(role):
            extra = {"form": "threads", "tid": threading.get_native_id(),
                     "switch_interval_s": sys.getswitchinterval()}
            # First, before any GPU work of this thread: gpuprio takes the thread's setting for
            # every operation the thread submits from then on.
            extra.update(set_own_priority(role, helper, helper_error))
            ja = job_args(a, role)
            if role == "low" and extra.get("priority_set") and a.batch_job == "resnet50-train":
                # loss.backward() runs the backward kernels from autograd's device thread, not this
                # one: the step gives that thread the low priority too (once per thread).
                ja.backward_hook = lambda: backward_priority(helper, extra)

            def body(ja, extra):
                torch, dev, dtype, model, _, info = loaded[role]
                # The high stream's CUDA priority: TORCH_HIGH_STREAM_PRIORITY (e.g. -1, greater;
                # torch clamps it to the device's range), in the environment so that B_ENV can set it
                # for gpuprio-b alone; 0 (the default, the low stream's) leaves priorities unused.
                want = int(os.environ.get("TORCH_HIGH_STREAM_PRIORITY", "0")) if role == "high" else 0
                stream = torch.cuda.Stream(device=dev, priority=want)
                extra["stream"] = "own (priority %d)" % stream.priority
                with torch.cuda.stream(stream):
                    fn = run_high if role == "high" else run_low
                    return fn(ja, (torch, dev, dtype, model, stream.synchronize, info), peer, extra=extra)
            try:
                results[role] = guarded(role, body, ja, extra=extra)
            finally:
                if peer is not None and role == "low":
                    peer.low_ended.set()

        for j in jobs:
            threads[j] = threading.Thread(target=job, args=(j,), name="gpuprio-bench-" + j)
        # The low thread first, as the low process is started first: the high one waits for it.
        for j in ("low", "high"):
            if j in threads:
                threads[j].start()
        if "high" in threads:
            threads["high"].join()
        if peer is not None:
            peer.stop()  # set by the high thread already, unless it failed before its requests
        if "low" in threads:
            # Alone, the low job ends after --seconds; beside the high one, once stopped, at the end
            # of the batch it is running (the process's timeout covers a hang in either case).
            threads["low"].join(None if peer is None else 15)
    stuck = [j for j, t in threads.items() if t.is_alive()]
    for j in jobs:
        res = results.get(j)
        if res is None or j in stuck:
            res = {"role": j, "ok": False, "form": "threads",
                   "error": "the %s thread did not end in time (still running when the results were written)" % j}
            res.update(environment())
        write_result(getattr(a, j + "_result"), res)
    rc = 0 if all(results.get(j, {}).get("ok") for j in jobs) and not stuck else 1
    if stuck:
        # A thread stuck in a CUDA call would keep the interpreter from exiting.
        log("threads", "%s still running: exiting without waiting for it" % ", ".join(stuck))
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)
    return rc


# --- record / report (standard library only) ---

# alone-gpuprio (the high job alone under gpuprio) and gpuprio-b (gpuprio with other settings or a
# second build: run_torch_bench.sh's B_ENV, LIB_B) appear only when asked for (TORCH_CONFIGS).
CONFIG_ORDER = ["alone", "alone-gpuprio", "low-alone", "native", "gpuprio", "gpuprio-b"]


def read_part(path, rc, err_path):
    part = {"rc": rc}
    try:
        with open(path) as fh:
            part["json"] = json.load(fh)
    except (OSError, ValueError) as e:
        part["json"] = None
        part["error"] = "no result (%s)" % type(e).__name__
    try:
        err = open(err_path, errors="replace").read() if err_path else ""
    except OSError:
        err = ""
    part["stderr_tail"] = err[-2000:]
    js = part["json"] or {}
    part["ok"] = bool(js.get("ok")) and rc == 0
    if not part["ok"]:
        if js.get("error"):
            part["error"] = js["error"]
        elif "error" not in part:
            part["error"] = "rc %s" % rc
        if rc in (124, 137):
            part["error"] += " (timed out)"
        elif rc != 0 and "rc " not in part["error"]:
            part["error"] += " (rc %s)" % rc
        if not js:
            tail = [l for l in err.splitlines() if l.strip()]
            if tail:
                part["error"] += ": " + tail[-1][:200]
    return part


def make_record(a):
    threads = a.form == "threads"
    rec = {"config": a.config, "round": int(a.round), "gpuprio": bool(int(a.gpuprio)), "form": a.form}

    def read(role):
        path = getattr(a, role + "_result")
        return None if path is None else read_part(path, int(getattr(a, role + "_rc")), getattr(a, role + "_err"))

    def check(role, js, rec):
        if bool(js.get("preloaded")) != rec["gpuprio"]:
            return "preloaded=%s in a %s run" % (js.get("preloaded"), "gpuprio" if rec["gpuprio"] else "native")
        if threads and js.get("form") != "threads":
            return "a result of the two-process form in a threads run"
        if threads and rec["gpuprio"] and js.get("env_priority"):
            # Each thread sets its own priority; a process default would hide a thread that did not.
            return "GPUPRIO_PRIORITY=%r set for the process" % js.get("env_priority")
        if threads and rec["gpuprio"] and not js.get("priority_set"):
            return "the thread's priority was not set (%s)" % js.get("priority_error")
        if not threads and rec["gpuprio"] and js.get("env_priority") != role:
            return "GPUPRIO_PRIORITY=%r, expected %r" % (js.get("env_priority"), role)
        if role == "low" and a.high_result is not None and js.get("stopped_by") not in ("peer", "stop-file"):
            return "the low process stopped by %r, not by the high process" % js.get("stopped_by")
        return None

    def one_process(rec):
        pids = {js_of(rec, role).get("pid") for role in ("high", "low") if js_of(rec, role)}
        if threads and len(pids) > 1:
            return ["the two jobs ran in different processes (pids %s)" % sorted(pids)]
        return []

    return pair_record(rec, a.skip, read, check, one_process)


def low_rate(r):
    if not r.get("ok"):
        return None
    if r["config"] == "low-alone":
        return js_of(r, "low").get("own_images_per_s")
    if r["config"] in ("native", "gpuprio", "gpuprio-b"):
        return js_of(r, "high").get("low_images_per_s")
    return None


def low_unit(rec):
    """What the low job's rate counts: training samples or images."""
    train = any(js_of(rec, role).get("batch_job") == "resnet50-train" for role in ("high", "low")) or \
        js_of(rec, "low").get("model") == "resnet50-train"
    return "samples/s" if train else "img/s"


def brief(rec):
    lr = low_rate(rec)
    b = server_brief(rec, "", None if lr is None else "low=%.1f %s" % (lr, low_unit(rec)))
    h = js_of(rec, "high")
    if rec.get("ok") and h.get("tpot_p50_ms") is not None:
        b += " ttft p50=%.3f tpot p50=%.4f p99=%.4f ms" % (h["ttft_p50_ms"], h["tpot_p50_ms"], h["tpot_p99_ms"])
    return b


def build(runs):
    rows = {}
    for c in CONFIG_ORDER:
        rs = [r for r in runs if r["config"] == c]
        good = [r for r in rs if r.get("ok")]
        lat = [v for r in good for v in js_of(r, "high").get("latency_ms", [])]
        host = [v for r in good for v in js_of(r, "high").get("host_ms", [])]
        ttft = [v for r in good for v in js_of(r, "high").get("ttft_ms", [])]
        tpot = [v for r in good for v in js_of(r, "high").get("tpot_ms", [])]
        rows[c] = {
            "runs": len(rs), "ok": len(good), "errors": [r.get("error") for r in rs if not r.get("ok")],
            "cut_short": sum(1 for r in good if js_of(r, "high").get("cut_short")),
            "requests": len(lat),
            "p50_ms": percentile(lat, 0.5), "p99_ms": percentile(lat, 0.99), "max_ms": max(lat) if lat else None,
            "host_p50_ms": percentile(host, 0.5), "host_p99_ms": percentile(host, 0.99),
            # The decoder server's: time to first token and time per output token, pooled.
            "ttft_p50_ms": percentile(ttft, 0.5), "ttft_p99_ms": percentile(ttft, 0.99),
            "tpot_p50_ms": percentile(tpot, 0.5), "tpot_p99_ms": percentile(tpot, 0.99),
            "round_tpot_p99_ms": spread([js_of(r, "high").get("tpot_p99_ms") for r in good]),
            "round_p50_ms": spread([js_of(r, "high").get("p50_ms") for r in good]),
            "round_p99_ms": spread([js_of(r, "high").get("p99_ms") for r in good]),
            "low_images_per_s": spread([low_rate(r) for r in good]),
            "low_batches_in_window": spread([js_of(r, "high").get("low_batches_in_window") for r in good
                                             if c in ("native", "gpuprio", "gpuprio-b")]),
        }
        for k in ("steal_pct", "involuntary_switches_per_request", "voluntary_switches_per_request"):
            rows[c][k] = spread([js_of(r, "high").get(k) for r in good])
    alone, low_alone = rows["alone"], rows["low-alone"]["low_images_per_s"]["median"]
    alone_by_round = {r["round"]: js_of(r, "high") for r in runs if r["config"] == "alone" and r.get("ok")}
    for c, row in rows.items():
        good = [r for r in runs if r["config"] == c and r.get("ok")]
        row["p50_vs_alone"] = ratio(row["p50_ms"], alone["p50_ms"])
        row["p99_vs_alone"] = ratio(row["p99_ms"], alone["p99_ms"])
        for q in ("ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99"):
            row[q + "_vs_alone"] = ratio(row[q + "_ms"], alone[q + "_ms"])
        row["round_p99_vs_alone"] = spread([ratio(js_of(r, "high").get("p99_ms"), alone["p99_ms"]) for r in good])
        row["low_vs_low_alone"] = ratio(row["low_images_per_s"]["median"], low_alone)
        row["round_low_vs_low_alone"] = spread([ratio(low_rate(r), low_alone) for r in good])
        # Round by round against the same round's alone run: the rounds interleave the
        # configurations, so a host that is slower for a while weighs on both sides of a ratio.
        for q in ("p50", "p99"):
            row["paired_%s_vs_alone" % q] = spread([
                ratio(js_of(r, "high").get(q + "_ms"), alone_by_round.get(r["round"], {}).get(q + "_ms"))
                for r in good])
    hj = next((js_of(r, "high") for r in runs if r.get("ok") and js_of(r, "high")), {})
    lj = next((js_of(r, "low") for r in runs if r.get("ok") and js_of(r, "low")), {})
    impls = sorted({js_of(r, role).get("impl") for r in runs for role in ("high", "low") if js_of(r, role).get("impl")})
    meta = {
        "device": hj.get("device") or lj.get("device"), "torch": hj.get("torch") or lj.get("torch"), "impl": impls,
        "high_model": hj.get("model"), "high_dtype": hj.get("dtype"), "rate_per_s": hj.get("rate_per_s"),
        "high_graph": sorted({bool(js_of(r, "high").get("graph")) for r in runs if js_of(r, "high")}),
        "requests_per_round": hj.get("requests"), "low_model": lj.get("model"), "low_dtype": lj.get("dtype"),
        "low_batch": lj.get("batch"), "image_size": hj.get("image_size") or lj.get("image_size"),
        "low_max_memory_gb": lj.get("max_memory_allocated_gb"),
        "low_batch_job": lj.get("batch_job") or "resnet50-infer",
        # The low job ran its warm-up, then idled (--idle-after-warmup); with its cache emptied.
        "low_idle_after_warmup": bool(lj.get("idle_after_warmup")),
        "low_idle_empty_cache": lj.get("memory_reserved_gb") is not None,
        # The decoder server's shape (None for ResNet-18).
        "decode_batch": hj.get("decode_batch"), "prompt_tokens": hj.get("prompt_tokens"),
        "gen_tokens": hj.get("gen_tokens"),
        "decoder_shape": None if hj.get("layers") is None else "%s layers, d_model %s, %s heads, vocab %s" % (
            hj.get("layers"), hj.get("d_model"), hj.get("heads"), hj.get("vocab")),
        "rounds": max((r["round"] for r in runs), default=0),
        # Records written before the threads form have no form: they are of the two-process form.
        "form": sorted({r.get("form", "processes") for r in runs}),
    }
    return {"bench": "torch_two_process", "meta": meta, "rows": rows,
            "runs": [strip_latencies(r) for r in runs]}


def strip_latencies(r):
    """The runs as recorded, less the per-request latency lists (the report's pooled figures hold them)."""
    r = json.loads(json.dumps(r))
    for role in ("high", "low"):
        js = js_of(r, role)
        if "latency_ms" in js:
            js["latency_ms_count"] = len(js.pop("latency_ms"))
        js.pop("host_ms", None)
        js.pop("ttft_ms", None)
        js.pop("tpot_ms", None)
    return r


def text(rep):
    m = rep["meta"]
    form = {("threads",): "one process, each job in a thread of its own with a CUDA stream of its own",
            ("processes",): "two processes"}.get(tuple(m.get("form") or ["processes"]), "mixed forms")
    if m.get("decode_batch") is not None:
        high = ("high: decoder (%s) batch %s %s, open loop at %s requests/s, %s measured per round; a request: "
                "prefill of %s prompt tokens (eager), then %s output tokens, each after the first one CUDA graph "
                "replay, each copied to the host; latency from the due time to the last token on the host; TTFT "
                "(to the first token) and TPOT (the mean gap between a request's later tokens) per request" % (
                    m.get("decoder_shape"), m["decode_batch"], m["high_dtype"], m["rate_per_s"],
                    m["requests_per_round"], m["prompt_tokens"], m["gen_tokens"]))
    else:
        high = ("high: %s batch 1 %s, open loop at %s requests/s, %s measured per round; latency from the due time to "
                "the logits on the host%s" % (m["high_model"], m["high_dtype"], m["rate_per_s"], m["requests_per_round"],
                                              {(True,): "; the forward pass as one CUDA graph replay per request "
                                                        "(--high-graph)",
                                               (False, True): "; MIXED: some runs replayed a CUDA graph"}.get(
                                                  tuple(m.get("high_graph") or []), "")))
    emptied = ", its cached memory returned to the driver first" if m.get("low_idle_empty_cache") else ""
    idle = "; IDLE after its warm-up batches: nothing launched while measured" + emptied \
        if m.get("low_idle_after_warmup") else ""
    if m.get("low_batch_job") == "idle":
        low = ("low: idle: its CUDA context and %s loaded, nothing launched after one warm-up op%s; %s rounds, "
               "configurations interleaved" % (m["low_model"], emptied, m["rounds"]))
    elif m.get("low_batch_job") == "resnet50-train":
        low = ("low: ResNet-50 training, batch %s, %s (fp32 weights), forward, backward, AdamW step, back to back; "
               "its rate in samples/s (the images/s columns) (peak memory %s GB)%s; %s rounds, configurations "
               "interleaved" % (m["low_batch"], m["low_dtype"], m["low_max_memory_gb"], idle, m["rounds"]))
    else:
        low = ("low: %s batch %s %s inference, back to back (peak memory %s GB)%s; %s rounds, configurations "
               "interleaved" % (m["low_model"], m["low_batch"], m["low_dtype"], m["low_max_memory_gb"], idle,
                                m["rounds"]))
    lines = [
        "PyTorch, %s, on %s (torch %s; models: %s)" % (form, m["device"], m["torch"], "; ".join(m["impl"]) or "-"),
        high,
        low,
        "p50/p99: over all measured requests of the configuration (pooled rounds); per-round values: median "
        "[min-max]; ratios against 'alone' (latency) and 'low-alone' (images/s); host p50/p99: from the due "
        "time to the request's last launch call returning (the host's share of the latency); paired: each "
        "round's p50 and p99 against the same round's alone run, median [min-max] over rounds; host noise: the "
        "machine's CPU steal over the measured window and the high thread's involuntary (preempted) and "
        "voluntary (blocked) context switches per request",
    ]
    hdr = "%-13s %5s %6s %8s %8s %8s %7s %7s %-13s %-24s %-24s %-24s %-20s" % (
        "config", "ok", "reqs", "p50 ms", "p99 ms", "max ms", "p50/al", "p99/al", "host p50/p99", "round p50 ms",
        "round p99 ms", "low images/s", "low/low-alone")
    lines += [hdr, "-" * len(hdr)]
    for c in CONFIG_ORDER:
        row = rep["rows"][c]
        if not row["runs"]:
            continue
        lines.append("%-13s %5s %6s %8s %8s %8s %7s %7s %-13s %-24s %-24s %-24s %-20s" % (
            c, "%d/%d" % (row["ok"], row["runs"]), row["requests"] or "-", fmt(row["p50_ms"], ".3f"),
            fmt(row["p99_ms"], ".3f"), fmt(row["max_ms"], ".3f"), fmt(row["p50_vs_alone"], ".2f"),
            fmt(row["p99_vs_alone"], ".2f"),
            "%s/%s" % (fmt(row.get("host_p50_ms"), ".2f"), fmt(row.get("host_p99_ms"), ".2f")),
            fmt_spread(row["round_p50_ms"], ".3f"),
            fmt_spread(row["round_p99_ms"], ".3f"), fmt_spread(row["low_images_per_s"], ".1f"),
            fmt_spread(row["round_low_vs_low_alone"], ".3f")))
        if row.get("tpot_p50_ms") is not None:
            lines.append("              tokens: TTFT p50/p99 %s/%s ms (%s/%s of alone), TPOT p50/p99 %s/%s ms "
                         "(%s/%s of alone), round TPOT p99 %s ms" % (
                             fmt(row["ttft_p50_ms"], ".3f"), fmt(row["ttft_p99_ms"], ".3f"),
                             fmt(row.get("ttft_p50_vs_alone"), ".2f"), fmt(row.get("ttft_p99_vs_alone"), ".2f"),
                             fmt(row["tpot_p50_ms"], ".4f"), fmt(row["tpot_p99_ms"], ".4f"),
                             fmt(row.get("tpot_p50_vs_alone"), ".2f"), fmt(row.get("tpot_p99_vs_alone"), ".2f"),
                             fmt_spread(row["round_tpot_p99_ms"], ".4f")))
        paired = row.get("paired_p50_vs_alone") or {}
        if paired.get("n") and c != "alone":
            lines.append("              paired p50/al %s  p99/al %s" % (
                fmt_spread(row["paired_p50_vs_alone"], ".2f"), fmt_spread(row["paired_p99_vs_alone"], ".2f")))
        if (row.get("steal_pct") or {}).get("n"):
            lines.append("              host noise: steal %s %%, high thread preempted %s times a request, "
                         "blocked %s times a request" % (
                             fmt_spread(row["steal_pct"], ".2f"),
                             fmt_spread(row["involuntary_switches_per_request"], ".2f"),
                             fmt_spread(row["voluntary_switches_per_request"], ".1f")))
        if row["cut_short"]:
            lines.append("              (%d run(s) cut short by --max-seconds)" % row["cut_short"])
        if row["requests"] and row["requests"] < 1000 and c != "low-alone":
            lines.append("              (fewer than 1000 measured requests: p99 rests on few samples)")
        for err in row["errors"]:
            lines.append("              failed: %s" % (err or "")[:160])
    return "\n".join(lines) + "\n"


def job_commands(sub):
    """The jobs' subcommands (high, low, threads), for report_main."""
    def common(s):
        s.add_argument("--device", default="cuda")
        s.add_argument("--dtype", choices=["fp16", "fp32"], default="fp16")
        s.add_argument("--impl", choices=["auto", "torchvision", "builtin"], default="auto")
        s.add_argument("--image-size", type=int, default=224)
        # In common, so that TORCH_ARGS reaches the high job in either form; the low job ignores it.
        s.add_argument("--high-graph", action="store_true",
                       help="the high job replays a CUDA graph of its forward pass, one per request")
        # The pair, in common too: the record of either job says which models ran.
        s.add_argument("--server", choices=["resnet18", "decoder"], default="resnet18",
                       help="the high job: ResNet-18 batch 1, or the decoder (make_decoder) generating tokens")
        s.add_argument("--batch-job", choices=["resnet50-infer", "resnet50-train", "idle"], default="resnet50-infer",
                       help="the low job: ResNet-50 inference, training steps (bf16 autocast, AdamW), or idle "
                       "(its context and model loaded, nothing launched: what an attached client alone costs)")
        s.add_argument("--idle-after-warmup", action="store_true",
                       help="the low job runs its warm-up batches (its memory, streams and libraries set up "
                       "as when it runs), then idles as --batch-job idle does")
        s.add_argument("--idle-empty-cache", action="store_true",
                       help="an idle low job first returns the caching allocator's free memory to the driver (in the "
                       "threads form the whole process's, the high job's included)")
        s.add_argument("--decode-batch", type=int, default=1, help="the decoder's batch (sequences a request)")
        s.add_argument("--prompt-tokens", type=int, default=32)
        s.add_argument("--gen-tokens", type=int, default=32, help="output tokens a request, the first included")
        s.add_argument("--layers", type=int, default=8)
        s.add_argument("--d-model", type=int, default=1024)
        s.add_argument("--heads", type=int, default=8)
        s.add_argument("--vocab", type=int, default=32000)

    def high_options(s):
        s.add_argument("--rate", type=float, default=20.0)
        s.add_argument("--requests", type=int, default=340)
        s.add_argument("--warmup", type=int, default=50)
        s.add_argument("--warm-releases", type=int, default=20)
        # Default: half again the releases' own span, plus 5 s (32 s for 340 requests at 20/s).
        s.add_argument("--max-seconds", type=float, default=None)
        s.add_argument("--peer-wait-s", type=float, default=60.0)

    def low_options(s):
        # Default (None): 1024 images for inference, 256 for training (low_batch).
        s.add_argument("--batch", type=int, default=None)
        s.add_argument("--warmup-batches", type=int, default=3)
        s.add_argument("--seconds", type=float, default=12.0)

    for role in ("high", "low"):
        s = sub.add_parser(role)
        s.add_argument("--result", required=True)
        s.add_argument("--peer")
        common(s)
        if role == "high":
            high_options(s)
        else:
            low_options(s)
            s.add_argument("--stop-file")
    # The options of both jobs, each once (the two jobs share the device, dtype, impl and size).
    t = sub.add_parser("threads")
    t.add_argument("--jobs", default="high,low")
    t.add_argument("--high-result")
    t.add_argument("--low-result")
    common(t)
    high_options(t)
    low_options(t)
    return {"high": run_role, "low": run_role, "threads": run_threads}


def main():
    return report_main("torch_two_process", lambda r: "%s round %s" % (r["config"], r["round"]), brief, build, text,
                       record=(pair_record_args("result", more=lambda r: r.add_argument(
                           "--form", choices=["processes", "threads"], default="processes")), make_record),
                       commands=job_commands)


if __name__ == "__main__":
    sys.exit(main())
