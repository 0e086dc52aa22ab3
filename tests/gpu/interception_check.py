#!/usr/bin/env python3
"""GPU-side interception checks for gpuprio (run on the GPU machine by run_interception_check.sh).

Subcommands:
  run CHECK --tag TAG --workdir DIR
      Runs one check (resnet, matmul, triton, graph) in this process, saves its output tensors to
      DIR/CHECK.TAG.pt and a result record (correctness, sha256 of every output) to DIR/CHECK.TAG.json.
      Exit 0 when the result is correct. The shell script runs each check once natively and once with
      libgpuprio.so preloaded, each time as a separate process.
  summarize --workdir DIR --out OUT --tags A B [--expect-gpuprio] [--expect-confined]
      Reads the results of tags A and B (e.g. native and preload), compares outputs bit for bit,
      checks the driver-API program, parses the `gpuprio: calls` lines from the stderr of tag B's runs
      (with --expect-gpuprio) and writes OUT/interception_summary.txt, OUT/interception.json and
      OUT/log.txt. Exit 0 only when everything passed.
"""

import argparse
import glob
import hashlib
import json
import os
import re
import sys
import time

try:  # Triton is only needed by the `triton` check; its kernel must live at module level.
    import triton
    import triton.language as tl
except ImportError:  # e.g. when only summarizing on a machine without Triton
    triton = None

if triton is not None:

    @triton.jit
    def gp_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(axis=0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, x + y, mask=mask)


TORCH_CHECKS = ["resnet", "train", "matmul", "triton", "graph"]
ALL_CHECKS = TORCH_CHECKS + ["driver"]


# --------------------------------------------------------------------------------------------------
# The checks (each returns (ok, details, outputs: dict name -> tensor)).


def _setup_torch():
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch

    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    # Full fp32 so the GPU results can be held against a CPU reference with tight tolerances.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if not torch.cuda.is_available():
        raise RuntimeError("torch.cuda.is_available() is False")
    return torch


def _rel_err(torch, got, ref):
    got = got.detach().double().cpu()
    ref = ref.detach().double().cpu()
    return float((got - ref).norm() / ref.norm().clamp_min(1e-300))


def check_resnet():
    torch = _setup_torch()
    import copy

    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).eval()  # random init, no download
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(8, 3, 224, 224, generator=gen)
    with torch.no_grad():
        ref = copy.deepcopy(model)(x)  # CPU float32 reference
        gpu_model = model.cuda()
        xg = x.cuda()
        y = gpu_model(xg)
        y2 = gpu_model(xg)  # a second forward in the same process must match the first
        torch.cuda.synchronize()
    y = y.cpu()
    y2 = y2.cpu()
    finite = bool(torch.isfinite(y).all())
    rel = _rel_err(torch, y, ref)
    repeat_equal = bool(torch.equal(y, y2))
    ok = finite and rel < 1e-3 and repeat_equal and tuple(y.shape) == (8, 1000)
    details = {
        "shape": list(y.shape),
        "finite": finite,
        "rel_err_vs_cpu_fp32": rel,
        "tolerance": 1e-3,
        "second_forward_bit_identical": repeat_equal,
        "argmax": y.argmax(dim=1).tolist(),
    }
    return ok, details, {"logits": y}


