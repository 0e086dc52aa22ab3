#!/usr/bin/env python3
"""`gpuprio trace merge` (docs/trace_format.md, "Merged traces"); unittest, standard library only.

Merges hand-made traces (and, given --writer-traces A B, two traces of the C++ writer from
trace_merge_test.cc) whose pids, op ids and flow ids collide, and checks: every event of every
input is in the output once (mapped back by the rule), each input's pids are its own, flows
connect within one process and never across, times are shifted by the difference of the bases,
metadata names each process, tests/gpu/trace_check.py's analysis finds nothing the inputs did not
have, and `trace summarize` counts the sum of the inputs. Bad input and outputs give one error
line and exit 2 and leave nothing behind. The CLI runs as a subprocess ($GPUPRIO_CLI_UNDER_TEST or
tools/cli/gpuprio of this tree); files go to a temporary directory removed at the end.

  python3 tests/tools/trace_merge_test.py [--writer-traces A B] [-v]
"""

import copy
import gzip
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))  # not realpath: keep the runfiles tree
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))
import trace_check as tc  # noqa: E402

CLI = os.environ.get("GPUPRIO_CLI_UNDER_TEST") or os.path.join(ROOT, "tools", "cli", "gpuprio")
ERROR_PREFIX = "gpuprio trace: error: "
GPU = 1000000
WRITER_TRACES = []


def hand_trace(pid, base, name, priority, devices=(0,), ops=2, version=2):
    """A trace per docs/trace_format.md: per op a client slice, queue b/e, dispatcher slice, a
    kernel on each device's stream 7 and its flow s/t/f; op ids 1..ops; a counter."""
    ev = [{"ph": "M", "name": "process_name", "pid": pid, "args": {"name": name}},
          {"ph": "M", "name": "thread_name", "pid": pid, "tid": 2, "args": {"name": "main"}},
          {"ph": "M", "name": "thread_name", "pid": pid, "tid": 3,
           "args": {"name": "gpuprio dispatcher (GPU 0)"}}]
    for d in devices:
        ev += [{"ph": "M", "name": "process_name", "pid": GPU + d, "args": {"name": f"GPU {d}"}},
               {"ph": "M", "name": "thread_name", "pid": GPU + d, "tid": 7,
                "args": {"name": "stream 7"}}]
    for op in range(1, ops + 1):
        t = 100.0 * op
        gpu = GPU + devices[(op - 1) % len(devices)]
        ev += [
            {"ph": "X", "cat": "client", "name": "cudaLaunchKernel", "pid": pid, "tid": 2,
             "ts": t, "dur": 2.0, "args": {"op_id": op, "priority": priority,
                                           "api": "cuLaunchKernel", "on_caller": False}},
            {"ph": "b", "cat": "queue", "name": f"queued p={priority}", "id": op, "pid": pid,
             "tid": 2, "ts": t, "args": {"op_id": op, "priority": priority, "delay_us": 4.0}},
            {"ph": "e", "cat": "queue", "name": f"queued p={priority}", "id": op, "pid": pid,
             "tid": 2, "ts": t + 4},
            {"ph": "X", "cat": "dispatch", "name": "cuLaunchKernel", "pid": pid, "tid": 3,
             "ts": t + 4, "dur": 1.0, "args": {"op_id": op, "priority": priority,
                                               "correlation_id": 5 + op, "result": 0}},
            {"ph": "X", "cat": "kernel", "name": f"{name}_gemm", "pid": gpu, "tid": 7,
             "ts": t + 10.125, "dur": 8.0,
             "args": {"op_id": op, "priority": priority, "correlation_id": 5 + op}},
            {"ph": "s", "cat": "gpuprio.op", "name": "op", "id": op, "pid": pid, "tid": 2,
             "ts": t},
            {"ph": "t", "cat": "gpuprio.op", "name": "op", "id": op, "pid": pid, "tid": 3,
             "ts": t + 4},
            {"ph": "f", "bp": "e", "cat": "gpuprio.op", "name": "op", "id": op, "pid": gpu,
             "tid": 7, "ts": t + 10.125},
            {"ph": "C", "name": "queue depth GPU 0", "pid": pid, "ts": t,
             "args": {f"p={priority}": 1}},
        ]
    return {"traceEvents": ev, "displayTimeUnit": "ns", "baseTimeNanoseconds": base,
            "otherData": {"gpuprio_version": "0.9.0",
                          "gpuprio": {"version": version, "pid": pid, "ops": ops,
                                      "dropped_records": 1}}}


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def load(path):
    data = read_bytes(path)
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return json.loads(data)


