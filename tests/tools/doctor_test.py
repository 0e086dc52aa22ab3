#!/usr/bin/env python3
"""`gpuprio run`'s per-program settings, `gpuprio doctor` and `gpuprio clean-segments`; unittest,
standard library only. Exits non-zero on failure.

Run by doctor_test.cc with the paths it needs in the environment: GPUPRIO_CLI_UNDER_TEST (the
CLI), GPUPRIO_TEST_LIB (libgpuprio.so), GPUPRIO_TEST_FAKE_CUDA (tests/fake_cuda's libcuda.so.1)
and GPUPRIO_TEST_ENV_DUMP (a child that prints its environment). Segments are fabricated with
segment_writer.py in private GPUPRIO_SHM_DIRs under TEST_TMPDIR (passed as --shm-dir, and as
GPUPRIO_SHM_DIR to every child), never in /dev/shm; a slot is made live by a helper process
holding its lock, as the library's processes do. Every scratch directory is removed.

  python3 tests/tools/doctor_test.py [-v]    (with the variables above set)
"""

import fcntl
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))  # not realpath: keep the runfiles tree
sys.path.insert(0, HERE)

import segment_writer  # noqa: E402

CLI = os.environ.get("GPUPRIO_CLI_UNDER_TEST") or os.path.join(HERE, "..", "..", "tools", "cli",
                                                                 "gpuprio")
LIB = os.environ.get("GPUPRIO_TEST_LIB", "")
FAKE_CUDA = os.environ.get("GPUPRIO_TEST_FAKE_CUDA", "")
# 0 where the fake driver cannot be loaded into this Python (a TSan build of it): the cases that
# need it are skipped, and doctor_test.cc expects exactly those three skips.
FAKE_CUDA_IN_PYTHON = os.environ.get("GPUPRIO_TEST_FAKE_CUDA_IN_PYTHON", "1") == "1"
NEEDS_FAKE_CUDA = unittest.skipUnless(FAKE_CUDA_IN_PYTHON,
                                      "the fake driver is a TSan build: not loadable here")
