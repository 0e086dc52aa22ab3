#!/usr/bin/env python3
"""`gpuprio trace summarize` on hostile and foreign input; unittest, standard library only.

Every input that is not a gpuprio trace the summary can read must end with exit 2, nothing on
stdout and one line "gpuprio trace: error: ..." on stderr naming the problem; never a Python
traceback. Readable traces must exit 0, and --json must print strict JSON (no NaN / Infinity).
The cases come from probing and from the fuzzer (trace_summarize_fuzz.py; the FuzzFindings
class holds its findings, minimised). The CLI runs as a subprocess: tools/cli/gpuprio next to
this file's tree, or $GPUPRIO_CLI_UNDER_TEST (to check these tests against another version).

  python3 tests/tools/trace_summarize_input_test.py [-v]
"""

import gzip
import json
import math
import os
import resource
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time
import unittest
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))  # not realpath: keep the runfiles tree
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
CLI = os.environ.get("GPUPRIO_CLI_UNDER_TEST") or os.path.join(ROOT, "tools", "cli", "gpuprio")
ERROR_PREFIX = "gpuprio trace: error: "
GPU_PID = 1000000
MIB = 1 << 20
MAX_INPUT_MB = 2048  # the CLI's default --max-input-mb (tools/cli/README.md)
# What one summarize run on hostile input may take: it holds a window of a few MiB of the text.
# Before the input was bounded, a 2 MB gzip file of spaces took 4.2 GB.
PEAK_RSS_BOUND = 300 * MIB
# The address space of the child in run_measured: a CLI that reads the file whole stops at this
# with MemoryError instead of taking the test machine's memory.
ADDRESS_SPACE_LIMIT = 1 << 30
# Generous: CI is a loaded 2-core machine, and reading 2 GiB of decompressed spaces takes ~10 s
# on an idle one.
SLOW_RUN_S = 240


def base_trace():
    """A valid trace per docs/trace_format.md: one deferred op (client, queue, dispatch, kernel;
    events 0-3), one op with no queue event whose kernel is lost (4, 5), one unlinked kernel (6)."""
    return {
        "traceEvents": [
            {"ph": "X", "cat": "client", "name": "cudaLaunchKernel", "pid": 1, "tid": 2,
             "ts": 10.0, "dur": 2.0, "args": {"op_id": 1, "priority": 1, "api": "cuLaunchKernel",
                                              "on_caller": False}},
            {"ph": "b", "cat": "queue", "name": "queued p=1", "id": 1, "pid": 1, "tid": 2,
             "ts": 10.0, "args": {"op_id": 1, "priority": 1, "delay_us": 4.0}},
            {"ph": "X", "cat": "dispatch", "name": "cuLaunchKernel", "pid": 1, "tid": 3,
             "ts": 14.0, "dur": 1.0, "args": {"op_id": 1, "priority": 1, "correlation_id": 5}},
            {"ph": "X", "cat": "kernel", "name": "gemm", "pid": GPU_PID, "tid": 7, "ts": 20.0,
             "dur": 8.0, "args": {"op_id": 1, "priority": 1, "correlation_id": 5}},
            {"ph": "X", "cat": "client", "name": "cudaLaunchKernel", "pid": 1, "tid": 2,
             "ts": 30.0, "dur": 2.0, "args": {"op_id": 2, "priority": 0, "api": "cuLaunchKernel",
                                              "on_caller": False}},
            {"ph": "X", "cat": "dispatch", "name": "cuLaunchKernel", "pid": 1, "tid": 3,
             "ts": 31.0, "dur": 1.0, "args": {"op_id": 2, "priority": 0, "correlation_id": 6}},
            {"ph": "X", "cat": "kernel", "name": "other", "pid": GPU_PID, "tid": 7, "ts": 40.0,
             "dur": 1.0, "args": {"op_id": 0, "correlation_id": 99}},
        ],
        "displayTimeUnit": "ns",
        "baseTimeNanoseconds": 1000,
        "otherData": {"gpuprio": {"version": 2, "pid": 1, "dropped_records": 3, "ops": 2}},
    }


def torch_profiler_trace():
    """What torch.profiler (Kineto) writes: a Chrome trace with no otherData.gpuprio."""
    return {"schemaVersion": 1, "deviceProperties": [], "traceName": "rank0.json",
            "traceEvents": [
                {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1,
                 "dur": 5, "args": {"External id": 1}},
                {"ph": "X", "cat": "kernel", "name": "sgemm", "pid": 0, "tid": 7, "ts": 3,
                 "dur": 2, "args": {"External id": 1, "correlation": 9}}]}


def gzip_with_spaces(prefix, spaces_mib):
    """A gzip file (bytes) of prefix then spaces_mib MiB of spaces, about 1 KiB per MiB. One
    compressed MiB is repeated: compressing gigabytes would take the test many seconds."""
    block = b" " * MIB
    compressor = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    # A full flush ends the deflate blocks byte-aligned with nothing after them referring back
    # past them, so each copy of `spaces` stands alone.
    head = compressor.compress(prefix) + compressor.flush(zlib.Z_FULL_FLUSH)
    spaces = compressor.compress(block) + compressor.flush(zlib.Z_FULL_FLUSH)
    crc = zlib.crc32(prefix)
    for _ in range(spaces_mib):
        crc = zlib.crc32(block, crc)
    size = len(prefix) + spaces_mib * MIB
    return (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + head + spaces * spaces_mib
            + b"\x03\x00"  # an empty final block
            + struct.pack("<II", crc, size & 0xffffffff))


