"""`gpuprio trace merge A.json[.gz] B.json[.gz]... -o ALL.json[.gz]`: the traces of several
processes (GPUPRIO_TRACE=FILE, one file per process) as one trace, so one Perfetto view shows
which process's work delayed which. docs/trace_format.md ("Merged traces") is the contract.

The bounded streaming reader of `trace summarize` (trace_reader.py, trace_summarize.read_trace) and
its event checks (Summary) are reused, so both commands refuse the same input.

The rule, in short:
  * Clock: every file's `ts` is relative to its `baseTimeNanoseconds`, a time on CUPTI's clock,
    which is one clock for the whole machine (CLOCK_MONOTONIC-based on Linux: the fake libcupti
    of the tests uses CLOCK_MONOTONIC itself). The merged file's base is the earliest input base;
    each file's times are shifted by (its base - that base). Files of different machines or
    boots have unrelated clocks. The writer records the kernel's boot id and the host name in
    otherData.gpuprio: files whose boot ids differ are refused; files of one boot id merge
    whatever their host names (containers of one machine have names of their own and one
    clock); only when some file has no boot id (an older writer) do differing host names refuse
    the merge, and otherwise the user is trusted. A file without an integer baseTimeNanoseconds
    is refused.
  * Tracks: CPU tracks keep the process's pid (another free pid below 1000000 if an earlier input
    has it); GPU tracks of input n (1-based) move from 1000000 + d to 1000000 + 1000 * n + d and
    are named "GPU d (pid P, NAME)".
  * Ids: op ids (args.op_id), flow ids and queue slice ids of input n become
    n * 10**D + id, D = max(6, digits of the largest id of any input), so flows connect within
    each process and never across, summarize's per-op joins do not mix processes, and the
    original id is the last D digits; 0 (no op) stays 0.
"""

import errno
import json
import os
import stat
import zlib

from .trace_reader import (
    READ_BYTES, BadField, add_limit_options, describe, micros_field, open_trace)
from .trace_summarize import GPU_PID_BASE, Summary, read_trace
from .util import UsageError

MERGE_USAGE = ("gpuprio trace merge FILE [FILE...] -o OUTPUT [--max-input-mb N] "
               "[--max-memory-mb N]")

GPU_STRIDE = 1000  # GPU d of input n: pid GPU_PID_BASE + GPU_STRIDE * n + d
MIN_ID_DIGITS = 6
MAX_INPUTS = 999  # GPU pids stay below 2 * GPU_PID_BASE, and ids below 2**63
SAFE_ID = 2**53  # beyond this a JavaScript viewer (chrome://tracing) rounds ids
GZIP_LEVEL = 1  # what the writer uses (docs/trace_format.md, "Sizes")
# The writer's counts in otherData.gpuprio that add up over processes.
SUMMED_KEYS = ("dropped_records", "ops", "ops_linked_to_gpu", "gpu_records",
               "gpu_records_linked_to_client", "ops_on_caller", "ops_issued",
               "ops_missing_external_correlation", "ops_missing_driver_call",
               "client_spans_synthesized", "api_records", "dropped_records_by_cupti",
               "dropped_records_over_cap", "refused_buffers", "dropped_op_events",
               "dropped_counter_samples")
CLOCK_KEYS = ("boot_id", "host")
ID_KEYS = ("id", "bind_id")


def identity(info):
    return (info.st_dev, info.st_ino)


