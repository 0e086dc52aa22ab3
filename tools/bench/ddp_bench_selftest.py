#!/usr/bin/env python3
"""Checks the two-GPU benchmark without a GPU or torch: ddp_bench_report.py's own self-test (its
record and report code on synthetic results, ratios against figures worked out by hand), then
run_ddp_bench.sh end to end, in a scratch copy of the scripts (bench_stats.scratch_tree) with a
stand-in for python (PYTHON: it answers the preflight, torch_two_process.py high and
`-m torch.distributed.run ... ddp_train_bench.py` itself and runs everything else, the report
included, with this python) and for nvidia-cuda-mps-control (two_process_selftest.py's). Checked:
the configurations and their rotation, each process's environment (no NVLink multicast anywhere,
gpuprio's variables only where they belong, one domain a run), that the server starts after the
trainer's ready file and the trainer stops by the stop file after it, --mps (every process a
client of the same live daemon, gone at the end), --native-only, and the failures: a trainer that
fails before it is ready, one that never becomes ready, and workers left behind by torchrun. Prints
one line per check and 'N passed, N failed'.

usage: python3 tools/bench/ddp_bench_selftest.py
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from bench_stats import scratch_tree, write_program
from two_process_selftest import MPS_CHECK, MPS_CONTROL, mps_pids

HERE = os.path.dirname(os.path.abspath(__file__))
results = []


def check(name, cond, detail=""):
    results.append(bool(cond))
    print("%s %s%s" % ("ok  " if cond else "FAIL", name, "" if cond else ": %s" % (detail,)))


# $PYTHON for run_ddp_bench.sh. Each stand-in process appends a JSON line to $STANDIN_LOG (what
# it was, its environment) and, through MPS_CHECK, "ROLE DAEMON-PID" to $STANDIN_SEEN.
# STANDIN_TRAINER_FAIL: "gpuprio" (a trainer under gpuprio exits 1 before it is ready) or "hang"
# (a trainer never becomes ready). STANDIN_ORPHAN=1: each trainer leaves a "worker" behind, in a
# session of its own, whose pid it wrote to --pid-dir (as torchrun's workers are).
STANDIN_PYTHON = r"""#!/usr/bin/env python3
import json, os, subprocess, sys, time
""" + MPS_CHECK + r"""
a = sys.argv[1:]
KEYS = ("LD_PRELOAD", "GPUPRIO_MODE", "GPUPRIO_PRIORITY", "GPUPRIO_DOMAIN", "NCCL_NVLS_ENABLE",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")

def note(role, **kw):
    rec = {"role": role, "pid": os.getpid(), "t_ns": time.monotonic_ns(),
           "env": {k: os.environ[k] for k in KEYS if k in os.environ}}
    rec.update(kw)
    with open(os.environ["STANDIN_LOG"], "a") as fh:
        fh.write(json.dumps(rec) + "\n")

def opt(args, name, default):
    return type(default)(args[args.index(name) + 1]) if name in args else default

def write_json(path, js):
    with open(path + ".tmp", "w") as fh:
        json.dump(js, fh)
    os.replace(path + ".tmp", path)

if a[:1] == ["-"]:
    sys.stdin.read()
    mps_daemon("preflight")
    note("preflight")
    print("python stand-in\ntorch stand-in CUDA 13.0 available True\ndevice 0: Stand-in H100\ndevice 1: Stand-in H100")
    sys.exit(0)
base = {"ok": True, "error": "", "preloaded": "gpuprio" in os.environ.get("LD_PRELOAD", ""),
        "env_priority": os.environ.get("GPUPRIO_PRIORITY", ""), "env_domain": os.environ.get("GPUPRIO_DOMAIN", ""),
        "device": "Stand-in H100", "torch": "stand-in", "pid": os.getpid()}
if len(a) >= 2 and a[0].endswith("torch_two_process.py") and a[1] == "high":
    started = time.monotonic_ns()
    mps_daemon("server")
    note("server", args=a)
    n, rate = opt(a, "--requests", 300), opt(a, "--rate", 20.0)
    lat = [2.0 + 0.1 * (i % 10) for i in range(n)]
    w0 = time.monotonic_ns()
    while time.monotonic_ns() < w0 + int(n / rate * 1e9):
        time.sleep(0.005)
    w1 = time.monotonic_ns()
    s = sorted(lat)
    write_json(opt(a, "--result", ""), dict(base, role="high", model="resnet18", impl="stand-in", dtype="fp16",
        rate_per_s=rate, requests=n, requests_done=n, latency_ms=lat, p50_ms=s[len(s) // 2], p99_ms=s[-1],
        window_s=(w1 - w0) / 1e9, window_start_ns=w0, window_end_ns=w1, started_ns=started))
    sys.exit(0)
if a[:2] == ["-m", "torch.distributed.run"]:
    i = next(k for k, v in enumerate(a) if v.endswith("ddp_train_bench.py"))
    t = a[i + 1:]
    mps_daemon("trainer")
    world = int(next(v.split("=", 1)[1] for v in a[:i] if v.startswith("--nproc_per_node=")))
    note("trainer", args=a, world=world)
    pid_dir = opt(t, "--pid-dir", "")
    if pid_dir:
        os.makedirs(pid_dir, exist_ok=True)
        open(os.path.join(pid_dir, "rank0.pid"), "w").write("%d\n" % os.getpid())
        if os.environ.get("STANDIN_ORPHAN") == "1":
            w = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", "ddp_train_bench.py", "worker"],
                                 start_new_session=True)
            open(os.path.join(pid_dir, "rank1.pid"), "w").write("%d\n" % w.pid)
            note("orphan", orphan=w.pid)
    fail = os.environ.get("STANDIN_TRAINER_FAIL", "")
    if fail == "gpuprio" and base["preloaded"]:
        print("stand-in trainer: failing under gpuprio", file=sys.stderr)
        sys.exit(1)
    if fail == "hang":
        time.sleep(600)
    time.sleep(0.2)
    ready, stop = opt(t, "--ready-file", ""), opt(t, "--stop-file", "")
    ready_ns = time.monotonic_ns()
    if ready:
        write_json(ready, {"t_ns": ready_ns})
    deadline, ends, stopped_by = time.monotonic() + opt(t, "--seconds", 30.0), [], "seconds"
    while True:
        time.sleep(0.01)
        ends.append(time.monotonic_ns())
        if stop and os.path.exists(stop):
            stopped_by = "stop-file"
            break
        if time.monotonic() >= deadline:
            break
    write_json(opt(t, "--result", ""), dict(base, role="trainer", model="resnet50", impl="stand-in", world_size=world,
        batch=opt(t, "--batch", 64), precision=opt(t, "--precision", "bf16"), image_size=224, backend="nccl",
        stopped_by=stopped_by, step_end_ns=ends, steps=len(ends), ready_ns=ready_ns,
        steps_per_s=(len(ends) - 1) / ((ends[-1] - ends[0]) / 1e9)))
    sys.exit(0)
os.execv(sys.executable, [sys.executable] + a)
"""


def scratch_repo(d):
    root = scratch_tree(d, {})
    bindir = os.path.join(root, "bin")
    os.makedirs(bindir)
    write_program(os.path.join(bindir, "python"), STANDIN_PYTHON)
    write_program(os.path.join(bindir, "nvidia-cuda-mps-control"), MPS_CONTROL)
    # --mps needs root: to the runner whoever runs the self-test is.
    with open(os.path.join(bindir, "id"), "w") as fh:
        fh.write('#!/bin/sh\nif [ "$1" = -u ]; then echo 0; else exec %s "$@"; fi\n' % (shutil.which("id") or "/usr/bin/id"))
    os.chmod(os.path.join(bindir, "id"), 0o755)
    return root


def run_runner(root, d, tag, args, env):
    """run_ddp_bench.sh OUT ARGS with the stand-ins; returns its process, OUT, the stand-ins' notes,
    what they found of MPS, the MPS processes that are there now and were not before, and seconds."""
    out = os.path.join(d, "out_" + tag)
    log, seen = os.path.join(d, "log_" + tag), os.path.join(d, "seen_" + tag)
    open(log, "w").close()
    open(seen, "w").close()
    e = dict(os.environ, PATH=os.path.join(root, "bin") + os.pathsep + os.environ.get("PATH", ""),
             PYTHON=os.path.join(root, "bin", "python"), STANDIN_LOG=log, STANDIN_SEEN=seen,
             ROUNDS="1", RATE="200", REQUESTS="40", DDP_SECONDS="1", SERVER_TIMEOUT="20", TRAINER_START_S="10")
    for k in ("LD_PRELOAD", "CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY", "GPUPRIO_LIB", "NCCL_NVLS_ENABLE",
              "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS", "DDP_CONFIGS"):
        e.pop(k, None)
    e.update(env)
    before = mps_pids()
    t0 = time.monotonic()
    p = subprocess.run(["bash", os.path.join(root, "tools", "bench", "run_ddp_bench.sh"), out] + args,
                       capture_output=True, text=True, env=e, timeout=300)
    secs = time.monotonic() - t0
    notes = [json.loads(l) for l in open(log) if l.strip()]
    seen_lines = [l.split() for l in open(seen).read().splitlines()]
    return p, out, notes, seen_lines, mps_pids() - before, secs


def report_of(out):
    path = os.path.join(out, "ddp_bench.json")
    return json.load(open(path)) if os.path.exists(path) else {"runs": []}


def js(rec, role):
    return (rec.get(role) or {}).get("json") or {}


def plain(root, d):
    p, out, notes, seen, left, _ = run_runner(root, d, "plain", [], {"ROUNDS": "2"})
    runs = report_of(out)["runs"]
    what = p.stdout[-3000:] + p.stderr[-1500:]
    check("plain: exit 0, 8 runs, every one ok", p.returncode == 0 and len(runs) == 8 and all(r["ok"] for r in runs),
          what)
    order = [(r["round"], r["config"]) for r in runs]
    check("plain: configurations rotated per round", order == [
        (1, "alone"), (1, "ddp-alone"), (1, "native"), (1, "gpuprio"),
        (2, "ddp-alone"), (2, "native"), (2, "gpuprio"), (2, "alone")], order)
    names = set(os.listdir(out))
    check("plain: output files", {"ddp_bench.json", "ddp_bench.txt", "ddp_bench_runs.jsonl", "ddp_preflight.txt",
                                  "ddp_bench_logs.tgz"} <= names and not any("mps" in n for n in names), names)
    procs = [n for n in notes if n["role"] in ("preflight", "server", "trainer")]
    check("plain: every process without NVLink multicast",
          procs and all(n["env"].get("NCCL_NVLS_ENABLE") == "0" and n["env"].get("TORCH_SYMM_MEM_DISABLE_MULTICAST") == "1"
                        and n["env"].get("NVSHMEM_DISABLE_NVLS") == "1" for n in procs), procs[:2])
    check("plain: the preflight without LD_PRELOAD", notes and notes[0]["role"] == "preflight" and
          "LD_PRELOAD" not in notes[0]["env"], notes[:1])
    gp = [r for r in runs if r["config"] == "gpuprio"]
    nat = [r for r in runs if r["config"] != "gpuprio"]
    check("plain: gpuprio runs: server high, trainer low, preloaded, one domain a run, a new one each run",
          len(gp) == 2 and all(js(r, "high").get("env_priority") == "high" and js(r, "low").get("env_priority") == "low"
                               and js(r, "high").get("preloaded") and js(r, "low").get("preloaded") and
                               js(r, "high")["env_domain"] and js(r, "high")["env_domain"] == js(r, "low")["env_domain"]
                               for r in gp) and js(gp[0], "high")["env_domain"] != js(gp[1], "high")["env_domain"],
          [(js(r, "high").get("env_domain"), js(r, "low").get("env_domain")) for r in gp])
    check("plain: other runs without gpuprio's variables",
          all(not js(r, role).get("preloaded") and not js(r, role).get("env_priority") and not js(r, role).get("env_domain")
              for r in nat for role in ("high", "low") if js(r, role)), nat[:1])
    pairs = [r for r in runs if r["config"] in ("native", "gpuprio")]
    check("plain: in each pair the server started after the trainer's ready file, the trainer stopped by the stop file",
          len(pairs) == 4 and all(js(r, "high")["started_ns"] > js(r, "low")["ready_ns"] and
                                  js(r, "low")["stopped_by"] == "stop-file" and r.get("trainer_window", {}).get("covered")
                                  for r in pairs), [(r["config"], r.get("error")) for r in pairs])
    servers = [n for n in notes if n["role"] == "server"]
    trainers = [n for n in notes if n["role"] == "trainer"]
    check("plain: the server on cuda:0 at RATE, REQUESTS", len(servers) == 6 and all(
        n["args"][n["args"].index("--device") + 1] == "cuda:0" and "--peer" not in n["args"] and
        n["args"][n["args"].index("--requests") + 1] == "40" for n in servers), servers[:1])
    check("plain: the trainer under torchrun, 2 ranks, defaults batch 64 bf16, ddp-alone without a stop file",
          len(trainers) == 6 and all(n["world"] == 2 and "--standalone" in n["args"] and
                                     n["args"][n["args"].index("--batch") + 1] == "64" and
                                     n["args"][n["args"].index("--precision") + 1] == "bf16" for n in trainers) and
          all("--stop-file" not in r_args for r_args in [n["args"] for n in trainers if "--ready-file" not in n["args"]]),
          trainers[:1])
    txt = open(os.path.join(out, "ddp_bench.txt")).read() if os.path.exists(os.path.join(out, "ddp_bench.txt")) else ""
    check("plain: the table, its targets and its last lines", "targets:" in txt and "no MPS" in txt and
          "settings: REQUESTS=40" in txt and "gpuprio    trainer" in txt, txt)


def mps(root, d):
    p, out, notes, seen, left, _ = run_runner(root, d, "mps", ["--mps"], {"STANDIN_WANT_MPS": "1"})
    runs = report_of(out)["runs"]
    check("--mps: exit 0, every run ok, records say mps", p.returncode == 0 and len(runs) == 4 and
          all(r["ok"] and r["mps"] for r in runs), p.stdout[-2500:] + p.stderr[-1000:])
    daemons = {s[1] for s in seen}
    # preflight, alone, ddp-alone, native (2), gpuprio (2)
    check("--mps: the preflight and every process found the same live daemon",
          len(seen) == 7 and seen[0][0] == "preflight" and len(daemons) == 1 and "none" not in daemons, seen)
    names = set(os.listdir(out))
    check("--mps: the daemon quit, its output kept; the table says MPS",
          not left and "ddp_bench_mps_control.txt" in names and "MPS daemon stopped" in p.stdout and
          "under MPS" in open(os.path.join(out, "ddp_bench.txt")).read(), (left, names, p.stdout[-1500:]))


def failures(root, d):
    p, out, notes, seen, left, secs = run_runner(root, d, "gpfail", [], {"STANDIN_TRAINER_FAIL": "gpuprio"})
    runs = {r["config"]: r for r in report_of(out)["runs"]}
    g = runs.get("gpuprio", {})
    check("a trainer failing under gpuprio: recorded, no server started, exit 0 (native runs ok)",
          p.returncode == 0 and not g.get("ok") and "server was not started" in (g.get("error") or "") and
          "r1 gpuprio: the trainer ended before it was ready" in p.stdout and
          "trainer" in (g.get("error") or "") and
          not any(n["role"] == "server" and n["env"].get("LD_PRELOAD") for n in notes) and
          all(runs[c]["ok"] for c in ("alone", "ddp-alone", "native")) and secs < 60,
          (secs, g.get("error"), p.stdout[-2000:]))

    p, out, notes, seen, left, secs = run_runner(root, d, "hang", [], {"STANDIN_TRAINER_FAIL": "hang",
                                                                        "TRAINER_START_S": "2", "DDP_CONFIGS": "native"})
    runs = report_of(out)["runs"]
    trainers = [n["pid"] for n in notes if n["role"] == "trainer"]
    gone = all(not os.path.exists("/proc/%d" % pid) for pid in trainers)
    check("a trainer that never becomes ready: given up after TRAINER_START_S, killed, recorded, exit 1",
          p.returncode == 1 and len(runs) == 1 and not runs[0]["ok"] and "did not become ready" in p.stdout and
          not any(n["role"] == "server" for n in notes) and gone and secs < 15, (secs, p.stdout[-2000:], runs))

    p, out, notes, seen, left, secs = run_runner(root, d, "orphan", ["--native-only"], {"STANDIN_ORPHAN": "1"})
    runs = report_of(out)["runs"]
    orphans = [n["orphan"] for n in notes if n["role"] == "orphan"]
    alive = [pid for pid in orphans if os.path.exists("/proc/%d" % pid) and
             open("/proc/%d/stat" % pid).read().rsplit(") ", 1)[1].split()[0] != "Z"]
    check("--native-only: alone, ddp-alone, native only, all ok",
          p.returncode == 0 and sorted(r["config"] for r in runs) == ["alone", "ddp-alone", "native"] and
          all(r["ok"] for r in runs), (p.stdout[-2000:], [r.get("error") for r in runs]))
    check("workers left behind by torchrun are killed by their pids", len(orphans) == 2 and not alive and
          p.stdout.count("trainer workers still running after torchrun ended: killing") == 2, (orphans, alive, p.stdout[-1500:]))
    for pid in alive:  # not to outlive the test if the check failed
        os.kill(pid, 9)


def main():
    p = subprocess.run([sys.executable, os.path.join(HERE, "ddp_bench_report.py"), "--selftest"],
                       capture_output=True, text=True)
    for line in p.stdout.splitlines()[:-1]:
        results.append(line.startswith("ok "))
        print(line)
    if p.returncode != 0 and all(results):
        check("ddp_bench_report.py --selftest ran", False, p.stderr[-1500:])
    with tempfile.TemporaryDirectory() as d:
        root = scratch_repo(d)
        plain(root, d)
        mps(root, d)
        failures(root, d)
    passed = sum(results)
    print("%d passed, %d failed" % (passed, len(results) - passed))
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
