"""`gpuprio mps start|stop|status|env`: an NVIDIA MPS control daemon (nvidia-cuda-mps-control)
for this node or a GPU set, in checked pipe and log directories, and what its clients need; and
the one-line warning of `gpuprio run` (and the check of `gpuprio doctor`) when gpuprio processes
of different priorities share a GPU without MPS (docs/mps.md).

The daemon is driven as NVIDIA documents it: `nvidia-cuda-mps-control -d` with
CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY set starts it; commands (`get_server_list`,
`get_client_list PID`, `quit`) are written to the stdin of `nvidia-cuda-mps-control` run without
arguments, which passes them to the daemon of that pipe directory and prints the answers. The
daemon writes its pid to nvidia-cuda-mps-control.pid in the pipe directory.
"""

import json
import os
import re
import shlex
import shutil
import stat
import sys
import time

from .util import UsageError, ascii_text

CONTROL = "nvidia-cuda-mps-control"
SYSTEM_PIPE_DIR = "/tmp/nvidia-mps"  # NVIDIA's defaults, what a client uses without the variable
SYSTEM_LOG_DIR = "/var/log/nvidia-mps"
PID_FILE = "nvidia-cuda-mps-control.pid"
CONTROL_PIPE = "control"
# What `gpuprio mps start` records beside the daemon's pipes: the log directory and GPU set it
# started the daemon with, for `status`.
RECORD_FILE = "gpuprio-mps.json"
EXIT_NOT_RUNNING = 1
COMMAND_TIMEOUT_S = 10  # one control command
START_WAIT_S = 10  # for a started daemon to answer
STOP_WAIT_S = 10  # for a daemon told to quit to exit
POLL_S = 0.1


class MpsError(Exception):
    """A failure of `gpuprio mps`: one line `gpuprio mps: error: ...`, exit 1."""


def is_root(args=None):
    # --as-user (hidden, for tests that run as root): the defaults and checks of a plain user.
    return os.geteuid() == 0 and not getattr(args, "as_user", False)


def private_base(environ):
    """The non-root default's parent: $XDG_RUNTIME_DIR/gpuprio-mps when XDG_RUNTIME_DIR is this
    user's private directory, else /tmp/gpuprio-mps-<uid>."""
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    if runtime.startswith("/"):
        try:
            info = os.stat(runtime)
            if (stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid()
                    and not info.st_mode & 0o022):
                return os.path.join(runtime, "gpuprio-mps")
        except OSError:
            pass
    return f"/tmp/gpuprio-mps-{os.geteuid()}"


def resolve_dirs(args, environ):
    """(pipe directory, log directory, where each came from): the option, else the environment's
    CUDA_MPS_PIPE_DIRECTORY / CUDA_MPS_LOG_DIRECTORY, else the defaults (root: NVIDIA's system
    ones; a user: private directories under private_base())."""
    root = is_root(args)
    base = None if root else private_base(environ)
    found = []
    for option, name, system, private in (
            (getattr(args, "pipe_dir", None), "CUDA_MPS_PIPE_DIRECTORY", SYSTEM_PIPE_DIR, "pipe"),
            (getattr(args, "log_dir", None), "CUDA_MPS_LOG_DIRECTORY", SYSTEM_LOG_DIR, "log")):
        if option:
            path, source = option, "option"
        elif environ.get(name):
            path, source = environ[name], name
        else:
            path = system if root else os.path.join(base, private)
            source = "default for root" if root else "default for this user"
        if not path.startswith("/"):
            path = os.path.abspath(path)
        found.append((os.path.normpath(path), source))
    return found[0][0], found[1][0], {"pipe": found[0][1], "log": found[1][1]}


def directory_problem(path, root):
    """Why the existing directory `path` must not hold a daemon's pipes or logs, or None: it must
    be a directory (not a link), this user's, and not writable by others (another user could
    plant a control pipe there, or remove the daemon's)."""
    try:
        info = os.lstat(path)
    except OSError as e:
        return f"cannot read it: {e.strerror}"
    if stat.S_ISLNK(info.st_mode):
        return "is a symbolic link, not a directory"
    if not stat.S_ISDIR(info.st_mode):
        return "is not a directory"
    if info.st_uid != os.geteuid():
        return f"belongs to uid {info.st_uid}, not to this user (uid {os.geteuid()})"
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o022:
        return (f"has mode {mode:04o}: others can write it (chmod go-w it, or use another "
                f"directory)")
    if not root and mode & 0o077:
        return f"has mode {mode:04o}, not 0700: a user's MPS directories are private"
    return None