def check_matmul():
    torch = _setup_torch()
    gen = torch.Generator().manual_seed(2)
    cases = [
        # name, dtype, a shape, b shape, rtol, atol per sqrt(k)
        ("fp32_mm", torch.float32, (1024, 768), (768, 512), 1e-4, 1e-4),
        ("fp32_odd", torch.float32, (333, 517), (517, 129), 1e-4, 1e-4),
        ("bf16_mm", torch.bfloat16, (2048, 2048), (2048, 2048), 1e-2, 1e-2),
        ("fp16_bmm", torch.float16, (16, 256, 128), (16, 128, 256), 2e-3, 2e-3),
    ]
    outputs = {}
    details = {}
    ok = True
    for name, dtype, sa, sb, rtol, atol_k in cases:
        a = torch.randn(*sa, generator=gen).to(dtype)
        b = torch.randn(*sb, generator=gen).to(dtype)
        ref = torch.matmul(a.double(), b.double())  # float64 reference of the rounded inputs
        c = torch.matmul(a.cuda(), b.cuda())
        torch.cuda.synchronize()
        c = c.cpu()
        k = sa[-1]
        atol = atol_k * k ** 0.5
        close = bool(torch.allclose(c.double(), ref, rtol=rtol, atol=atol))
        max_err = float((c.double() - ref).abs().max())
        details[name] = {"dtype": str(dtype), "a": list(sa), "b": list(sb), "max_abs_err": max_err,
                         "rtol": rtol, "atol": atol, "ok": close}
        ok = ok and close
        outputs[name] = c
    # A linear layer with bias (cuBLASLt epilogue path).
    w = torch.randn(384, 640, generator=gen)
    bias = torch.randn(384, generator=gen)
    x = torch.randn(96, 640, generator=gen)
    ref = x.double() @ w.double().t() + bias.double()
    y = torch.nn.functional.linear(x.cuda(), w.cuda(), bias.cuda())
    torch.cuda.synchronize()
    y = y.cpu()
    close = bool(torch.allclose(y.double(), ref, rtol=1e-4, atol=1e-4 * 640 ** 0.5))
    details["fp32_linear_bias"] = {"max_abs_err": float((y.double() - ref).abs().max()), "ok": close}
    ok = ok and close
    outputs["fp32_linear_bias"] = y
    return ok, details, outputs


def check_triton():
    torch = _setup_torch()
    if triton is None:
        raise RuntimeError("triton is not importable")

    gen = torch.Generator().manual_seed(3)
    n = 1_000_003
    x = torch.randn(n, generator=gen)
    y = torch.randn(n, generator=gen)
    xg, yg = x.cuda(), y.cuda()
    out = torch.empty_like(xg)
    block = 1024
    grid = (triton.cdiv(n, block),)
    launches = 5
    for _ in range(launches):
        out.fill_(float("nan"))
        gp_add_kernel[grid](xg, yg, out, n, BLOCK=block)
    torch.cuda.synchronize()
    got = out.cpu()
    ref = x + y  # a float32 add is exact to the bit on CPU and GPU
    equal = bool(torch.equal(got, ref))
    details = {"n": n, "launches": launches, "bit_identical_to_cpu_add": equal,
               "max_abs_err": float((got - ref).abs().max()), "triton": triton.__version__}
    return equal, details, {"out": got}


def check_graph():
    torch = _setup_torch()
    gen = torch.Generator().manual_seed(4)
    w1 = torch.randn(256, 512, generator=gen) / 16
    w2 = torch.randn(512, 128, generator=gen) / 16
    inputs = [torch.randn(64, 256, generator=gen) for _ in range(5)]
    w1g, w2g = w1.cuda(), w2.cuda()

    def f(x):
        h = torch.relu(x @ w1g) * 2.0 + 1.0
        return torch.tanh(h @ w2g) + h.sum(dim=1, keepdim=True) * 1e-3

    static_x = torch.zeros(64, 256, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):  # warm-up on a side stream, as torch.cuda.graphs asks
            f(static_x)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()

    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_y = f(static_x)
    replays = []
    for x in inputs:
        static_x.copy_(x.cuda())
        g.replay()
        replays.append(static_y.clone())
    torch.cuda.synchronize()
    replays = [r.cpu() for r in replays]
    eager = [f(x.cuda()).cpu() for x in inputs]

    def ref_f(x):
        h = torch.relu(x.double() @ w1.double()) * 2.0 + 1.0
        return torch.tanh(h @ w2.double()) + h.sum(dim=1, keepdim=True) * 1e-3

    refs = [ref_f(x) for x in inputs]
    errs = [float((r.double() - ref).abs().max()) for r, ref in zip(replays, refs)]
    close = all(torch.allclose(r.double(), ref, rtol=1e-4, atol=1e-4) for r, ref in zip(replays, refs))
    distinct = all(not torch.equal(replays[i], replays[i + 1]) for i in range(len(replays) - 1))
    eager_equal = all(torch.equal(r, e) for r, e in zip(replays, eager))
    ok = close and distinct
    details = {"replays": len(replays), "max_abs_err_vs_fp64": max(errs), "all_close": close,
               "replays_differ_per_input": distinct, "replay_bit_identical_to_eager": eager_equal}
    return ok, details, {"replays": torch.stack(replays)}


