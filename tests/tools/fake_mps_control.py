#!/usr/bin/env python3
"""A stand-in for NVIDIA's nvidia-cuda-mps-control, for tests of `gpuprio mps` without a GPU;
standard library only. It is driven the way the real one is:

  nvidia-cuda-mps-control -d     daemonizes (the caller gets its exit status once the daemon is
                                 set up), creates the control pipe `control` (a FIFO) and
                                 nvidia-cuda-mps-control.pid in $CUDA_MPS_PIPE_DIRECTORY, writes
                                 control.log in $CUDA_MPS_LOG_DIRECTORY, and serves commands
                                 until `quit`; with a daemon already on that directory it fails
  nvidia-cuda-mps-control        reads commands from stdin, one a line, passes each to the daemon
                                 of $CUDA_MPS_PIPE_DIRECTORY and prints its answer; without one it
                                 prints "Cannot find MPS control daemon process" and exits 1

Commands: get_server_list (the pids in $FAKE_MPS_SERVERS, comma-separated, as the daemon's
environment had it), get_client_list PID ($FAKE_MPS_CLIENTS_<PID>), quit (the daemon removes its
pipe and pid file and exits). The daemon also exits by itself after FAKE_MPS_LIFETIME_S (default
300) seconds, so a test that dies leaves no daemon behind for long. The daemon records its
CUDA_VISIBLE_DEVICES in control.log ("visible=...").

A client sends "REPLY_FIFO COMMAND" on the control FIFO and reads the answer from its own FIFO.
"""

import os
import select
import sys
import tempfile
import time

PIPE_DIR = os.environ.get("CUDA_MPS_PIPE_DIRECTORY") or "/tmp/nvidia-mps"
LOG_DIR = os.environ.get("CUDA_MPS_LOG_DIRECTORY") or "/var/log/nvidia-mps"
CONTROL = os.path.join(PIPE_DIR, "control")
PID_FILE = os.path.join(PIPE_DIR, "nvidia-cuda-mps-control.pid")


def log(text):
    with open(os.path.join(LOG_DIR, "control.log"), "a") as f:
        f.write(f"[{time.time():.3f}] {text}\n")


def daemon_running():
    try:
        with open(PID_FILE) as f:
            pid = int(f.read().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return False
    with open(f"/proc/{pid}/stat", "rb") as f:
        return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")


def answer(command):
    words = command.split()
    if not words:
        return ""
    if words[0] == "get_server_list":
        return "\n".join(p for p in os.environ.get("FAKE_MPS_SERVERS", "").split(",") if p)
    if words[0] == "get_client_list" and len(words) == 2:
        return "\n".join(p for p in os.environ.get(f"FAKE_MPS_CLIENTS_{words[1]}", "").split(",")
                         if p)
    return f"unknown command: {command}"


def serve(ready_fd):
    os.mkfifo(CONTROL, 0o600)
    # Read and write, so the FIFO never reads end-of-file between clients.
    fd = os.open(CONTROL, os.O_RDWR)
    with open(PID_FILE, "w") as f:
        f.write(f"{os.getpid()}\n")
    log(f"daemon started pid={os.getpid()} visible={os.environ.get('CUDA_VISIBLE_DEVICES', '')}")
    os.write(ready_fd, b"ok")
    os.close(ready_fd)
    deadline = time.monotonic() + float(os.environ.get("FAKE_MPS_LIFETIME_S", "300"))
    buffered = b""
    try:
        while time.monotonic() < deadline:
            readable, _, _ = select.select([fd], [], [], 0.5)
            if not readable:
                continue
            buffered += os.read(fd, 4096)
            while b"\n" in buffered:
                line, buffered = buffered.split(b"\n", 1)
                reply, _, command = line.decode().partition(" ")
                log(f"command: {command}")
                text = "" if command.strip() == "quit" else answer(command)
                with open(reply, "w") as out:
                    out.write(text + ("\n" if text else ""))
                if command.strip() == "quit":
                    return
        log("lifetime over")
    finally:
        for path in (CONTROL, PID_FILE):
            try:
                os.unlink(path)
            except OSError:
                pass
        log("daemon exiting")


def start_daemon():
    if daemon_running():
        print("An instance of this daemon is already running", file=sys.stderr)
        return 1
    for path in (CONTROL, PID_FILE):
        try:
            os.unlink(path)  # left over from a killed daemon
        except OSError:
            pass
    read_end, write_end = os.pipe()
    if os.fork() > 0:
        os.close(write_end)
        ok = os.read(read_end, 2) == b"ok"
        return 0 if ok else 1
    os.close(read_end)
    os.setsid()
    if os.fork() > 0:
        os._exit(0)
    null = os.open(os.devnull, os.O_RDWR)
    for target in (0, 1, 2):
        os.dup2(null, target)
    os.chdir("/")
    try:
        serve(write_end)
    finally:
        os._exit(0)


def client():
    if not daemon_running():
        print("Cannot find MPS control daemon process", file=sys.stderr)
        return 1
    for line in sys.stdin:
        command = line.strip()
        if not command:
            continue
        scratch = tempfile.mkdtemp(prefix="fake_mps_reply_")
        reply = os.path.join(scratch, "reply")
        try:
            os.mkfifo(reply, 0o600)
            fd = os.open(CONTROL, os.O_WRONLY | os.O_NONBLOCK)
            os.write(fd, f"{reply} {command}\n".encode())
            os.close(fd)
            with open(reply) as f:
                sys.stdout.write(f.read())
        finally:
            os.unlink(reply) if os.path.exists(reply) else None
            os.rmdir(scratch)
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["-d"]:
        sys.exit(start_daemon())
    if sys.argv[1:]:
        print(f"usage: {sys.argv[0]} [-d]", file=sys.stderr)
        sys.exit(2)
    sys.exit(client())
