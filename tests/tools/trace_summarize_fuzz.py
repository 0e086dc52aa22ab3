#!/usr/bin/env python3
"""Seeded, deterministic fuzzer of `gpuprio trace summarize` (tools/cli/gpuprio); stdlib only.

Mutates valid gpuprio traces (a synthetic one built here, plus any --seed-trace, e.g. one the C++
writer produced) and a foreign Chrome trace: byte flips, truncation, spliced bytes, invalid UTF-8,
gzip, numbers swapped for 1e400 / NaN / Infinity / huge ints, values swapped for other JSON types,
keys deleted, deep nesting, hostile strings; the same --seed gives the same inputs. Each input is
summarised in this process (fast; stdout as strict about encoding as a UTF-8 terminal's),
alternately with and without --json, and every 200th one and every failure again as a real
subprocess. An execution passes when it ends with exit 0 (stderr empty; with --json, stdout is
strict JSON: no NaN or Infinity) or exit 2 (stdout empty, stderr one line "gpuprio trace: error:
..."), never with an uncaught exception or a traceback.

  python3 tests/tools/trace_summarize_fuzz.py [--cli PATH] [--seed N] [--executions N]
      [--seed-trace FILE ...] [--save-failures DIR]

Prints the executions and the distinct failures (by kind: exception type and line, or the broken
rule), with the first input of each; exits 1 if there was any. Saved inputs go to --save-failures,
else $TEST_UNDECLARED_OUTPUTS_DIR when Bazel sets it.
"""

import argparse
import contextlib
import gzip
import importlib.machinery
import importlib.util
import io
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))  # not realpath: keep the runfiles tree
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
DEFAULT_CLI = os.path.join(ROOT, "tools", "cli", "gpuprio")
ERROR_PREFIX = "gpuprio trace: error: "
SUBPROCESS_EVERY = 200

# --------------------------------------------------------------------------------------------------
# Seeds.


def synthetic_trace():
    """A small trace per docs/trace_format.md: priorities 1, 0 and -5, a deferred op per kernel,
    a copy issued on the caller, a launch whose kernel is lost, a kernel of no op, flows, a counter."""
    pid, client, dispatcher, gpu = 77, 11, 22, 1000000
    events = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "python3"}},
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": dispatcher,
         "args": {"name": "gpuprio dispatcher (GPU 0)"}},
        {"ph": "M", "name": "process_name", "pid": gpu, "tid": 0, "args": {"name": "GPU 0"}},
    ]
    for op_id, priority in ((1, 1), (2, 1), (3, 0), (4, -5), (5, 0)):
        t = 100.0 * op_id
        events += [
            {"ph": "X", "cat": "client", "name": "cudaLaunchKernel", "pid": pid, "tid": client,
             "ts": t, "dur": 4.0, "args": {"op_id": op_id, "priority": priority,
                                           "api": "cuLaunchKernel", "on_caller": False}},
            {"ph": "b", "cat": "queue", "name": f"queued p={priority}", "id": op_id, "pid": pid,
             "tid": client, "ts": t, "args": {"op_id": op_id, "priority": priority,
                                              "delay_us": 1.5 * op_id}},
            {"ph": "e", "cat": "queue", "name": f"queued p={priority}", "id": op_id, "pid": pid,
             "tid": client, "ts": t + 1.5 * op_id},
            {"ph": "X", "cat": "dispatch", "name": "cuLaunchKernel", "pid": pid, "tid": dispatcher,
             "ts": t + 1.5 * op_id, "dur": 1.0,
             "args": {"op_id": op_id, "priority": priority, "correlation_id": 100 + op_id,
                      "result": 0}},
            {"ph": "s", "cat": "gpuprio.op", "name": "op", "id": op_id, "pid": pid, "tid": client,
             "ts": t},
        ]
        if op_id != 5:  # op 5's kernel record is lost
            events += [
                {"ph": "X", "cat": "kernel", "name": f"gemm<{op_id % 2}>", "pid": gpu, "tid": 7,
                 "ts": t + 10.0, "dur": 20.0 + op_id,
                 "args": {"op_id": op_id, "correlation_id": 100 + op_id, "priority": priority,
                          "device": 0, "stream": 7}},
                {"ph": "f", "bp": "e", "cat": "gpuprio.op", "name": "op", "id": op_id, "pid": gpu,
                 "tid": 7, "ts": t + 10.0},
            ]
    events += [
        {"ph": "X", "cat": "client", "name": "cudaMemcpyAsync", "pid": pid, "tid": client,
         "ts": 900.0, "dur": 30.0, "args": {"op_id": 6, "priority": 0,
                                            "api": "cuMemcpyHtoDAsync_v2", "on_caller": True}},
        {"ph": "X", "cat": "memcpy", "name": "Memcpy HtoD", "pid": gpu, "tid": 7, "ts": 905.0,
         "dur": 20.0, "args": {"op_id": 6, "correlation_id": 106, "priority": 0, "device": 0,
                               "stream": 7, "bytes": 4096}},
        {"ph": "X", "cat": "kernel", "name": "other", "pid": gpu, "tid": 9, "ts": 950.0,
         "dur": 1.0, "args": {"op_id": 0, "correlation_id": 999, "device": 0, "stream": 9}},
        {"ph": "X", "cat": "cuda_api", "name": "cudaStreamSynchronize", "pid": pid, "tid": client,
         "ts": 960.0, "dur": 5.0, "args": {"correlation_id": 998}},
        {"ph": "C", "name": "queue depth GPU 0", "pid": pid, "ts": 100.0, "args": {"p=1": 1}},
    ]
    return {"traceEvents": events, "displayTimeUnit": "ns", "baseTimeNanoseconds": 1700000000,
            "otherData": {"gpuprio": {"version": 2, "pid": pid, "dropped_records": 2, "ops": 6,
                                      "ops_linked_to_gpu": 5, "gpu_records": 6,
                                      "gpu_records_linked_to_client": 5}}}