def make_directory(path, root):
    """Creates `path` (and missing parents) if needed, mode 0700 (0755 for root, whose daemon
    serves every user), and checks it; MpsError says why it cannot be used."""
    mode = 0o755 if root else 0o700
    missing = []
    probe = path
    while not os.path.lexists(probe):
        missing.append(probe)
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, mode)
            os.chmod(directory, mode)  # whatever the umask
        except FileExistsError:
            pass
        except OSError as e:
            raise MpsError(f"cannot create {directory}: {e.strerror}")
    why = directory_problem(path, root)
    if why is not None:
        raise MpsError(f"{path} {why}")


def process_running(pid):
    """Whether `pid` is a running process (a zombie is not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            line = f.read()
        return line[line.rfind(b")") + 2:][:1] not in (b"Z", b"X", b"")
    except OSError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def daemon_pid(pipe_dir):
    """The pid the pipe directory's pid file names, or None."""
    try:
        with open(os.path.join(pipe_dir, PID_FILE), "rb") as f:
            text = f.read(64).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if re.fullmatch(r"[0-9]{1,10}", text) and int(text) > 0 else None


def pipe_state(pipe_dir):
    """What the pipe directory's files say, without asking the daemon: "none" (no control pipe),
    "stale" (its pid file names no running process), "running" (it names one) or "unknown" (a
    control pipe and no pid file); and the pid."""
    try:
        mode = os.lstat(os.path.join(pipe_dir, CONTROL_PIPE)).st_mode
    except OSError:
        return "none", None
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        return "none", None
    pid = daemon_pid(pipe_dir)
    if pid is None:
        return "unknown", None
    return ("running" if process_running(pid) else "stale"), pid


def serves(environ):
    """Whether an MPS control daemon serves a CUDA program started with `environ`: its
    CUDA_MPS_PIPE_DIRECTORY (NVIDIA's default without it) holds a control pipe whose daemon runs.
    Files only, no process started: for `gpuprio run`."""
    pipe_dir = environ.get("CUDA_MPS_PIPE_DIRECTORY") or SYSTEM_PIPE_DIR
    # A running daemon keeps its pid file beside the pipe; NVIDIA's leaves the control pipe
    # behind when it quits, so a pipe without a pid file is no daemon.
    return pipe_state(pipe_dir)[0] == "running"


def control_command(environ):
    return shutil.which(CONTROL, path=environ.get("PATH", os.defpath))


