"""`gpuprio trace summarize FILE`: per-priority queueing delay and issue-to-start percentiles,
the top kernels and the unlinked work of a trace written with GPUPRIO_TRACE=FILE, as text, JSON
or CSV (docs/trace_format.md is the contract).
"""

import csv
import json
import math
import signal
import sys

from .trace_reader import (
    MAX_VALUE_MB, BadField, JsonReader, MiB, TraceText, add_limit_options, bool_field, describe,
    integer_field, micros_field, string_field)
from .util import UsageError, ascii_text, printable


GPU_PID_BASE = 1000000  # GPU d's events have pid GPU_PID_BASE + d
TOP_KERNELS = 10
MISSING_SHOWN = 5  # op ids listed for ops whose kernel record is missing
# The otherData.gpuprio.version values this reader understands, each with the client slice's
# key for "the client thread issued the op itself": version 2 renamed version 1's `inline`, the
# name of one class of calls (docs/trace_format.md).
TRACE_FORMAT_ON_CALLER_KEYS = {1: "inline", 2: "on_caller"}

INT64_MIN, INT64_MAX, UINT64_MAX = -2**63, 2**63 - 1, 2**64 - 1

# Every name the on-the-caller flag has had. The writer puts otherData, which gives the version,
# after the events, so each event's value of each name is kept until the version is known.
ON_CALLER_KEYS = tuple(sorted(set(TRACE_FORMAT_ON_CALLER_KEYS.values())))

# What the summary keeps, in bytes, rounded up: per op, and per distinct kernel or API name
# besides the name's own string. With CPython 3.11 on x86-64, peak memory grew by 320 bytes per
# op from a trace of 100,000 ops to one of 300,000 (the percentiles' lists included).
OP_BYTES = 400
NAME_BYTES = 200


def gpuprio_info(other, not_ours):
    """The writer's counts {"ops", "dropped_records", "version"} in otherData (None: absent);
    UsageError naming what is missing or wrong."""
    info = other.get("gpuprio") if isinstance(other, dict) else None
    if info is None:
        raise UsageError(f"{not_ours}: it has no \"otherData\": {{\"gpuprio\": {{...}}}}, which "
                         f"gpuprio's writer puts in every trace (Chrome traces of other tools, "
                         f"such as torch.profiler, have none)")
    if not isinstance(info, dict):
        raise UsageError(f"{not_ours}: otherData.gpuprio is {describe(info)}, not an object")
    try:
        version = integer_field(info, "version", INT64_MIN, INT64_MAX, "otherData.gpuprio.",
                                required=True)
        counts = {key: integer_field(info, key, 0, INT64_MAX, "otherData.gpuprio.") or 0
                  for key in ("ops", "dropped_records")}
    except BadField as e:
        raise UsageError(f"{not_ours}: {e.field} {e.problem}")
    counts["version"] = version
    return counts


def read_trace(path, max_input_mb, summary):
    """Reads the trace at path as the file is read, feeding its events to summary; returns the
    writer's counts {"ops", "dropped_records"} with its format "version". UsageError names the
    problem otherwise, the same json.loads and then the checks of the whole document would have
    found first, except that the bounds are checked as the file is read.

    A gpuprio trace is a JSON object with a "traceEvents" list and an "otherData.gpuprio" object
    whose "version" is one of TRACE_FORMAT_ON_CALLER_KEYS; other Chrome traces (torch.profiler's)
    have no otherData.gpuprio.
    """
    not_ours = f"{path!r} is not a gpuprio trace"
    longer = f"more than {MAX_VALUE_MB} MiB of JSON text (gpuprio writes events of a few KiB)"
    source = TraceText(path, max_input_mb)
    try:
        reader = JsonReader(source, path)
        if reader.peek() != "{":
            kind = {"[": "a list", "\"": "a string"}.get(reader.peek(), "a number")
            shape = "not an object with \"traceEvents\" and \"otherData\""
            top = reader.value(lambda: f"{not_ours}: the top level is {kind}, {shape}")
            reader.end()
            raise UsageError(f"{not_ours}: the top level is {describe(top)}, {shape}")
        reader.pos += 1
        info, events = read_members(reader, summary, longer, not_ours)
        reader.end()
    finally:
        source.close()
    if info is None:
        info = gpuprio_info(None, not_ours)
    if isinstance(info, UsageError):
        raise info
    if info["version"] not in TRACE_FORMAT_ON_CALLER_KEYS:
        known = " and ".join(str(v) for v in sorted(TRACE_FORMAT_ON_CALLER_KEYS))
        raise UsageError(f"{path!r} is a gpuprio trace of format version {info['version']}; "
                         f"this gpuprio reads versions {known}")
    if events != "list":
        raise UsageError(f"{not_ours}: \"traceEvents\" is {events}, not a list")
    summary.check(info["version"])
    return info