def check_train():
    """One ResNet-50 training step (forward, backward, SGD with momentum) from a fixed seed: the
    loss, every gradient and the updated weights are compared bit for bit between the runs."""
    torch = _setup_torch()
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).cuda().train()  # random init, no download
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(8, 3, 224, 224, generator=gen).cuda()
    target = torch.randint(0, 1000, (8,), generator=gen).cuda()
    losses = []
    for _ in range(2):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), target)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    torch.cuda.synchronize()
    outputs = {"loss": torch.stack(losses).cpu()}
    for name in ("conv1.weight", "layer4.2.conv3.weight", "fc.weight", "fc.bias"):
        outputs["param." + name] = dict(model.named_parameters())[name].detach().cpu()
        outputs["grad." + name] = dict(model.named_parameters())[name].grad.detach().cpu()
    outputs["bn1.running_mean"] = model.bn1.running_mean.detach().cpu()
    finite = all(bool(torch.isfinite(t).all()) for t in outputs.values())
    details = {"losses": [float(v) for v in outputs["loss"]], "finite": finite,
               "loss_decreased": float(outputs["loss"][1]) < float(outputs["loss"][0])}
    return finite, details, outputs


CHECK_FUNCS = {"resnet": check_resnet, "matmul": check_matmul, "triton": check_triton,
               "graph": check_graph, "train": check_train}


def tensor_sha256(t):
    import torch

    t = t.detach().cpu().contiguous()
    h = hashlib.sha256()
    h.update(str(t.dtype).encode() + str(tuple(t.shape)).encode())
    h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def cmd_run(args):
    rec = {"check": args.check, "tag": args.tag, "ok": False, "details": {}, "sha256": {},
           "error": None, "pid": os.getpid(), "ld_preload": os.environ.get("LD_PRELOAD", ""),
           "gpuprio_mode": os.environ.get("GPUPRIO_MODE", "")}
    t0 = time.time()
    try:
        ok, details, outputs = CHECK_FUNCS[args.check]()
        import torch

        rec["ok"] = bool(ok)
        rec["details"] = details
        rec["sha256"] = {k: tensor_sha256(v) for k, v in outputs.items()}
        torch.save({k: v.detach().cpu() for k, v in outputs.items()},
                   os.path.join(args.workdir, f"{args.check}.{args.tag}.pt"))
        rec["torch"] = torch.__version__
    except Exception as e:  # recorded, and the exit code says it failed
        import traceback

        rec["error"] = f"{type(e).__name__}: {e}"
        traceback.print_exc()
    rec["elapsed_s"] = round(time.time() - t0, 3)
    with open(os.path.join(args.workdir, f"{args.check}.{args.tag}.json"), "w") as fh:
        json.dump(rec, fh, indent=1)
    print(f"interception_check: {args.check} [{args.tag}] ok={rec['ok']} "
          f"elapsed={rec['elapsed_s']}s details={json.dumps(rec['details'])}"
          + (f" error={rec['error']}" if rec["error"] else ""))
    return 0 if rec["ok"] else 1


# --------------------------------------------------------------------------------------------------
# Summary.

CALLS_RE = re.compile(r"^gpuprio: info: calls api=(\S+)((?:\s+\w+=\d+)+)\s*$")
PATHS = ["dlsym", "gpa", "gpa_ptsz", "exported"]