def ask(control, pipe_dir, command, environ, timeout=COMMAND_TIMEOUT_S):
    """Runs `command` through the control program for the daemon of pipe_dir: (exit status, its
    output) ; (None, why) when it did not finish in time or could not start."""
    import subprocess  # only the mps commands and doctor start processes
    env = dict(environ)
    env["CUDA_MPS_PIPE_DIRECTORY"] = pipe_dir
    try:
        done = subprocess.run([control], input=command + "\n", env=env, capture_output=True,
                              text=True, errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"'{command}' got no answer within {timeout} s"
    except OSError as e:
        return None, f"cannot run {control}: {e.strerror}"
    return done.returncode, (done.stdout + done.stderr).strip()


def answers(control, pipe_dir, environ):
    """Whether a daemon answers `get_server_list` on pipe_dir: (bool, server pids, why not)."""
    if pipe_state(pipe_dir)[0] in ("none", "stale"):
        return False, [], "no running daemon's control pipe there"
    status, text = ask(control, pipe_dir, "get_server_list", environ)
    if status != 0:
        return False, [], text if status is None else f"exit {status}: {last_line(text)}"
    return True, [int(t) for t in text.split() if t.isdigit()], None


def last_line(text):
    lines = [line for line in text.splitlines() if line.strip()]
    return ascii_text(lines[-1]) if lines else "no output"


def export_lines(pipe_dir):
    return f"export CUDA_MPS_PIPE_DIRECTORY={shlex.quote(pipe_dir)}\n"


def say(text):
    print(f"gpuprio mps: {text}", file=sys.stderr)


def need_control(environ):
    control = control_command(environ)
    if control is None:
        raise MpsError(f"{CONTROL} not found in PATH: it comes with the NVIDIA driver "
                       "(packages nvidia-utils / nvidia-compute-utils)")
    return control


def parse_gpus(text):
    """--gpus: a comma-separated list of indices or UUIDs (GPU-..., MIG-...), as
    CUDA_VISIBLE_DEVICES takes them."""
    items = [item.strip() for item in text.split(",")]
    if not text.strip() or any(not re.fullmatch(r"[0-9]+|(GPU|MIG)-[0-9A-Za-z-]+", i)
                               for i in items):
        raise UsageError(f"--gpus: {text!r} is not a comma-separated list of GPU indices or "
                         "UUIDs (0,1 or GPU-...)")
    return ",".join(items)


def set_exclusive(gpus, environ):
    """EXCLUSIVE_PROCESS compute mode on each GPU of the set (all without one), with nvidia-smi,
    so that only the MPS server can create a context on them."""
    import subprocess
    smi = shutil.which("nvidia-smi", path=environ.get("PATH", os.defpath))
    if smi is None:
        raise MpsError("--exclusive: nvidia-smi not found in PATH")
    targets = gpus.split(",") if gpus else [None]
    for gpu in targets:
        argv = [smi] + (["-i", gpu] if gpu is not None else []) + ["-c", "EXCLUSIVE_PROCESS"]
        try:
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  errors="replace", timeout=60)
        except subprocess.TimeoutExpired:
            raise MpsError(f"--exclusive: {' '.join(argv)} did not finish within 60 s")
        except OSError as e:
            raise MpsError(f"--exclusive: cannot run {smi}: {e.strerror}")
        if done.returncode != 0:
            raise MpsError(f"--exclusive: {' '.join(argv)} failed (exit {done.returncode}): "
                           f"{last_line(done.stdout + done.stderr)}")
        say(f"compute mode EXCLUSIVE_PROCESS set on {'GPU ' + gpu if gpu else 'every GPU'}")


def command_start(args, environ):
    import subprocess
    import tempfile
    root = is_root(args)
    gpus = parse_gpus(args.gpus) if args.gpus is not None else None
    if args.exclusive and not root:
        raise MpsError("--exclusive sets the GPUs' compute mode, which needs root")
    pipe_dir, log_dir, _ = resolve_dirs(args, environ)
    control = need_control(environ)
    if not root:
        base = private_base(environ)
        if pipe_dir.startswith(base + "/") or log_dir.startswith(base + "/"):
            make_directory(base, root)
    for path in (pipe_dir, log_dir):
        make_directory(path, root)
    state, pid = pipe_state(pipe_dir)
    if state == "running" or (state == "unknown" and answers(control, pipe_dir, environ)[0]):
        raise MpsError(f"an MPS control daemon already runs on {pipe_dir}"
                       + (f" (pid {pid})" if pid else "")
                       + ": use it (gpuprio mps env), or stop it first (gpuprio mps stop)")
    if args.exclusive:
        set_exclusive(gpus, environ)
    env = dict(environ)
    env["CUDA_MPS_PIPE_DIRECTORY"] = pipe_dir
    env["CUDA_MPS_LOG_DIRECTORY"] = log_dir
    if gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpus
    # Its output to a file, not a pipe: a daemon that keeps the descriptors open would make a
    # pipe's reader wait for it to exit.
    with tempfile.TemporaryFile() as output:
        try:
            status = subprocess.run([control, "-d"], env=env, stdin=subprocess.DEVNULL,
                                    stdout=output, stderr=output,
                                    timeout=COMMAND_TIMEOUT_S).returncode
        except subprocess.TimeoutExpired:
            status = None
        except OSError as e:
            raise MpsError(f"cannot run {control}: {e.strerror}")
        output.seek(0)
        text = output.read(65536).decode("utf-8", "replace")
    if status != 0:
        raise MpsError(f"{control} -d " + ("did not return within "
                                           f"{COMMAND_TIMEOUT_S} s" if status is None
                                           else f"failed (exit {status})")
                       + f": {last_line(text)} (its log: {log_dir}/control.log)")
    deadline = time.monotonic() + START_WAIT_S
    while True:
        ok, _, why = answers(control, pipe_dir, env)
        if ok:
            break
        if time.monotonic() > deadline:
            raise MpsError(f"the daemon started but does not answer on {pipe_dir} after "
                           f"{START_WAIT_S} s ({why}); see {log_dir}/control.log, and stop it "
                           f"with gpuprio mps stop --pipe-dir {shlex.quote(pipe_dir)}")
        time.sleep(POLL_S)
    pid = daemon_pid(pipe_dir)
    record = {"log_directory": log_dir, "gpus": gpus, "exclusive": bool(args.exclusive),
              "pid": pid, "started_by_uid": os.geteuid(), "started": int(time.time())}
    try:
        with open(os.path.join(pipe_dir, RECORD_FILE), "w", encoding="utf-8") as f:
            json.dump(record, f)
    except OSError:
        pass  # only status reads it
    say(f"MPS control daemon started (pid {pid or '?'}; pipes {pipe_dir}, logs {log_dir}"
        + (f"; GPUs {gpus}, which its clients see renumbered from 0" if gpus else "")
        + "). Run every process that shares the GPUs under it, with:")
    sys.stdout.write(export_lines(pipe_dir))
    return 0


