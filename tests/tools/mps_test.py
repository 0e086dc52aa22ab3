#!/usr/bin/env python3
"""`gpuprio mps start|stop|status|env`, `gpuprio run`'s warning about processes of another
priority on its GPUs without MPS, and `gpuprio doctor`'s check of the same; unittest, standard
library only, no GPU. Exits non-zero on failure.

The MPS control program is fake_mps_control.py (beside this file), put first on the PATH of every
command under test as `nvidia-cuda-mps-control`: it really daemonizes, makes its control pipe and
pid file in CUDA_MPS_PIPE_DIRECTORY and answers get_server_list / get_client_list / quit through
it. Every daemon a test starts is stopped at its end (asked to quit, killed if it will not), and
every scratch directory (under TEST_TMPDIR) is removed. Segments are fabricated with
segment_writer.py in a private GPUPRIO_SHM_DIR; a slot is made live by a helper process holding
its lock, as the library's processes do.

Run by mps_test.cc with GPUPRIO_CLI_UNDER_TEST (the CLI) and GPUPRIO_TEST_LIB (libgpuprio.so) set;
by hand, from the repository root:

  python3 -I -S -B tests/tools/mps_test.py [-v]
"""

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))  # not realpath: keep the runfiles tree
sys.path.insert(0, HERE)

import segment_writer  # noqa: E402

REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
CLI = os.environ.get("GPUPRIO_CLI_UNDER_TEST") or os.path.join(REPO, "tools", "cli", "gpuprio")
LIB = os.environ.get("GPUPRIO_TEST_LIB") or os.path.join(REPO, "bazel-bin", "hook",
                                                         "libgpuprio.so")
FAKE_CONTROL = os.path.join(HERE, "fake_mps_control.py")
UUID = "00112233445566778899aabbccddeeff"
GPU_NAME = "GPU-00112233-4455-6677-8899-aabbccddeeff"
OTHER_UUID = "ffeeddccbbaa99887766554433221100"
PID_FILE = "nvidia-cuda-mps-control.pid"
WAIT_S = 20  # for a fake daemon to go, in cleanup
HOLDER = r"""
import fcntl, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack("@hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET,
                                               int(sys.argv[2]), 1, 0))
print("locked", flush=True)
sys.stdin.read()
"""