def foreign_trace():
    """A torch.profiler-style Chrome trace: no otherData.gpuprio."""
    events = []
    for i in range(3):
        events += [
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10.0 * i,
             "dur": 5, "args": {"External id": i}},
            {"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": 10.0 * i + 6,
             "dur": 2, "args": {"External id": i, "correlation": 50 + i}},
        ]
    return {"schemaVersion": 1, "deviceProperties": [], "traceEvents": events}


# --------------------------------------------------------------------------------------------------
# Mutations. Each takes (rng, data: bytes) and returns (bytes, description).

NUMBER = re.compile(rb"(?<![\w.\"])-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?![\w.\"])")
EXTREME_NUMBERS = [b"1e400", b"-1e400", b"NaN", b"Infinity", b"-Infinity", b"1e308", b"-1e308",
                   b"9" * 30, b"-" + b"9" * 400, b"9" * 5000, b"-0", b"0", b"1e-400", b"4.9e-324",
                   b"18446744073709551616", b"-9223372036854775809", b"1.5", b"true", b"null",
                   b"\"1\"", b"[]", b"{}", b"0.0", b"-1",
                   # in range: sums and differences of these must stay finite
                   b"9223372036854775", b"-9223372036854775.807", b"1e15", b"18446744073709551615"]
HOSTILE_STRINGS = ["\ud800", "\udfff", "\x1b[2J\x1b[31m", "a\nb\r\n", "\x00", "\u202e", "é" * 3,
                   "x" * 100000, "", "Launch", "cuLaunchKernel", "kernel", "client", "dispatch",
                   "queue", "X", "b", "1", "NaN"]
NEST_DEPTHS = [10, 500, 900, 990, 1000, 3000, 100000]


def flip_bytes(rng, data):
    data = bytearray(data)
    flips = rng.randint(1, 8)
    for _ in range(flips):
        if data:
            data[rng.randrange(len(data))] ^= rng.randint(1, 255)
    return bytes(data), f"flip {flips} bytes"


def truncate(rng, data):
    cut = rng.randrange(len(data) + 1)
    return data[:cut], f"truncate at {cut}"


def splice(rng, data):
    """Delete, duplicate or insert a span."""
    if not data:
        return data, "splice nothing"
    a = rng.randrange(len(data))
    b = min(len(data), a + rng.randint(1, 64))
    what = rng.choice(("delete", "duplicate", "insert"))
    if what == "delete":
        return data[:a] + data[b:], f"delete [{a}, {b})"
    if what == "duplicate":
        return data[:b] + data[a:b] + data[b:], f"duplicate [{a}, {b})"
    junk = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    return data[:a] + junk + data[a:], f"insert {len(junk)} random bytes at {a}"


def bad_encoding(rng, data):
    junk = rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xef\xbb\xbf", b"\x00", b"\xfe\xff"])
    at = 0 if junk in (b"\xef\xbb\xbf", b"\xfe\xff") else rng.randrange(len(data) + 1)
    return data[:at] + junk + data[at:], f"insert {junk!r} at {at}"


def swap_number(rng, data):
    matches = list(NUMBER.finditer(data))
    if not matches:
        return data, "no number to swap"
    m = rng.choice(matches)
    new = rng.choice(EXTREME_NUMBERS)
    return data[:m.start()] + new + data[m.end():], \
        f"number {m.group()[:20]!r} at {m.start()} -> {new[:20]!r}"


def compress(rng, data):
    packed = gzip.compress(data, mtime=0)
    if rng.random() < 0.4:
        cut = rng.randrange(len(packed))
        return packed[:cut], f"gzip, truncated at {cut}"
    return packed, "gzip"


