#!/usr/bin/env python3
"""`gpuprio exporter` over real HTTP; unittest, standard library only. Exits non-zero on failure.

Run by exporter_test.cc with the paths it needs in the environment: GPUPRIO_CLI_UNDER_TEST (the
CLI), GPUPRIO_TEST_LIB (libgpuprio.so), GPUPRIO_TEST_FAKE_CUDA (tests/fake_cuda's libcuda.so.1)
and GPUPRIO_TEST_COORD_CLIENT (tests/coordinator's coord_client). The exporter is started on an
ephemeral port (--port 0, the address read from its first line) over a private GPUPRIO_SHM_DIR
under TEST_TMPDIR, where coord_client processes under the library (the fake driver) attach to a
segment; every scrape is parsed whole by a strict parser of the text format 0.0.4 written here.
Every scratch directory is removed, every child stopped.

  python3 tests/tools/exporter_test.py [-v]    (with the variables above set)
"""

import json
import math
import os
import re
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import segment_writer  # noqa: E402

CLI = os.environ.get("GPUPRIO_CLI_UNDER_TEST") or os.path.join(HERE, "..", "..", "tools", "cli",
                                                                 "gpuprio")
LIB = os.environ.get("GPUPRIO_TEST_LIB", "")
FAKE_CUDA = os.environ.get("GPUPRIO_TEST_FAKE_CUDA", "")
COORD_CLIENT = os.environ.get("GPUPRIO_TEST_COORD_CLIENT", "")
SEGMENT_BYTES = 4096 + 64 * 4096
UUID = "00112233445566778899aabbccddeeff"

# --- a strict parser of the Prometheus text format, version 0.0.4 ------------------------------

METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
FLOAT = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?Inf|NaN")
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")


class FormatError(AssertionError):
    pass


def parse_float(text, where):
    if not FLOAT.fullmatch(text):
        raise FormatError(f"{where}: {text!r} is not a float")
    return float(text.replace("Inf", "inf").replace("NaN", "nan"))


def parse_labels(line, pos, where):
    """The labels from line[pos] == '{' on: (dict, position after '}')."""
    labels = {}
    pos += 1
    while True:
        if line.startswith("}", pos):
            return labels, pos + 1
        match = LABEL_NAME.match(line, pos)
        if not match:
            raise FormatError(f"{where}: bad label name at column {pos}")
        name = match[0]
        pos = match.end()
        if not line.startswith('="', pos):
            raise FormatError(f"{where}: no =\" after label {name}")
        pos += 2
        value = []
        while True:
            if pos >= len(line):
                raise FormatError(f"{where}: unterminated value of label {name}")
            c = line[pos]
            if c == "\\":
                nxt = line[pos + 1:pos + 2]
                if nxt not in ("\\", '"', "n"):
                    raise FormatError(f"{where}: bad escape \\{nxt} in label {name}")
                value.append("\n" if nxt == "n" else nxt)
                pos += 2
            elif c == '"':
                pos += 1
                break
            elif c == "\n":
                raise FormatError(f"{where}: raw newline in label {name}")
            else:
                value.append(c)
                pos += 1
        if name in labels:
            raise FormatError(f"{where}: label {name} twice")
        labels[name] = "".join(value)
        if line.startswith(",", pos):
            pos += 1
        elif not line.startswith("}", pos):
            raise FormatError(f"{where}: expected , or }} after label {name}")


def family_of(name, types):
    if name in types:
        return name
    for suffix in ("_bucket", "_sum", "_count"):
        base = name[:-len(suffix)] if name.endswith(suffix) else None
        if base and types.get(base) in ("histogram", "summary"):
            return base
    return None