def fingerprint(path):
    """What tells that a file changed between the two passes."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


class Scan:
    """Pass 1 over one input: the events checked as summarize checks them (its Summary, which
    also bounds the memory kept), plus what the merge needs: the pids, the largest id, the
    process's name, baseTimeNanoseconds and otherData."""

    def __init__(self, path, max_memory_mb):
        self.path = path
        self.summary = Summary(path, max_memory_mb)
        self.base = None
        self.other = None
        self.restart_own()

    def restart_own(self):
        self.pids = set()
        self.max_id = 0
        self.names = {}  # pid -> its process_name
        self.events = 0
        self.bad = None  # (index, message)

    def restart(self):
        self.summary.restart()
        self.restart_own()

    def top_level(self, key, value):
        if key == "baseTimeNanoseconds":
            self.base = value
        elif key == "otherData":
            self.other = value

    def add(self, index, e):
        self.summary.add(index, e)
        self.events += 1
        if self.bad is not None:
            return
        problem = event_problem(e)
        if problem:
            self.bad = (index, problem)
            return
        pid = e["pid"]
        if pid not in self.pids:
            self.summary.charge(100)
            self.pids.add(pid)
        args = e.get("args")
        ids = [e[k] for k in ID_KEYS if k in e]
        if isinstance(args, dict) and isinstance(args.get("op_id"), int):
            ids.append(args["op_id"])
        self.max_id = max([self.max_id] + ids)
        if e["ph"] == "M" and e.get("name") == "process_name" and isinstance(args, dict):
            name = args.get("name")
            if isinstance(name, str) and pid not in self.names:
                self.summary.charge(100 + len(name))
                self.names[pid] = name[:200]

    def check(self, version):
        self.summary.check(version)
        if self.bad is not None:
            index, problem = self.bad
            raise UsageError(f"{self.path!r} has a malformed event: "
                                      f"traceEvents[{index}]{problem}")


def event_problem(e):
    """What merge needs of an event beyond what summarize checks: "" if it is fine, else the
    field and its problem."""
    if not isinstance(e, dict):
        return " is not an object"
    if not isinstance(e.get("ph"), str):
        return ".ph is missing or not a string"
    pid = e.get("pid")
    if isinstance(pid, bool) or not isinstance(pid, int) or not 0 <= pid < 2**32:
        return f".pid is {describe(pid)}, not an integer in [0, 2**32)"
    if e["ph"] != "M" or "ts" in e:
        try:
            micros_field(e, "ts")
        except BadField as bad:
            return f".{bad.field} {bad.problem}"
    for key in ID_KEYS:
        if key in e:
            value = e[key]
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
                return f".{key} is {describe(value)}, not an integer in [0, 2**63)"
    if "id2" in e:
        return ".id2 is not in gpuprio's format (flows and queue slices use \"id\")"
    args = e.get("args")
    if args is not None and not isinstance(args, dict):
        return f".args is {describe(args)}, not an object"
    if isinstance(args, dict) and "op_id" in args:
        value = args["op_id"]
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
            return f".args.op_id is {describe(value)}, not an integer in [0, 2**63)"
    return ""


class Input:
    def __init__(self, number, path, fingerprint_, scan, info):
        self.number = number
        self.path = path
        self.fingerprint = fingerprint_
        self.scan = scan
        self.info = info  # read_trace's counts, with "version"
        self.gpuprio = scan.other.get("gpuprio") if isinstance(scan.other, dict) else {}
        self.pid = self.gpuprio.get("pid") if isinstance(self.gpuprio.get("pid"), int) else None
        self.pid_map = {}
        self.shift_ns = 0
        self.id_offset = 0


def check_input_file(path):
    """(dev, ino) of path, a regular file that is not a symbolic link; UsageError otherwise."""
    try:
        info = os.lstat(path)
    except OSError as e:
        raise UsageError(f"cannot read {path!r}: {e.strerror or e}")
    if stat.S_ISLNK(info.st_mode):
        raise UsageError(f"cannot read {path!r}: it is a symbolic link; give the file it "
                             f"points to")
    os.close(open_trace(path))  # refuses FIFOs, devices, sockets, directories
    return identity(info)


def process_name(inp):
    name = inp.scan.names.get(inp.pid) if inp.pid is not None else None
    return name