ENV_DUMP = os.environ.get("GPUPRIO_TEST_ENV_DUMP", "")
UUID = "00112233445566778899aabbccddeeff"
GPU_NAME = "GPU-00112233-4455-6677-8899-aabbccddeeff"
NO_DRIVER = "/nonexistent/libcuda.so.1"
OLD = time.time() - 3600  # an hour ago: old enough for clean-segments
# A process that holds the lock of one slot of a segment file (the library's liveness), says
# "locked" once it does, and holds it until its stdin closes.
HOLDER = r"""
import fcntl, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack("@hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET,
                                               int(sys.argv[2]), 1, 0))
print("locked", flush=True)
sys.stdin.read()
"""
# A process that has the file open and holds no lock (one attaching), until its stdin closes.
OPENER = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
print("open", flush=True)
sys.stdin.read()
"""


def scratch_dir(prefix):
    return tempfile.mkdtemp(prefix=prefix, dir=os.environ.get("TEST_TMPDIR"))


def run_cli(args, env=None, shm_dir=None):
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith("GPUPRIO_") and k != "LD_PRELOAD"}
    if shm_dir is not None:
        environ["GPUPRIO_SHM_DIR"] = shm_dir
    environ.update(env or {})
    return subprocess.run([sys.executable, CLI] + args, env=environ, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)


class ShmDirTestCase(unittest.TestCase):
    """A private GPUPRIO_SHM_DIR with this user's segment directory; helper processes stopped
    and everything removed at the end."""

    def setUp(self):
        self.shm_dir = scratch_dir("shm_")
        self.addCleanup(shutil.rmtree, self.shm_dir, ignore_errors=True)
        self.user_dir = os.path.join(self.shm_dir, segment_writer.directory_name())
        os.mkdir(self.user_dir, 0o700)
        os.chmod(self.user_dir, 0o700)

    def segment(self, domain, slots=(), age=OLD, **spec):
        path = os.path.join(self.user_dir, segment_writer.segment_name(UUID, domain))
        segment_writer.write_segment(path, dict(uuid=UUID, slots=list(slots), **spec))
        if age is not None:
            os.utime(path, (age, age))
        return path

    def helper(self, code, *args):
        child = subprocess.Popen([sys.executable, "-I", "-S", "-c", code, *map(str, args)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

        def stop():
            child.stdin.close()
            child.wait(timeout=30)
            child.stdout.close()
        self.addCleanup(stop)
        self.assertIn(child.stdout.readline().strip(), ("locked", "open"))
        return child

    def hold_slot(self, path, index):
        """A live process holding slot `index` of `path`, as an attached gpuprio process does."""
        return self.helper(HOLDER, path, segment_writer.lock_offset(index))

    def doctor(self, *args, driver=NO_DRIVER):
        return run_cli(["doctor", "--lib", LIB, "--cuda-lib", driver, "--shm-dir", self.shm_dir,
                        *args], shm_dir=self.shm_dir)

    def doctor_json(self, *args, driver=NO_DRIVER, exit_code=1):
        done = self.doctor("--json", *args, driver=driver)
        self.assertEqual(done.returncode, exit_code, done.stdout + done.stderr)
        self.assertEqual(done.stderr, "")
        lines = done.stdout.splitlines()
        self.assertEqual(len(lines), 1, done.stdout)
        return json.loads(lines[0])


class RunSettingsTest(unittest.TestCase):
    """--domain, --isolation and --reserved-sms set their variables, checked as the library
    checks them."""

    def env_lines(self, *args):
        done = run_cli(["env", "--lib", LIB, *args])
        self.assertEqual(done.returncode, 0, done.stderr)
        return done.stdout.splitlines()

    def test_settings_are_exported_canonical(self):
        lines = self.env_lines("--domain", " batch.1 ", "--isolation", "Always",
                               "--reserved-sms", "+024")
        self.assertEqual(lines[1:], ["export GPUPRIO_ISOLATION=always",
                                     "export GPUPRIO_RESERVED_SMS=24",
                                     "export GPUPRIO_DOMAIN=batch.1"])

    def test_run_passes_them_to_the_program(self):
        done = run_cli(["run", "--lib", LIB, "--mode", "off", "--domain", "serve", "--isolation",
                        "off", "--reserved-sms", "0", "--", ENV_DUMP])
        self.assertEqual(done.returncode, 0, done.stderr)
        for line in ("GPUPRIO_DOMAIN=serve", "GPUPRIO_ISOLATION=off", "GPUPRIO_RESERVED_SMS=0"):
            self.assertIn(line, done.stdout.splitlines())

    def test_edges_of_the_ranges_are_accepted(self):
        for value in ("0", "1024"):
            self.assertIn(f"export GPUPRIO_RESERVED_SMS={value}",
                          self.env_lines("--reserved-sms", value))
        for value in ("a", "Z_-.9", "x" * 64):
            self.assertIn(f"export GPUPRIO_DOMAIN={value}", self.env_lines("--domain", value))
        for value in ("active", "always", "off", "force"):
            self.assertIn(f"export GPUPRIO_ISOLATION={value}",
                          self.env_lines("--isolation", value.upper()))

    def test_bad_values_are_one_error_line(self):
        cases = [
            (["--domain", "a/b"], ["--domain", "'a/b'", "GPUPRIO_DOMAIN"]),
            (["--domain", ".."], ["--domain", "'..'"]),
            (["--domain", "x" * 65], ["--domain", "1 to 64"]),
            (["--domain", ""], ["--domain"]),
            (["--domain", "caf\u00e9"], ["--domain"]),
            (["--isolation", "sometimes"], ["--isolation", "'sometimes'", "active, always, off, "
                                            "force"]),
            (["--reserved-sms", "-1"], ["--reserved-sms", "[0, 1024]"]),
            (["--reserved-sms", "1025"], ["--reserved-sms", "[0, 1024]"]),
            (["--reserved-sms", "16.5"], ["--reserved-sms"]),
        ]
        for args, needles in cases:
            for command in (["env", "--lib", LIB], ["run", "--lib", LIB]):
                argv = command + args + (["--", ENV_DUMP] if command[0] == "run" else [])
                with self.subTest(argv=argv):
                    done = run_cli(argv)
                    self.assertEqual(done.returncode, 2)
                    self.assertEqual(done.stdout, "")
                    lines = done.stderr.splitlines()
                    self.assertEqual(len(lines), 1, done.stderr)
                    self.assertTrue(lines[0].startswith(f"gpuprio {command[0]}: error: "))
                    for needle in needles:
                        self.assertIn(needle, lines[0])

    def test_help_names_the_options(self):
        done = run_cli(["run", "--help"])
        for option in ("--domain", "--isolation", "--reserved-sms"):
            self.assertIn(option, done.stdout)


class DoctorTest(ShmDirTestCase):

    def test_json_shape_without_a_gpu(self):
        report = self.doctor_json()
        self.assertEqual(set(report), {"usable", "version", "checks", "library", "driver",
                                       "runtime", "mps", "segments"})
        self.assertIs(report["usable"], False)
        for check in report["checks"]:
            self.assertEqual(set(check), {"check", "status", "text", "fix"})
            self.assertIn(check["status"], ("ok", "info", "warning", "error"))
        by_name = {c["check"]: c for c in report["checks"]}
        self.assertEqual(by_name["library"]["status"], "ok")
        self.assertIs(report["library"]["loads"], True)
        self.assertEqual(report["library"]["path"], os.path.abspath(LIB))
        self.assertEqual(report["library"]["version"], report["version"])
        self.assertEqual(by_name["driver"]["status"], "error")
        self.assertIn("no NVIDIA driver", by_name["driver"]["text"])
        self.assertIn("install the NVIDIA driver", by_name["driver"]["fix"])
        self.assertIs(report["driver"]["found"], False)
        self.assertEqual(report["driver"]["devices"], [])
        self.assertEqual(set(report["mps"]), {"control_command", "pipe_directory", "running",
                                              "enabled_on_devices"})
        self.assertEqual(set(report["runtime"]), {"toolkit", "version", "runtime"})
        self.assertEqual(report["segments"], {"shm_dir": self.shm_dir, "segments": [],
                                              "ignored": []})
        self.assertEqual([c["check"] for c in report["checks"] if c["status"] == "error"],
                         ["driver"])

    def test_text_without_a_gpu(self):
        done = self.doctor()
        self.assertEqual(done.returncode, 1, done.stderr)
        self.assertEqual(done.stderr, "")
        text = done.stdout
        self.assertTrue(text.startswith("gpuprio doctor (gpuprio "), text)
        self.assertIn("[ok]", text)
        self.assertIn("[error]    driver", text)
        self.assertIn("what to do:\n  driver: install the NVIDIA driver", text)
        self.assertTrue(text.endswith("verdict: gpuprio cannot run here: see driver above "
                                      "(exit 1)\n"), text)
        self.assertLess(len(text.splitlines()), 25)  # one screen

    @NEEDS_FAKE_CUDA
    def test_with_the_fake_driver_it_is_usable(self):
        report = self.doctor_json(driver=FAKE_CUDA, exit_code=0)
        self.assertIs(report["usable"], True)
        self.assertEqual(report["driver"]["version"], 13000)
        self.assertIs(report["driver"]["green_context_entry_points"], True)
        device = report["driver"]["devices"][0]
        self.assertEqual((device["cc_major"], device["cc_minor"], device["sms"]), (9, 0, 132))
        # The fake splits an H100's 132 SMs in groups of 8: GPUPRIO_RESERVED_SMS=16 keeps 20.
        self.assertEqual(device["isolation"]["available"], True)
        self.assertIn("112 of 132 SMs for confined work, 20 kept free",
                      device["isolation"]["detail"])
        done = self.doctor(driver=FAKE_CUDA)
        self.assertEqual(done.returncode, 0)
        self.assertIn("verdict: gpuprio can run here (exit 0)", done.stdout)

    @NEEDS_FAKE_CUDA
    def test_a_driver_without_green_contexts_falls_back_to_the_budget(self):
        done = run_cli(["doctor", "--json", "--lib", LIB, "--cuda-lib", FAKE_CUDA, "--shm-dir",
                        self.shm_dir], env={"FAKECUDA_GREEN_CONTEXTS": "0"}, shm_dir=self.shm_dir)
        self.assertEqual(done.returncode, 0, done.stdout)
        report = json.loads(done.stdout)
        gpu = next(c for c in report["checks"] if c["check"] == "GPU 0")
        self.assertEqual(gpu["status"], "warning")
        self.assertIn("in-flight budget", gpu["text"])

    def test_a_missing_library_is_an_error(self):
        done = run_cli(["doctor", "--json", "--lib", "/nonexistent/libgpuprio.so", "--cuda-lib",
                        FAKE_CUDA, "--shm-dir", self.shm_dir], shm_dir=self.shm_dir)
        self.assertEqual(done.returncode, 1)
        report = json.loads(done.stdout)
        self.assertIs(report["usable"], False)
        library = next(c for c in report["checks"] if c["check"] == "library")
        self.assertEqual(library["status"], "error")
        self.assertIn("/nonexistent/libgpuprio.so", library["text"])
        self.assertIn("GPUPRIO_LIB", library["fix"])

    def test_a_stale_segment_is_reported_and_a_live_one_is_not(self):
        stale = self.segment("stale", slots=[{"index": 0, "pid": 2147483647, "command": "gone"}])
        live = self.segment("live", slots=[{"index": 5, "pid": os.getpid(), "command": "server"}])
        self.hold_slot(live, 5)
        report = self.doctor_json()
        segments = {s["path"]: s for s in report["segments"]["segments"]}
        self.assertEqual(set(segments), {stale, live})
        self.assertEqual(segments[stale]["state"], "stale")
        self.assertIs(segments[stale]["removable"], True)
        self.assertEqual(segments[stale]["gpu"], GPU_NAME)
        self.assertEqual(segments[live]["state"], "in use")
        self.assertIs(segments[live]["removable"], False)
        self.assertEqual(segments[live]["processes"],
                         [{"slot": 5, "pid": os.getpid(), "command": "server"}])
        texts = [c["text"] for c in report["checks"]]
        self.assertTrue(any(t.startswith(stale + ": stale") for t in texts), texts)
        self.assertFalse(any(t.startswith(live) for t in texts), texts)
        self.assertIn("gpuprio clean-segments removes it",
                      [c["fix"] for c in report["checks"]])
        # Doctor only looks.
        self.assertTrue(os.path.exists(stale) and os.path.exists(live))

    def test_a_damaged_segment_says_what_to_do(self):
        damaged = self.segment("broken", truncate_to=100)
        report = self.doctor_json()
        check = next(c for c in report["checks"] if c["text"].startswith(damaged))
        self.assertEqual(check["status"], "warning")
        self.assertIn("is 100 bytes", check["text"])
        self.assertIn("do not coordinate", check["text"])
        self.assertIn("gpuprio clean-segments removes it", check["fix"])

    @NEEDS_FAKE_CUDA
    def test_an_unlistable_segment_directory_is_a_warning(self):
        missing = os.path.join(self.shm_dir, "missing")
        done = run_cli(["doctor", "--json", "--lib", LIB, "--cuda-lib", FAKE_CUDA, "--shm-dir",
                        missing], shm_dir=self.shm_dir)
        self.assertEqual(done.returncode, 0, done.stdout)
        report = json.loads(done.stdout)
        self.assertIsNone(report["segments"])
        check = next(c for c in report["checks"] if c["check"] == "segments")
        self.assertEqual(check["status"], "warning")
        self.assertIn("GPUPRIO_SHM_DIR", check["fix"])


class CleanSegmentsTest(ShmDirTestCase):

    def clean(self, *args):
        return run_cli(["clean-segments", "--shm-dir", self.shm_dir, *args],
                       shm_dir=self.shm_dir)

    def test_removes_stale_segments_and_keeps_the_used_ones(self):
        stale = self.segment("stale", slots=[{"index": 0, "pid": 2147483647}])
        damaged = self.segment("damaged", truncate_to=100)
        live = self.segment("live", slots=[{"index": 63, "pid": os.getpid()}])
        self.hold_slot(live, 63)
        opened = self.segment("attaching")
        self.helper(OPENER, opened)
        fresh = self.segment("fresh", age=None)
        other = os.path.join(self.user_dir, "notes.txt")  # not a segment's name
        with open(other, "w") as f:
            f.write("x")
        os.utime(other, (OLD, OLD))

        dry = self.clean("--dry-run")
        self.assertEqual(dry.returncode, 0, dry.stderr)
        self.assertIn(f"would remove {stale}: stale", dry.stdout)
        self.assertIn(f"would remove {damaged}: stale", dry.stdout)
        self.assertIn("2 segments would be removed, 3 kept", dry.stdout)
        for path in (stale, damaged, live, opened, fresh, other):
            self.assertTrue(os.path.exists(path), path)

        done = self.clean()
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stderr, "")
        self.assertIn(f"removed {stale}: stale", done.stdout)
        self.assertIn(f"removed {damaged}: stale", done.stdout)
        self.assertIn(f"kept {live}: in use: 1 process attached", done.stdout)
        self.assertIn(f"kept {opened}: no slot held, but open in pid", done.stdout)
        self.assertIn(f"kept {fresh}: stale", done.stdout)
        self.assertIn("under 10 s old", done.stdout)
        self.assertTrue(done.stdout.endswith(f"2 segments removed, 3 kept ({self.shm_dir})\n"))
        self.assertEqual(sorted(os.listdir(self.user_dir)),
                         sorted(os.path.basename(p) for p in (live, opened, fresh, other)))

        # The holder still holds its slot in the file it opened: nothing was replaced.
        with open(live, "rb") as f:
            query = struct.pack("@hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET,
                                segment_writer.lock_offset(63), 1, 0)
            answer = fcntl.fcntl(f.fileno(), fcntl.F_OFD_GETLK, query)
            self.assertNotEqual(struct.unpack("@hhqqi4x", answer)[0], fcntl.F_UNLCK)

    def test_domain_limits_what_is_removed(self):
        first = self.segment("first")
        second = self.segment("second")
        done = self.clean("--domain", "first")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertFalse(os.path.exists(first))
        self.assertTrue(os.path.exists(second))
        self.assertIn("1 segment removed, 0 kept", done.stdout)

    def test_bad_options_are_one_error_line(self):
        for args in (["--domain", "a/b"], ["--bogus"]):
            with self.subTest(args=args):
                done = self.clean(*args)
                self.assertEqual(done.returncode, 2)
                self.assertEqual(len(done.stderr.splitlines()), 1, done.stderr)
                self.assertTrue(done.stderr.startswith("gpuprio clean-segments: error: "))

    def test_an_empty_directory_is_fine(self):
        done = self.clean()
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout, f"0 segments removed, 0 kept ({self.shm_dir})\n")


class ProbeEnvironmentTest(unittest.TestCase):
    """The environment doctor's probe children get (doctor_checks.probe_environment)."""

    def setUp(self):
        sys.path.insert(0, os.path.dirname(CLI))
        from gpuprio_cli import doctor_checks  # noqa: E402 (found next to the CLI)
        self.probe_environment = doctor_checks.probe_environment

    def test_gpuprios_mps_client_priority_goes_with_its_mark(self):
        shell = {"PATH": "/usr/bin", "GPUPRIO_PRIORITY": "low", "CUDA_MPS_CLIENT_PRIORITY": "1",
                 "GPUPRIO_MPS_CLIENT_PRIORITY_SET": "1", "LD_PRELOAD": "/x/libgpuprio.so"}
        self.assertEqual(self.probe_environment(shell, "/lib/libgpuprio.so"),
                         {"PATH": "/usr/bin", "LD_PRELOAD": "/lib/libgpuprio.so"})

    def test_the_users_mps_client_priority_stays(self):
        for value, mark in (("1", None), ("0", "1")):
            shell = {"CUDA_MPS_CLIENT_PRIORITY": value}
            if mark is not None:
                shell["GPUPRIO_MPS_CLIENT_PRIORITY_SET"] = mark
            self.assertEqual(self.probe_environment(shell, None),
                             {"CUDA_MPS_CLIENT_PRIORITY": value})


if __name__ == "__main__":
    for name, value in (("GPUPRIO_TEST_LIB", LIB), ("GPUPRIO_TEST_FAKE_CUDA", FAKE_CUDA),
                        ("GPUPRIO_TEST_ENV_DUMP", ENV_DUMP)):
        if not value:
            sys.exit(f"doctor_test.py: set {name} (doctor_test.cc does)")
    unittest.main()