def parse_exposition(text):
    """{family: {"type", "help", "samples": [(name, labels, value)]}}; FormatError on any
    departure from the format (or from the conventions the exporter promises)."""
    if text and not text.endswith("\n"):
        raise FormatError("the text does not end with a newline")
    families, types, finished = {}, {}, set()
    current, series = None, set()
    for number, line in enumerate(text.split("\n")[:-1], 1):
        where = f"line {number} ({line[:80]!r})"
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) < 3 or parts[0] != "#" or parts[1] not in ("HELP", "TYPE"):
                raise FormatError(f"{where}: a comment other than HELP or TYPE")
            name = parts[2]
            if not METRIC_NAME.fullmatch(name):
                raise FormatError(f"{where}: bad metric name")
            family = families.setdefault(name, {"type": None, "help": None, "samples": []})
            if name in finished or (family["samples"]):
                raise FormatError(f"{where}: {parts[1]} after the family's samples")
            if parts[1] == "TYPE":
                if len(parts) != 4 or parts[3] not in TYPES:
                    raise FormatError(f"{where}: bad TYPE")
                if family["type"] is not None:
                    raise FormatError(f"{where}: second TYPE")
                family["type"] = types[name] = parts[3]
            else:
                if family["help"] is not None:
                    raise FormatError(f"{where}: second HELP")
                help_text = parts[3] if len(parts) == 4 else ""
                if re.search(r"\\[^\\n]|\\$", help_text):
                    raise FormatError(f"{where}: bad escape in HELP")
                family["help"] = help_text
            if current is not None and current != name:
                finished.add(current)
            current = name
            continue
        match = METRIC_NAME.match(line)
        if not match:
            raise FormatError(f"{where}: not a sample")
        name, pos = match[0], match.end()
        labels = {}
        if line.startswith("{", pos):
            labels, pos = parse_labels(line, pos, where)
        if not line.startswith(" ", pos):
            raise FormatError(f"{where}: no space before the value")
        fields = line[pos + 1:].split(" ")
        if len(fields) not in (1, 2):
            raise FormatError(f"{where}: extra fields")
        value = parse_float(fields[0], where)
        if len(fields) == 2 and not re.fullmatch(r"-?[0-9]+", fields[1]):
            raise FormatError(f"{where}: bad timestamp")
        family_name = family_of(name, types)
        if family_name is None:
            raise FormatError(f"{where}: sample of {name} without a TYPE")
        if family_name in finished or (current != family_name):
            raise FormatError(f"{where}: samples of {family_name} not together after its TYPE")
        key = (name, tuple(sorted(labels.items())))
        if key in series:
            raise FormatError(f"{where}: the same series twice")
        series.add(key)
        kind = types[family_name]
        if kind == "counter" and not (value >= 0):
            raise FormatError(f"{where}: a counter that is negative or NaN")
        if kind == "histogram" and name == family_name:
            raise FormatError(f"{where}: a histogram sample without _bucket/_sum/_count")
        if name.endswith("_bucket") and kind == "histogram" and "le" not in labels:
            raise FormatError(f"{where}: a bucket without le")
        families[family_name]["samples"].append((name, labels, value))
    for name, family in families.items():
        if family["type"] is None:
            raise FormatError(f"{name}: HELP without TYPE")
        if family["help"] is None:
            raise FormatError(f"{name}: no HELP")
        if not name.startswith("gpuprio_"):
            raise FormatError(f"{name}: not gpuprio_-prefixed")
        if (family["type"] == "counter") != name.endswith("_total"):
            raise FormatError(f"{name}: counters, and only counters, end in _total")
        if family["type"] == "histogram":
            check_histogram(name, family["samples"])
    return families


def check_histogram(name, samples):
    groups = {}
    for sample_name, labels, value in samples:
        rest = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
        group = groups.setdefault(rest, {"buckets": [], "sum": None, "count": None})
        if sample_name == name + "_bucket":
            group["buckets"].append((parse_float(labels["le"], f"{name} le"), value))
        elif sample_name == name + "_sum":
            group["sum"] = value
        else:
            group["count"] = value
    for rest, group in groups.items():
        where = f"{name}{dict(rest)}"
        if group["sum"] is None or group["count"] is None or not group["buckets"]:
            raise FormatError(f"{where}: _bucket, _sum and _count are not all there")
        bounds = [le for le, _ in group["buckets"]]
        if bounds != sorted(bounds) or len(set(bounds)) != len(bounds):
            raise FormatError(f"{where}: le bounds not strictly increasing")
        if bounds[-1] != math.inf:
            raise FormatError(f"{where}: the last bucket is not +Inf")
        counts = [c for _, c in group["buckets"]]
        if any(b < a for a, b in zip(counts, counts[1:])) or counts[0] < 0:
            raise FormatError(f"{where}: buckets not cumulative")
        if counts[-1] != group["count"]:
            raise FormatError(f"{where}: +Inf bucket {counts[-1]} != _count {group['count']}")
        if group["sum"] < 0 or (group["count"] == 0 and group["sum"] != 0):
            raise FormatError(f"{where}: bad _sum {group['sum']}")


