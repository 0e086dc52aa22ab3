"""`gpuprio exporter`: the per-GPU shared-memory segments as Prometheus metrics over HTTP.

The segments are found, opened and checked by the same code as `gpuprio top`'s (segments.py:
segment_directories, read_segment, liveness; top_report.py: bucket_upper_us), only the listing is
this module's own, to cap what one scrape reads. Standard library only.

Every scrape reads the segments anew: each file is opened read-only (O_NOFOLLOW | O_NONBLOCK,
never mapped, never written, no lock taken: slot liveness is asked with F_OFD_GETLK), a file that
is not a regular one of exactly the segment's size is refused before a byte of it is read, and a
scrape reads at most --max-segments files and lists at most MAX_DIRECTORY_ENTRIES names per
directory. One scrape runs at a time. The metrics are documented in docs/metrics.md.
"""

import errno
import html
import http.server
import math
import os
import re
import signal
import socket
import sys
import threading
import time

from .run import check_domain
from .segment_layout import DELAY_BUCKETS, SEGMENT_BYTES, SEGMENT_FILE_NAME
from .segments import (
    BadSegment, Vanished, add_shm_dir_option, format_gpu_uuid, own_ids, pid_namespace_inode,
    priority_or_none, read_segment, segment_directories, shm_dir_of, whole_device_priority)
from .top_report import bucket_upper_us
from .util import UsageError, product_version

DEFAULT_LISTEN = "127.0.0.1"
DEFAULT_PORT = 9464
DEFAULT_MAX_SEGMENTS = 64  # 64 segments of 260 KiB: at most about 17 MiB read per scrape
MAX_SEGMENTS_LIMIT = 4096
MAX_DIRECTORY_ENTRIES = 4096  # names looked at per directory (and in --shm-dir itself)
SCRAPE_BUDGET_S = 5.0  # segments not reached by then are counted as skipped
CGROUP_BYTES = 16384  # read of /proc/<pid>/cgroup
REQUEST_TIMEOUT_S = 10  # a client that sends nothing for this long is dropped
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# /proc/<pid>/cgroup paths: the pod UID (kubelet: "pod<uid>", with '_' for '-' under the systemd
# driver) and a container id (64 hex digits, alone or after docker-/cri-containerd-/crio-/...).
POD_UID = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}"
                     r"[-_][0-9a-f]{12})")
CONTAINER_ID = re.compile(r"(?:^|[/-])(?:(docker|cri-containerd|containerd|crio|cri-o|libpod)"
                          r"[-:])?([0-9a-f]{64})(?:\.scope)?(?:/|$)")


def escape_label(value):
    """A label value as the text format wants it: backslash, double quote and newline escaped."""
    return value.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")