def read_members(reader, summary, longer, not_ours):
    """The members of the top-level object, its "{" read: "traceEvents" fed to summary as it is
    read, the others whole (at most MAX_VALUE_MB each). (info: the checked otherData, the
    UsageError it gives, or None without one; events: "list" if the last "traceEvents" is a list,
    else what it is instead, "missing" without one.)"""
    info = None
    events = "missing"
    if reader.peek() == "}":
        reader.pos += 1
        return info, events
    while True:
        if reader.peek() != "\"":
            reader.fail("Expecting property name enclosed in double quotes", reader.pos)
        key = reader.value(lambda: f"{not_ours}: it has a key of {longer}")
        reader.expect(":", "Expecting ':' delimiter")
        # json.loads keeps the last value of a repeated key.
        if key == "traceEvents" and reader.peek() == "[":
            summary.restart()
            read_events(reader, summary, longer, not_ours)
            events = "list"
        else:
            value = reader.value(
                lambda: f"{not_ours}: its {ascii_text(key[:40])!r} is {longer}")
            if key == "traceEvents":
                summary.restart()
                events = "missing" if value is None else describe(value)
            elif key == "otherData":
                try:
                    info = gpuprio_info(value, not_ours)
                except UsageError as e:
                    info = e
            top_level = getattr(summary, "top_level", None)  # trace merge's hook
            if top_level is not None:
                top_level(key, value)
            del value  # up to MAX_VALUE_MB of objects, not kept while the rest is read
        if reader.peek() == "}":
            reader.pos += 1
            return info, events
        reader.expect(",", "Expecting ',' delimiter")


def read_events(reader, summary, longer, not_ours):
    """The "traceEvents" list, each event fed to summary as it is parsed."""
    reader.pos += 1
    if reader.peek() == "]":
        reader.pos += 1
        return
    index = 0
    while True:
        summary.add(index, reader.value(lambda: f"{not_ours}: traceEvents[{index}] is {longer}"))
        index += 1
        if reader.peek() == "]":
            reader.pos += 1
            return
        reader.expect(",", "Expecting ',' delimiter")


def read_flag(args, key):
    """args[key] as read_event reads the on-the-caller flag: a bool, or the BadField it gives."""
    try:
        return bool_field(args, key, "args.")
    except BadField as bad:
        return bad