def samples(families, name, **match):
    family = family_of(name, {k: v["type"] for k, v in families.items()})
    return [(labels, value) for sample_name, labels, value in families[family]["samples"]
            if sample_name == name and all(labels.get(k) == v for k, v in match.items())]


class ParserSelfTest(unittest.TestCase):
    """The parser refuses what it must (so its acceptance of the exporter's output means
    something)."""

    GOOD = ('# HELP gpuprio_x_total X.\n# TYPE gpuprio_x_total counter\n'
            'gpuprio_x_total{a="q\\"\\\\\\n"} 1\n')

    def test_accepts_good(self):
        families = parse_exposition(self.GOOD)
        self.assertEqual(families["gpuprio_x_total"]["samples"][0][1]["a"], 'q"\\\n')

    def test_refuses_bad(self):
        bad = [
            self.GOOD.replace("# TYPE gpuprio_x_total counter\n", ""),  # no TYPE
            self.GOOD.replace("1\n", "-1\n"),  # negative counter
            self.GOOD.replace('\\"', '"'),  # unescaped quote
            self.GOOD.replace("\\\\\\n", "\\t"),  # bad escape
            self.GOOD + "# a comment\n",
            self.GOOD.replace("{a=", "{1a="),
            self.GOOD[:-1],
            self.GOOD + 'gpuprio_x_total{a="q\\"\\\\\\n"} 2\n',  # the series twice
            ("# HELP gpuprio_h H.\n# TYPE gpuprio_h histogram\ngpuprio_h_bucket{le=\"1\"} 2\n"
             "gpuprio_h_bucket{le=\"2\"} 1\ngpuprio_h_bucket{le=\"+Inf\"} 2\ngpuprio_h_sum 1\n"
             "gpuprio_h_count 2\n"),  # not cumulative
            ("# HELP gpuprio_h H.\n# TYPE gpuprio_h histogram\ngpuprio_h_bucket{le=\"1\"} 2\n"
             "gpuprio_h_sum 1\ngpuprio_h_count 2\n"),  # no +Inf
            ("# HELP gpuprio_h H.\n# TYPE gpuprio_h histogram\n"
             "gpuprio_h_bucket{le=\"+Inf\"} 3\ngpuprio_h_sum 1\ngpuprio_h_count 2\n"),
        ]
        for text in bad:
            with self.assertRaises(FormatError, msg=text):
                parse_exposition(text)


def load_cli():
    """The CLI under test as a module (its exporter_module() gives the exporter's functions)."""
    import importlib.machinery
    import importlib.util
    loader = importlib.machinery.SourceFileLoader("gpuprio_cli", CLI)
    spec = importlib.util.spec_from_loader("gpuprio_cli", loader)
    cli = importlib.util.module_from_spec(spec)
    loader.exec_module(cli)
    return cli


class WholeDevicePriorityTest(unittest.TestCase):
    """The level a slot's last_whole_device stamp names, within the library's 0.5 s window, on a
    fixed clock (the scrapes above can only check the stamps that never show)."""

    def test_window(self):
        cli = load_cli()
        level_of = cli.exporter_module().whole_device_priority
        now = 1_700_000_000.0

        def slot(at_s, level_key):
            return {"last_whole_device": (int(at_s * 1e6) << 8) | level_key}

        self.assertEqual(level_of(slot(now - 0.2, 102), now), 1)  # key 102: priority 1
        self.assertEqual(level_of(slot(now - 0.49, 1), now), -100)
        self.assertIsNone(level_of(slot(now - 0.6, 102), now))  # older than the window
        self.assertEqual(level_of(slot(now + 0.5, 98), now), -3)  # ahead, within the tolerance
        self.assertIsNone(level_of(slot(now + 2, 102), now))  # further ahead: garbage
        self.assertIsNone(level_of({"last_whole_device": 0}, now))
        self.assertIsNone(level_of(slot(now, 255), now))  # no level
        self.assertIsNone(level_of(slot(now, 0), now))