def command_stop(args, environ):
    pipe_dir, _, _ = resolve_dirs(args, environ)
    state, pid = pipe_state(pipe_dir)
    if state == "none":
        say(f"no MPS control daemon on {pipe_dir} (no control pipe there): nothing to stop")
        return 0
    if state == "stale":
        say(f"no MPS control daemon on {pipe_dir}: its pid file names pid {pid}, which no longer "
            "runs (left over from a daemon that was killed): nothing to stop")
        return 0
    control = need_control(environ)
    if state == "unknown":
        # A control pipe without a pid file: what NVIDIA's daemon leaves when it quits.
        live, _, why = answers(control, pipe_dir, environ)
        if not live:
            say(f"no MPS control daemon answers on {pipe_dir} ({why}): nothing to stop")
            return 0
    status, text = ask(control, pipe_dir, "quit", environ)
    if status != 0:
        raise MpsError(f"'quit' to the daemon on {pipe_dir} failed: "
                       + (text if status is None else f"exit {status}: {last_line(text)}"))
    deadline = time.monotonic() + STOP_WAIT_S
    while True:
        if pid is not None:
            gone = not process_running(pid)
        else:
            gone = not answers(control, pipe_dir, environ)[0]
        if gone:
            break
        if time.monotonic() > deadline:
            raise MpsError(f"the daemon on {pipe_dir}" + (f" (pid {pid})" if pid else "")
                           + f" is still there {STOP_WAIT_S} s after 'quit' (its clients may "
                             "still run: see gpuprio mps status)"
                           + (f"; kill {pid} ends it" if pid else ""))
        time.sleep(POLL_S)
    try:
        os.unlink(os.path.join(pipe_dir, RECORD_FILE))
    except OSError:
        pass
    say(f"MPS control daemon on {pipe_dir}" + (f" (pid {pid})" if pid else "") + " stopped")
    return 0


def read_record(pipe_dir):
    try:
        with open(os.path.join(pipe_dir, RECORD_FILE), encoding="utf-8") as f:
            record = json.load(f)
        return record if isinstance(record, dict) else {}
    except (OSError, ValueError):
        return {}


def same_directory(a, b):
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def status_report(args, environ):
    pipe_dir, log_dir, sources = resolve_dirs(args, environ)
    state, pid = pipe_state(pipe_dir)
    record = read_record(pipe_dir) if state != "none" else {}
    if sources["log"].startswith("default") and isinstance(record.get("log_directory"), str):
        log_dir, sources["log"] = record["log_directory"], "recorded by gpuprio mps start"
    report = {"pipe_directory": pipe_dir, "log_directory": log_dir, "sources": sources,
              "state": state, "pid": pid, "answers": False, "servers": [],
              "gpus": record.get("gpus"), "why": None}
    control = control_command(environ)
    report["control_command"] = control
    if control is None:
        report["why"] = f"{CONTROL} not found in PATH"
    elif state in ("running", "unknown"):
        ok, servers, why = answers(control, pipe_dir, environ)
        report["answers"], report["why"] = ok, why
        for server in servers:
            status, text = ask(control, pipe_dir, f"get_client_list {server}", environ)
            clients = ([int(t) for t in text.split() if t.isdigit()] if status == 0 else None)
            report["servers"].append({"pid": server, "clients": clients})
    else:
        report["why"] = ("no control pipe there" if state == "none" else
                         f"its pid file names pid {pid}, which no longer runs")
    current = environ.get("CUDA_MPS_PIPE_DIRECTORY")
    report["environment"] = {
        "CUDA_MPS_PIPE_DIRECTORY": current,
        "points_here": same_directory(current or SYSTEM_PIPE_DIR, pipe_dir)}
    return report