def parse_calls(text):
    """Sums the `gpuprio: calls` lines (one per API per process) of one stderr file."""
    apis = {}
    lines = 0
    for line in text.splitlines():
        m = CALLS_RE.match(line.strip())
        if not m:
            continue
        lines += 1
        fields = dict(kv.split("=") for kv in m.group(2).split())
        entry = apis.setdefault(m.group(1), {k: 0 for k in ["total"] + PATHS})
        for k, v in fields.items():
            entry[k] = entry.get(k, 0) + int(v)
    return apis, lines


ISOLATION_RE = re.compile(r"^gpuprio: info: isolation(?::| off)")
CONFINED_RE = re.compile(r"\bconfined=(\d+)")


def parse_isolation(text):
    """The library's isolation lines (`gpuprio: info: isolation: device D: ...` when it made a green
    context, `gpuprio: info: isolation off on device D: why` when not) and the ops it issued on twin
    streams (`confined=K` in its exit summary, summed over the process's lines)."""
    lines = [l.strip() for l in text.splitlines() if ISOLATION_RE.match(l.strip())]
    counts = [int(m.group(1)) for l in text.splitlines() if l.startswith("gpuprio:")
              for m in [CONFINED_RE.search(l)] if m]
    return {"lines": lines, "green_context": any(l.startswith("gpuprio: info: isolation: device") for l in lines),
            "confined": sum(counts) if counts else None}


def read(path, default=""):
    try:
        with open(path, errors="replace") as fh:
            return fh.read()
    except OSError:
        return default


def load_run(workdir, check, tag):
    base = os.path.join(workdir, f"{check}.{tag}")
    rc_text = read(base + ".rc", "").strip()
    run = {"rc": int(rc_text) if rc_text.lstrip("-").isdigit() else None,
           "stdout": read(base + ".out"), "stderr": read(base + ".err")}
    if check == "driver":
        out = run["stdout"]
        m = re.search(r"launches cuLaunchKernel=(\d+) cuLaunchKernelEx=(\d+)", out)
        run["launches"] = {"cuLaunchKernel": int(m.group(1)), "cuLaunchKernelEx": int(m.group(2))} if m else None
        run["ok"] = run["rc"] == 0 and "driver_api_program: OK" in out
        run["details"] = {"program_output": out.strip().splitlines()[-1] if out.strip() else ""}
        run["sha256"] = {}
        run["error"] = None if run["ok"] else f"rc={run['rc']}"
    else:
        try:
            with open(base + ".json") as fh:
                rec = json.load(fh)
        except (OSError, ValueError) as e:
            rec = {"ok": False, "details": {}, "sha256": {}, "error": f"no result record ({e}); rc={run['rc']}"}
        run.update(ok=bool(rec.get("ok")) and run["rc"] == 0, details=rec.get("details", {}),
                   sha256=rec.get("sha256", {}), error=rec.get("error"),
                   elapsed_s=rec.get("elapsed_s"))
    return run


def max_diff(workdir, check, tag_a, tag_b):
    """On a mismatch: how far apart the saved outputs are (for the log; needs torch, CPU only)."""
    try:
        import torch

        a = torch.load(os.path.join(workdir, f"{check}.{tag_a}.pt"))
        b = torch.load(os.path.join(workdir, f"{check}.{tag_b}.pt"))
        out = {}
        for k in a:
            if k in b and a[k].shape == b[k].shape:
                out[k] = {"equal": bool(torch.equal(a[k], b[k])),
                          "max_abs_diff": float((a[k].double() - b[k].double()).abs().max())}
            else:
                out[k] = {"equal": False, "note": "missing or shape differs"}
        return out
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}