class CgroupTest(unittest.TestCase):
    """The pod UID and container id gpuprio_process_info takes from /proc/PID/cgroup."""

    def test_parse_cgroup(self):
        cli = load_cli()
        parse = cli.exporter_module().parse_cgroup
        cid = "0123456789abcdef" * 4
        pod = "1234abcd-5678-90ab-cdef-1234567890ab"
        cases = {
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
            f"{pod.replace('-', '_')}.slice/cri-containerd-{cid}.scope\n": (pod, cid),
            f"12:memory:/kubepods/besteffort/pod{pod}/{cid}\n1:name=systemd:/\n": (pod, cid),
            f"0::/system.slice/docker-{cid}.scope\n": ("", cid),
            f"0::/docker/{cid}\n": ("", cid),
            f"0::/kubepods/pod{pod}/crio-{cid}.scope\n": (pod, cid),
            "0::/user.slice/user-1000.slice/session-1.scope\n": ("", ""),
            "0::/\n": ("", ""),
            "garbage\0\xff": ("", ""),
        }
        for text, expected in cases.items():
            self.assertEqual(parse(text), expected, text)


# --- the exporter and its programs --------------------------------------------------------------

def scratch_dir(prefix):
    return tempfile.mkdtemp(prefix=prefix, dir=os.environ.get("TEST_TMPDIR"))


def clean_environ():
    return {k: v for k, v in os.environ.items()
            if not k.startswith("GPUPRIO_") and k != "LD_PRELOAD"}


class Exporter:
    def __init__(self, test, shm_dir, *extra):
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-S", "-B", CLI, "exporter", "--port", "0", "--shm-dir",
             shm_dir, *extra], env=clean_environ(), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        test.addCleanup(self.stop)
        line = self.process.stdout.readline()
        match = re.fullmatch(r"gpuprio exporter: listening on (http://127\.0\.0\.1:([0-9]+))"
                             r"/metrics\n", line)
        test.assertIsNotNone(match, f"first line {line!r}; stderr "
                                    f"{self.process.stderr.read() if not line else ''}")
        self.base = match[1]
        test.assertNotEqual(int(match[2]), 0)

    def get(self, path):
        with urllib.request.urlopen(self.base + path, timeout=20) as answer:
            return answer.status, answer.headers.get("Content-Type"), answer.read().decode()

    def scrape(self):
        status, content_type, body = self.get("/metrics")
        assert status == 200 and content_type.startswith("text/plain; version=0.0.4"), \
            (status, content_type)
        return parse_exposition(body)

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process.stdout.close()
        self.process.stderr.close()

    def rss(self):
        with open(f"/proc/{self.process.pid}/status") as f:
            return int(re.search(r"VmRSS:\s+([0-9]+) kB", f.read())[1]) * 1024