def plan(inputs):
    """Chooses each input's pids, id offset and clock shift; UsageError for files that cannot be
    merged."""
    versions = {inp.info["version"] for inp in inputs}
    if len(versions) > 1:
        listed = ", ".join(f"{inp.path!r} is version {inp.info['version']}" for inp in inputs)
        raise UsageError(f"cannot merge traces of different format versions ({listed}): "
                             f"write them with one gpuprio version")
    # The boot id decides where every file has one; the host name only where some file has none.
    keys = CLOCK_KEYS[:1] if all(inp.gpuprio.get("boot_id") is not None for inp in inputs) \
        else CLOCK_KEYS
    for key in keys:
        seen = {}
        for inp in inputs:
            value = inp.gpuprio.get(key)
            if value is not None:
                seen.setdefault(str(value), inp.path)
        if len(seen) > 1:
            (a, pa), (b, pb) = list(seen.items())[:2]
            raise UsageError(f"cannot merge {pa!r} and {pb!r}: their clocks cannot be "
                                 f"related ({key} {a!r} and {b!r}; CUPTI's clock is one "
                                 f"machine's, since its boot)")
    for inp in inputs:
        base = inp.scan.base
        if isinstance(base, bool) or not isinstance(base, int) or not -2**63 <= base < 2**63:
            raise UsageError(f"{inp.path!r} is not a gpuprio trace that can be merged: "
                                 f"baseTimeNanoseconds is {describe(base)}, not an integer "
                                 f"(the CUPTI clock time of ts 0)")
    base = min(inp.scan.base for inp in inputs)
    largest = max(inp.scan.max_id for inp in inputs)
    digits = max(MIN_ID_DIGITS, len(str(largest)))
    stride = 10**digits
    if stride * (len(inputs) + 1) >= 2**63:
        raise UsageError(f"cannot merge: ids up to {largest} leave no room to tell "
                             f"{len(inputs)} processes apart below 2**63")
    used = set()
    for inp in inputs:
        inp.shift_ns = inp.scan.base - base
        inp.id_offset = inp.number * stride
        for pid in sorted(inp.scan.pids):
            if pid >= GPU_PID_BASE:
                device = pid - GPU_PID_BASE
                if device >= GPU_STRIDE:
                    raise UsageError(f"{inp.path!r} has GPU pid {pid} (device {device}); "
                                         f"merge takes devices below {GPU_STRIDE}")
                inp.pid_map[pid] = GPU_PID_BASE + GPU_STRIDE * inp.number + device
        for pid in sorted(p for p in inp.scan.pids if p < GPU_PID_BASE):
            new = pid
            if new in used:
                new = GPU_PID_BASE - 1
                while new in used or any(new in other.scan.pids for other in inputs):
                    new -= 1
            used.add(new)
            inp.pid_map[pid] = new
    return base, stride


def shifted(ts, shift_ns):
    if not shift_ns:
        return ts
    return (round(ts * 1000) + shift_ns) / 1000


def transform(inp, e):
    """Event e of input inp as the merged file has it (a new dict)."""
    e = dict(e)
    pid = e["pid"]
    e["pid"] = inp.pid_map[pid]
    if "ts" in e:
        e["ts"] = shifted(e["ts"], inp.shift_ns)
    for key in ID_KEYS:
        if key in e and e[key]:
            e[key] += inp.id_offset
    args = e.get("args")
    if isinstance(args, dict):
        if args.get("op_id"):
            args = dict(args)
            args["op_id"] += inp.id_offset
            e["args"] = args
        if e["ph"] == "M" and isinstance(args.get("name"), str):
            if e.get("name") == "process_name":
                e["args"] = dict(args, name=track_name(inp, pid, args["name"]))
    return e


def track_name(inp, pid, name):
    process = f"pid {inp.pid}" if inp.pid is not None else f"input {inp.number}"
    command = process_name(inp)
    if command and command != f"process {inp.pid}":
        process += f", {command}"
    if pid >= GPU_PID_BASE:
        return f"{name} ({process})"
    if inp.pid_map[pid] != pid:
        return f"{name} (pid {pid} of {os.path.basename(inp.path)})"
    return name