def read_event(e):
    """The fields the summary reads from one event, checked, or None for an event it does not
    read (other phases and categories, flows, metadata). BadField names a bad field. A client
    slice's on-the-caller flag is read under each of ON_CALLER_KEYS, a bool or a BadField each:
    which one counts depends on the format version."""
    if not isinstance(e, dict):
        raise BadField("", f"is {describe(e)}, not an object")
    ph, cat, pid = e.get("ph"), e.get("cat"), e.get("pid")
    if (ph == "X" and isinstance(pid, int) and not isinstance(pid, bool)
            and pid >= GPU_PID_BASE):
        kind = "gpu"
    elif ph == "X" and cat in ("client", "dispatch"):
        kind = cat
    elif ph == "b" and cat == "queue":
        kind = "queue"
    else:
        return None
    args = e.get("args")
    if args is None:
        args = {}
    elif not isinstance(args, dict):
        raise BadField("args", f"is {describe(args)}, not an object")
    fields = {"kind": kind, "cat": cat,
              "op_id": integer_field(args, "op_id", 0, UINT64_MAX, "args.") or 0}
    if kind == "gpu" and cat == "kernel":
        fields["name"] = string_field(e, "name", required=True)
        fields["dur"] = micros_field(e, "dur")
    if not fields["op_id"]:
        return fields  # 0: the op is unknown; only kernels without an op are counted
    fields["priority"] = integer_field(args, "priority", INT64_MIN, INT64_MAX, "args.")
    if kind == "queue":
        fields["delay_us"] = micros_field(args, "delay_us", "args.")
        return fields
    fields["ts"] = micros_field(e, "ts")
    if kind == "client":
        fields["api"] = string_field(args, "api", "args.")
        fields["on_caller"] = [read_flag(args, key) for key in ON_CALLER_KEYS]
    elif kind == "dispatch":
        fields["name"] = string_field(e, "name")
    return fields


def percentile(sorted_values, p):
    """Nearest-rank percentile: the smallest value with at least p% of the values <= it."""
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def distribution(values):
    """count, p50, p99, max; the statistics of no values are None (null in --json)."""
    values = sorted(values)
    if not values:
        return {"count": 0, "p50": None, "p99": None, "max": None}
    return {"count": len(values), "p50": round(percentile(values, 50), 3),
            "p99": round(percentile(values, 99), 3), "max": round(values[-1], 3)}


class Op:
    """What the summary keeps of one op."""

    __slots__ = ("priority", "api", "on_caller", "client_ts", "dispatch_ts", "gpu_ts",
                 "queue_delay")

    def __init__(self):
        self.priority = self.api = None
        self.on_caller = 0  # bit k: the client slice's flag ON_CALLER_KEYS[k] is true
        self.client_ts = self.dispatch_ts = self.gpu_ts = self.queue_delay = None