def mode_of(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def process_running(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


def write_script(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o755)


class MpsTestCase(unittest.TestCase):
    """A scratch directory with a bin/ holding the fake control program, a private
    XDG_RUNTIME_DIR, and the daemons started on pipe directories under it stopped at the end."""

    def setUp(self):
        self.scratch = tempfile.mkdtemp(prefix="mps_", dir=os.environ.get("TEST_TMPDIR"))
        self.addCleanup(shutil.rmtree, self.scratch, ignore_errors=True)
        self.bin = os.path.join(self.scratch, "bin")
        os.mkdir(self.bin)
        write_script(os.path.join(self.bin, "nvidia-cuda-mps-control"),
                     f"#!/bin/sh\nexec '{sys.executable}' -I -S -B '{FAKE_CONTROL}' \"$@\"\n")
        self.xdg = os.path.join(self.scratch, "xdg")
        os.mkdir(self.xdg, 0o700)
        os.chmod(self.xdg, 0o700)
        self.addCleanup(self.stop_daemons)

    def environment(self, extra=None, fake_control=True):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("GPUPRIO_", "CUDA_", "FAKE_MPS_")) and k != "LD_PRELOAD"}
        path = env.get("PATH", os.defpath)
        env["PATH"] = f"{self.bin}:{path}" if fake_control else path
        env["XDG_RUNTIME_DIR"] = self.xdg
        env.update(extra or {})
        return env

    def cli(self, *args, env=None, fake_control=True):
        if (args[:2] == ("mps", "start") and "--as-user" not in args
                and "--log-dir" not in args and "CUDA_MPS_LOG_DIRECTORY" not in (env or {})):
            # Never the system's /var/log/nvidia-mps, which is root's default.
            args = args + ("--log-dir", os.path.join(self.scratch, "root-log"))
        return subprocess.run([sys.executable, "-I", "-S", "-B", CLI, *args],
                              env=self.environment(env, fake_control), capture_output=True,
                              text=True, timeout=60, stdin=subprocess.DEVNULL)

    def pipe_dirs(self):
        """Every directory under the scratch one holding a daemon's pid file."""
        for directory, _, files in os.walk(self.scratch):
            if PID_FILE in files:
                yield directory

    def daemon_pid(self, pipe_dir):
        try:
            with open(os.path.join(pipe_dir, PID_FILE)) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def stop_daemons(self):
        for pipe_dir in list(self.pipe_dirs()):
            pid = self.daemon_pid(pipe_dir)
            if pid is None or not process_running(pid):
                continue
            subprocess.run([os.path.join(self.bin, "nvidia-cuda-mps-control")], input="quit\n",
                           text=True, capture_output=True, timeout=WAIT_S,
                           env=self.environment({"CUDA_MPS_PIPE_DIRECTORY": pipe_dir}))
            deadline = time.monotonic() + WAIT_S
            while process_running(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if process_running(pid):
                os.kill(pid, signal.SIGKILL)

    def start(self, *args, env=None):
        done = self.cli("mps", "start", *args, env=env)
        self.assertEqual(done.returncode, 0, done.stderr)
        return done

    def default_pipe(self):
        return os.path.join(self.xdg, "gpuprio-mps", "pipe")


class StartStopTest(MpsTestCase):

    def test_a_user_gets_private_directories_and_the_export_line(self):
        done = self.start("--as-user")
        pipe = self.default_pipe()
        self.assertEqual(done.stdout, f"export CUDA_MPS_PIPE_DIRECTORY={pipe}\n")
        self.assertIn("MPS control daemon started (pid ", done.stderr)
        for path in (os.path.dirname(pipe), pipe, os.path.join(self.xdg, "gpuprio-mps", "log")):
            self.assertEqual(mode_of(path), 0o700, path)
        pid = self.daemon_pid(pipe)
        self.assertTrue(process_running(pid))
        self.assertTrue(stat.S_ISFIFO(os.lstat(os.path.join(pipe, "control")).st_mode))
        self.assertTrue(os.path.isfile(os.path.join(self.xdg, "gpuprio-mps", "log",
                                                    "control.log")))
        env = self.cli("mps", "env", "--as-user")
        self.assertEqual((env.returncode, env.stdout), (0, done.stdout), env.stderr)
        stop = self.cli("mps", "stop", "--as-user")
        self.assertEqual(stop.returncode, 0, stop.stderr)
        self.assertIn(f"(pid {pid}) stopped", stop.stderr)
        self.assertFalse(process_running(pid))
        self.assertFalse(os.path.exists(os.path.join(pipe, "control")))

    def test_a_second_daemon_on_the_same_pipe_directory_is_refused(self):
        self.start("--as-user")
        pid = self.daemon_pid(self.default_pipe())
        again = self.cli("mps", "start", "--as-user")
        self.assertEqual(again.returncode, 1)
        self.assertEqual(again.stdout, "")
        self.assertIn(f"an MPS control daemon already runs on {self.default_pipe()} (pid {pid})",
                      again.stderr)
        self.assertEqual(self.daemon_pid(self.default_pipe()), pid)
        # Another pipe directory is another daemon.
        other = os.path.join(self.scratch, "other")
        self.start("--as-user", "--pipe-dir", other)
        self.assertNotEqual(self.daemon_pid(other), pid)

    def test_a_directory_others_can_write_or_another_user_owns_is_refused(self):
        pipe = os.path.join(self.scratch, "shared")
        os.mkdir(pipe)
        os.chmod(pipe, 0o777)
        done = self.cli("mps", "start", "--pipe-dir", pipe)
        self.assertEqual(done.returncode, 1)
        self.assertIn(f"{pipe} has mode 0777: others can write it", done.stderr)
        self.assertFalse(os.path.exists(os.path.join(pipe, "control")))
        os.chmod(pipe, 0o755)
        user = self.cli("mps", "start", "--as-user", "--pipe-dir", pipe)
        self.assertEqual(user.returncode, 1)
        self.assertIn("has mode 0755, not 0700", user.stderr)
        link = os.path.join(self.scratch, "link")
        os.symlink(pipe, link)
        linked = self.cli("mps", "start", "--pipe-dir", link)
        self.assertEqual(linked.returncode, 1)
        self.assertIn("is a symbolic link", linked.stderr)
        os.chmod(pipe, 0o700)
        try:
            os.chown(pipe, 65534, -1)
            chowned = True
        except OSError:  # not root, or a user namespace (a sandbox) without uid 65534
            chowned = False
        if chowned:
            foreign = self.cli("mps", "start", "--pipe-dir", pipe)
            self.assertEqual(foreign.returncode, 1)
            self.assertIn(f"{pipe} belongs to uid 65534, not to this user", foreign.stderr)
        self.assertEqual(list(self.pipe_dirs()), [])

    def test_explicit_directories_and_a_gpu_set(self):
        pipe = os.path.join(self.scratch, "p", "pipe")
        log = os.path.join(self.scratch, "p", "log")
        done = self.start("--pipe-dir", pipe, "--log-dir", log, "--gpus", "1, GPU-abc")
        self.assertEqual(done.stdout, f"export CUDA_MPS_PIPE_DIRECTORY={pipe}\n")
        self.assertIn("GPUs 1,GPU-abc, which its clients see renumbered from 0", done.stderr)
        with open(os.path.join(log, "control.log")) as f:
            self.assertIn("visible=1,GPU-abc", f.read())
        status = self.cli("mps", "status", "--pipe-dir", pipe)
        self.assertEqual(status.returncode, 0, status.stderr)
        self.assertIn(f"log directory:  {log} (recorded by gpuprio mps start)", status.stdout)
        self.assertIn("GPUs:           1,GPU-abc", status.stdout)
        bad = self.cli("mps", "start", "--pipe-dir", pipe, "--gpus", "0;1")
        self.assertEqual(bad.returncode, 2)
        self.assertEqual(bad.stderr.count("\n"), 1, bad.stderr)
        self.assertIn("gpuprio mps: error: --gpus: '0;1' is not", bad.stderr)

    def test_the_environment_names_the_directories(self):
        pipe = os.path.join(self.scratch, "env-pipe")
        log = os.path.join(self.scratch, "env-log")
        env = {"CUDA_MPS_PIPE_DIRECTORY": pipe, "CUDA_MPS_LOG_DIRECTORY": log}
        self.start("--as-user", env=env)
        self.assertTrue(process_running(self.daemon_pid(pipe)))
        self.assertEqual(mode_of(pipe), 0o700)
        report = json.loads(self.cli("mps", "status", "--json", env=env).stdout)
        self.assertEqual(report["sources"], {"pipe": "CUDA_MPS_PIPE_DIRECTORY",
                                             "log": "CUDA_MPS_LOG_DIRECTORY"})
        self.assertTrue(report["environment"]["points_here"])

    def test_status_lists_servers_and_their_clients(self):
        env = {"FAKE_MPS_SERVERS": "111,222", "FAKE_MPS_CLIENTS_111": "5,6"}
        self.start("--as-user", env=env)
        pipe = self.default_pipe()
        done = self.cli("mps", "status", "--as-user", "--json")
        self.assertEqual(done.returncode, 0, done.stderr)
        report = json.loads(done.stdout)
        self.assertTrue(report["answers"])
        self.assertEqual(report["pid"], self.daemon_pid(pipe))
        self.assertEqual(report["servers"], [{"pid": 111, "clients": [5, 6]},
                                             {"pid": 222, "clients": []}])
        self.assertEqual(report["pipe_directory"], pipe)
        self.assertEqual(report["environment"], {"CUDA_MPS_PIPE_DIRECTORY": None,
                                                 "points_here": False})
        text = self.cli("mps", "status", "--as-user").stdout
        self.assertIn("server 111: clients 5, 6", text)
        self.assertIn("server 222: clients none", text)
        self.assertIn('does not point at it (CUDA_MPS_PIPE_DIRECTORY unset, so /tmp/nvidia-mps); '
                      'eval "$(gpuprio mps env)" does', text)
        here = self.cli("mps", "status", "--as-user",
                        env={"CUDA_MPS_PIPE_DIRECTORY": pipe}).stdout
        self.assertIn(f"this environment: points at it (CUDA_MPS_PIPE_DIRECTORY={pipe})", here)

    def test_without_a_daemon(self):
        status = self.cli("mps", "status", "--as-user")
        self.assertEqual(status.returncode, 1)
        self.assertIn(f"not answering on {self.default_pipe()} (no control pipe there)",
                      status.stdout)
        stop = self.cli("mps", "stop", "--as-user")
        self.assertEqual(stop.returncode, 0)
        self.assertIn("no MPS control daemon on", stop.stderr)
        self.assertIn("nothing to stop", stop.stderr)
        env = self.cli("mps", "env", "--as-user")
        self.assertEqual((env.returncode, env.stdout), (1, ""))
        self.assertIn("start one with gpuprio mps start", env.stderr)
        missing = self.cli("mps", "start", "--as-user", fake_control=False)
        if shutil.which("nvidia-cuda-mps-control") is None:
            self.assertEqual(missing.returncode, 1)
            self.assertIn("nvidia-cuda-mps-control not found in PATH", missing.stderr)

    def test_files_of_a_killed_daemon_do_not_count_as_one(self):
        self.start("--as-user")
        pipe = self.default_pipe()
        pid = self.daemon_pid(pipe)
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + WAIT_S
        while process_running(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertTrue(os.path.exists(os.path.join(pipe, "control")))
        stop = self.cli("mps", "stop", "--as-user")
        self.assertEqual(stop.returncode, 0)
        self.assertIn(f"names pid {pid}, which no longer runs", stop.stderr)
        status = self.cli("mps", "status", "--as-user")
        self.assertEqual(status.returncode, 1)
        self.start("--as-user")
        self.assertNotEqual(self.daemon_pid(pipe), pid)

    def test_the_pipe_nvidias_daemon_leaves_behind_is_no_daemon(self):
        # NVIDIA's daemon removes its pid file when it quits and leaves the control pipe.
        self.start("--as-user")
        pipe = self.default_pipe()
        pid = self.daemon_pid(pipe)
        self.assertEqual(self.cli("mps", "stop", "--as-user").returncode, 0)
        os.mkfifo(os.path.join(pipe, "control"), 0o600)
        self.assertFalse(os.path.exists(os.path.join(pipe, "nvidia-cuda-mps-control.pid")))
        stop = self.cli("mps", "stop", "--as-user")
        self.assertEqual(stop.returncode, 0, stop.stderr)
        self.assertIn(f"no MPS control daemon answers on {pipe}", stop.stderr)
        self.assertIn("nothing to stop", stop.stderr)
        self.assertFalse(process_running(pid))
        status = self.cli("mps", "status", "--as-user")
        self.assertEqual(status.returncode, 1)

    def test_exclusive_sets_the_compute_mode_as_root_only(self):
        user = self.cli("mps", "start", "--as-user", "--exclusive")
        self.assertEqual(user.returncode, 1)
        self.assertIn("--exclusive sets the GPUs' compute mode, which needs root", user.stderr)
        if os.geteuid() != 0:
            return
        calls = os.path.join(self.scratch, "smi_calls")
        pipe = os.path.join(self.scratch, "excl")
        no_smi = self.cli("mps", "start", "--exclusive", "--pipe-dir", pipe,
                          env={"PATH": self.bin})
        self.assertEqual(no_smi.returncode, 1)
        self.assertIn("--exclusive: nvidia-smi not found", no_smi.stderr)
        write_script(os.path.join(self.bin, "nvidia-smi"),
                     f"#!/bin/sh\necho \"$@\" >> '{calls}'\n")
        self.start("--exclusive", "--gpus", "0,GPU-12", "--pipe-dir", pipe)
        with open(calls) as f:
            self.assertEqual(f.read().splitlines(), ["-i 0 -c EXCLUSIVE_PROCESS",
                                                     "-i GPU-12 -c EXCLUSIVE_PROCESS"])

    def test_root_defaults_are_nvidias(self):
        if os.geteuid() != 0:
            self.skipTest("not root")  # counted: mps_test.cc expects it only as a user
        report = json.loads(self.cli("mps", "status", "--json").stdout)
        self.assertEqual((report["pipe_directory"], report["log_directory"]),
                         ("/tmp/nvidia-mps", "/var/log/nvidia-mps"))
        self.assertEqual(report["sources"]["pipe"], "default for root")


class SharingTest(MpsTestCase):
    """gpuprio run's warning and doctor's check, on fabricated segments with live slots."""

    def setUp(self):
        super().setUp()
        self.shm_dir = os.path.join(self.scratch, "shm")
        os.mkdir(self.shm_dir)
        self.user_dir = os.path.join(self.shm_dir, segment_writer.directory_name())
        os.mkdir(self.user_dir, 0o700)
        os.chmod(self.user_dir, 0o700)

    def segment(self, priorities, uuid=UUID, domain="default", held=True):
        path = os.path.join(self.user_dir, segment_writer.segment_name(uuid, domain))
        slots = [{"index": i, "pid": os.getpid(), "command": f"job{i}", "default_priority": p}
                 for i, p in enumerate(priorities)]
        segment_writer.write_segment(path, {"uuid": uuid, "slots": slots})
        if held:
            for i in range(len(priorities)):
                self.hold(path, i)

    def hold(self, path, index):
        child = subprocess.Popen([sys.executable, "-I", "-S", "-c", HOLDER, path,
                                  str(segment_writer.lock_offset(index))],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

        def stop():
            child.stdin.close()
            child.wait(timeout=30)
            child.stdout.close()
        self.addCleanup(stop)
        self.assertEqual(child.stdout.readline().strip(), "locked")

    def run_command(self, *options, env=None):
        environ = {"GPUPRIO_SHM_DIR": self.shm_dir}
        environ.update(env or {})
        done = self.cli("run", "--lib", LIB, *options, "--", sys.executable, "-I", "-S", "-c",
                        "print('ran')", env=environ)
        self.assertEqual((done.returncode, done.stdout), (0, "ran\n"), done.stderr)
        return [line for line in done.stderr.splitlines() if line.startswith("gpuprio run:")]

    def test_run_warns_once_of_another_priority_without_mps(self):
        self.segment([-1, -1])
        lines = self.run_command("--priority", "high")
        self.assertEqual(len(lines), 1, lines)
        line = lines[0]
        self.assertTrue(line.startswith(f"gpuprio run: warning: {GPU_NAME} is shared with "
                                        "gpuprio processes of another priority ("), line)
        self.assertIn(f"pid {os.getpid()} job0 at low, pid {os.getpid()} job1 at low", line)
        self.assertIn("no MPS daemon serves this environment (/tmp/nvidia-mps)", line)
        self.assertIn('eval "$(gpuprio mps start)"', line)
        self.assertIn("docs/mps.md", line)

    def test_run_is_quiet_when_nothing_calls_for_mps(self):
        self.segment([-1])
        self.assertEqual(self.run_command("--priority", "low"), [])  # the same priority
        self.assertEqual(self.run_command("--priority", "-1"), [])
        self.assertEqual(self.run_command("--priority", "high", "--log", "error"), [])
        self.assertEqual(self.run_command("--priority", "high", "--mode", "off"), [])
        self.assertEqual(self.run_command("--priority", "high", "--domain", "other"), [])
        self.assertEqual(self.run_command("--priority", "high",
                                          env={"CUDA_VISIBLE_DEVICES": "GPU-ffee"}), [])
        self.assertEqual(len(self.run_command("--priority", "high",
                                              env={"CUDA_VISIBLE_DEVICES": "GPU-0011"})), 1)
        self.assertEqual(self.run_command("--priority", "high",
                                          env={"CUDA_VISIBLE_DEVICES": ""}), [])
        if not os.path.isdir("/proc/driver/nvidia/gpus"):
            # An index that cannot be mapped to a UUID here may be any GPU.
            self.assertEqual(len(self.run_command("--priority", "high",
                                                  env={"CUDA_VISIBLE_DEVICES": "0"})), 1)

    def test_a_slot_nobody_holds_is_no_process(self):
        self.segment([-1], held=False)
        self.assertEqual(self.run_command("--priority", "high"), [])

    def test_run_warns_beside_the_pipe_a_stopped_daemon_left(self):
        self.segment([-1])
        pipe = self.default_pipe()
        os.makedirs(pipe, mode=0o700, exist_ok=True)
        os.mkfifo(os.path.join(pipe, "control"), 0o600)
        self.addCleanup(shutil.rmtree, os.path.dirname(pipe), True)
        lines = self.run_command("--priority", "high", env={"CUDA_MPS_PIPE_DIRECTORY": pipe})
        self.assertEqual(len(lines), 1, lines)
        self.assertIn("no MPS daemon serves this environment", lines[0])

    def test_run_under_mps_is_quiet(self):
        self.segment([-1])
        self.start("--as-user")
        self.assertEqual(self.run_command("--priority", "high",
                                          env={"CUDA_MPS_PIPE_DIRECTORY": self.default_pipe()}),
                         [])

    def doctor_sharing(self, env=None):
        environ = {"GPUPRIO_SHM_DIR": self.shm_dir}
        environ.update(env or {})
        done = self.cli("doctor", "--json", "--lib", LIB, "--cuda-lib", "/nonexistent/libcuda.so.1",
                        "--shm-dir", self.shm_dir, env=environ)
        self.assertEqual(done.stderr, "")
        report = json.loads(done.stdout)
        return [c for c in report["checks"] if c["check"] == "sharing"]

    def test_doctor_lists_gpus_shared_at_different_priorities_without_mps(self):
        self.segment([1, -1])
        self.segment([0, 0], uuid=OTHER_UUID)
        checks = self.doctor_sharing()
        self.assertEqual(len(checks), 1, checks)
        self.assertEqual(checks[0]["status"], "warning")
        self.assertIn(f"{GPU_NAME} (domain default): gpuprio processes of different priorities "
                      "share it without MPS", checks[0]["text"])
        self.assertIn("job0 at high", checks[0]["text"])
        self.assertIn("job1 at low", checks[0]["text"])
        self.assertIn("gpuprio mps start", checks[0]["fix"])
        self.start("--as-user")
        self.assertEqual(self.doctor_sharing({"CUDA_MPS_PIPE_DIRECTORY": self.default_pipe()}),
                         [])


if __name__ == "__main__":
    unittest.main()