def canonical(e, drop_process_name):
    e = copy.deepcopy(e)
    if drop_process_name and e.get("ph") == "M" and e.get("name") == "process_name":
        e["args"].pop("name", None)
    if "ts" in e:
        e["ts"] = round(e["ts"] * 1000)  # ns
    return json.dumps(e, sort_keys=True)


class MergeTestCase(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="gpuprio_merge_test.")
        self.addCleanup(self.dir.cleanup)

    def path(self, name):
        return os.path.join(self.dir.name, name)

    def write(self, doc, name, gz=False):
        path = self.path(name)
        data = json.dumps(doc).encode() if not isinstance(doc, (bytes, str)) else (
            doc.encode() if isinstance(doc, str) else doc)
        with open(path, "wb") as f:
            f.write(gzip.compress(data) if gz else data)
        return path

    def cli(self, *args):
        p = subprocess.run([sys.executable, "-I", "-S", "-B", CLI] + list(args),
                           capture_output=True, text=True, timeout=120)
        return p.returncode, p.stdout, p.stderr

    def merge(self, inputs, output):
        rc, out, err = self.cli("trace", "merge", *inputs, "-o", output)
        self.assertEqual((rc, err), (0, ""), out)
        self.assertEqual(self.leftovers(), [])
        return load(output)

    def leftovers(self):
        return sorted(n for n in os.listdir(self.dir.name) if n.endswith(".tmp"))

    def summarize(self, path):
        rc, out, err = self.cli("trace", "summarize", path, "--json", "--top", "0")
        self.assertEqual((rc, err), (0, ""))
        return json.loads(out)

    def check_merged(self, paths, merged):
        """Every check of a merge of the files at paths into the document merged."""
        docs = [load(p) for p in paths]
        info = merged["otherData"]["gpuprio"]["merged"]
        self.assertEqual([i["file"] for i in info["inputs"]], paths)
        base = min(d["baseTimeNanoseconds"] for d in docs)
        self.assertEqual(merged["baseTimeNanoseconds"], base)
        self.assertEqual(merged["otherData"]["gpuprio"]["version"],
                         docs[0]["otherData"]["gpuprio"]["version"])
        self.assertEqual(merged["otherData"]["gpuprio"]["ops"],
                         sum(d["otherData"]["gpuprio"].get("ops", 0) for d in docs))
        # Each output pid belongs to one input.
        owner = {}
        for n, i in enumerate(info["inputs"]):
            for old, new in i["pids"].items():
                self.assertNotIn(new, owner, f"pid {new} of inputs {owner.get(new)} and {n}")
                owner[new] = n
                self.assertEqual(int(old) >= GPU, new >= GPU)
        stride = info["id_stride"]
        # Map every output event back to its input by the documented rule.
        back = [[] for _ in docs]
        for e in merged["traceEvents"]:
            n = owner[e["pid"]]
            i = info["inputs"][n]
            self.assertEqual(i["id_offset"], (n + 1) * stride)
            old_pid = {new: int(old) for old, new in i["pids"].items()}[e["pid"]]
            shift_ns = docs[n]["baseTimeNanoseconds"] - base
            self.assertAlmostEqual(i["ts_shift_us"], shift_ns / 1000)
            o = copy.deepcopy(e)
            o["pid"] = old_pid
            if "ts" in o:
                o["ts"] = (round(o["ts"] * 1000) - shift_ns) / 1000
            for key in ("id", "bind_id"):
                if o.get(key):
                    self.assertEqual(o[key] // stride, n + 1)
                    o[key] -= i["id_offset"]
            if (o.get("args") or {}).get("op_id"):
                self.assertEqual(o["args"]["op_id"] // stride, n + 1)
                o["args"]["op_id"] -= i["id_offset"]
            back[n].append(canonical(o, True))
            if e["ph"] == "M" and e["name"] == "process_name" and e["pid"] >= GPU:
                pid = docs[n]["otherData"]["gpuprio"]["pid"]
                self.assertIn(f"(pid {pid}", e["args"]["name"])
                self.assertTrue(e["args"]["name"].startswith("GPU "), e["args"]["name"])
                self.assertEqual(e["args"]["name"].split(" (")[0],
                                 f"GPU {old_pid - GPU}")
        for n, d in enumerate(docs):
            self.assertEqual(sorted(back[n]),
                             sorted(canonical(e, True) for e in d["traceEvents"]),
                             f"input {n}: events differ")
        # Flows: each id's steps lie in one input's tracks.
        flows = {}
        for e in merged["traceEvents"]:
            if e["ph"] in ("s", "t", "f"):
                flows.setdefault(e["id"], set()).add(owner[e["pid"]])
        self.assertTrue(flows)
        for fid, owners in flows.items():
            self.assertEqual(len(owners), 1, f"flow {fid} crosses processes")
        # The repo's trace checker: nothing the inputs did not already have.
        ins = [tc.analyze_gpuprio_trace(d, min_linked=0.0) for d in docs]
        out = tc.analyze_gpuprio_trace(merged, min_linked=0.0)
        for key in ("kernels", "kernels_linked", "client_slices", "dispatch_slices",
                    "flow_s_without_f", "flow_f_without_s"):
            self.assertEqual(out[key], sum(r[key] for r in ins), key)
        self.assertEqual(out["flows_unbound"], {"s": 0, "t": 0, "f": 0})
        self.assertEqual(out["flows_ts_not_at_slice_start"], 0)
        self.assertEqual(out["failures"], [])
        # summarize reads it and counts every input's work.
        per = [self.summarize(p) for p in paths]
        whole = self.summarize(self.merged_path)
        for key in ("ops", "ops_linked_to_gpu", "kernels", "kernels_linked_to_client",
                    "kernels_unlinked", "dropped_records"):
            self.assertEqual(whole[key], sum(s[key] for s in per), key)
        levels = {}
        for s in per:
            for level in s["priorities"]:
                levels[level["priority"]] = levels.get(level["priority"], 0) + level["ops"]
        self.assertEqual({lv["priority"]: lv["ops"] for lv in whole["priorities"]}, levels)
        return owner


class Merge(MergeTestCase):
    def test_colliding_hand_traces(self):
        # a and b: the same pid (two containers); c: two GPUs, the earliest base. Ids collide.
        a = self.write(hand_trace(100, 5_000_000_000, "serve", 1), "a.json")
        b = self.write(hand_trace(100, 5_002_500_123, "batch", -1, ops=3), "b.json.gz", gz=True)
        c = self.write(hand_trace(300, 4_999_000_000, "train", 0, devices=(0, 1), ops=4),
                       "c.json")
        self.merged_path = self.path("all.json")
        merged = self.merge([a, b, c], self.merged_path)
        owner = self.check_merged([a, b, c], merged)
        cpu = {n: sorted(p for p, o in owner.items() if o == n and p < GPU) for n in range(3)}
        self.assertEqual(cpu[0], [100])  # the first keeps its pid
        self.assertNotEqual(cpu[1], [100])
        self.assertEqual(cpu[2], [300])
        self.assertEqual(sorted(p for p in owner if p >= GPU),
                         [1001000, 1002000, 1003000, 1003001])
        # The kernel of b's op 1 starts 2500.123 us after a's, as their clocks say.
        kernels = {(owner[e["pid"]], e["args"]["op_id"] % 10**6): e["ts"]
                   for e in merged["traceEvents"] if e.get("cat") == "kernel"}
        self.assertAlmostEqual(kernels[(1, 1)] - kernels[(0, 1)], 2500.123, places=6)
        self.assertAlmostEqual(kernels[(0, 1)], 1000 + 110.125, places=6)  # c's base is earlier

    def test_gzip_output_and_replacing_an_output(self):
        a = self.write(hand_trace(100, 10_000, "serve", 1), "a.json")
        b = self.write(hand_trace(200, 10_000, "batch", -1), "b.json")
        self.merged_path = self.path("all.json.gz")
        self.write(b"old", "all.json.gz")
        with open(self.merged_path, "rb") as f:
            self.assertEqual(f.read(2), b"ol")
        merged = self.merge([a, b], self.merged_path)
        with open(self.merged_path, "rb") as f:
            self.assertEqual(f.read(2), b"\x1f\x8b")
        self.check_merged([a, b], merged)

    def test_writer_traces(self):
        if not WRITER_TRACES:
            self.skipTest("no --writer-traces (trace_merge_test.cc gives them)")
        self.merged_path = self.path("writer_all.json")
        merged = self.merge(WRITER_TRACES, self.merged_path)
        self.check_merged(WRITER_TRACES, merged)
        # Both wrote pid 77 and ops 1..: still two processes, and the graph-like op's extra flow
        # (an id above every op id) stays in its process too.
        info = merged["otherData"]["gpuprio"]["merged"]["inputs"]
        self.assertEqual([i["process_name"] for i in info], ["serve", "batch"])
        self.assertEqual(info[1]["ts_shift_us"], 2500.123)
        names = sorted(e["args"]["name"] for e in merged["traceEvents"]
                       if e["ph"] == "M" and e["name"] == "process_name" and e["pid"] >= GPU)
        self.assertEqual(names, ["GPU 0 (pid 77, batch)", "GPU 0 (pid 77, serve)"])

    def test_merged_file_merges_again(self):
        a = self.write(hand_trace(100, 10_000, "serve", 1), "a.json")
        b = self.write(hand_trace(200, 20_000, "batch", -1), "b.json")
        self.merged_path = self.path("ab.json")
        self.merge([a, b], self.merged_path)
        self.assertEqual(self.summarize(self.merged_path)["ops"], 4)


class Refusals(MergeTestCase):
    def assert_refused(self, inputs, output, *words):
        before = {p: read_bytes(p) for p in inputs if os.path.isfile(p)
                  and not os.path.islink(p)}
        existed = os.path.lexists(output)
        rc, out, err = self.cli("trace", "merge", *inputs, "-o", output)
        self.assertEqual(rc, 2, err)
        self.assertEqual(out, "")
        self.assertTrue(err.startswith(ERROR_PREFIX), err)
        self.assertEqual(err.count("\n"), 1, err)
        for word in words:
            self.assertIn(word, err)
        self.assertEqual(os.path.lexists(output), existed)
        for p, data in before.items():
            self.assertEqual(read_bytes(p), data, p)
        self.assertEqual(self.leftovers(), [])

    def good(self, name="a.json", pid=100):
        return self.write(hand_trace(pid, 10_000, "serve", 1), name)

    def test_bad_json(self):
        bad = self.write("{\"traceEvents\": [", "bad.json")
        self.assert_refused([self.good(), bad], self.path("out.json"), "not valid JSON", bad)

    def test_not_a_gpuprio_trace(self):
        torch = self.write({"traceEvents": [], "schemaVersion": 1}, "torch.json")
        self.assert_refused([self.good(), torch], self.path("out.json"),
                            "is not a gpuprio trace")

    def test_malformed_event(self):
        doc = hand_trace(200, 10_000, "batch", 1)
        doc["traceEvents"][5]["id"] = "one"
        bad = self.write(doc, "bad.json")
        self.assert_refused([self.good(), bad], self.path("out.json"), "traceEvents[5].id")

    def test_missing_base_time(self):
        doc = hand_trace(200, 10_000, "batch", 1)
        del doc["baseTimeNanoseconds"]
        bad = self.write(doc, "nobase.json")
        self.assert_refused([self.good(), bad], self.path("out.json"), "baseTimeNanoseconds")

    def test_different_versions(self):
        old = self.write(hand_trace(200, 10_000, "batch", 1, version=1), "v1.json")
        self.assert_refused([self.good(), old], self.path("out.json"), "format versions")

    def test_clocks_of_different_boots(self):
        docs = [hand_trace(100 + k, 10_000, "p", 1) for k in range(2)]
        for k, d in enumerate(docs):
            d["otherData"]["gpuprio"]["boot_id"] = f"boot-{k}"
        paths = [self.write(d, f"boot{k}.json") for k, d in enumerate(docs)]
        self.assert_refused(paths, self.path("out.json"), "clocks cannot be related")

    def test_hosts_of_one_boot(self):
        # Two containers of one machine: host names of their own, one boot, one clock.
        docs = [hand_trace(100 + k, 10_000 + k, "p", 1) for k in range(2)]
        for k, d in enumerate(docs):
            d["otherData"]["gpuprio"]["boot_id"] = "b0"
            d["otherData"]["gpuprio"]["host"] = f"pod-{k}"
        paths = [self.write(d, f"pod{k}.json") for k, d in enumerate(docs)]
        out = self.path("out.json")
        merged = self.merge(paths, out)["otherData"]["gpuprio"]
        self.assertEqual(merged["boot_id"], "b0")
        self.assertEqual([i["host"] for i in merged["merged"]["inputs"]], ["pod-0", "pod-1"])

    def test_hosts_differ_without_boot_ids(self):
        docs = [hand_trace(100 + k, 10_000, "p", 1) for k in range(2)]
        docs[0]["otherData"]["gpuprio"]["boot_id"] = "b0"
        for k, d in enumerate(docs):
            d["otherData"]["gpuprio"]["host"] = f"node-{k}"
        paths = [self.write(d, f"node{k}.json") for k, d in enumerate(docs)]
        self.assert_refused(paths, self.path("out.json"), "host 'node-0' and 'node-1'")

    def test_symlink(self):
        link = self.path("link.json")
        os.symlink(self.good(), link)
        self.assert_refused([link], self.path("out.json"), "symbolic link")

    def test_fifo(self):
        fifo = self.path("fifo.json")
        os.mkfifo(fifo)
        self.assert_refused([self.good(), fifo], self.path("out.json"), "pipe or FIFO")

    def test_directory(self):
        self.assert_refused([self.good(), self.dir.name], self.path("out.json"))

    def test_too_large(self):
        doc = hand_trace(200, 10_000, "batch", 1, ops=2)
        doc["padding"] = " " * (2 << 20)
        big = self.write(doc, "big.json")
        rc, out, err = self.cli("trace", "merge", self.good(), big, "-o", self.path("o.json"),
                                "--max-input-mb", "1")
        self.assertEqual((rc, out, err.count("\n")), (2, "", 1), err)
        self.assertIn("--max-input-mb", err)
        self.assertFalse(os.path.exists(self.path("o.json")))

    def test_output_is_an_input(self):
        a, b = self.good(), self.good("b.json", 200)
        self.assert_refused([a, b], b, "it is the input")
        link = self.path("out_link.json")
        os.symlink(a, link)
        self.assert_refused([a, b], link, "it is the input")
        hard = self.path("hard.json")
        os.link(a, hard)
        self.assert_refused([a, b], hard, "it is the input")

    def test_same_input_twice(self):
        a = self.good()
        self.assert_refused([a, a], self.path("out.json"), "the same file")

    def test_output_directory_missing(self):
        self.assert_refused([self.good()], self.path("no/such/dir/out.json"), "cannot write")

    def test_no_output(self):
        rc, out, err = self.cli("trace", "merge", self.good())
        self.assertEqual((rc, out, err.count("\n")), (2, "", 1), err)
        self.assertTrue(err.startswith(ERROR_PREFIX), err)


def main():
    argv = sys.argv[:1]
    args = sys.argv[1:]
    while args:
        if args[0] == "--writer-traces":
            WRITER_TRACES.extend(args[1:3])
            args = args[3:]
        else:
            argv.append(args.pop(0))
    unittest.main(argv=argv)


if __name__ == "__main__":
    main()