class Summary:
    """The numbers `trace summarize` prints, gathered from the events fed to add() one at a time
    as the file is read: the trace is never held whole. Keeps at most about max_memory_mb MiB
    (0: no limit) of ops and names; UsageError beyond that."""

    def __init__(self, path, max_memory_mb):
        self.path = path
        self.max_memory_mb = max_memory_mb
        self.restart()

    def restart(self):
        """Forgets the events fed so far (a repeated "traceEvents" replaces the earlier one)."""
        self.ops = {}  # op id -> Op
        self.kernels = {}  # name -> [count, total us]
        self.apis = {}  # one copy of each API name the ops hold
        self.kernel_count = self.kernels_linked = 0
        self.memory = 0  # bytes kept, estimated
        self.bad = None  # (index, BadField) of the first malformed event
        self.bad_flags = {}  # key of ON_CALLER_KEYS -> (index, BadField) of its first bad value

    def charge(self, size):
        self.memory += size
        if self.max_memory_mb and self.memory > self.max_memory_mb * MiB:
            raise UsageError(f"{self.path!r} is too large to summarize in {self.max_memory_mb} "
                             f"MiB (--max-memory-mb): {len(self.ops)} ops and "
                             f"{len(self.kernels)} kernel names so far; give a larger "
                             f"--max-memory-mb, or 0 for no limit")

    def op(self, op_id):
        record = self.ops.get(op_id)
        if record is None:
            self.charge(OP_BYTES)
            record = self.ops[op_id] = Op()
        return record

    def api(self, name):
        kept = self.apis.get(name)
        if kept is None and name is not None:
            self.charge(NAME_BYTES + sys.getsizeof(name))
            kept = self.apis[name] = name
        return kept

    def add(self, index, e):
        """Takes traceEvents[index]. A malformed event refuses the file, but only once the rest
        of it has been read: json.loads, and whether it is a gpuprio trace, come first."""
        if self.bad is not None:
            return
        try:
            fields = read_event(e)
        except BadField as bad:
            self.bad = (index, bad)
            return
        if fields is None:
            return
        kind, op_id = fields["kind"], fields["op_id"]
        if kind == "gpu":
            if fields["cat"] == "kernel":
                self.kernel_count += 1
                name = fields["name"]
                entry = self.kernels.get(name)
                if entry is None:
                    self.charge(NAME_BYTES + sys.getsizeof(name))
                    entry = self.kernels[name] = [0, 0.0]
                entry[0] += 1
                entry[1] += fields["dur"]
                if op_id:
                    self.kernels_linked += 1
            if op_id:
                record = self.op(op_id)
                ts = fields["ts"]
                record.gpu_ts = ts if record.gpu_ts is None else min(record.gpu_ts, ts)
                if record.priority is None:
                    record.priority = fields["priority"]
        elif kind == "client" and op_id:
            on_caller = 0
            for bit, (key, flag) in enumerate(zip(ON_CALLER_KEYS, fields["on_caller"])):
                if isinstance(flag, BadField):
                    self.bad_flags.setdefault(key, (index, flag))
                elif flag:
                    on_caller |= 1 << bit
            record = self.op(op_id)
            record.priority = fields["priority"]
            record.api = self.api(fields["api"])
            record.on_caller = on_caller
            record.client_ts = fields["ts"]
        elif kind == "dispatch" and op_id:
            record = self.op(op_id)
            record.dispatch_ts = fields["ts"]
            if record.priority is None:
                record.priority = fields["priority"]
            if record.api is None:
                record.api = self.api(fields["name"])
        elif kind == "queue" and op_id:
            record = self.op(op_id)
            record.queue_delay = fields["delay_us"]
            if record.priority is None:
                record.priority = fields["priority"]

    def check(self, version):
        """UsageError for the first malformed event, now that the format version says which
        on-the-caller flag counts."""
        bad = [self.bad, self.bad_flags.get(TRACE_FORMAT_ON_CALLER_KEYS[version])]
        bad = [b for b in bad if b is not None]
        if bad:
            index, field = min(bad, key=lambda b: b[0])
            where = f"traceEvents[{index}]" + (f".{field.field}" if field.field else "")
            raise UsageError(f"{self.path!r} has a malformed event: {where} {field.problem}")

    def result(self, info, top_count=TOP_KERNELS):
        """The summary as one dict (the --json output); top_kernels holds the top_count kernels
        by total GPU time (0: all)."""
        on_caller_bit = 1 << ON_CALLER_KEYS.index(TRACE_FORMAT_ON_CALLER_KEYS[info["version"]])
        by_priority = {}
        for record in self.ops.values():
            level = by_priority.setdefault(record.priority, {"ops": 0, "queue": [], "start": []})
            level["ops"] += 1
            if record.queue_delay is not None:
                level["queue"].append(record.queue_delay)
            issue_ts = (record.client_ts if record.on_caller & on_caller_bit
                        else record.dispatch_ts)
            if record.gpu_ts is not None and issue_ts is not None:
                level["start"].append(record.gpu_ts - issue_ts)
        priorities = [
            {"priority": p, "ops": level["ops"], "queue_delay_us": distribution(level["queue"]),
             "issue_to_start_us": distribution(level["start"])}
            for p, level in sorted(by_priority.items(),
                                   key=lambda item: (item[0] is None, -(item[0] or 0)))]

        top = sorted(self.kernels.items(), key=lambda item: (-item[1][1], item[0]))
        if top_count:
            top = top[:top_count]
        missing = sorted((op_id, r.api) for op_id, r in self.ops.items()
                         if r.gpu_ts is None and r.api and "Launch" in r.api)
        return {
            "ops": max(len(self.ops), info["ops"]),
            "ops_linked_to_gpu": sum(1 for r in self.ops.values() if r.gpu_ts is not None),
            "kernels": self.kernel_count,
            "kernels_linked_to_client": self.kernels_linked,
            "kernels_unlinked": self.kernel_count - self.kernels_linked,
            "dropped_records": info["dropped_records"],
            "priorities": priorities,
            "top_kernels": [{"name": name, "count": count, "total_us": round(total, 3),
                             "mean_us": round(total / count, 3)}
                            for name, (count, total) in top],
            "launches_missing_kernel": {
                "count": len(missing),
                "first": [{"op_id": op_id, "api": api}
                          for op_id, api in missing[:MISSING_SHOWN]]},
        }