def status_text(report):
    lines = []
    where = report["pipe_directory"]
    if report["answers"]:
        lines.append(f"MPS control daemon: running (pid {report['pid'] or '?'}), answers on {where}")
    else:
        lines.append(f"MPS control daemon: not answering on {where} ({report['why']})")
    lines.append(f"pipe directory: {where} ({report['sources']['pipe']})")
    lines.append(f"log directory:  {report['log_directory']} ({report['sources']['log']})")
    if report["gpus"]:
        lines.append(f"GPUs:           {report['gpus']} (its clients see them renumbered from 0)")
    if report["answers"]:
        if not report["servers"]:
            lines.append("servers:        none yet (a server starts with the first client)")
        for server in report["servers"]:
            clients = server["clients"]
            text = ("?" if clients is None else
                    ", ".join(str(c) for c in clients) if clients else "none")
            lines.append(f"server {server['pid']}: clients {text}")
    env = report["environment"]
    current = env["CUDA_MPS_PIPE_DIRECTORY"]
    shown = (f"CUDA_MPS_PIPE_DIRECTORY={current}" if current else
             f"CUDA_MPS_PIPE_DIRECTORY unset, so {SYSTEM_PIPE_DIR}")
    if env["points_here"]:
        lines.append(f"this environment: points at it ({shown})")
    else:
        lines.append(f"this environment: does not point at it ({shown}); "
                     f"eval \"$(gpuprio mps env{pipe_option(report)})\" does")
    return "".join(ascii_text(line) + "\n" for line in lines)


def pipe_option(report):
    return ("" if report["sources"]["pipe"].startswith("default") else
            f" --pipe-dir {shlex.quote(report['pipe_directory'])}")


def command_status(args, environ):
    report = status_report(args, environ)
    if args.json:
        sys.stdout.write(json.dumps(report, sort_keys=True) + "\n")
    else:
        sys.stdout.write(status_text(report))
    return 0 if report["answers"] else EXIT_NOT_RUNNING


def command_env(args, environ):
    pipe_dir, _, _ = resolve_dirs(args, environ)
    control = need_control(environ)
    ok, _, why = answers(control, pipe_dir, environ)
    if not ok:
        raise MpsError(f"no MPS control daemon answers on {pipe_dir} ({why}): start one with "
                       "gpuprio mps start")
    sys.stdout.write(export_lines(pipe_dir))
    return 0


def handle(function):
    def run(args, environ):
        try:
            return function(args, environ)
        except MpsError as e:
            print(f"gpuprio mps: error: {ascii_text(str(e))}", file=sys.stderr)
            return 1
    return run


