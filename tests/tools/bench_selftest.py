"""What the benchmark self-tests (two_process_selftest.py, interference_selftest.py,
ddp_bench_selftest.py) share: check() and the 'N passed, N failed' summary, the scratch tree the
runners run in (the scripts as they are in tools/bench, with stand-ins for the CUDA programs), the stand-in
for nvidia-cuda-mps-control and the check each stand-in process makes of the MPS daemon, the bin/
that puts the stand-ins first in PATH, and the runner's environment."""

import os
import shutil
import subprocess
import sys
import tempfile

# The repository (or the test's runfiles tree) and the benchmarks' directory in it, which is also
# put on sys.path so that the self-tests can import the report modules (bench_stats and others).
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "tools", "bench")
sys.path.insert(0, BENCH)
PY = sys.executable
results = []


def check(name, cond, detail=""):
    """One check: 'ok   NAME', or 'FAIL NAME: DETAIL' (the detail cut to 3000 characters)."""
    results.append(bool(cond))
    print("%s %s%s" % ("ok  " if cond else "FAIL", name, "" if cond else ": %s" % str(detail)[:3000]))


def finish():
    """Prints 'N passed, N failed'; the exit status: 0 when every check passed."""
    passed = sum(results)
    print("%d passed, %d failed" % (passed, len(results) - passed))
    return 0 if passed == len(results) else 1


def run_steps(*steps):
    """Each step(d) in turn, in one temporary directory d; then finish()."""
    with tempfile.TemporaryDirectory() as d:
        for step in steps:
            step(d)
    return finish()


def part_args(kind, high=None, low=None, high_rc=0, low_rc=0, err=None):
    """A two-process record's files: --ROLE-KIND FILE [--ROLE-err ERR] --ROLE-rc N for each of high
    and low given."""
    args = []
    for role, path, rc in (("high", high, high_rc), ("low", low, low_rc)):
        if path:
            args += ["--%s-%s" % (role, kind), path] + (["--%s-err" % role, err] if err else [])
            args += ["--%s-rc" % role, str(rc)]
    return args