def format_us(value):
    return "-" if value is None else f"{value:.3f}"


def print_summary(summary, path, top_count=TOP_KERNELS):
    print(f"trace {printable(path)}: {summary['ops']} ops, {summary['ops_linked_to_gpu']} "
          f"linked to GPU work; {summary['kernels']} kernels, "
          f"{summary['kernels_linked_to_client']} linked to a client call; "
          f"{summary['dropped_records']} CUPTI records dropped")
    print()
    print(f"{'priority':>8} {'ops':>7}  {'queueing delay us p50/p99/max':>31}  "
          f"{'issue-to-start us p50/p99/max':>31}")
    for level in summary["priorities"]:
        cells = []
        for key in ("queue_delay_us", "issue_to_start_us"):
            d = level[key]
            cells.append("/".join(format_us(d[k]) for k in ("p50", "p99", "max")))
        name = "?" if level["priority"] is None else str(level["priority"])
        print(f"{name:>8} {level['ops']:>7}  {cells[0]:>31}  {cells[1]:>31}")
    print()
    print(f"top {top_count} kernels by total GPU time:" if top_count
          else "kernels by total GPU time:")
    print(f"{'count':>7} {'total us':>12} {'mean us':>10}  name")
    for k in summary["top_kernels"]:
        print(f"{k['count']:>7} {k['total_us']:>12.3f} {k['mean_us']:>10.3f}  "
              f"{printable(k['name'])}")
    print()
    missing = summary["launches_missing_kernel"]
    listed = ", ".join(f"{m['op_id']} ({printable(m['api'])})" for m in missing["first"])
    print(f"launch ops with no kernel record: {missing['count']}"
          + (f": {listed}" + (", ..." if missing["count"] > len(missing["first"]) else "")
             if listed else ""))
    print(f"kernels not linked to a client call: {summary['kernels_unlinked']}")
    print(f"dropped CUPTI records: {summary['dropped_records']}")


CSV_COLUMNS = ["section", "priority", "name", "count", "total_us", "mean_us", "p50_us", "p99_us",
               "max_us"]


def summary_csv_rows(summary):
    """The summary as rows under CSV_COLUMNS, one table for spreadsheets and pandas: section
    "total" (name = the count's key, value in count), "queue_delay" and "issue_to_start" (one row
    per priority), "kernel" (one row per top kernel). Cells that do not apply are empty."""
    rows = []

    def row(section, priority=None, name=None, count=None, total=None, mean=None, dist=None):
        dist = dist or {}
        rows.append([section, priority, name, count, total, mean, dist.get("p50"),
                     dist.get("p99"), dist.get("max")])

    for key in ("ops", "ops_linked_to_gpu", "kernels", "kernels_linked_to_client",
                "kernels_unlinked", "dropped_records"):
        row("total", name=key, count=summary[key])
    row("total", name="launches_missing_kernel", count=summary["launches_missing_kernel"]["count"])
    for section, key in (("queue_delay", "queue_delay_us"),
                         ("issue_to_start", "issue_to_start_us")):
        for level in summary["priorities"]:
            dist = level[key]
            row(section, priority="?" if level["priority"] is None else level["priority"],
                count=dist["count"], dist=dist)
    for k in summary["top_kernels"]:
        row("kernel", name=k["name"], count=k["count"], total=k["total_us"], mean=k["mean_us"])
    return [["" if cell is None else cell for cell in r] for r in rows]


def print_summary_csv(summary):
    # csv quotes what needs it (demangled kernel names hold commas); "\n" line ends, as the
    # other formats.
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    writer.writerows(summary_csv_rows(summary))