def check_note(check, d):
    if check == "resnet":
        return f"rel err vs CPU fp32 {d.get('rel_err_vs_cpu_fp32', float('nan')):.2e}"
    if check == "matmul":
        return ", ".join(f"{k}:{'ok' if v.get('ok') else 'BAD'}" for k, v in d.items())
    if check == "triton":
        return f"bit-identical to CPU add: {d.get('bit_identical_to_cpu_add')}"
    if check == "graph":
        return (f"max err vs fp64 {d.get('max_abs_err_vs_fp64', float('nan')):.2e}, "
                f"replay==eager: {d.get('replay_bit_identical_to_eager')}")
    if check == "driver":
        return d.get("program_output", "")
    return ""


def cmd_summarize(args):
    tag_a, tag_b = args.tags
    workdir = args.workdir
    failures = []
    checks = {}
    totals = {}  # api -> path -> count, over tag B runs
    for check in ALL_CHECKS:
        ra = load_run(workdir, check, tag_a)
        rb = load_run(workdir, check, tag_b)
        entry = {"correct": {tag_a: ra["ok"], tag_b: rb["ok"]},
                 "details": {tag_a: ra["details"], tag_b: rb["details"]},
                 "errors": {tag_a: ra["error"], tag_b: rb["error"]},
                 "rc": {tag_a: ra["rc"], tag_b: rb["rc"]}}
        for tag, r in ((tag_a, ra), (tag_b, rb)):
            if not r["ok"]:
                failures.append(f"{check} [{tag}]: not correct ({r['error'] or 'see details'})")
        if check != "driver":
            same = bool(ra["sha256"]) and ra["sha256"] == rb["sha256"]
            entry["bit_identical"] = same
            entry["sha256"] = {tag_a: ra["sha256"], tag_b: rb["sha256"]}
            if not same:
                failures.append(f"{check}: outputs of [{tag_a}] and [{tag_b}] are not bit-identical")
                entry["diff"] = max_diff(workdir, check, tag_a, tag_b)
        apis, nlines = parse_calls(rb["stderr"])
        entry["gpuprio_lines"] = nlines
        entry["gpuprio_calls"] = apis
        if args.expect_gpuprio and nlines == 0:
            failures.append(f"{check} [{tag_b}]: no 'gpuprio: calls' lines on stderr (library not loaded, "
                            "GPUPRIO_LOG not honoured, or the process died before exit)")
        for api, counts in apis.items():
            t = totals.setdefault(api, {k: 0 for k in ["total"] + PATHS})
            for k, v in counts.items():
                t[k] = t.get(k, 0) + v
        if args.expect_confined:
            iso = parse_isolation(rb["stderr"])
            entry["isolation"] = iso
            if not iso["green_context"]:
                failures.append(f"{check} [{tag_b}]: no 'gpuprio: info: isolation: device' line (no green context): "
                                + ("; ".join(iso["lines"]) or "no isolation line at all"))
        if check == "driver" and args.expect_gpuprio:
            want = rb.get("launches")
            entry["driver_program_launches"] = want
            if want is None:
                failures.append("driver [preload]: the program did not report its launch counts")
            else:
                for api, n in want.items():
                    got = apis.get(api, {}).get("exported", 0)
                    if got != n:
                        failures.append(f"driver: the program called {api} {n} times through the exported "
                                        f"symbol, gpuprio counted exported={got}")
        checks[check] = entry

    launch = {api: totals.get(api, {k: 0 for k in ["total"] + PATHS}) for api in ["cuLaunchKernel", "cuLaunchKernelEx"]}
    if args.expect_gpuprio:
        for api, c in launch.items():
            if c["total"] <= 0:
                failures.append(f"no {api} launches were seen by gpuprio in any run")

    confined_total = None
    if args.expect_confined:
        confined_total = sum((checks[c].get("isolation") or {}).get("confined") or 0 for c in ALL_CHECKS)
        if confined_total <= 0:
            failures.append("no op was issued on a twin stream in any run (confined=K missing or 0 in every "
                            "exit summary)")
    passed = not failures
    summary = {"confined_total": confined_total, "passed": passed, "tags": [tag_a, tag_b], "expect_gpuprio": args.expect_gpuprio,
               "failures": failures, "launch_totals": launch, "all_api_totals": totals, "checks": checks}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "interception.json"), "w") as fh:
        json.dump(summary, fh, indent=1, sort_keys=True)

    lines = [f"gpuprio interception check: {'PASS' if passed else 'FAIL'}",
             f"runs compared: [{tag_a}] vs [{tag_b}]" + ("" if args.expect_gpuprio else " (native only: no gpuprio)"),
             ""]
    lines.append(f"{'check':8} {tag_a + ' ok':>12} {tag_b + ' ok':>12} {'bit-identical':>14}  notes")
    for check in ALL_CHECKS:
        e = checks[check]
        bi = e.get("bit_identical")
        bi_s = "n/a" if bi is None else ("yes" if bi else "NO")
        d = e["details"].get(tag_b) or e["details"].get(tag_a) or {}
        try:
            note = check_note(check, d)
        except Exception as ex:  # a malformed record must not hide the summary
            note = f"(no details: {type(ex).__name__})"
        lines.append(f"{check:8} {str(e['correct'][tag_a]):>12} {str(e['correct'][tag_b]):>12} {bi_s:>14}  {note}")
    lines.append("")
    if args.expect_gpuprio:
        lines.append(f"launches seen by gpuprio in the [{tag_b}] runs, by path:")
        lines.append(f"{'check':8} {'api':18} {'total':>9} " + " ".join(f"{p:>9}" for p in PATHS))
        for check in ALL_CHECKS:
            for api in ["cuLaunchKernel", "cuLaunchKernelEx"]:
                c = checks[check]["gpuprio_calls"].get(api)
                if c:
                    lines.append(f"{check:8} {api:18} {c['total']:>9} " + " ".join(f"{c.get(p, 0):>9}" for p in PATHS))
        for api, c in launch.items():
            lines.append(f"{'ALL':8} {api:18} {c['total']:>9} " + " ".join(f"{c.get(p, 0):>9}" for p in PATHS))
        lines.append("")
    if args.expect_confined:
        lines.append(f"isolation (GPUPRIO_ISOLATION={os.environ.get('GPUPRIO_ISOLATION', '')}), [{tag_b}] runs:")
        for check in ALL_CHECKS:
            iso = checks[check].get("isolation") or {}
            lines.append(f"{check:8} green context: {'yes' if iso.get('green_context') else 'NO':3}  "
                         f"confined={iso.get('confined')}  {(iso.get('lines') or ['-'])[0][:90]}")
        lines.append(f"{'ALL':8} confined={confined_total}")
        lines.append("")
    if failures:
        lines.append("failures:")
        lines += [f"  - {f}" for f in failures]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "interception_summary.txt"), "w") as fh:
        fh.write(text)

    with open(os.path.join(args.out, "log.txt"), "w") as fh:
        for check in ALL_CHECKS:
            for tag in (tag_a, tag_b):
                base = os.path.join(workdir, f"{check}.{tag}")
                fh.write(f"===== {check} [{tag}] rc={read(base + '.rc').strip()} cmd: {read(base + '.cmd').strip()}\n")
                fh.write("----- stdout\n" + read(base + ".out"))
                fh.write("----- stderr\n" + read(base + ".err") + "\n")
    sys.stdout.write(text)
    return 0 if passed else 1


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("check", choices=TORCH_CHECKS)
    r.add_argument("--tag", required=True)
    r.add_argument("--workdir", required=True)
    s = sub.add_parser("summarize")
    s.add_argument("--workdir", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--tags", nargs=2, required=True, metavar=("A", "B"))
    s.add_argument("--expect-gpuprio", action="store_true")
    s.add_argument("--expect-confined", action="store_true",
                   help="tag B ran with GPUPRIO_ISOLATION=force: each run must have made a green context "
                        "and some op must have been issued on a twin stream")
    args = p.parse_args()
    return cmd_run(args) if args.cmd == "run" else cmd_summarize(args)


if __name__ == "__main__":
    sys.exit(main())