def many_ops_trace(ops, kernel_names=("gemm",)):
    """A gpuprio trace of `ops` deferred ops (client, queue, dispatch, kernel each), op k at
    priority k % 3 - 1, queued k % 1000 / 8 us, its kernel named kernel_names[k % len] running
    1.5 us starting 2 us after issue."""
    events = []
    for k in range(1, ops + 1):
        priority, t = k % 3 - 1, 100.0 * k
        events += [
            {"ph": "X", "cat": "client", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": t,
             "dur": 1.0, "args": {"op_id": k, "priority": priority, "api": "cuLaunchKernel",
                                  "on_caller": False}},
            {"ph": "b", "cat": "queue", "name": f"queued p={priority}", "id": k, "pid": 1,
             "tid": 2, "ts": t, "args": {"op_id": k, "priority": priority,
                                         "delay_us": k % 1000 / 8}},
            {"ph": "X", "cat": "dispatch", "name": "cuLaunchKernel", "pid": 1, "tid": 3,
             "ts": t + 10, "dur": 1.0, "args": {"op_id": k, "priority": priority}},
            {"ph": "X", "cat": "kernel", "name": kernel_names[k % len(kernel_names)],
             "pid": GPU_PID, "tid": 7, "ts": t + 12, "dur": 1.5,
             "args": {"op_id": k, "priority": priority}}]
    return {"traceEvents": events, "displayTimeUnit": "ns", "baseTimeNanoseconds": 1000,
            "otherData": {"gpuprio": {"version": 2, "pid": 1, "dropped_records": 0,
                                      "ops": ops}}}


def nearest_rank(sorted_values, p):
    return sorted_values[max(1, math.ceil(p / 100 * len(sorted_values))) - 1]


def limit_address_space():
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))


def strict_json(text):
    def reject(constant):
        raise ValueError(f"{constant} is not JSON")
    return json.loads(text, parse_constant=reject)