class LiveProgramsTest(unittest.TestCase):
    """Two coord_client programs (priorities high and low) under the library, attached to one
    segment of the fake GPU."""

    @classmethod
    def setUpClass(cls):
        for path in (LIB, FAKE_CUDA, COORD_CLIENT):
            if not path or not os.path.exists(path):
                raise unittest.SkipTest(f"missing test input {path!r}")
        cls.work = scratch_dir("exporter_")
        cls.shm_dir = os.path.join(cls.work, "shm")
        os.mkdir(cls.shm_dir, 0o700)
        cls.domain = f"exp-{os.getpid()}"
        cls.stop_file = os.path.join(cls.work, "stop")
        cls.clients = {}
        try:
            for name, priority in (("high", "high"), ("low", "low")):
                env = clean_environ()
                env.update({"LD_LIBRARY_PATH": os.path.dirname(FAKE_CUDA), "LD_PRELOAD": LIB,
                            "GPUPRIO_MODE": "schedule", "GPUPRIO_SHM_DIR": cls.shm_dir,
                            "GPUPRIO_DOMAIN": cls.domain, "GPUPRIO_PRIORITY": priority})
                ready = os.path.join(cls.work, f"ready_{name}")
                cls.clients[name] = (subprocess.Popen(
                    [COORD_CLIENT, "stream", ready, cls.stop_file, "300"], env=env,
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL), ready)
            deadline = time.monotonic() + 30
            while not all(os.path.exists(ready) for _, ready in cls.clients.values()):
                for process, _ in cls.clients.values():
                    if process.poll() is not None:
                        raise AssertionError(f"a client exited early: {process.returncode}")
                if time.monotonic() > deadline:
                    raise AssertionError("the clients did not start")
                time.sleep(0.05)
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        open(cls.stop_file, "w").close()
        for process, _ in cls.clients.values():
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        shutil.rmtree(cls.work, ignore_errors=True)

    def test_metrics_of_live_programs(self):
        exporter = Exporter(self, self.shm_dir, "--domain", self.domain)
        first = exporter.scrape()
        time.sleep(1.3)  # a heartbeat (at least once a second) between the scrapes
        families = exporter.scrape()
        pids = {name: str(process.pid) for name, (process, _) in self.clients.items()}
        info = samples(families, "gpuprio_process_info", domain=self.domain)
        by_pid = {labels["pid"]: labels for labels, _ in info}
        self.assertEqual(set(by_pid), set(pids.values()), info)
        self.assertEqual(by_pid[pids["high"]]["priority"], "1")
        self.assertEqual(by_pid[pids["low"]]["priority"], "-1")
        self.assertEqual(by_pid[pids["high"]]["command"], "coord_client")
        uuid = by_pid[pids["high"]]["uuid"]
        self.assertRegex(uuid, r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
        for labels in by_pid.values():
            self.assertIn("pod_uid", labels)
            self.assertIn("container_id", labels)
        for name, pid in pids.items():
            ops = sum(v for _, v in samples(families, "gpuprio_process_ops_issued_total",
                                             pid=pid))
            self.assertGreater(ops, 0, f"{name} issued nothing")
            self.assertEqual({l["path"] for l, _ in samples(
                families, "gpuprio_process_ops_issued_total", pid=pid)},
                {"dispatcher", "direct"})
            self.assertEqual([v for _, v in samples(families, "gpuprio_process_alive",
                                                     pid=pid)], [1])
            heartbeat = samples(families, "gpuprio_process_heartbeat_unchanged_seconds", pid=pid)
            self.assertEqual(len(heartbeat), 1, f"{name}: no heartbeat age on the 2nd scrape")
            self.assertLess(heartbeat[0][1], 1.3)
            self.assertFalse(samples(first, "gpuprio_process_heartbeat_unchanged_seconds",
                                     pid=pid))
            for family in ("gpuprio_process_queued_ops", "gpuprio_process_in_flight_ops",
                           "gpuprio_process_held", "gpuprio_process_held_seconds_total",
                           "gpuprio_process_queued_estimated_seconds",
                           "gpuprio_process_in_flight_estimated_seconds",
                           "gpuprio_process_queueing_delay_seconds_count"):
                values = samples(families, family, pid=pid)
                self.assertEqual(len(values), 1, (family, name))
                self.assertGreaterEqual(values[0][1], 0)
            buckets = samples(families, "gpuprio_process_queueing_delay_seconds_bucket", pid=pid)
            self.assertGreater(len(buckets), 40)
            self.assertIn("1e-06", {l["le"] for l, _ in buckets})
            # Per level: each client submits at its own priority only, so its one level row
            # holds all its ops (a scrape reads the process's and the level's counters at
            # slightly different moments: the level's may only trail).
            level = by_pid[pid]["priority"]
            by_path = {l["path"]: v for l, v in samples(
                families, "gpuprio_level_ops_issued_total", pid=pid)}
            self.assertEqual({l["level"] for l, _ in samples(
                families, "gpuprio_level_ops_issued_total", pid=pid)}, {level})
            self.assertEqual(set(by_path), {"dispatcher", "direct"})
            self.assertGreater(sum(by_path.values()), 0)
            self.assertLessEqual(sum(by_path.values()), ops)
            count = samples(families, "gpuprio_level_queueing_delay_seconds_count", pid=pid)
            self.assertEqual([l["level"] for l, _ in count], [level])
            self.assertEqual(count[0][1], by_path["dispatcher"])
            for family in ("gpuprio_process_isolation_reserved_sms",
                           "gpuprio_process_isolation_device_sms",
                           "gpuprio_process_confined_in_flight_ops",
                           "gpuprio_process_confined_in_flight_estimated_seconds"):
                values = samples(families, family, pid=pid)
                self.assertEqual(len(values), 1, (family, name))
                self.assertGreaterEqual(values[0][1], 0)
        self.assertEqual(samples(families, "gpuprio_gpu_processes", uuid=uuid), [
            ({"uuid": uuid, "domain": self.domain}, 2)])
        self.assertEqual(samples(families, "gpuprio_gpu_priority_high_water")[0][1], 1)
        status = samples(families, "gpuprio_segment_status", domain=self.domain)
        self.assertEqual([(l["state"], l["reason"]) for l, _ in status], [("ok", "")])
        self.assertEqual(samples(families, "gpuprio_exporter_segments_read")[0][1], 1)
        self.assertEqual(samples(families, "gpuprio_exporter_scrapes_total")[0][1], 2)
        self.check_monitoring_examples(families)
        # The other pages.
        status_code, content_type, body = exporter.get("/healthz")
        self.assertEqual((status_code, body), (200, "ok\n"))
        status_code, content_type, body = exporter.get("/")
        self.assertIn('href="/metrics"', body)
        with self.assertRaises(urllib.error.HTTPError) as raised:
            exporter.get("/nothing")
        self.assertEqual(raised.exception.code, 404)
        raised.exception.close()
        # SIGTERM stops it, exit 0.
        exporter.process.send_signal(signal.SIGTERM)
        self.assertEqual(exporter.process.wait(timeout=10), 0)


    def check_monitoring_examples(self, families):
        """deploy/monitoring's dashboard is valid JSON, and it and the scrape config name only
        metrics this scrape has (with a histogram's _bucket/_sum/_count)."""
        dashboard = os.environ.get("GPUPRIO_TEST_MONITORING") or os.path.join(
            HERE, "..", "..", "deploy", "monitoring", "grafana-dashboard.json")
        with open(dashboard) as f:
            text = f.read()
        panels = json.loads(text)["panels"]
        self.assertGreaterEqual(len(panels), 6)
        with open(os.path.join(os.path.dirname(dashboard), "prometheus-scrape.yaml")) as f:
            text += f.read()
        known = set(families)
        known |= {f"{name}{suffix}" for name, family in families.items()
                  if family["type"] == "histogram" for suffix in ("_bucket", "_sum", "_count")}
        used = set(re.findall(r"gpuprio_[a-z_]+", text)) - {"gpuprio_exporter"}
        self.assertTrue(used)
        self.assertFalse(used - known, "metrics the examples name but the exporter lacks")


class DamagedSegmentsTest(unittest.TestCase):
    """Files by segments' names that are not segments: each one reported, the scrape served."""

    def setUp(self):
        self.shm_dir = scratch_dir("exporter_shm_")
        self.addCleanup(shutil.rmtree, self.shm_dir, ignore_errors=True)
        self.user_dir = os.path.join(self.shm_dir, segment_writer.directory_name())
        os.mkdir(self.user_dir, 0o700)

    def make(self, domain, write):
        path = os.path.join(self.user_dir, segment_writer.segment_name(UUID, domain))
        write(path)
        return path

    def test_damaged_files_are_reported(self):
        def sized(size, fill=b""):
            def write(path):
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                try:
                    if fill:
                        os.write(fd, fill)
                    os.ftruncate(fd, size)
                finally:
                    os.close(fd)
            return write

        self.make("garbage", sized(SEGMENT_BYTES, os.urandom(SEGMENT_BYTES)))
        self.make("short", sized(100, b"gpuprioS" + os.urandom(92)))
        self.make("sparse", sized(1 << 40))  # a terabyte, none of it written
        self.make("empty", sized(0))
        self.make("fifo", lambda path: os.mkfifo(path, 0o600))
        self.make("link", lambda path: os.symlink("/dev/zero", path))
        truncated = bytearray(segment_writer.segment_bytes({"uuid": UUID}))
        self.make("truncated", sized(len(truncated) // 2, bytes(truncated[:len(truncated) // 2])))
        self.make("good", lambda path: segment_writer.write_segment(path, {"uuid": UUID}))
        exporter = Exporter(self, self.shm_dir)
        families = exporter.scrape()
        status = {l["domain"]: (l["state"], l["reason"])
                  for l, v in samples(families, "gpuprio_segment_status")}
        self.assertEqual(status, {
            "garbage": ("damaged", "bad_magic"),
            "short": ("damaged", "wrong_size"),
            "sparse": ("damaged", "wrong_size"),
            "truncated": ("damaged", "wrong_size"),
            "empty": ("stale", "empty"),
            "fifo": ("unreadable", "not_regular_file"),
            "link": ("unreadable", "symlink"),
            "good": ("stale", "no_live_process"),
        })
        counts = {l["state"]: v for l, v in samples(families, "gpuprio_segments")}
        self.assertEqual(counts, {"ok": 0, "stale": 2, "damaged": 4, "unreadable": 2})
        self.assertEqual(samples(families, "gpuprio_exporter_scrape_failed")[0][1], 0)
        self.assertEqual(samples(families, "gpuprio_exporter_read_bytes")[0][1], SEGMENT_BYTES)
        # Nothing was written: the files are as they were.
        self.assertTrue(stat.S_ISFIFO(os.lstat(os.path.join(
            self.user_dir, segment_writer.segment_name(UUID, "fifo"))).st_mode))

    def test_level_rows(self):
        slot = {"index": 3, "pid": os.getpid(), "default_priority": -5,
                "ops_dispatched": 12, "ops_direct": 4, "isolation_reserved_sms": 16,
                "isolation_device_sms": 132, "confined_in_flight_ops": 2,
                "confined_in_flight_estimated_ns": 1_500_000,
                "levels": [{"row": 0, "level": -5, "ops_dispatched": 9, "ops_direct": 4,
                            "ops_confined": 7, "histogram": {"0": 2, "10": 7}},
                           {"row": 1, "level": 100, "ops_dispatched": 1},
                           {"row": 3, "ops_dispatched": 2, "histogram": {"47": 2}}]}
        self.make("levels", lambda path: segment_writer.write_segment(
            path, {"uuid": UUID, "slots": [slot]}))
        # A row whose key is no level, and two rows of one level: garbage in a slot no process
        # owns is no process (skipped; with a live owner the segment would be damaged).
        bad_key = dict(slot, levels=[{"row": 2, "level_key": 202, "ops_direct": 1}])
        self.make("badkey", lambda path: segment_writer.write_segment(
            path, {"uuid": UUID, "slots": [bad_key]}))
        twice = dict(slot, levels=[{"row": 0, "level": 1}, {"row": 2, "level": 1}])
        self.make("twice", lambda path: segment_writer.write_segment(
            path, {"uuid": UUID, "slots": [twice]}))
        families = Exporter(self, self.shm_dir).scrape()
        status = {l["domain"]: (l["state"], l["reason"])
                  for l, v in samples(families, "gpuprio_segment_status")}
        self.assertEqual(status, {"levels": ("stale", "no_live_process"),
                                  "badkey": ("stale", "no_live_process"),
                                  "twice": ("stale", "no_live_process")})
        self.assertEqual({l["domain"] for l, _ in samples(families, "gpuprio_process_info")},
                         {"levels"})
        issued = {(l["level"], l["path"]): v for l, v in samples(
            families, "gpuprio_level_ops_issued_total", domain="levels")}
        self.assertEqual(issued, {("-5", "dispatcher"): 9, ("-5", "direct"): 4,
                                  ("100", "dispatcher"): 1, ("100", "direct"): 0,
                                  ("other", "dispatcher"): 2, ("other", "direct"): 0})
        confined = {l["level"]: v for l, v in samples(
            families, "gpuprio_level_ops_confined_total", domain="levels")}
        self.assertEqual(confined, {"-5": 7, "100": 0, "other": 0})
        counts = {l["level"]: v for l, v in samples(
            families, "gpuprio_level_queueing_delay_seconds_count", domain="levels")}
        self.assertEqual(counts, {"-5": 9, "100": 0, "other": 2})
        # Bucket 0 is under 1 us; bucket 10 is [2^4.5, 2^5) us: at le=32e-6 all 9 are counted.
        buckets = {l["le"]: v for l, v in samples(
            families, "gpuprio_level_queueing_delay_seconds_bucket", domain="levels", level="-5")}
        self.assertEqual(buckets["1e-06"], 2)
        self.assertEqual(buckets["+Inf"], 9)
        for family, value in (("gpuprio_process_isolation_reserved_sms", 16),
                              ("gpuprio_process_isolation_device_sms", 132),
                              ("gpuprio_process_confined_in_flight_ops", 2),
                              ("gpuprio_process_confined_in_flight_estimated_seconds", 0.0015)):
            self.assertEqual([v for _, v in samples(families, family, domain="levels")], [value],
                             family)

    def test_whole_device_priority_only_within_the_window(self):
        # A level stamp (microseconds << 8 | level key) 2 s old, one 1 s in the future beyond the
        # tolerance, and one whose key is no level: none of them shows.
        now_us = time.time_ns() // 1000
        for name, word in (("old", ((now_us - 2_000_000) << 8) | 102),
                           ("future", ((now_us + 5_000_000) << 8) | 102),
                           ("nolevel", (now_us << 8) | 255)):
            slot = {"index": 0, "pid": os.getpid(), "last_whole_device": word}
            self.make(name, lambda path, slot=slot: segment_writer.write_segment(
                path, {"uuid": UUID, "slots": [slot]}))
        families = Exporter(self, self.shm_dir).scrape()
        self.assertEqual({l["domain"] for l, _ in samples(families, "gpuprio_process_info")},
                         {"old", "future", "nolevel"})
        self.assertEqual(samples(families, "gpuprio_process_whole_device_priority"), [])

    def test_cap_and_memory(self):
        for i in range(6):
            self.make(f"d{i}", lambda path: segment_writer.write_segment(path, {"uuid": UUID}))
        exporter = Exporter(self, self.shm_dir, "--max-segments", "4")
        families = exporter.scrape()
        self.assertEqual(samples(families, "gpuprio_exporter_segments_read")[0][1], 4)
        self.assertEqual(samples(families, "gpuprio_exporter_segments_skipped")[0][1], 2)
        for _ in range(20):
            exporter.scrape()
        before = exporter.rss()
        for _ in range(150):
            exporter.get("/metrics")
        grown = exporter.rss() - before
        self.assertLess(grown, 4 << 20, f"RSS grew {grown} bytes over 150 scrapes")

    def test_scrapes_take_no_lock_and_write_nothing(self):
        """While scrapes run back to back from several threads, a write lock on the whole
        segment (what would conflict with any lock the exporter took) is always granted at once,
        and the file's bytes and mtime stay as they were."""
        import fcntl
        import threading
        path = self.make("busy", lambda p: segment_writer.write_segment(p, {"uuid": UUID}))
        with open(path, "rb") as f:
            content = f.read()
        mtime = os.stat(path).st_mtime_ns
        exporter = Exporter(self, self.shm_dir)
        stop, errors, scrapes = threading.Event(), [], [0]

        def scrape_loop():
            try:
                while not stop.is_set():
                    exporter.scrape()
                    scrapes[0] += 1
            except Exception as e:  # reported by the main thread
                errors.append(e)

        threads = [threading.Thread(target=scrape_loop) for _ in range(3)]
        for thread in threads:
            thread.start()
        fd = os.open(path, os.O_RDWR)
        try:
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack(
                    "@hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0))  # raises if refused
                fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack(
                    "@hhqqi4x", fcntl.F_UNLCK, os.SEEK_SET, 0, 0, 0))
        finally:
            os.close(fd)
            stop.set()
            for thread in threads:
                thread.join(timeout=30)
        self.assertFalse(errors, errors)
        self.assertGreater(scrapes[0], 3)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), content)
        self.assertEqual(os.stat(path).st_mtime_ns, mtime)

    def test_bad_options(self):
        for args in (["--port", "70000"], ["--port", "x"], ["--max-segments", "0"],
                     ["--domain", "a/b"], ["--domain", "x", "--all-domains"]):
            result = subprocess.run([sys.executable, CLI, "exporter", *args],
                                    env=clean_environ(), capture_output=True, text=True,
                                    timeout=30, stdin=subprocess.DEVNULL)
            self.assertEqual(result.returncode, 2, (args, result.stderr))
            self.assertTrue(result.stderr.startswith("gpuprio exporter: error: ")
                            or "not allowed with" in result.stderr, result.stderr)


if __name__ == "__main__":
    unittest.main()