def add_parser(subcommands):
    """`gpuprio mps`."""
    import argparse
    mps = subcommands.add_parser(
        "mps", help="start, stop or inspect an NVIDIA MPS control daemon for gpuprio",
        usage="gpuprio mps {start,stop,status,env} [options]",
        description="An NVIDIA MPS control daemon, so that gpuprio processes share the GPU's SMs "
                    "at once and lower ones can be confined beside higher ones (docs/mps.md). "
                    "Directories: --pipe-dir / --log-dir, else CUDA_MPS_PIPE_DIRECTORY / "
                    f"CUDA_MPS_LOG_DIRECTORY, else as root {SYSTEM_PIPE_DIR} and "
                    f"{SYSTEM_LOG_DIR}, as a user private ones (mode 0700) in "
                    "$XDG_RUNTIME_DIR/gpuprio-mps or /tmp/gpuprio-mps-UID.")
    commands = mps.add_subparsers(dest="mps_command", metavar="COMMAND", required=True,
                                  parser_class=type(mps), prog="gpuprio mps")

    def directories(parser):
        parser.add_argument("--pipe-dir", metavar="DIR",
                            help="the daemon's pipe directory (CUDA_MPS_PIPE_DIRECTORY)")
        parser.add_argument("--as-user", action="store_true", help=argparse.SUPPRESS)

    start = commands.add_parser(
        "start", help="start a daemon and print the export lines its clients need",
        description="Starts nvidia-cuda-mps-control -d on the pipe and log directories "
                    "(created if missing, refused if another user owns them or others can "
                    "write them), refuses when a daemon already runs on the pipe directory, "
                    f"waits up to {START_WAIT_S} s for it to answer, and prints the export line "
                    "its clients need on stdout: eval \"$(gpuprio mps start)\".")
    directories(start)
    start.add_argument("--log-dir", metavar="DIR",
                       help="the daemon's log directory (CUDA_MPS_LOG_DIRECTORY)")
    start.add_argument("--gpus", metavar="LIST",
                       help="only these GPUs (indices or UUIDs, as CUDA_VISIBLE_DEVICES; its "
                            "clients see them renumbered from 0)")
    start.add_argument("--exclusive", action="store_true",
                       help="first set the GPUs' compute mode to EXCLUSIVE_PROCESS with "
                            "nvidia-smi (root), so only the MPS server can use them")
    start.set_defaults(handler=handle(command_start))
    stop = commands.add_parser(
        "stop", help="tell the daemon to quit and wait for it to exit",
        description=f"Sends 'quit' to the daemon of the pipe directory and waits up to "
                    f"{STOP_WAIT_S} s for it to exit. Exit 0 also when none runs.")
    directories(stop)
    stop.set_defaults(handler=handle(command_stop))
    status = commands.add_parser(
        "status", help="whether a daemon answers, its servers and clients",
        description="Whether a daemon answers on the pipe directory, its servers "
                    "(get_server_list) and their clients (get_client_list), the directories, "
                    "and whether this environment points at it. Exit 0 when it answers, 1 when "
                    "not.")
    directories(status)
    status.add_argument("--log-dir", metavar="DIR", help=argparse.SUPPRESS)
    status.add_argument("--json", action="store_true", help="print one JSON object")
    status.set_defaults(handler=handle(command_status))
    env = commands.add_parser(
        "env", help="print the export line of a running daemon's clients",
        description="Prints the export line that makes CUDA programs clients of the daemon "
                    "on the pipe directory: eval \"$(gpuprio mps env)\". Exit 1 when no daemon "
                    "answers there.")
    directories(env)
    env.set_defaults(handler=handle(command_env))


# ---- gpuprio run's warning and doctor's check: processes of different priorities on a GPU ----

def priority_value(text):
    """GPUPRIO_PRIORITY as the library takes it; a bad or missing value is normal (0)."""
    value = (text or "").strip().lower()
    named = {"low": -1, "normal": 0, "high": 1}
    if value in named:
        return named[value]
    if re.fullmatch(r"[+-]?[0-9]{1,4}", value) and -100 <= int(value) <= 100:
        return int(value)
    return 0


def priority_text(value):
    return {-1: "low", 0: "normal", 1: "high"}.get(value, str(value))


def nvidia_gpus():
    """[(PCI bus id, model, uuid hex)] of /proc/driver/nvidia/gpus, sorted by bus id; [] if
    unreadable."""
    root = "/proc/driver/nvidia/gpus"
    found = []
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    for name in names:
        try:
            with open(os.path.join(root, name, "information"), encoding="utf-8",
                      errors="replace") as f:
                text = f.read(8192)
        except OSError:
            continue
        uuid = re.search(r"GPU UUID:\s*GPU-([0-9a-fA-F-]+)", text)
        model = re.search(r"Model:\s*(.*)", text)
        if uuid:
            found.append((name.lower(), model[1].strip() if model else "",
                          uuid[1].replace("-", "").lower()))
    return found