def _nodes(doc):
    """(container, key) of every value in doc, iteratively (no recursion limit)."""
    out, stack = [], [doc]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in items:
            out.append((node, key))
            if isinstance(value, (dict, list)):
                stack.append(value)
    return out


PLACEHOLDER = "@@fuzz-placeholder@@"


def _random_value(rng):
    """A JSON value of a random type; deep nesting is spliced in as text (json.dumps recurses)."""
    kind = rng.randrange(9)
    if kind == 0:
        return rng.choice(HOSTILE_STRINGS), None
    if kind == 1:
        return rng.choice([0, -1, 1, 2**63, -2**63 - 1, 2**64, 10**30, 10**300]), None
    if kind == 2:
        return rng.choice([0.5, -0.0, 1e308, -1e308, 5e-324, float("inf"), float("-inf"),
                           float("nan")]), None
    if kind == 3:
        return rng.choice([True, False, None]), None
    if kind == 4:
        return rng.choice([[], [1, "a"], {}, {"op_id": 1}]), None
    if kind == 5:
        depth = rng.choice(NEST_DEPTHS)
        opener, closer = rng.choice([("[", "]"), ('{"a":', "}")])
        return PLACEHOLDER, opener * depth + "1" + closer * depth
    if kind == 6:
        return "x" * rng.choice([1, 1000, 1000000]), None
    if kind == 7:
        return rng.choice([-100, 100, 2**31, -2**31 - 1, 999999, 1000000, 1000001]), None
    return rng.choice(["kernel", "client", "dispatch", "queue", "X", "b", "cuLaunchKernel"]), None


def structural(rng, data):
    """Parse, change one value (type swap, key deletion, nesting, hostile string), dump."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return data, "structural: not JSON"
    if not isinstance(doc, (dict, list)):
        return data, "structural: scalar"
    nodes = _nodes(doc)
    if not nodes:
        return data, "structural: empty"
    container, key = rng.choice(nodes)
    nested = None
    what = rng.randrange(4)
    if what == 0 and isinstance(container, dict):
        del container[key]
        description = f"delete key {key!r}"
    elif what == 1:
        container[key], nested = _random_value(rng)
        description = f"[{key!r}] -> {repr(container[key])[:40]}"
    elif what == 2 and isinstance(container[key], list) and container[key]:
        container[key].extend(container[key] * rng.choice([1, 10]))
        description = f"[{key!r}] list repeated"
    else:
        value = rng.choice(HOSTILE_STRINGS)
        container[key] = value
        description = f"[{key!r}] -> string {value[:20]!r}"
    text = json.dumps(doc)  # writes NaN / Infinity for non-finite floats, as foreign writers do
    if nested is not None:
        text = text.replace(json.dumps(PLACEHOLDER), nested, 1)
        description += f" ({len(nested) // 2} nested levels)"
    return text.encode("utf-8", "surrogatepass"), description


def top_level(rng, data):
    """Whole-document replacements: other JSON types, a foreign header, another format version."""
    options = [b"", b" ", b"null", b"[]", b"{}", b"1", b"\"x\"", b"[" * 5000,
               b"{\"traceEvents\":{}}",
               b"{\"traceEvents\":[],\"otherData\":{\"gpuprio\":{\"version\":3}}}",
               b"{\"traceEvents\":[],\"otherData\":{\"gpuprio\":{\"version\":\"2\"}}}",
               b"{\"traceEvents\":[],\"otherData\":{\"gpuprio\":[]}}",
               b"{\"traceEvents\":[],\"otherData\":[]}",
               b"{\"traceEvents\":[1,\"a\",null],\"otherData\":{\"gpuprio\":{\"version\":2}}}"]
    new = rng.choice(options)
    return new, f"document -> {new[:40]!r}"


MUTATIONS = [(flip_bytes, 3), (truncate, 2), (splice, 2), (bad_encoding, 1), (swap_number, 4),
             (compress, 1), (structural, 8), (top_level, 1)]


def mutate(rng, seed):
    steps = []
    data = seed
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        mutation = rng.choices([m for m, _ in MUTATIONS], weights=[w for _, w in MUTATIONS])[0]
        data, description = mutation(rng, data)
        steps.append(f"{mutation.__name__}: {description}")
    return data, "; ".join(steps)


# --------------------------------------------------------------------------------------------------
# Running summarize.


def load_cli(path):
    loader = importlib.machinery.SourceFileLoader("gpuprio_cli_under_fuzz", path)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def strict_json(text):
    def reject(constant):
        raise ValueError(f"{constant} is not JSON")
    return json.loads(text, parse_constant=reject)


def verdict(rc, out, err, as_json):
    """None if the execution kept the contract, else the rule it broke."""
    if "Traceback (most recent call last)" in err:
        return "traceback on stderr"
    if rc == 2:
        lines = err.splitlines()
        if out:
            return "exit 2 with output on stdout"
        if len(lines) != 1 or not lines[0].startswith(ERROR_PREFIX):
            return f"exit 2 without exactly one '{ERROR_PREFIX}...' line"
        return None
    if rc != 0:
        return f"exit {rc}"
    if err:
        return "exit 0 with text on stderr"
    if as_json:
        try:
            if not isinstance(strict_json(out), dict):
                return "--json output is not an object"
        except ValueError as e:
            return f"--json output is not strict JSON ({str(e)[:60]})"
    elif not out:
        return "exit 0 with no output"
    return None


def run_in_process(cli, path, as_json):
    """(rc, stdout, stderr, failure kind or None); stdout and stderr encode like a UTF-8 tty's."""
    out_bytes, err_bytes = io.BytesIO(), io.BytesIO()
    out = io.TextIOWrapper(out_bytes, encoding="utf-8", errors="strict", write_through=True)
    err = io.TextIOWrapper(err_bytes, encoding="utf-8", errors="backslashreplace",
                           write_through=True)
    argv = ["trace", "summarize", path] + (["--json"] if as_json else [])
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = cli.main(argv, {})
        crash = None
    except Exception as e:  # noqa: BLE001 -- any escaping exception is what we hunt
        frame = traceback.extract_tb(e.__traceback__)[-1]
        rc, crash = 1, f"{type(e).__name__} at line {frame.lineno} ({frame.name})"
    text = lambda b: b.getvalue().decode("utf-8", "replace")  # noqa: E731
    return rc, text(out_bytes), text(err_bytes), crash