def run(args, stdin=None):
    """python ARGS: (exit status, stdout, stderr)."""
    p = subprocess.run([PY] + args, input=stdin, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def write(d, name, text):
    path = os.path.join(d, name)
    with open(path, "w") as fh:
        fh.write(text)
    return path


def write_program(path, text):
    """A stand-in program, the text of a python3 script run by this python."""
    with open(path, "w") as fh:
        fh.write(text.replace("/usr/bin/env python3", sys.executable, 1))
    os.chmod(path, 0o755)


def scratch_tree(d, gpu_programs):
    """The runners as they are in tools/bench, in a tree of their own (d/repo, returned): tools/bench,
    tests/gpu/gpu_run_args.sh, and .gpu/ with an empty libgpuprio.so and a stand-in (write_program)
    for each of gpu_programs (name -> text)."""
    root = os.path.join(d, "repo")
    os.makedirs(os.path.join(root, "tools"))
    shutil.copytree(BENCH, os.path.join(root, "tools", "bench"), ignore=shutil.ignore_patterns("__pycache__"))
    os.makedirs(os.path.join(root, "tests", "gpu"))
    shutil.copy(os.path.join(ROOT, "tests", "gpu", "gpu_run_args.sh"),
                os.path.join(root, "tests", "gpu"))
    os.makedirs(os.path.join(root, ".gpu"))
    for name, text in gpu_programs.items():
        write_program(os.path.join(root, ".gpu", name), text)
    open(os.path.join(root, ".gpu", "libgpuprio.so"), "w").close()
    return root


# Every stand-in CUDA process appends "ROLE PID-OF-THE-MPS-DAEMON-IT-FOUND" (or "none") to
# $STANDIN_SEEN; with STANDIN_WANT_MPS=1 one that finds no live daemon fails.
MPS_CHECK = r"""
def mps_daemon(role):
    pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "")
    try:
        pid = int(open(os.path.join(pipe, "daemon.pid")).read()) if pipe else 0
        os.kill(pid, 0)
        st = open("/proc/%d/stat" % pid).read().rsplit(") ", 1)[1].split()[0]
        found = str(pid) if st != "Z" else "none"
    except (OSError, ValueError):
        found = "none"
    with open(os.environ["STANDIN_SEEN"], "a") as fh:
        fh.write("%s %s\n" % (role, found))
    if os.environ.get("STANDIN_WANT_MPS") == "1" and found == "none":
        print("stand-in: no MPS daemon (pipe %r)" % pipe, file=sys.stderr)
        sys.exit(1)
"""

# nvidia-cuda-mps-control: -d starts a "daemon" (a process named like the real one's,
# nvidia-cuda-mps, which is what mps_daemon.sh looks for) under a keeper that reaps it (a container's
# pid 1 may not), and writes its pid into the pipe directory; "quit" on stdin ends it, unless
# STANDIN_MPS_STUCK=1; STANDIN_MPS_FAIL=1 makes -d fail.
MPS_CONTROL = r"""#!/usr/bin/env python3
import os, signal, subprocess, sys, time
pipe, logd = os.environ.get("CUDA_MPS_PIPE_DIRECTORY", ""), os.environ.get("CUDA_MPS_LOG_DIRECTORY", "")
if not (pipe and os.path.isdir(pipe) and logd and os.path.isdir(logd)):
    print("stand-in mps control: no pipe or log directory"); sys.exit(1)
pidf = os.path.join(pipe, "daemon.pid")
def log(line):
    with open(os.path.join(logd, "control.log"), "a") as fh:
        fh.write(line + "\n")
if sys.argv[1:] == ["-d"]:
    if os.environ.get("STANDIN_MPS_FAIL") == "1":
        print("stand-in mps control: cannot start"); sys.exit(1)
    daemon = ("import os, signal, time\n"
              "open('/proc/self/comm', 'w').write('nvidia-cuda-mps')\n"
              "if os.environ.get('STANDIN_MPS_STUCK') == '1': signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
              "time.sleep(300)\n")
    keeper = ("import subprocess, sys\n"
              "p = subprocess.Popen([sys.executable, '-c', sys.argv[1]])\n"
              "open(sys.argv[2], 'w').write(str(p.pid))\n"
              "p.wait()\n")
    subprocess.Popen([sys.executable, "-c", keeper, daemon, pidf + ".tmp"], start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        if os.path.exists(pidf + ".tmp") and open(pidf + ".tmp").read():
            break
        time.sleep(0.05)
    os.replace(pidf + ".tmp", pidf)
    log("started daemon " + open(pidf).read())
    sys.exit(0)
cmd = sys.stdin.read().strip()
pid = int(open(pidf).read())
if cmd == "get_server_list":
    print(pid)
elif cmd == "quit":
    log("quit")
    os.kill(pid, signal.SIGTERM)
    print("quit sent")
"""


def stand_in_bin(root, programs, uid="0"):
    """root/bin (for PATH) with programs (name -> text, write_program), the stand-in
    nvidia-cuda-mps-control, and an `id` whose `id -u` answers uid (a shell word: --mps needs root,
    and to the runner whoever runs the self-test is)."""
    bindir = os.path.join(root, "bin")
    os.makedirs(bindir)
    write_program(os.path.join(bindir, "nvidia-cuda-mps-control"), MPS_CONTROL)
    for name, text in programs.items():
        write_program(os.path.join(bindir, name), text)
    with open(os.path.join(bindir, "id"), "w") as fh:
        fh.write('#!/bin/sh\nif [ "$1" = -u ]; then echo %s; else exec %s "$@"; fi\n'
                 % (uid, shutil.which("id") or "/usr/bin/id"))
    os.chmod(os.path.join(bindir, "id"), 0o755)
    return bindir


def mps_pids():
    p = subprocess.run(["pgrep", "-x", "nvidia-cuda-mps"], capture_output=True, text=True)
    return set(p.stdout.split())


def runner_env(root, drop=(), **env):
    """The environment a runner runs in: root/bin first in PATH, without LD_PRELOAD, the MPS
    directories or any of drop, with env on top."""
    e = dict(os.environ, PATH=os.path.join(root, "bin") + os.pathsep + os.environ.get("PATH", ""))
    for k in ("LD_PRELOAD", "CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY") + tuple(drop):
        e.pop(k, None)
    e.update(env)
    return e