class Output:
    """The merged file, written to a new temporary file in the output's directory (O_EXCL,
    O_NOFOLLOW) and renamed onto the output when complete; gzip-compressed if the name ends in
    .gz."""

    def __init__(self, path):
        self.path = path
        directory = os.path.dirname(path) or "."
        name = os.path.basename(path)
        self.compress = (zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
                         if path.endswith(".gz") else None)
        self.buffer = []
        self.buffered = 0
        for attempt in range(100):
            self.temp = os.path.join(directory, f".{name}.{os.getpid()}.{attempt}.tmp")
            try:
                self.fd = os.open(self.temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL
                                  | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
                return
            except FileExistsError:
                continue
            except OSError as e:
                raise UsageError(f"cannot write {path!r}: {e.strerror or e}")
        raise UsageError(f"cannot write {path!r}: no free temporary name beside it")

    def write(self, text):
        self.buffer.append(text)
        self.buffered += len(text)
        if self.buffered >= READ_BYTES:
            self.flush()

    def flush(self):
        data = "".join(self.buffer).encode("utf-8")
        self.buffer, self.buffered = [], 0
        if self.compress is not None:
            data = self.compress.compress(data)
        self._write(data)

    def _write(self, data):
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.fd, view):]
            except OSError as e:
                raise UsageError(f"cannot write {self.path!r}: {e.strerror or e}")

    def commit(self):
        self.flush()
        if self.compress is not None:
            self._write(self.compress.flush())
        try:
            os.fsync(self.fd)
            os.close(self.fd)
            self.fd = None
            os.rename(self.temp, self.path)
        except OSError as e:
            raise UsageError(f"cannot write {self.path!r}: {e.strerror or e}")
        self.temp = None

    def abandon(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self.temp is not None:
            try:
                os.unlink(self.temp)
            except OSError:
                pass


class Writer:
    """Pass 2 over one input: each event, checked again against pass 1 (the file must not have
    changed), written transformed."""

    def __init__(self, inp, out, first):
        self.inp = inp
        self.out = out
        self.first = first  # [bool]: no event written yet
        self.count = 0

    def restart(self):
        if self.count:  # a repeated "traceEvents": pass 1 saw only the last one
            raise UsageError(f"{self.inp.path!r} has more than one \"traceEvents\" "
                                      f"list; merge takes one")

    def add(self, index, e):
        if event_problem(e) or e["pid"] not in self.inp.pid_map:
            raise UsageError(f"{self.inp.path!r} changed while it was merged")
        self.count += 1
        text = json.dumps(transform(self.inp, e), ensure_ascii=False,
                          allow_nan=False, separators=(",", ":"))
        self.out.write(text if self.first[0] else ",\n" + text)
        self.first[0] = False

    def check(self, version):
        pass


def merged_other(inputs, base, stride, version):
    gpuprio = {"version": version}
    for key in SUMMED_KEYS:
        values = [inp.gpuprio.get(key) for inp in inputs]
        gpuprio[key] = sum(v for v in values if isinstance(v, int) and not isinstance(v, bool))
    boot_ids = {str(inp.gpuprio.get("boot_id")) for inp in inputs
                if inp.gpuprio.get("boot_id") is not None}
    if len(boot_ids) == 1:
        gpuprio["boot_id"] = boot_ids.pop()
    gpuprio["merged"] = {
        "clock": "CUPTI",
        "id_stride": stride,
        "inputs": [{
            "input": inp.number,
            "file": inp.path,
            "pid": inp.pid,
            "process_name": process_name(inp),
            "host": inp.gpuprio.get("host"),
            "gpuprio_version": (inp.scan.other or {}).get("gpuprio_version"),
            "base_time_ns": inp.scan.base,
            "ts_shift_us": inp.shift_ns / 1000,
            "id_offset": inp.id_offset,
            "pids": {str(old): new for old, new in sorted(inp.pid_map.items())},
            "events": inp.scan.events,
            "ops": inp.info["ops"],
            "dropped_records": inp.info["dropped_records"],
        } for inp in inputs],
    }
    versions = sorted({str(v) for v in (inp.scan.other.get("gpuprio_version")
                                        for inp in inputs) if v is not None})
    other = {"gpuprio_version": versions[0] if len(versions) == 1 else ",".join(versions),
             "gpuprio": gpuprio}
    return other


def command_trace_merge(args, environ):
    """`gpuprio trace merge`."""
    for option, value in (("--max-input-mb", args.max_input_mb),
                          ("--max-memory-mb", args.max_memory_mb)):
        if value < 0:
            raise UsageError(f"{option} must be 0 (no limit) or more, not {value}")
    if len(args.files) > MAX_INPUTS:
        raise UsageError(f"at most {MAX_INPUTS} traces can be merged, not {len(args.files)}")
    output = args.output
    identities = {}
    for path in args.files:
        ident = check_input_file(path)
        if ident in identities:
            raise UsageError(f"{path!r} and {identities[ident]!r} are the same file")
        identities[ident] = path
    # Never over an input: neither the output's own name nor what it links to.
    for follow in (False, True):
        try:
            info = os.stat(output, follow_symlinks=follow)
        except FileNotFoundError:
            continue
        except OSError as e:
            if e.errno == errno.ELOOP:
                continue
            raise UsageError(f"cannot write {output!r}: {e.strerror or e}")
        if identity(info) in identities:
            raise UsageError(f"cannot write {output!r}: it is the input "
                                 f"{identities[identity(info)]!r}; name another output")
        if not follow and not (stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)):
            raise UsageError(f"cannot write {output!r}: it exists and is not a regular file")

    try:
        return merge(args, identities)
    except MemoryError:  # the bounds are estimates, and 0 lifts them
        raise UsageError(f"cannot merge: out of memory (--max-memory-mb "
                             f"{args.max_memory_mb})")