def format_value(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


class Metrics:
    """Metric families in the order first declared; each one HELP and TYPE line, then its
    samples."""

    def __init__(self):
        self.families = {}

    def declare(self, name, kind, help_text):
        if name not in self.families:
            self.families[name] = (kind, help_text, [])

    def add(self, family, value, labels=(), suffix=""):
        self.families[family][2].append((family + suffix, labels, value))

    def text(self):
        out = []
        for name, (kind, help_text, samples) in self.families.items():
            out.append(f"# HELP {name} {help_text.replace(chr(92), chr(92) * 2)}\n")
            out.append(f"# TYPE {name} {kind}\n")
            for sample_name, labels, value in samples:
                if labels:
                    inner = ",".join(f'{k}="{escape_label(str(v))}"' for k, v in labels)
                    out.append(f"{sample_name}{{{inner}}} {format_value(value)}\n")
                else:
                    out.append(f"{sample_name} {format_value(value)}\n")
        return "".join(out)


def cgroup_identity(pid):
    """(pod_uid, container_id) from /proc/<pid>/cgroup, "" for what it does not show."""
    try:
        fd = os.open(f"/proc/{pid}/cgroup", os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return "", ""
    try:
        data = os.read(fd, CGROUP_BYTES)
    except OSError:
        return "", ""
    finally:
        os.close(fd)
    return parse_cgroup(data.decode("ascii", "replace"))


def parse_cgroup(text):
    """(pod_uid, container_id) that the lines of a /proc/<pid>/cgroup name, "" where none."""
    pod = container = ""
    for line in text.splitlines():
        path = line.split(":", 2)[-1]
        if not pod:
            match = POD_UID.search(path)
            if match:
                pod = match[1].replace("_", "-")
        if not container:
            for part in path.split("/"):
                match = CONTAINER_ID.search("/" + part + "/")
                if match:
                    container = match[2]
    return pod, container


# Why a segment was refused (read_segment's text) -> (state, reason label).
REASONS = (
    ("symbolic link", "unreadable", "symlink"),
    ("not a regular file", "unreadable", "not_regular_file"),
    ("cannot open", "unreadable", "open_failed"),
    ("cannot read", "unreadable", "read_failed"),
    ("belongs to", "unreadable", "wrong_owner"),
    ("has mode", "unreadable", "wrong_mode"),
    ("is empty", "stale", "empty"),
    ("is not ready", "stale", "not_ready"),
    ("bytes, not", "damaged", "wrong_size"),
    ("shrank", "damaged", "wrong_size"),
    ("magic", "damaged", "bad_magic"),
    ("layout version", "damaged", "layout_version"),
    ("holds GPU-", "damaged", "uuid_mismatch"),
    ("slot ", "damaged", "bad_slot"),
    ("priority_high_water", "damaged", "bad_header"),
    ("its ", "damaged", "bad_header"),
)


def classify(why):
    for text, state, reason in REASONS:
        if text in why:
            return state, reason
    return "damaged", "other"


def midpoint_seconds(bucket, buckets):
    """A delay in `bucket` taken as its middle (DelayBucket: bucket 0 < 1 us, bucket b >= 1
    [2^((b-1)/2), 2^(b/2)) us; the last one open, taken as its lower bound)."""
    if bucket == 0:
        return 0.5e-6
    low = 2 ** ((bucket - 1) / 2)
    if bucket == buckets - 1:
        return low * 1e-6
    return (low + 2 ** (bucket / 2)) / 2 * 1e-6


# The metric families of a segment (one sample per GPU) and of a slot (per process):
# (name, type, help). Every metric: docs/metrics.md.
GPU_FAMILIES = (
    ("gpuprio_gpu_processes", "gauge",
     "Slots of the segment whose owner holds the slot lock (running processes)"),
    ("gpuprio_gpu_dead_slots", "gauge",
     "Live-state slots of the segment that no process owns (not yet freed)"),
    ("gpuprio_gpu_priority_high_water", "gauge",
     "The highest priority any process ever published in the segment (absent: none)"),
)
PROCESS_FAMILIES = (
    ("gpuprio_process_info", "gauge",
     "1 per process slot; labels name the process (command is /proc/PID/comm, "
     "pod_uid and container_id come from /proc/PID/cgroup, empty where it shows none)"),
    ("gpuprio_process_alive", "gauge",
     "1 while the slot's owner holds its lock (F_OFD_GETLK, no lock taken), 0 when no "
     "process owns it"),
    ("gpuprio_process_ops_issued_total", "counter",
     "Ops issued, by path: dispatcher (queued, then issued by the dispatcher) or direct "
     "(issued by the calling thread)"),
    ("gpuprio_process_queued_ops", "gauge", "Ops queued, not yet issued"),
    ("gpuprio_process_queued_estimated_seconds", "gauge",
     "Estimated GPU time of the queued ops"),
    ("gpuprio_process_in_flight_ops", "gauge", "Ops issued, not yet seen completed"),
    ("gpuprio_process_in_flight_estimated_seconds", "gauge",
     "Estimated GPU time of the ops in flight"),
    ("gpuprio_process_active_priority", "gauge",
     "The highest priority with work queued or in flight (absent: none)"),
    ("gpuprio_process_max_seen_priority", "gauge",
     "The highest priority that ever submitted work (absent: none)"),
    ("gpuprio_process_held", "gauge",
     "1 while the dispatcher holds work back for more important work"),
    ("gpuprio_process_whole_device_priority", "gauge",
     "The highest priority of the process that launched work needing the whole GPU (a CUDA "
     "graph) within the last 0.5 s: less important work on the GPU is held rather than confined "
     "to the SM partition (absent: none)"),
    ("gpuprio_process_held_seconds_total", "counter",
     "Time the dispatcher spent holding work back"),
    ("gpuprio_process_heartbeat_unchanged_seconds", "gauge",
     "Seconds for which this exporter has seen the slot's heartbeat counter keep its "
     "value, on its own clock (0: it moved since the previous scrape; absent on the "
     "first scrape that sees the slot). A running process bumps it at least once a "
     "second"),
    ("gpuprio_process_queueing_delay_seconds", "histogram",
     "Queueing delay (submit to issue) of the ops issued by the dispatcher, from the "
     "segment's half-octave microsecond buckets; _sum is an estimate from the bucket "
     "midpoints (the open last bucket counted at its lower bound)"),
    ("gpuprio_process_isolation_reserved_sms", "gauge",
     "SMs kept free of confined work on this GPU (0: the process has no SM partition)"),
    ("gpuprio_process_isolation_device_sms", "gauge",
     "The GPU's SMs as the process's SM partition counts them (0: no partition)"),
    ("gpuprio_process_confined_in_flight_ops", "gauge",
     "Ops in flight on twin streams, confined to the SMs outside the reserve"),
    ("gpuprio_process_confined_in_flight_estimated_seconds", "gauge",
     "Estimated GPU time of the confined ops in flight"),
)
# Per priority level of a process (label level: the level, or "other" for the levels beyond the
# slot's rows).
LEVEL_FAMILIES = (
    ("gpuprio_level_ops_issued_total", "counter",
     "Ops of this level issued, by path: dispatcher (queued first) or direct (issued by the "
     "calling thread)"),
    ("gpuprio_level_ops_confined_total", "counter",
     "Ops of this level the dispatcher issued onto twin streams (confined to the SMs outside "
     "the reserve)"),
    ("gpuprio_level_queueing_delay_seconds", "histogram",
     "Queueing delay (submit to issue) of this level's ops issued by the dispatcher; buckets and "
     "_sum as gpuprio_process_queueing_delay_seconds"),
)

class Exporter:
    def __init__(self, shm_dir, domain, max_segments):
        self.shm_dir = shm_dir
        self.domain = domain
        self.max_segments = max_segments
        self.lock = threading.Lock()
        self.heartbeats = {}  # (file, slot, state_word, pid, start) -> (value, first seen ns)
        self.scrapes = 0
        self.errors = 0
        self.last_duration = 0.0
        # The le bounds of the delay histogram, in seconds, with the segment buckets each one
        # closes (bucket_upper_us gives buckets 1 and 2 the same whole-microsecond bound).
        self.le_bounds = []
        for bucket in range(DELAY_BUCKETS):
            upper = bucket_upper_us(bucket)
            if upper is None:
                continue
            if self.le_bounds and self.le_bounds[-1][0] == upper:
                self.le_bounds[-1] = (upper, bucket)
            else:
                self.le_bounds.append((upper, bucket))
        self.midpoints = [midpoint_seconds(b, DELAY_BUCKETS) for b in range(DELAY_BUCKETS)]

    # --- reading -----------------------------------------------------------------------------

    def list_names(self, fd):
        names = []
        with os.scandir(fd) as entries:
            for entry in entries:
                if len(names) >= MAX_DIRECTORY_ENTRIES:
                    return sorted(names), True
                names.append(entry.name)
        return sorted(names), False

    def open_directories(self, result):
        """The segment directories of --shm-dir this user and its groups own, open, as
        segment_directories gives them; [] when --shm-dir cannot be listed. What cannot be read
        goes to result["files"], names left unlisted to result["truncated"]."""
        uids, gids = own_ids()
        try:
            shm_fd = os.open(self.shm_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NONBLOCK
                             | os.O_CLOEXEC)
        except OSError as e:
            result["files"].append((".", "", "", "unreadable", errno.errorcode.get(e.errno,
                                                                                   "error")))
            return []
        try:
            try:
                names, cut = self.list_names(shm_fd)
            except OSError as e:
                result["files"].append((".", "", "", "unreadable",
                                        errno.errorcode.get(e.errno, "error")))
                return []
            result["truncated"] += cut
            directories, refused = segment_directories(self.shm_dir, shm_fd, names, uids, gids)
        finally:
            os.close(shm_fd)
        for path, _ in refused:
            result["files"].append((os.path.relpath(path, self.shm_dir), "", "",
                                    "unreadable", "bad_directory"))
        return directories

    def read_all(self, deadline):
        """{"segments": [(relative path, segment)], "files": [(relative path, domain, uuid,
        state, reason)], "skipped": n, "bytes": n, "truncated_listing": n}."""
        result = {"segments": [], "files": [], "skipped": 0, "bytes": 0, "truncated": 0}
        directories = self.open_directories(result)
        read = 0
        try:
            for scope, owner_id, dir_name, dir_fd, _ in directories:
                try:
                    file_names, cut = self.list_names(dir_fd)
                except OSError as e:
                    result["files"].append((dir_name, "", "", "unreadable",
                                            errno.errorcode.get(e.errno, "error")))
                    continue
                result["truncated"] += cut
                for file_name in file_names:
                    match = SEGMENT_FILE_NAME.fullmatch(file_name)
                    if match is None or match[1] in (".", ".."):
                        continue
                    if self.domain is not None and match[1] != self.domain:
                        continue
                    if read >= self.max_segments or time.monotonic() > deadline:
                        result["skipped"] += 1
                        continue
                    read += 1
                    relative = f"{dir_name}/{file_name}"
                    uuid = format_gpu_uuid(bytes.fromhex(match[2]))
                    try:
                        segment = read_segment(dir_fd, file_name, (scope, owner_id))
                    except Vanished:
                        continue
                    except BadSegment as bad:
                        state, reason = classify(bad.why)
                        result["files"].append((relative, match[1], uuid, state, reason))
                        continue
                    result["bytes"] += SEGMENT_BYTES
                    alive = any(s["lock_held"] for s in segment["slots"])
                    result["files"].append((relative, match[1], uuid, "ok" if alive else "stale",
                                            "" if alive else "no_live_process"))
                    segment.update({"domain": match[1], "uuid": uuid, "file": relative})
                    result["segments"].append(segment)
        finally:
            for _, _, _, dir_fd, _ in directories:
                os.close(dir_fd)
        return result

    # --- metrics -----------------------------------------------------------------------------

    def scrape(self):
        """The exposition text of one scrape."""
        started = time.monotonic()
        m = Metrics()
        try:
            result = self.read_all(started + SCRAPE_BUDGET_S)
            self.segment_metrics(m, result)
            failed = False
        except Exception as e:  # a scrape never takes the exporter down
            failed = True
            self.errors += 1
            print(f"gpuprio exporter: scrape failed: {type(e).__name__}: {e}", file=sys.stderr)
            result = {"segments": [], "files": [], "skipped": 0, "bytes": 0, "truncated": 0}
        self.scrapes += 1
        self.self_metrics(m, result, failed)
        self.last_duration = time.monotonic() - started
        return m.text()

    def segment_metrics(self, m, result):
        now_ns = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        own_namespace = pid_namespace_inode()
        m.declare("gpuprio_segment_status", "gauge",
                  "1 per segment file found, by state: ok (read, a process holds a slot lock), "
                  "stale (read or being set up, no process holds a slot), damaged (wrong size, "
                  "magic, header or slot values), unreadable (not a regular file, a link, wrong "
                  "owner or mode, cannot be opened); reason says why")
        states = {"ok": 0, "stale": 0, "damaged": 0, "unreadable": 0}
        for relative, domain, uuid, state, reason in result["files"]:
            states[state] += 1
            m.add("gpuprio_segment_status", 1, (("file", relative), ("domain", domain),
                                                ("uuid", uuid), ("state", state),
                                                ("reason", reason)))
        m.declare("gpuprio_segments", "gauge", "Segment files found in this scrape, by state")
        for state, count in states.items():
            m.add("gpuprio_segments", count, (("state", state),))
        for name, kind, help_text in GPU_FAMILIES:
            m.declare(name, kind, help_text)
        for name, kind, help_text in PROCESS_FAMILIES + LEVEL_FAMILIES:
            m.declare(name, kind, help_text)
        seen = set()
        for segment in result["segments"]:
            gpu = (("uuid", segment["uuid"]), ("domain", segment["domain"]))
            alive_count = sum(1 for s in segment["slots"] if s["lock_held"])
            m.add("gpuprio_gpu_processes", alive_count, gpu)
            m.add("gpuprio_gpu_dead_slots", sum(1 for s in segment["slots"]
                                                if s["lock_held"] is False), gpu)
            high_water = priority_or_none(segment["priority_high_water"])
            if high_water is not None:
                m.add("gpuprio_gpu_priority_high_water", high_water, gpu)
            for slot in segment["slots"]:
                self.slot_metrics(m, segment, slot, gpu, own_namespace, now_ns, seen)
        # Forget the heartbeats of slots gone from view: the table stays as large as the slots.
        for key in list(self.heartbeats):
            if key not in seen:
                del self.heartbeats[key]

    def slot_metrics(self, m, segment, slot, gpu, own_namespace, now_ns, seen):
        priority = priority_or_none(slot["default_priority"])
        pod = container = ""
        if own_namespace is not None and slot["pid_namespace"] == own_namespace:
            pod, container = cgroup_identity(slot["pid"])
        labels = gpu + (("slot", str(slot["index"])), ("pid", str(slot["pid"])),
                        ("priority", "" if priority is None else str(priority)))
        m.add("gpuprio_process_info", 1, labels + (("command", slot["command"]),
                                                   ("pod_uid", pod),
                                                   ("container_id", container)))
        if slot["lock_held"] is not None:
            m.add("gpuprio_process_alive", 1 if slot["lock_held"] else 0, labels)
        m.add("gpuprio_process_ops_issued_total", slot["ops_dispatched"],
              labels + (("path", "dispatcher"),))
        m.add("gpuprio_process_ops_issued_total", slot["ops_direct"],
              labels + (("path", "direct"),))
        m.add("gpuprio_process_queued_ops", slot["queued_ops"], labels)
        m.add("gpuprio_process_queued_estimated_seconds", slot["queued_estimated_ns"] / 1e9, labels)
        m.add("gpuprio_process_in_flight_ops", slot["in_flight_ops"], labels)
        m.add("gpuprio_process_in_flight_estimated_seconds", slot["in_flight_estimated_ns"] / 1e9,
              labels)
        for family, key in (("gpuprio_process_active_priority", "active_priority"),
                            ("gpuprio_process_max_seen_priority", "max_seen_priority")):
            value = priority_or_none(slot[key])
            if value is not None:
                m.add(family, value, labels)
        m.add("gpuprio_process_held", slot["held"], labels)
        whole_device = whole_device_priority(slot, time.time())
        if whole_device is not None:
            m.add("gpuprio_process_whole_device_priority", whole_device, labels)
        m.add("gpuprio_process_held_seconds_total", slot["held_ns_total"] / 1e9, labels)
        key = (segment["file"], slot["index"], slot["state_word"], slot["pid"],
               slot["start_time_ticks"])
        seen.add(key)
        old = self.heartbeats.get(key)
        if old is not None and old[0] == slot["heartbeat"]:
            m.add("gpuprio_process_heartbeat_unchanged_seconds", (now_ns - old[1]) / 1e9, labels)
        else:
            if old is not None:
                m.add("gpuprio_process_heartbeat_unchanged_seconds", 0.0, labels)
            self.heartbeats[key] = (slot["heartbeat"], now_ns)
        self.histogram(m, "gpuprio_process_queueing_delay_seconds", slot["delay_histogram"],
                       labels)
        m.add("gpuprio_process_isolation_reserved_sms", slot["isolation_reserved_sms"], labels)
        m.add("gpuprio_process_isolation_device_sms", slot["isolation_device_sms"], labels)
        m.add("gpuprio_process_confined_in_flight_ops", slot["confined_in_flight_ops"], labels)
        m.add("gpuprio_process_confined_in_flight_estimated_seconds",
              slot["confined_in_flight_estimated_ns"] / 1e9, labels)
        for level, row in slot["levels"]:
            at = labels + (("level", str(level)),)
            m.add("gpuprio_level_ops_issued_total", row["ops_dispatched"],
                  at + (("path", "dispatcher"),))
            m.add("gpuprio_level_ops_issued_total", row["ops_direct"], at + (("path", "direct"),))
            m.add("gpuprio_level_ops_confined_total", row["ops_confined"], at)
            self.histogram(m, "gpuprio_level_queueing_delay_seconds", row["delay_histogram"], at)

    def histogram(self, m, family, counts, labels):
        """The segment's half-octave delay buckets as a Prometheus histogram."""
        cumulative, bucket = 0, 0
        for upper_us, last in self.le_bounds:
            while bucket <= last:
                cumulative += counts[bucket]
                bucket += 1
            m.add(family, cumulative, labels + (("le", format_value(upper_us / 1e6)),), "_bucket")
        total = sum(counts)
        m.add(family, total, labels + (("le", "+Inf"),), "_bucket")
        m.add(family, sum(c * mid for c, mid in zip(counts, self.midpoints)), labels, "_sum")
        m.add(family, total, labels, "_count")

    def self_metrics(self, m, result, failed):
        families = (
            ("gpuprio_exporter_scrapes_total", "counter", "Scrapes of /metrics served",
             self.scrapes),
            ("gpuprio_exporter_scrape_errors_total", "counter",
             "Scrapes whose reading failed unexpectedly (the metrics of the segments are left "
             "out of such a scrape)", self.errors),
            ("gpuprio_exporter_scrape_failed", "gauge",
             "1 if this scrape's reading failed unexpectedly", 1 if failed else 0),
            ("gpuprio_exporter_last_scrape_duration_seconds", "gauge",
             "How long the previous scrape took", self.last_duration),
            ("gpuprio_exporter_segments_read", "gauge",
             "Segment files read and checked in this scrape", len(result["segments"])),
            ("gpuprio_exporter_segments_skipped", "gauge",
             "Segment files left unread in this scrape: over --max-segments or the time budget",
             result["skipped"]),
            ("gpuprio_exporter_directory_listings_truncated", "gauge",
             f"Directories of which only the first {MAX_DIRECTORY_ENTRIES} entries were looked "
             f"at in this scrape", result["truncated"]),
            ("gpuprio_exporter_read_bytes", "gauge", "Bytes of segments read in this scrape",
             result["bytes"]),
            ("gpuprio_exporter_resident_memory_bytes", "gauge",
             "The exporter's resident memory", resident_bytes()),
        )
        for name, kind, help_text, value in families:
            m.declare(name, kind, help_text)
            if value is not None:
                m.add(name, value)
        m.declare("gpuprio_exporter_build_info", "gauge", "1, labelled with gpuprio's version")
        m.add("gpuprio_exporter_build_info", 1, (("version", self.version()),))

    def version(self):
        try:
            return product_version() or ""
        except Exception:
            return ""


def resident_bytes():
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


INDEX_PAGE = """<!DOCTYPE html>
<html><head><title>gpuprio exporter</title></head>
<body><h1>gpuprio exporter</h1>
<p>Prometheus metrics of the gpuprio segments in {shm_dir}: <a href="/metrics">/metrics</a>.
Liveness: <a href="/healthz">/healthz</a>. Metric reference: docs/metrics.md.</p>
</body></html>
"""


class Handler(http.server.BaseHTTPRequestHandler):
    server_version = "gpuprio-exporter"
    timeout = REQUEST_TIMEOUT_S

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass  # no line per scrape

    def reply(self, code, body, content_type, head=False):
        data = body.encode("utf-8")
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if not head:
            self.wfile.write(data)

    def answer(self, head):
        exporter = self.server.exporter
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            if not exporter.lock.acquire(timeout=SCRAPE_BUDGET_S * 2):
                self.reply(503, "another scrape is still running\n", "text/plain; charset=utf-8",
                           head)
                return
            try:
                body = exporter.scrape()
            finally:
                exporter.lock.release()
            self.reply(200, body, CONTENT_TYPE, head)
        elif path == "/healthz":
            self.reply(200, "ok\n", "text/plain; charset=utf-8", head)
        elif path == "/":
            self.reply(200, INDEX_PAGE.format(shm_dir=html.escape(exporter.shm_dir)),
                       "text/html; charset=utf-8", head)
        else:
            self.reply(404, "not found: try /metrics\n", "text/plain; charset=utf-8", head)

    def do_GET(self):  # noqa: N802 - http.server's name
        self.answer(head=False)

    def do_HEAD(self):  # noqa: N802
        self.answer(head=True)


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        pass  # a client that went away mid-reply is no news


def add_parser(subcommands):
    """Registers `gpuprio exporter` on the CLI's subparsers."""
    parser = subcommands.add_parser(
        "exporter", help="serve the segments' metrics to Prometheus over HTTP",
        usage="gpuprio exporter [--listen ADDR] [--port N] [--shm-dir DIR] "
              "[--domain NAME | --all-domains] [--max-segments N]",
        description="Serves the per-GPU shared-memory segments of this user and its groups "
                    "(what `gpuprio top` shows) in Prometheus's text format at /metrics, read "
                    "anew at each scrape, read only, never locked or written; /healthz answers "
                    "ok. Prints 'gpuprio exporter: listening on http://ADDR:PORT/metrics' once "
                    "it listens; SIGTERM or Ctrl-C stops it (exit 0). Metrics: docs/metrics.md.",
        epilog="examples: gpuprio exporter; gpuprio exporter --listen 0.0.0.0 --port 9464")
    parser.add_argument("--listen", metavar="ADDR", default=DEFAULT_LISTEN,
                        help=f"address to listen on (default {DEFAULT_LISTEN}: this machine "
                             f"only; 0.0.0.0 or :: for every interface)")
    parser.add_argument("--port", metavar="N", default=str(DEFAULT_PORT),
                        help=f"TCP port (default {DEFAULT_PORT}; 0: any free port, printed)")
    add_shm_dir_option(parser, "whose segments to read")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--domain", metavar="NAME",
                       help="only the segments of this GPUPRIO_DOMAIN")
    which.add_argument("--all-domains", action="store_true",
                       help="the segments of every domain (the default)")
    parser.add_argument("--max-segments", metavar="N", default=str(DEFAULT_MAX_SEGMENTS),
                        help=f"segment files read per scrape at most, the rest counted as "
                             f"skipped (default {DEFAULT_MAX_SEGMENTS})")
    parser.set_defaults(handler=command_exporter)
    return parser


def whole_number(option, text, low, high):
    if not re.fullmatch(r"[0-9]{1,9}", text or "") or not low <= int(text) <= high:
        raise UsageError(f"{option}: {text!r} is not a whole number in [{low}, {high}]")
    return int(text)


class Server6(Server):
    address_family = socket.AF_INET6


def command_exporter(args, environ):
    port = whole_number("--port", args.port, 0, 65535)
    max_segments = whole_number("--max-segments", args.max_segments, 1, MAX_SEGMENTS_LIMIT)
    domain = None if args.domain is None else check_domain("--domain", args.domain)
    shm_dir = shm_dir_of(args, environ)
    exporter = Exporter(shm_dir, domain, max_segments)
    listen = args.listen
    if listen.startswith("[") and listen.endswith("]"):
        listen = listen[1:-1]
    try:
        server = (Server6 if ":" in listen else Server)((listen, port), Handler)
    except OSError as e:
        print(f"gpuprio exporter: error: cannot listen on {args.listen} port {port}: "
              f"{e.strerror or e}", file=sys.stderr)
        return 1
    server.exporter = exporter
    host, bound_port = server.server_address[:2]
    shown = f"[{host}]" if ":" in host else host
    print(f"gpuprio exporter: listening on http://{shown}:{bound_port}/metrics", flush=True)

    def stop(signum, frame):
        # serve_forever runs in this (the main) thread: shut it down from another one.
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        server.serve_forever(poll_interval=0.5)
    finally:
        server.server_close()
    return 0