def command_trace_summarize(args, environ):
    # A reader that stops early (`| head`) ends us quietly, as it does cat, instead of a
    # BrokenPipeError traceback (Python ignores SIGPIPE by default).
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    if args.json and args.format not in (None, "json"):
        raise UsageError(f"--json and --format {args.format} disagree: give one of them")
    output = "json" if args.json else (args.format or "text")
    if args.top < 0:
        raise UsageError(f"--top must be 0 (all kernels) or more, not {args.top}")
    for option, value in (("--max-input-mb", args.max_input_mb),
                          ("--max-memory-mb", args.max_memory_mb)):
        if value < 0:
            raise UsageError(f"{option} must be 0 (no limit) or more, not {value}")
    gathered = Summary(args.file, args.max_memory_mb)
    try:
        info = read_trace(args.file, args.max_input_mb, gathered)
        summary = gathered.result(info, args.top)
    except MemoryError:  # the bounds are estimates, and 0 lifts them
        raise UsageError(f"cannot summarize {args.file!r}: out of memory (--max-memory-mb "
                         f"{args.max_memory_mb})")
    if output == "csv":
        reconfigure = getattr(sys.stdout, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
        print_summary_csv(summary)
    elif output == "json":
        # Strict JSON: every number in the summary is finite (read_event bounds them), and
        # allow_nan=False keeps it that way; ASCII-only, so any stdout encoding takes it.
        print(json.dumps(summary, sort_keys=True, allow_nan=False))
    else:
        # Characters the terminal's encoding lacks are escaped rather than raising.
        reconfigure = getattr(sys.stdout, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
        print_summary(summary, args.file, args.top)
    return 0

SUMMARIZE_USAGE = ("gpuprio trace summarize FILE [--top N] [--format text|json|csv] "
                   "[--max-input-mb N] [--max-memory-mb N]")


def add_parser(trace_commands):
    """`gpuprio trace summarize`."""
    summarize_parser = trace_commands.add_parser(
        "summarize", help="per-priority latency percentiles, top kernels, unlinked work",
        usage=SUMMARIZE_USAGE,
        description="Per priority: ops, queueing delay (submit to issue) and issue-to-start "
                    "latency (issue to the GPU starting the work), p50/p99/max in "
                    "microseconds (nearest-rank percentiles); the top N kernels by total GPU "
                    "time; launch ops with no kernel record; kernels not linked to a client "
                    "call; CUPTI records dropped. The trace is read as a stream, never whole: "
                    "FILE must be a regular file (not a pipe or FIFO, device, socket or "
                    "directory) of at most --max-input-mb MiB of JSON once decompressed, whose "
                    "summary keeps at most about --max-memory-mb MiB, with no event over "
                    f"{MAX_VALUE_MB} MiB of JSON; anything else is refused with one error line, "
                    "exit 2.",
        epilog="example: gpuprio trace summarize /tmp/serve.json.gz --top 50 --format csv")
    summarize_parser.add_argument("file", metavar="FILE",
                                  help="a trace written by gpuprio, plain or gzipped")
    summarize_parser.add_argument("--top", type=int, default=TOP_KERNELS, metavar="N",
                                  help=f"kernels listed (default {TOP_KERNELS}; 0: all)")
    summarize_parser.add_argument("--format", choices=("text", "json", "csv"), default=None,
                                  help="text tables (default), one JSON object, or one CSV "
                                       "table (columns: " + ",".join(CSV_COLUMNS) + ")")
    summarize_parser.add_argument("--json", action="store_true",
                                  help="the same as --format json")
    add_limit_options(
        summarize_parser,
        "refuse a trace of more than N MiB of JSON, counted as it is decompressed, so that a small "
        "gzip file cannot expand without end",
        f"refuse a trace whose summary would keep more than about N MiB, some {OP_BYTES} bytes per "
        "op plus the kernel and API names")
    summarize_parser.set_defaults(handler=command_trace_summarize)