def run_subprocess(cli_path, path, as_json):
    argv = [sys.executable, "-I", "-S", "-B", cli_path, "trace", "summarize", path]
    p = subprocess.run(argv + (["--json"] if as_json else []), capture_output=True, timeout=60,
                       env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"})
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cli", default=DEFAULT_CLI, help="the gpuprio script under test")
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--executions", type=int, default=6000)
    parser.add_argument("--seed-trace", action="append", default=[],
                        help="another valid trace to mutate (e.g. one the C++ writer wrote)")
    parser.add_argument("--save-failures", default=os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR"))
    args = parser.parse_args()

    cli = load_cli(args.cli)
    parser_once = cli.make_parser()  # building argparse's parsers costs more than most inputs
    cli.make_parser = lambda: parser_once
    seeds = [("synthetic", json.dumps(synthetic_trace()).encode()),
             ("foreign", json.dumps(foreign_trace()).encode())]
    for path in args.seed_trace:
        with open(path, "rb") as f:
            seeds.append((os.path.basename(path), f.read()))
    rng = random.Random(args.seed)
    failures = {}  # kind -> [count, first description, first input]
    exits = {}
    subprocess_runs = 0
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        path = None
        for n in range(args.executions):
            seed_name, seed = seeds[n % len(seeds)]
            data, description = mutate(rng, seed)
            description = f"seed {seed_name}: {description}"
            # A new file each time: ext4 flushes a file truncated and rewritten to disk on close.
            if path is not None:
                os.unlink(path)
            path = os.path.join(tmp, f"input{n}.json")
            with open(path, "wb") as f:
                f.write(data)
            as_json = n % 2 == 0
            rc, out, err, crash = run_in_process(cli, path, as_json)
            kind = crash or verdict(rc, out, err, as_json)
            exits[rc] = exits.get(rc, 0) + 1
            if kind is not None or n % SUBPROCESS_EVERY == 0:
                subprocess_runs += 1
                sub_rc, sub_out, sub_err = run_subprocess(args.cli, path, as_json)
                sub_kind = verdict(sub_rc, sub_out, sub_err, as_json)
                if kind is None and sub_kind is not None:
                    kind = f"subprocess only: {sub_kind}: {sub_err.strip().splitlines()[-1:]}"
            if kind is None:
                continue
            kind = f"{kind}{' (--json)' if as_json else ''}"
            entry = failures.setdefault(kind, [0, description, data])
            entry[0] += 1
    elapsed = time.monotonic() - started

    print(f"{args.executions} executions ({subprocess_runs} also as subprocesses) in "
          f"{elapsed:.1f} s, seed {args.seed}, {len(seeds)} seed traces; exits: "
          + ", ".join(f"{rc}: {count}" for rc, count in sorted(exits.items())))
    print(f"{sum(e[0] for e in failures.values())} failing executions, {len(failures)} kinds")
    for i, (kind, (count, description, data)) in enumerate(sorted(failures.items())):
        print(f"  [{i}] {count} x {kind}\n      first: {description}")
        if args.save_failures:
            os.makedirs(args.save_failures, exist_ok=True)
            with open(os.path.join(args.save_failures, f"fuzz_failure_{i}.json"), "wb") as f:
                f.write(data)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
