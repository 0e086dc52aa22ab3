#!/usr/bin/env python3
"""Checks the two-process benchmarks' record and report code on synthetic results, without a GPU
or torch: two_process_report.py (run_two_process_bench.sh) and the record/report half of
torch_two_process.py (run_torch_bench.sh). Prints one line per check and 'N passed, N failed'.

usage: python3 tools/bench/two_process_selftest.py
"""

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PY = sys.executable
results = []


def check(name, cond, detail=""):
    results.append(bool(cond))
    print("%s %s%s" % ("ok  " if cond else "FAIL", name, "" if cond else ": %s" % detail))


def run(args, stdin=None):
    p = subprocess.run([PY] + args, input=stdin, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def write(d, name, text):
    path = os.path.join(d, name)
    with open(path, "w") as fh:
        fh.write(text)
    return path


def interference_json(**kw):
    js = {"bench": "interference", "ok": True, "period_ms": 10, "chain": 20, "high_us": 50, "sms": 132,
          "device": "Synthetic H100", "cycles_per_us": 1980.0, "low_batch": 20, "low_blocks_per_sm": 2,
          "low_threads": 1024, "low_fill": "smem", "low_smem_per_block": 116736, "low_resident_blocks_per_sm": 2,
          "preloaded": False, "env_priority": "", "error": ""}
    js.update(kw)
    return "interference: gpuprio_set_thread_priority not found (not used)\n" + json.dumps(js) + "\n"


def two_process(d):
    rep = os.path.join(HERE, "two_process_report.py")
    lines = []

    def record(group, config, rnd, gpuprio, high=None, low=None, high_rc=0, low_rc=0, skip=None):
        args = [rep, "record", "--group", str(group), "--config", config, "--round", str(rnd), "--mps", "0",
                "--gpuprio", str(gpuprio)]
        if skip:
            args += ["--skip", skip]
        tag = "%s.%s.%s" % (config, group, rnd)
        if high is not None:
            args += ["--high-out", write(d, tag + ".h.out", high), "--high-err", write(d, tag + ".h.err", ""),
                     "--high-rc", str(high_rc)]
        if low is not None:
            args += ["--low-out", write(d, tag + ".l.out", low), "--low-err", write(d, tag + ".l.err", "boom\n"),
                     "--low-rc", str(low_rc)]
        rc, out, err = run(args)
        assert rc == 0, err
        lines.append(out)
        return json.loads(out)

    pre = {"preloaded": True}
    record(0, "calibrate", 0, 0, high=interference_json(role="high", high_p50_ms=1.0, high_p99_ms=1.0))
    for rnd in (1, 2, 3):
        # Chain alone: mean 1.0 ms per 10 ms period, so the busy share is 0.1.
        record(0, "alone", rnd, 0, high=interference_json(role="high", high_p50_ms=1.0, high_p99_ms=1.0 + 0.1 * rnd,
                                                          high_mean_ms=1.0))
        for L in (0.2, 2.0):
            record(L, "low-alone", rnd, 0, low=interference_json(role="low", low_own_per_s=1000 / L,
                                                                 low_stopped_by="seconds"))
            record(L, "native", rnd, 0,
                   high=interference_json(role="high", high_p50_ms=4.0, high_p99_ms=5.0, high_mean_ms=4.0,
                                          low_kernels_per_s=0.95 * 1000 / L),
                   low=interference_json(role="low", low_stopped_by="peer"))
            gp_high = interference_json(role="high", high_p50_ms=1.2, high_p99_ms=1.4 * rnd, high_mean_ms=1.2,
                                        low_kernels_per_s=0.85 * 1000 / L, env_priority="high", **pre)
            gp_low = interference_json(role="low", low_stopped_by="peer", env_priority="low", **pre)
            if L == 2.0 and rnd == 3:
                record(L, "gpuprio", rnd, 1, high=gp_high, low="", low_rc=124)  # a low process that hung
            else:
                record(L, "gpuprio", rnd, 1, high=gp_high, low=gp_low)
        record(0, "alone-gpuprio", rnd, 1, skip="skipped: gpuprio runs timed out twice")
    # A gpuprio run whose low process ran without the library does not count.
    r = record(0.2, "gpuprio", 9, 1, high=interference_json(role="high", env_priority="high", high_p50_ms=1, **pre),
               low=interference_json(role="low", low_stopped_by="peer"))
    check("record: a low process without the library fails a gpuprio run", not r["ok"] and "preloaded" in r["error"],
          r.get("error"))
    lines.pop()
    r = json.loads(lines[-1])
    check("record: a skipped run is recorded as such", r.get("skipped") and not r["ok"], r)
    rc, out, _ = run([rep, "brief"], stdin=lines[3])
    check("brief: figures of a pair", "p99=5.000" in out and "low/s=4750.0" in out, out)

    runs = write(d, "runs.jsonl", "".join(lines))
    oj, ot = os.path.join(d, "tp.json"), os.path.join(d, "tp.txt")
    rc, _, err = run([rep, "report", runs, oj, ot])
    check("report: exit 0 when every native run succeeded", rc == 0, err)
    rpt = json.load(open(oj))
    txt = open(ot).read()
    check("report: busy share from the alone chain", abs(rpt["busy_share"] - 0.1) < 1e-9, rpt["busy_share"])
    g = {x["low_ms"]: x for x in rpt["groups"]}
    gp = g[0.2]["configs"]["gpuprio"]
    # alone p99 median = 1.2; gpuprio p99s 1.4, 2.8, 4.2 -> ratios 1.17, 2.33, 3.5
    check("report: p99 / alone median and spread", abs(gp["p99_vs_alone"]["median"] - 2.8 / 1.2) < 1e-9 and
          abs(gp["p99_vs_alone"]["min"] - 1.4 / 1.2) < 1e-9 and gp["p99_vs_alone"]["n"] == 3, gp["p99_vs_alone"])
    check("report: low against alone x (1 - busy)", abs(gp["low_vs_expected"]["median"] - 0.85 / 0.9) < 1e-9,
          gp["low_vs_expected"])
    check("report: a failed gpuprio run is left out and listed", g[2.0]["configs"]["gpuprio"]["ok"] == 2 and
          "low:" in (g[2.0]["configs"]["gpuprio"]["errors"][0] or ""), g[2.0]["configs"]["gpuprio"])
    t = {tt["what"]: tt for tt in g[0.2]["targets"]}
    check("report: p99 target at 0.2 ms judged", t["gpuprio high p99 / alone <= 1.5"]["met"] is False, t)
    check("report: low target judged", t["gpuprio low >= 90% of low alone x (1 - busy)"]["met"] is True, t)
    check("report: the table names the targets", "MISSED" in txt and "met" in txt and "alone-gpuprio" in txt, txt)

    lines.append(json.dumps({"group_low_ms": 0.2, "config": "native", "round": 4, "mps": False, "gpuprio": False,
                             "ok": False, "error": "high: timed out"}) + "\n")
    runs = write(d, "runs2.jsonl", "".join(lines))
    rc, _, err = run([rep, "report", runs, oj, ot])
    check("report: exit 1 when a native run failed", rc == 1 and "native run failed" in err, (rc, err))


def torch_part(d):
    script = os.path.join(HERE, "torch_two_process.py")
    lines = []

    def result(name, **kw):
        js = {"ok": True, "error": "", "preloaded": False, "env_priority": "", "impl": "builtin", "torch": "2.x",
              "device": "Synthetic H100", "dtype": "fp16", "image_size": 224}
        js.update(kw)
        return write(d, name, json.dumps(js))

    def record(config, rnd, gpuprio, high=None, low=None, high_rc=0, low_rc=0):
        args = [script, "record", "--config", config, "--round", str(rnd), "--gpuprio", str(gpuprio)]
        if high:
            args += ["--high-result", high, "--high-rc", str(high_rc)]
        if low:
            args += ["--low-result", low, "--low-rc", str(low_rc)]
        rc, out, err = run(args)
        assert rc == 0, err
        lines.append(out)
        return json.loads(out)

    def lat(base, n=400):
        return [base + 0.01 * (i % 100) for i in range(n)]  # 400 values: nearest-rank p99 = base + 0.98

    pre = {"preloaded": True}
    for rnd in (1, 2, 3):
        record("alone", rnd, 0, high=result("a%d" % rnd, role="high", model="resnet18", latency_ms=lat(2.0),
                                            p50_ms=2.5, p99_ms=2.99, requests=400, rate_per_s=20))
        record("low-alone", rnd, 0, low=result("la%d" % rnd, role="low", model="resnet50", batch=1024,
                                               own_images_per_s=10000.0, stopped_by="seconds"))
        record("native", rnd, 0, high=result("n%d" % rnd, role="high", latency_ms=lat(20.0), p50_ms=20.5,
                                             p99_ms=20.99, low_images_per_s=9500.0 + rnd),
               low=result("nl%d" % rnd, role="low", stopped_by="peer"))
        record("gpuprio", rnd, 1,
               high=result("g%d" % rnd, role="high", latency_ms=lat(2.2), p50_ms=2.7, p99_ms=3.19,
                           low_images_per_s=8000.0 + 100 * rnd, env_priority="high", **pre),
               low=result("gl%d" % rnd, role="low", stopped_by="peer", env_priority="low", **pre))
    r = record("gpuprio", 9, 1, high=os.path.join(d, "missing.json"), high_rc=124,
               low=result("gl9", role="low", stopped_by="seconds", env_priority="low", **pre))
    check("torch record: a missing result and a low process that stopped by itself fail the run",
          not r["ok"] and "timed out" in r["error"] and "stopped by 'seconds'" in r["error"], r.get("error"))
    runs = write(d, "truns.jsonl", "".join(lines))
    oj, ot = os.path.join(d, "t.json"), os.path.join(d, "t.txt")
    rc, _, err = run([script, "report", runs, oj, ot])
    check("torch report: exit 0 when every native run succeeded", rc == 0, err)
    rows = json.load(open(oj))["rows"]
    check("torch report: pooled requests over rounds", rows["alone"]["requests"] == 1200, rows["alone"]["requests"])
    check("torch report: pooled p99 / alone", abs(rows["gpuprio"]["p99_vs_alone"] - 3.18 / 2.98) < 1e-6,
          rows["gpuprio"]["p99_vs_alone"])
    check("torch report: low / low alone, median and spread",
          abs(rows["gpuprio"]["low_vs_low_alone"] - 0.82) < 1e-9 and
          abs(rows["gpuprio"]["round_low_vs_low_alone"]["max"] - 0.83) < 1e-9, rows["gpuprio"])
    check("torch report: the failed run is listed", rows["gpuprio"]["ok"] == 3 and len(rows["gpuprio"]["errors"]) == 1,
          rows["gpuprio"])
    check("torch report: latencies are not copied into the report's runs",
          all("latency_ms" not in ((r.get("high") or {}).get("json") or {}) for r in json.load(open(oj))["runs"]))
    txt = open(ot).read()
    check("torch report: table", "gpuprio" in txt and "low-alone" in txt and "builtin" in txt, txt)


def main():
    with tempfile.TemporaryDirectory() as d:
        two_process(d)
        torch_part(d)
    passed = sum(results)
    print("%d passed, %d failed" % (passed, len(results) - passed))
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