class SummarizeTestCase(unittest.TestCase):

    def setUp(self):
        # Bazel's per-test directory when there is one, so that nothing is left in /tmp even if
        # the cleanup never runs.
        self.dir = tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR"))
        self.addCleanup(self.dir.cleanup)

    def write(self, data, name="trace.json"):
        path = os.path.join(self.dir.name, name)
        if isinstance(data, (dict, list)):
            data = json.dumps(data)
        with open(path, "wb") as f:
            f.write(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
        return path

    def summarize(self, path, *flags):
        # LANG: a UTF-8 locale whose stdout is strict about what it encodes, as on most desks.
        # -S: no site-packages (the CLI is standard library only; .pth files slow every start).
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
        argv = [sys.executable, "-I", "-S", "-B", CLI, "trace", "summarize", path, *flags]
        p = subprocess.run(argv, capture_output=True, env=env, timeout=120)
        return p.returncode, p.stdout.decode("utf-8", "replace"), \
            p.stderr.decode("utf-8", "replace")

    def assert_rejected(self, data, *expected, name="trace.json", path=None):
        """data (or path) is refused, with and without --json: exit 2, one error line naming the
        file and containing each of `expected`. Returns that line."""
        path = path or self.write(data, name)
        for flags in ((), ("--json",)):
            rc, out, err = self.summarize(path, *flags)
            line = self.assert_one_error_line(rc, out, err, path, *expected, flags=flags)
        return line

    def assert_summarized(self, data, name="trace.json"):
        """data is summarised: exit 0 with and without --json, the JSON strict. Returns
        (summary dict, table text)."""
        path = self.write(data, name)
        rc, out, err = self.summarize(path, "--json")
        self.assertEqual((rc, err), (0, ""), out)
        summary = strict_json(out)
        rc, table, err = self.summarize(path)
        self.assertEqual((rc, err), (0, ""), table)
        return summary, table

    def run_measured(self, path, *flags, timeout=SLOW_RUN_S):
        """summarize as summarize() runs it, but with its address space limited to
        ADDRESS_SPACE_LIMIT: (exit code, stdout, stderr, peak RSS in bytes). Still running
        after `timeout` seconds fails the test."""
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
        argv = [sys.executable, "-I", "-S", "-B", CLI, "trace", "summarize", path, *flags]
        # Files, not pipes: nothing to drain while waiting, and wait4 gives this child's own
        # peak RSS (RUSAGE_CHILDREN would be the largest of every child so far).
        with tempfile.TemporaryFile(dir=self.dir.name) as out, \
                tempfile.TemporaryFile(dir=self.dir.name) as err:
            child = subprocess.Popen(argv, stdout=out, stderr=err, env=env,
                                     preexec_fn=limit_address_space)
            deadline = time.monotonic() + timeout
            while True:
                pid, status, usage = os.wait4(child.pid, os.WNOHANG)
                if pid:
                    break
                if time.monotonic() > deadline:
                    child.kill()
                    _, status, _ = os.wait4(child.pid, 0)
                    child.returncode = os.waitstatus_to_exitcode(status)
                    self.fail(f"summarize {path!r} {' '.join(flags)} still ran after {timeout} s")
                time.sleep(0.05)
            child.returncode = os.waitstatus_to_exitcode(status)
            out.seek(0)
            err.seek(0)
            return (child.returncode, out.read().decode("utf-8", "replace"),
                    err.read().decode("utf-8", "replace"), usage.ru_maxrss * 1024)

    def assert_one_error_line(self, rc, out, err, path, *expected, flags=()):
        """One run's outcome is a refusal: exit 2, nothing on stdout, one error line naming the
        file and containing each of `expected`. Returns that line."""
        context = f"flags {flags}; stdout {out[:300]!r}; stderr {err[-1500:]!r}"
        self.assertNotIn("Traceback", err, context)
        self.assertEqual(rc, 2, context)
        self.assertEqual(out, "", context)
        lines = err.splitlines()
        self.assertEqual(len(lines), 1, context)
        self.assertTrue(lines[0].startswith(ERROR_PREFIX), context)
        self.assertIn(repr(path), lines[0], context)
        for text in expected:
            self.assertIn(text, lines[0], context)
        return lines[0]


DELETE = object()


def with_event(index, **changes):
    """base_trace() with event `index` changed: key=value sets, key=DELETE removes; "args_key"
    addresses args[key]."""
    trace = base_trace()
    event = trace["traceEvents"][index]
    for key, value in changes.items():
        target, key = (event["args"], key[5:]) if key.startswith("args_") else (event, key)
        if value is DELETE:
            del target[key]
        else:
            target[key] = value
    return trace


def with_text(old, new):
    """The JSON text of base_trace() with the first `old` replaced by the literal `new`."""
    text = json.dumps(base_trace())
    assert old in text, old
    return text.replace(old, new, 1)


class AcceptedTraces(SummarizeTestCase):

    def test_base_trace(self):
        summary, table = self.assert_summarized(base_trace())
        self.assertEqual(summary["ops"], 2)
        self.assertEqual(summary["kernels"], 2)
        self.assertEqual(summary["dropped_records"], 3)
        self.assertEqual(summary["priorities"][0]["issue_to_start_us"]["max"], 6.0)
        self.assertIn("launch ops with no kernel record: 1: 2 (cuLaunchKernel)", table)

    def test_an_op_issued_on_the_caller_starts_from_its_client_call(self):
        # Op 1's kernel starts at 20: 6 us after its dispatcher slice, 10 after its client slice.
        summary, _ = self.assert_summarized(with_event(0, args_on_caller=True))
        self.assertEqual(summary["priorities"][0]["issue_to_start_us"]["max"], 10.0)

    def test_version_1_names_the_on_caller_flag_inline(self):
        trace = with_event(0, args_on_caller=DELETE, args_inline=True)
        trace["otherData"]["gpuprio"]["version"] = 1
        summary, _ = self.assert_summarized(trace)
        self.assertEqual(summary["priorities"][0]["issue_to_start_us"]["max"], 10.0)
        # Version 2 reads `on_caller` only: a leftover `inline` means nothing.
        trace["otherData"]["gpuprio"]["version"] = 2
        summary, _ = self.assert_summarized(trace)
        self.assertEqual(summary["priorities"][0]["issue_to_start_us"]["max"], 6.0)

    def test_statistics_of_nothing_are_null_in_json(self):
        summary, table = self.assert_summarized(base_trace())
        low = summary["priorities"][1]  # op 2: no queue event, no kernel
        self.assertEqual(low["priority"], 0)
        self.assertEqual(low["queue_delay_us"], {"count": 0, "p50": None, "p99": None,
                                                 "max": None})
        self.assertIn("-/-/-", table)

    def test_gzip(self):
        summary, _ = self.assert_summarized(gzip.compress(json.dumps(base_trace()).encode()),
                                            name="trace.json.gz")
        self.assertEqual(summary["ops"], 2)

    def test_utf8_bom(self):
        summary, _ = self.assert_summarized(b"\xef\xbb\xbf" + json.dumps(base_trace()).encode())
        self.assertEqual(summary["ops"], 2)

    def test_unknown_keys_phases_and_events_are_ignored(self):
        trace = base_trace()
        trace["otherData"]["gpuprio"]["future_counter"] = [1, {"x": None}]
        trace["otherData"]["torch"] = "x"
        trace["traceEvents"] += [{"ph": "C", "name": "c", "pid": 1, "ts": 1e400,
                                  "args": {"v": None}},
                                 {"ph": "i", "name": "mark", "ts": "later"},
                                 {"ph": "X", "cat": "cpu_op", "name": 7, "ts": None}]
        trace["traceEvents"][0]["args"]["unknown"] = {"deep": [[[]]]}
        summary, _ = self.assert_summarized(json.dumps(trace))  # 1e400 -> Infinity, unread
        self.assertEqual(summary["ops"], 2)

    def test_largest_times_in_range_stay_finite(self):
        # Times at the edge of the writer's int64 ns range: differences and sums stay finite.
        edge = 9223372036854775.0
        trace = with_event(3, ts=edge, dur=edge)
        trace["traceEvents"][2]["ts"] = -edge
        trace["traceEvents"][6]["dur"] = edge
        summary, _ = self.assert_summarized(trace)
        self.assertGreater(summary["priorities"][0]["issue_to_start_us"]["max"], 1.8e16)
        self.assertGreater(summary["top_kernels"][0]["total_us"], 9.2e15)

    def test_hostile_names_are_escaped_in_tables(self):
        # Found by probing: a lone surrogate (valid as a JSON \\ud800 escape) raised
        # UnicodeEncodeError in print; control characters went to the terminal raw.
        trace = with_event(3, name="\ud800 \x1b[2J\u202e\nx")
        summary, table = self.assert_summarized(json.dumps(trace))
        self.assertEqual(summary["top_kernels"][0]["name"], "\ud800 \x1b[2J\u202e\nx")
        self.assertIn("\\ud800 \\x1b[2J\\u202e\\nx", table)
        self.assertNotIn("\x1b", table)

    def test_reader_that_stops_early(self):
        # `summarize FILE | head -0`: was a BrokenPipeError traceback; now SIGPIPE ends it quietly.
        path = self.write(base_trace())
        for flags in ((), ("--json",)):
            read_end, write_end = os.pipe()
            os.close(read_end)  # before the child writes: its first write hits a closed pipe
            p = subprocess.run([sys.executable, "-I", "-S", "-B", CLI, "trace", "summarize", path,
                                *flags], stdout=write_end, stderr=subprocess.PIPE, timeout=120)
            os.close(write_end)
            err = p.stderr.decode("utf-8", "replace")
            self.assertEqual(err, "", flags)
            self.assertEqual(p.returncode, -signal.SIGPIPE, flags)

    def test_hostile_api_is_escaped_in_tables(self):
        _, table = self.assert_summarized(json.dumps(with_event(4, args_api="cuLaunch\x07")))
        self.assertIn("2 (cuLaunch\\x07)", table)


class NotGpuprioTraces(SummarizeTestCase):

    def test_torch_profiler_trace(self):
        line = self.assert_rejected(torch_profiler_trace(), "is not a gpuprio trace",
                                    "otherData", "gpuprio")
        self.assertIn("torch.profiler", line)

    def test_gzipped_torch_profiler_trace(self):
        self.assert_rejected(gzip.compress(json.dumps(torch_profiler_trace()).encode()),
                             "is not a gpuprio trace", "otherData", name="t.json.gz")

    def test_chrome_array_format(self):
        self.assert_rejected(base_trace()["traceEvents"], "is not a gpuprio trace",
                             "top level is a list")

    def test_other_data_without_gpuprio(self):
        trace = base_trace()
        trace["otherData"] = {"torch": {"version": 1}}
        self.assert_rejected(trace, "is not a gpuprio trace", "otherData")

    def test_other_data_gpuprio_not_an_object(self):
        trace = base_trace()
        trace["otherData"]["gpuprio"] = [1]
        self.assert_rejected(trace, "otherData.gpuprio is a list, not an object")

    def test_no_version(self):
        trace = base_trace()
        del trace["otherData"]["gpuprio"]["version"]
        self.assert_rejected(trace, "otherData.gpuprio.version is missing")

    def test_other_format_version(self):
        trace = base_trace()
        trace["otherData"]["gpuprio"]["version"] = 3
        self.assert_rejected(trace, "format version 3", "reads versions 1 and 2")

    def test_no_trace_events(self):
        trace = base_trace()
        del trace["traceEvents"]
        self.assert_rejected(trace, "\"traceEvents\" is missing")

    def test_trace_events_not_a_list(self):
        trace = base_trace()
        trace["traceEvents"] = {"0": {}}
        self.assert_rejected(trace, "\"traceEvents\" is an object, not a list")


class UnreadableFiles(SummarizeTestCase):

    def test_missing(self):
        self.assert_rejected(None, "No such file", path=os.path.join(self.dir.name, "none.json"))

    def test_directory(self):
        self.assert_rejected(None, "Is a directory", path=self.dir.name)

    def test_path_through_a_file(self):
        self.write(base_trace())
        self.assert_rejected(None, "Not a directory",
                             path=os.path.join(self.dir.name, "trace.json", "x.json"))

    def test_read_error(self):
        # Opens, then read() fails (EIO at address 0), also for root, who passes permission checks.
        self.assert_rejected(None, "Input/output error", path="/proc/self/mem")

    def test_empty(self):
        self.assert_rejected(b"", "is empty")

    def test_only_whitespace(self):
        self.assert_rejected(b" \n\t", "is empty")

    def test_binary_garbage(self):
        self.assert_rejected(bytes(range(256)) * 4, "is not UTF-8 text", "byte 0x80 at offset 128")

    def test_invalid_utf8_inside_a_string(self):
        data = json.dumps(base_trace()).encode().replace(b"gemm", b"ge\xffm")
        self.assert_rejected(data, "is not UTF-8 text", "byte 0xff")

    def test_encoded_surrogate(self):  # CESU-8 style: not UTF-8
        data = json.dumps(base_trace()).encode().replace(b"gemm", b"\xed\xa0\x80")
        self.assert_rejected(data, "is not UTF-8 text", "byte 0xed")

    def test_not_json(self):
        self.assert_rejected("traceEvents: []", "is not valid JSON", "line 1 column 1")

    def test_truncated(self):
        text = json.dumps(base_trace())
        self.assert_rejected(text[:len(text) // 2], "is not valid JSON")

    def test_trailing_garbage(self):
        self.assert_rejected(json.dumps(base_trace()) + "]", "is not valid JSON", "Extra data")

    def test_truncated_gzip(self):
        data = gzip.compress(json.dumps(base_trace()).encode())
        self.assert_rejected(data[:len(data) // 2], "is not a valid gzip file")

    def test_corrupt_gzip(self):
        data = bytearray(gzip.compress(json.dumps(base_trace()).encode()))
        data[20] ^= 0xff
        self.assert_rejected(bytes(data), "is not a valid gzip file")

    def test_top_level_scalars(self):
        for text in ("null", "1", "\"trace\"", "true"):
            with self.subTest(text=text):
                self.assert_rejected(text, "is not a gpuprio trace", "top level is")


class DeepNesting(SummarizeTestCase):
    """RecursionError from json's parser was a traceback."""

    def test_arrays_3000_deep(self):
        self.assert_rejected("[" * 3000 + "]" * 3000, "too deeply")

    def test_objects_3000_deep(self):
        self.assert_rejected("{\"a\":" * 3000 + "1" + "}" * 3000, "too deeply")

    def test_deep_value_inside_an_event(self):
        self.assert_rejected(with_text("\"gemm\"", "[" * 5000 + "]" * 5000), "too deeply")

    def test_unclosed_deep_nesting(self):
        self.assert_rejected("[" * 100000, "too deeply")

    def test_nesting_below_the_limit_in_an_unread_field_is_fine(self):
        summary, _ = self.assert_summarized(with_text("\"correlation_id\": 99",
                                                      "\"x\": " + "[" * 200 + "]" * 200))
        self.assertEqual(summary["kernels"], 2)

    def test_nesting_below_the_limit_in_a_read_field_is_a_type_error(self):
        self.assert_rejected(with_text("\"gemm\"", "[" * 200 + "]" * 200),
                             "traceEvents[3].name is a list, not a string")


class NonFiniteAndHugeNumbers(SummarizeTestCase):
    """Decision: a number the summary reads must be finite and, for times, within the writer's
    int64-nanosecond range; anything else refuses the file, naming the event and field."""

    def test_1e400_time(self):
        self.assert_rejected(with_text("\"ts\": 20.0", "\"ts\": 1e400"),
                             "traceEvents[3].ts is infinite")

    def test_minus_1e400_duration(self):
        self.assert_rejected(with_text("\"dur\": 8.0", "\"dur\": -1e400"),
                             "traceEvents[3].dur is infinite")

    def test_nan_literal(self):
        self.assert_rejected(with_text("\"ts\": 20.0", "\"ts\": NaN"), "traceEvents[3].ts is NaN")

    def test_infinity_literal_delay(self):
        self.assert_rejected(with_text("\"delay_us\": 4.0", "\"delay_us\": Infinity"),
                             "traceEvents[1].args.delay_us is infinite")

    def test_minus_infinity_literal(self):
        self.assert_rejected(with_text("\"ts\": 14.0", "\"ts\": -Infinity"),
                             "traceEvents[2].ts is infinite")

    def test_finite_but_out_of_range_time(self):
        # 1e308 and -1e308 are finite, but their difference is not.
        text = with_text("\"ts\": 20.0", "\"ts\": 1e308")
        self.assert_rejected(text.replace("\"ts\": 14.0", "\"ts\": -1e308", 1),
                             "traceEvents[2].ts is -1e+308, not a number of microseconds")

    def test_huge_integer_time(self):
        self.assert_rejected(with_text("\"ts\": 20.0", "\"ts\": " + "9" * 400),
                             "traceEvents[3].ts is an integer of 400 digits, not a number")

    def test_integer_beyond_pythons_digit_limit(self):
        # Was one line already, but advised calling sys.set_int_max_str_digits().
        line = self.assert_rejected(with_text("\"ts\": 20.0", "\"ts\": " + "9" * 5000),
                                    "an integer literal of more than 4300 digits")
        self.assertNotIn("sys.", line)

    def test_huge_integer_op_id(self):
        self.assert_rejected(with_text("\"op_id\": 1", "\"op_id\": 18446744073709551616"),
                             "traceEvents[0].args.op_id is 18446744073709551616, not an integer")

    def test_huge_integer_priority(self):
        self.assert_rejected(with_text("\"priority\": 1", "\"priority\": " + "9" * 30),
                             "traceEvents[0].args.priority is", "not an integer")

    def test_infinite_ops_count(self):
        trace = base_trace()
        trace["otherData"]["gpuprio"]["ops"] = float("inf")
        self.assert_rejected(json.dumps(trace), "otherData.gpuprio.ops is infinite")

    def test_nan_as_a_string(self):  # float("NaN") accepted it
        self.assert_rejected(with_event(1, args_delay_us="NaN"),
                             "traceEvents[1].args.delay_us is a string 'NaN', not a number")


class WrongTypesAndMissingFields(SummarizeTestCase):

    def test_string_duration(self):  # float("3") accepted it
        self.assert_rejected(with_event(3, dur="8"), "traceEvents[3].dur is a string '8'")

    def test_string_time(self):
        self.assert_rejected(with_event(0, ts="x"), "traceEvents[0].ts is a string 'x'")

    def test_boolean_time(self):
        self.assert_rejected(with_event(0, ts=True), "traceEvents[0].ts is true, not a number")

    def test_null_time(self):
        self.assert_rejected(with_event(2, ts=None), "traceEvents[2].ts is null")

    def test_missing_time(self):
        self.assert_rejected(with_event(2, ts=DELETE), "traceEvents[2].ts is missing")

    def test_missing_kernel_duration(self):
        self.assert_rejected(with_event(6, dur=DELETE), "traceEvents[6].dur is missing")

    def test_missing_kernel_name(self):
        self.assert_rejected(with_event(3, name=DELETE), "traceEvents[3].name is missing")

    def test_missing_queue_delay(self):
        self.assert_rejected(with_event(1, args_delay_us=DELETE),
                             "traceEvents[1].args.delay_us is missing")

    def test_event_not_an_object(self):
        trace = base_trace()
        trace["traceEvents"].insert(2, "event")
        self.assert_rejected(trace, "traceEvents[2] is a string 'event', not an object")

    def test_args_not_an_object(self):
        self.assert_rejected(with_event(0, args=[1]), "traceEvents[0].args is a list")

    def test_op_id_string(self):
        self.assert_rejected(with_event(0, args_op_id="1"),
                             "traceEvents[0].args.op_id is a string '1', not an integer")

    def test_op_id_list(self):
        self.assert_rejected(with_event(2, args_op_id=[1]), "traceEvents[2].args.op_id is a list")

    def test_op_id_float(self):
        self.assert_rejected(with_event(3, args_op_id=1.5), "traceEvents[3].args.op_id is 1.5")

    def test_op_id_negative(self):
        self.assert_rejected(with_event(3, args_op_id=-1), "traceEvents[3].args.op_id is -1")

    def test_priority_string(self):  # the sort raised TypeError
        self.assert_rejected(with_event(0, args_priority="high"),
                             "traceEvents[0].args.priority is a string 'high'")

    def test_api_not_a_string(self):
        self.assert_rejected(with_event(4, args_api=["cuLaunchKernel"]),
                             "traceEvents[4].args.api is a list, not a string")

    def test_on_caller_as_a_string(self):  # bool("false") was True
        self.assert_rejected(with_event(0, args_on_caller="false"),
                             "traceEvents[0].args.on_caller is a string 'false', not true or false")

    def test_version_1_inline_as_a_string(self):
        trace = with_event(0, args_on_caller=DELETE, args_inline="false")
        trace["otherData"]["gpuprio"]["version"] = 1
        self.assert_rejected(trace,
                             "traceEvents[0].args.inline is a string 'false', not true or false")

    def test_kernel_name_not_a_string(self):
        self.assert_rejected(with_event(3, name={"a": 1}), "traceEvents[3].name is an object")

    def test_long_string_is_shortened_in_the_message(self):
        line = self.assert_rejected(with_event(0, ts="y" * 100000), "traceEvents[0].ts")
        self.assertLess(len(line), 400)

    def test_dropped_records_string(self):
        trace = base_trace()
        trace["otherData"]["gpuprio"]["dropped_records"] = "7"
        self.assert_rejected(trace, "otherData.gpuprio.dropped_records is a string '7'")


class NotRegularFiles(SummarizeTestCase):
    """FILE is read only if it is a regular file: a FIFO blocked the open until a writer came,
    and /dev/zero was read without end (~135 MB/s more memory)."""

    def test_dev_zero_is_refused_at_once(self):
        rc, out, err, peak = self.run_measured("/dev/zero", timeout=60)
        self.assert_one_error_line(rc, out, err, "/dev/zero", "is a character device",
                                   "not a regular file")
        self.assertLess(peak, PEAK_RSS_BOUND)

    def test_fifo_is_refused_without_waiting_for_a_writer(self):
        path = os.path.join(self.dir.name, "trace.fifo")
        os.mkfifo(path)
        self.addCleanup(os.unlink, path)
        for flags in ((), ("--json",)):
            rc, out, err, _ = self.run_measured(path, *flags, timeout=60)
            self.assert_one_error_line(rc, out, err, path, "is a pipe or FIFO",
                                       "not a regular file", "save the trace to a file")

    def test_socket_is_refused(self):
        path = os.path.join(self.dir.name, "trace.sock")
        os.mknod(path, stat.S_IFSOCK | 0o600)  # bind() would limit the path to 107 bytes
        self.addCleanup(os.unlink, path)
        self.assert_rejected(None, "is a socket, not a regular file", path=path)

    def test_symbolic_link_to_a_trace_is_read(self):
        target = self.write(base_trace())
        path = os.path.join(self.dir.name, "link.json")
        os.symlink(target, path)
        rc, out, err = self.summarize(path, "--json")
        self.assertEqual((rc, err), (0, ""))
        self.assertEqual(strict_json(out)["ops"], 2)


class BoundedInput(SummarizeTestCase):
    """The trace is read as a stream, never whole: at most --max-input-mb of JSON (after
    decompressing), about --max-memory-mb kept, one value at most 1 MiB of JSON text."""

    def test_gzip_bomb_is_refused_in_bounded_memory(self):
        # 2 MB of gzip that expands to more than the default bound, all spaces (a gzip file of
        # 2 GiB of spaces took 4.2 GB and 22 s).
        path = self.write(gzip_with_spaces(b"", MAX_INPUT_MB + 1), "bomb.json.gz")
        self.assertLess(os.path.getsize(path), 4 * MIB)
        rc, out, err, peak = self.run_measured(path)
        self.assert_one_error_line(rc, out, err, path, f"more than {MAX_INPUT_MB} MiB of JSON "
                                   "once decompressed", "--max-input-mb")
        self.assertLess(peak, PEAK_RSS_BOUND)

    def test_trace_padded_with_spaces_is_summarized_in_bounded_memory(self):
        # 400 MiB of whitespace after the trace: valid JSON, read through in a small window.
        data = gzip_with_spaces(json.dumps(base_trace()).encode(), 400)
        path = self.write(data, "padded.json.gz")
        rc, out, err, peak = self.run_measured(path, "--json")
        self.assertEqual((rc, err), (0, ""), out)
        self.assertEqual(strict_json(out)["ops"], 2)
        self.assertLess(peak, PEAK_RSS_BOUND)

    def test_max_input_mb_bounds_plain_and_gzipped_traces(self):
        text = json.dumps(many_ops_trace(6000)).encode()
        below = len(text) // MIB  # in MiB, the bound the trace is just over
        self.assertGreaterEqual(below, 2)
        for name, data, where in (("plain.json", text, ""),
                                  ("packed.json.gz", gzip.compress(text), " once decompressed")):
            with self.subTest(name=name):
                path = self.write(data, name)
                rc, out, err = self.summarize(path, "--max-input-mb", str(below))
                self.assert_one_error_line(rc, out, err, path,
                                           f"more than {below} MiB of JSON{where}",
                                           "--max-input-mb")
                for bound in (str(below + 1), "0"):
                    rc, out, err = self.summarize(path, "--json", "--max-input-mb", bound)
                    self.assertEqual((rc, err), (0, ""), bound)
                    self.assertEqual(strict_json(out)["ops"], 6000)

    def test_max_memory_mb_bounds_what_is_kept(self):
        path = self.write(many_ops_trace(6000))
        rc, out, err = self.summarize(path, "--max-memory-mb", "1")
        self.assert_one_error_line(rc, out, err, path, "--max-memory-mb", "ops")
        for flags in ((), ("--max-memory-mb", "0")):
            rc, out, err = self.summarize(path, "--json", *flags)
            self.assertEqual((rc, err), (0, ""), flags)
            self.assertEqual(strict_json(out)["ops"], 6000)

    def test_negative_bounds_are_refused(self):
        path = self.write(base_trace())
        for option in ("--max-input-mb", "--max-memory-mb"):
            rc, out, err = self.summarize(path, option, "-1")
            self.assertEqual(rc, 2, err)
            self.assertEqual(err, f"{ERROR_PREFIX}{option} must be 0 (no limit) or more, not -1\n")

    def test_event_longer_than_the_bound_is_refused(self):
        self.assert_rejected(with_event(3, name="k" * (2 * MIB)),
                             "traceEvents[3] is more than 1 MiB of JSON text")

    def test_long_event_within_the_bound_is_read(self):
        # Just under the bound, and across the file's first MiB: read whole all the same.
        name = "k" * (MIB - 2048)
        text = json.dumps(with_event(3, name=name)).replace("[", "[" + " " * 2000, 1)
        start = text.index(name)
        self.assertLess(start, MIB)
        self.assertGreater(start + len(name), MIB)
        summary, _ = self.assert_summarized(text)
        self.assertEqual(summary["top_kernels"][0]["name"], name)


class StreamedInput(SummarizeTestCase):
    """A trace read in pieces summarizes, and fails, as if it were read whole: values, multi-byte
    characters and numbers cut by a read, positions of errors far into the file."""

    NAMES = ("gemm<\u00e9\u20ac\U0001d11e>", "relu")  # 2-, 3- and 4-byte UTF-8
    CUT_EVERY = 64 * 1024

    def trace_text(self, ops):
        """many_ops_trace(ops) as indented JSON (so errors have lines and columns), every "dur"
        written in exponent form (1.5e0) and moved by whitespace so that each 64 KiB boundary
        of the file falls after the first character of one: a reader whose reads are a power
        of two from 64 KiB up gets numbers cut at every read."""
        trace = many_ops_trace(ops, self.NAMES)
        events = trace.pop("traceEvents")
        text = '{"traceEvents": [\n'
        parts, size, cuts = [text], len(text), 0
        for index, event in enumerate(events):
            text = ("" if index == 0 else ",\n") + json.dumps(event, indent=1,
                                                               ensure_ascii=False)
            key = text.find('"dur": ')
            if key >= 0:
                number = key + len('"dur": ')
                end = text.index(",", number)
                text = text[:number] + text[number:end] + "e0" + text[end:]
                start = size + len(text[:number].encode())  # in bytes, as the file is read
                boundary = (start // self.CUT_EVERY + 1) * self.CUT_EVERY
                if boundary - start - 1 < 2048:  # the next "dur" is closer than that
                    text = text[:number] + " " * (boundary - start - 1) + text[number:]
                    cuts += 1
            parts.append(text)
            size += len(text.encode())
        parts.append("\n], " + json.dumps(trace, indent=1)[1:])
        self.assertGreaterEqual(cuts, size // self.CUT_EVERY)
        return "".join(parts)

    def test_summary_of_a_trace_read_in_pieces(self):
        ops = 12000
        text = self.trace_text(ops)
        self.assertGreater(len(text.encode()), 6 * MIB)
        self.assertEqual(json.loads(text)["traceEvents"][3]["dur"], 1.5)
        for name, data in (("indented.json", text.encode()),
                           ("indented.json.gz", gzip.compress(text.encode(), 1))):
            with self.subTest(name=name):
                summary, table = self.assert_summarized(data, name)
                self.assertEqual(summary["ops"], ops)
                self.assertEqual(summary["kernels"], ops)
                self.assertEqual(summary["kernels_linked_to_client"], ops)
                self.assertEqual(summary["launches_missing_kernel"]["count"], 0)
                kernels = {k["name"]: k for k in summary["top_kernels"]}
                self.assertEqual(set(kernels), set(self.NAMES))
                for k in kernels.values():
                    self.assertEqual(k["count"], ops // 2)
                    self.assertEqual(k["total_us"], 1.5 * ops // 2)
                    self.assertIn(k["name"], table)
                self.assertEqual([level["priority"] for level in summary["priorities"]],
                                 [1, 0, -1])
                for level in summary["priorities"]:
                    delays = sorted(k % 1000 / 8 for k in range(1, ops + 1)
                                    if k % 3 - 1 == level["priority"])
                    self.assertEqual(level["queue_delay_us"],
                                     {"count": len(delays), "p50": nearest_rank(delays, 50),
                                      "p99": nearest_rank(delays, 99), "max": delays[-1]})
                    self.assertEqual(level["issue_to_start_us"],
                                     {"count": len(delays), "p50": 2.0, "p99": 2.0, "max": 2.0})

    def test_json_error_far_into_the_file_is_where_json_loads_says(self):
        text = self.trace_text(12000)
        cut = text.index('"cat": "dispatch"', len(text) * 3 // 4)
        broken = text[:cut] + '"cat" "dispatch"' + text[cut + len('"cat": "dispatch"'):]
        with self.assertRaises(json.JSONDecodeError) as loads:
            json.loads(broken)
        self.assertGreater(loads.exception.lineno, 1000)
        for name, data in (("broken.json", broken.encode()),
                           ("broken.json.gz", gzip.compress(broken.encode(), 1))):
            with self.subTest(name=name):
                self.assert_rejected(data, f"is not valid JSON: {loads.exception}", name=name)

    def test_utf8_error_far_into_the_file_names_its_offset(self):
        data = self.trace_text(12000).encode()
        at = data.index(b"relu", len(data) * 3 // 4)
        data = data[:at] + b"\xff" + data[at + 1:]
        self.assert_rejected(data, f"is not UTF-8 text: byte 0xff at offset {at}")
        self.assert_rejected(gzip.compress(data, 1), "is not UTF-8 text: byte 0xff at offset "
                             f"{at} of the decompressed data", name="t.json.gz")


class FuzzFindings(SummarizeTestCase):
    """What trace_summarize_fuzz.py (seed 20240601, on its own seed traces and the C++ writer's)
    found in summarize before it checked its input, minimised: tracebacks and invalid --json."""

    def test_recursion_error_in_json_parser(self):
        # structural: a value -> 3000 (or 100000) nested arrays: RecursionError
        self.assert_rejected(with_text("\"other\"", "[" * 3000 + "1" + "]" * 3000), "too deeply")

    def test_infinity_in_json_output(self):
        # swap_number: a kernel's dur -> Infinity: "Infinity" in --json
        self.assert_rejected(with_text("\"dur\": 1.0, \"args\": {\"op_id\": 0",
                                       "\"dur\": Infinity, \"args\": {\"op_id\": 0"),
                             "traceEvents[6].dur is infinite")

    def test_minus_infinity_in_json_output(self):
        # swap_number: a GPU slice's ts -> -Infinity: "-Infinity" in --json
        self.assert_rejected(with_text("\"ts\": 20.0", "\"ts\": -Infinity"),
                             "traceEvents[3].ts is infinite")

    def test_nan_in_json_output(self):
        # swap_number: a dispatch slice's ts -> NaN: "NaN" in --json
        self.assert_rejected(with_text("\"ts\": 14.0", "\"ts\": NaN"), "traceEvents[2].ts is NaN")

    def test_nan_string_in_json_output(self):
        # structural: ['delay_us'] -> string 'NaN' (float() took it): "NaN" in --json
        self.assert_rejected(with_event(1, args_delay_us="NaN"), "args.delay_us is a string")

    def test_overflow_error_converting_a_huge_integer(self):
        # swap_number: a time -> -999...9 (400 digits): OverflowError in float()
        for old, field in (("\"ts\": 10.0, \"dur\": 2.0", "traceEvents[0].ts"),
                           ("\"delay_us\": 4.0", "traceEvents[1].args.delay_us"),
                           ("\"ts\": 14.0", "traceEvents[2].ts"),
                           ("\"ts\": 20.0", "traceEvents[3].ts"),
                           ("\"dur\": 8.0", "traceEvents[3].dur")):
            with self.subTest(field=field):
                key, rest = old.split(":", 1)
                rest = rest.split(",", 1)[1] if "," in rest else ""
                new = f"{key}: -{'9' * 400}" + (f",{rest}" if rest else "")
                self.assert_rejected(with_text(old, new), field)

    def test_overflow_error_converting_infinite_counts(self):
        # swap_number: otherData.gpuprio.dropped_records -> 1e400: OverflowError in int()
        for key in ("dropped_records", "ops"):
            with self.subTest(key=key):
                old = f"\"{key}\": {base_trace()['otherData']['gpuprio'][key]}"
                self.assert_rejected(with_text(old, f"\"{key}\": 1e400"),
                                     f"otherData.gpuprio.{key} is infinite")


if __name__ == "__main__":
    unittest.main()