def merge(args, identities):
    output = args.output
    inputs = []
    for number, path in enumerate(args.files, start=1):
        before = fingerprint(path)
        scan = Scan(path, args.max_memory_mb)
        info = read_trace(path, args.max_input_mb, scan)
        scan.summary = None  # what it kept of the ops is not needed any more
        if fingerprint(path) != before:
            raise UsageError(f"{path!r} changed while it was merged")
        inputs.append(Input(number, path, before, scan, info))
    base, stride = plan(inputs)
    version = inputs[0].info["version"]

    out = Output(output)
    try:
        out.write("{\"otherData\":")
        out.write(json.dumps(merged_other(inputs, base, stride, version),
                             ensure_ascii=False, allow_nan=False))
        out.write(f",\"displayTimeUnit\":\"ns\",\"baseTimeNanoseconds\":{base},"
                  f"\"traceEvents\":[\n")
        first = [True]
        for inp in inputs:
            if fingerprint(inp.path) != inp.fingerprint:
                raise UsageError(f"{inp.path!r} changed while it was merged")
            writer = Writer(inp, out, first)
            read_trace(inp.path, args.max_input_mb, writer)
            if writer.count != inp.scan.events or fingerprint(inp.path) != inp.fingerprint:
                raise UsageError(f"{inp.path!r} changed while it was merged")
        out.write("\n]}\n")
        out.commit()
    finally:
        out.abandon()
    print(f"merged {len(inputs)} traces ({sum(i.scan.events for i in inputs)} events) into "
          f"{output}")
    return 0


def add_parser(trace_commands):
    """`gpuprio trace merge`."""
    merge_parser = trace_commands.add_parser(
        "merge", help="several processes' traces as one, each process's tracks kept apart",
        usage=MERGE_USAGE,
        description="Merges the traces of several processes of one machine (CUPTI's clock is "
                    "the machine's) into one Chrome trace: times on the earliest file's base, "
                    "each process's GPU tracks under their own pid (1000000 + 1000 * N + device "
                    "for the Nth file) named after the process, op, flow and queue ids of the Nth "
                    "file made N * 10**D + id, so flows connect within each process only. Inputs "
                    "are read as summarize reads them (regular files, not symbolic links, at "
                    "most --max-input-mb each); OUTPUT is written to a temporary file beside it "
                    "and renamed, never over an input, gzipped if it ends in .gz. "
                    "docs/trace_format.md, \"Merged traces\".",
        epilog="example: gpuprio trace merge serve.json batch.json.gz -o both.json.gz")
    merge_parser.add_argument("files", nargs="+", metavar="FILE",
                              help="traces written by gpuprio, plain or gzipped")
    merge_parser.add_argument("-o", "--output", required=True, metavar="OUTPUT",
                              help="the merged trace (.json or .json.gz)")
    add_limit_options(merge_parser, "refuse an input of more than N MiB of JSON once decompressed",
                      "refuse an input whose checks keep more than about N MiB")
    merge_parser.set_defaults(handler=command_trace_merge)