def visible_gpus(environ):
    """The UUID prefixes (hex, no dashes) of the GPUs a CUDA program with `environ` may use, or
    None for "any" (CUDA_VISIBLE_DEVICES unset, or entries that cannot be mapped here)."""
    if "CUDA_VISIBLE_DEVICES" not in environ:
        return None
    entries = [e.strip() for e in environ["CUDA_VISIBLE_DEVICES"].split(",")]
    prefixes, gpus = [], None
    for entry in entries:
        if entry.upper().startswith("GPU-"):
            prefixes.append(entry[4:].replace("-", "").lower())
        elif re.fullmatch(r"[0-9]+", entry):
            if gpus is None:
                gpus = nvidia_gpus()
                if not gpus:
                    return None  # no /proc/driver/nvidia here (a container): not mapped
                # CUDA numbers them fastest first, ties by PCI bus id: the bus order is CUDA's
                # only where every GPU is the same model, or with CUDA_DEVICE_ORDER=PCI_BUS_ID.
                if (environ.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID"
                        and len({model for _, model, _ in gpus}) > 1):
                    return None
            index = int(entry)
            if index >= len(gpus):
                break  # CUDA stops at the first entry it cannot use
            prefixes.append(gpus[index][2])
        else:
            return None if entry else prefixes  # MIG-... or anything else: not mapped here
    return prefixes


def mixed_priority_gpus(environ, own_priority=None, shm_dir=None, domain=None):
    """The GPUs (of those a program with `environ` may use) whose segments show live gpuprio
    processes of different priorities (of another priority than own_priority, if given):
    [{"gpu", "domain", "processes": [(pid, priority, command)]}]. Reads the segments as `top`
    does; nothing when they cannot be read."""
    from .segments import default_shm_dir, format_gpu_uuid, take_sample
    try:
        directory = shm_dir if shm_dir is not None else default_shm_dir(environ)
        sample = take_sample(directory, domain)
    except (UsageError, OSError):
        return []
    visible = visible_gpus(environ)
    found = []
    for key in sorted(sample["segments"]):
        segment = sample["segments"][key]
        uuid = segment["uuid"]
        if visible is not None and not any(uuid.startswith(p) for p in visible if p):
            continue
        processes = [(slot["pid"], slot["default_priority"], slot["command"])
                     for slot in segment["slots"]
                     if slot["lock_held"] and slot["default_priority"] is not None
                     and -100 <= slot["default_priority"] <= 100]
        priorities = {p for _, p, _ in processes}
        if own_priority is not None:
            processes = [p for p in processes if p[1] != own_priority]
            mixed = bool(processes)
        else:
            mixed = len(priorities) > 1
        if mixed:
            found.append({"gpu": format_gpu_uuid(bytes.fromhex(uuid)),
                          "domain": segment["domain"], "processes": processes})
    return found


def processes_text(processes, limit=3):
    shown = [f"pid {pid} {ascii_text(command)} at {priority_text(priority)}"
             for pid, priority, command in processes[:limit]]
    more = len(processes) - limit
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def run_warning(child_env):
    """`gpuprio run`'s one line about processes of other priorities on the command's GPUs
    without MPS, or None. Quiet when the command would print no warning (GPUPRIO_LOG=error),
    when it does not schedule or coordinate, or when an MPS daemon serves it."""
    if (child_env.get("GPUPRIO_LOG", "").strip().lower() == "error"
            or child_env.get("GPUPRIO_MODE", "").strip().lower() in ("off", "passthrough")
            or child_env.get("GPUPRIO_COORDINATE", "").strip() == "0"):
        return None
    if serves(child_env):
        return None
    domain = child_env.get("GPUPRIO_DOMAIN", "").strip() or "default"
    own = priority_value(child_env.get("GPUPRIO_PRIORITY"))
    try:
        found = mixed_priority_gpus(child_env, own_priority=own, domain=domain)
    except Exception:  # a warning must never stop the command from running
        return None
    if not found:
        return None
    gpus = ", ".join(f["gpu"] for f in found)
    others = [p for f in found for p in f["processes"]]
    pipe_dir = child_env.get("CUDA_MPS_PIPE_DIRECTORY") or SYSTEM_PIPE_DIR
    return (f"gpuprio run: warning: {gpus} {'is' if len(found) == 1 else 'are'} shared with "
            f"gpuprio processes of another priority ({processes_text(others)}) and no MPS "
            f"daemon serves this environment ({pipe_dir}): the GPU time-slices between the "
            f"processes, so a running kernel of one delays the other; run both under MPS "
            f"(eval \"$(gpuprio mps start)\", then start both from that shell; docs/mps.md)")
