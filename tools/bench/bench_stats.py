"""What the benchmark reports share: the spread of a value over rounds, ratios that tolerate a
missing baseline, formatting that prints "-" for what was not measured, and the records of runs
(a process's JSON line, exit code, stderr tail, what gpuprio logged about isolation). Imported by
the report scripts next to it (run as `python3 tools/bench/SCRIPT.py`, so this directory is on
sys.path); `python3 bench_stats.py record ...` writes a one-process run's record for the shell
runners (main() says how)."""

import argparse
import json
import os
import re
import statistics
import sys


def spread(values):
    """Median, min and max of the values that were measured (None ones dropped)."""
    values = [v for v in values if v is not None]
    if not values:
        return {"n": 0, "median": None, "min": None, "max": None}
    return {"n": len(values), "median": statistics.median(values), "min": min(values),
            "max": max(values)}


def ratio(a, b):
    """a / b, or None when either is missing or b is zero."""
    if a is None or b is None or not b:
        return None
    return a / b


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def fmt_spread(s, spec):
    """"median [min-max]", or the median alone for one value, or "-" for none."""
    if not s or s["median"] is None:
        return "-"
    if s["n"] == 1:
        return format(s["median"], spec)
    return "%s [%s-%s]" % (format(s["median"], spec), format(s["min"], spec), format(s["max"], spec))


def percentile(values, q):
    """Nearest rank on the sorted values (as bench_common.h's percentile), None for none."""
    if not values:
        return None
    v = sorted(values)
    return v[int(q * (len(v) - 1) + 0.5)]


def run_counts(rs):
    """How a configuration's runs went: {"runs", "ok" (how many), "errors" (of the failed ones)}."""
    return {"runs": len(rs), "ok": sum(1 for r in rs if r.get("ok")),
            "errors": [r.get("error") for r in rs if not r.get("ok")]}


def chain_spreads(rs, fig, alone_p50, alone_p99):
    """The high chain's figures over rounds: p50, p99 and max (ms) from fig(run, key), and p50 and
    p99 over the alone baselines."""
    return {"high_p50_ms": spread([fig(r, "high_p50_ms") for r in rs]),
            "high_p99_ms": spread([fig(r, "high_p99_ms") for r in rs]),
            "high_max_ms": spread([fig(r, "high_max_ms") for r in rs]),
            "p50_vs_alone": spread([ratio(fig(r, "high_p50_ms"), alone_p50) for r in rs]),
            "p99_vs_alone": spread([ratio(fig(r, "high_p99_ms"), alone_p99) for r in rs])}


def first_ok(runs, get):
    """get(run) of the first ok run where it is not empty, {} when there is none."""
    return next((get(r) for r in runs if r.get("ok") and get(r)), {})


def target(what, value, limit, at_most=False):
    """A target judged on a value: {"what", "value", "met"}, met None when the value is missing."""
    met = None if value is None else (value <= limit if at_most else value >= limit)
    return {"what": what, "value": value, "met": met}


def target_state(t):
    return "no data" if t["met"] is None else ("met" if t["met"] else "MISSED")


def header(row, *titles):
    """A table's header line (the row format filled with the titles) and a rule as long."""
    hdr = row % titles
    return [hdr, "-" * len(hdr)]


def write_report(rep, text, out_json, out_txt):
    """The report as JSON into out_json and its table (text) into out_txt."""
    with open(out_json, "w") as fh:
        json.dump(rep, fh, indent=1)
        fh.write("\n")
    with open(out_txt, "w") as fh:
        fh.write(text)


def read_jsonl(path):
    """The records of a runs.jsonl file, one JSON object a line (blank lines skipped)."""
    runs = []
    with open(path) as fh:
        for line in fh:
            line = line.strip()
            if line:
                runs.append(json.loads(line))
    return runs


def read_text(path):
    try:
        with open(path, errors="replace") as fh:
            return fh.read()
    except (OSError, TypeError):
        return ""


def last_json_line(text):
    """The last line of the text that starts with "{" and parses as JSON, or None."""
    js = None
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                js = json.loads(line)
            except ValueError:
                pass
    return js


ISOLATION_RE = re.compile(r"^gpuprio: info: isolation(?::| off)")
CONFINED_RE = re.compile(r"\bconfined=(\d+)")


def gpuprio_log(err):
    """What the library said at GPUPRIO_LOG=info about spatial isolation: its isolation lines and the
    ops it issued on twin streams (confined=K, summed); None when it said nothing of either."""
    lines = [l.strip() for l in err.splitlines() if ISOLATION_RE.match(l.strip())]
    counts = [int(m.group(1)) for l in err.splitlines() if l.startswith("gpuprio:")
              for m in [CONFINED_RE.search(l)] if m]
    if not lines and not counts:
        return None
    return {"isolation_lines": lines[:4],
            "green_context": any(l.startswith("gpuprio: info: isolation: device") for l in lines),
            "confined": sum(counts) if counts else None}


def timed_out(rc):
    return rc in (124, 137)


def process_part(out_path, err_path, rc):
    """One process's part of a record: its JSON line (if any), exit code, stderr tail, ok, and why not."""
    part = {"rc": rc}
    out = read_text(out_path)
    if out_path and not out and not os.path.exists(out_path):
        part["error"] = "no stdout: %s missing" % out_path
    err = read_text(err_path)
    js = last_json_line(out)
    part["json"] = js
    part["stderr_tail"] = err[-1500:]
    log = gpuprio_log(err)
    if log:
        part["gpuprio_log"] = log
    part["ok"] = bool(js and js.get("ok")) and rc == 0
    if not part["ok"]:
        if js and js.get("error"):
            part["error"] = js["error"]
        elif timed_out(rc):
            part["error"] = "timed out"
        elif not part.get("error"):
            tail = [l for l in err.splitlines() if l.strip()]
            part["error"] = "rc %s: %s" % (rc, tail[-1] if tail else "no output")
        if timed_out(rc) and "timed out" not in part["error"]:
            part["error"] += " (timed out)"
        part["stdout_tail"] = out[-500:]
    return part


def flat_record(fields, out_path, err_path, rc, skip=None, skip_error=None, stderr_always=False):
    """A one-process run's record: its JSON line's fields at the top level, then the runner's
    fields, rc, ok, and on failure (or always, with stderr_always) the stderr tail."""
    rec = {}
    if not skip:
        rec = dict(last_json_line(read_text(out_path)) or {})
    rec.update(fields)
    rec["rc"] = rc
    err = skip or read_text(err_path)
    rec["ok"] = bool(rec.get("ok")) and rc == 0 and not skip
    log = gpuprio_log(err)
    if log:
        rec["gpuprio_log"] = log
    if stderr_always or not rec["ok"]:
        rec["stderr_tail"] = err[-1500:]
    if not rec["ok"]:
        rec["stdout_tail"] = read_text(out_path)[-500:]
        if skip:
            rec["error"] = skip_error or skip
        elif timed_out(rc):
            rec["error"] = (rec.get("error") or "") + " timed out"
        if not rec.get("error"):
            tail = [l for l in err.splitlines() if l.strip()]
            rec["error"] = "rc %s: %s" % (rc, tail[-1] if tail else "no output")
    return rec


def pair_record(rec, skip, read_part, check, more_errors=None):
    """A run of a high and a low process (or job) as one record: the runner's fields (rec), then the
    part of each role ("high", "low") that ran, read_part(role) (None: it did not run). A part that
    is ok can still fail check(role, js, rec), which returns why (None: it passes); more_errors(rec)
    adds what is wrong with the run as a whole. ok when some part ran and nothing failed; a skipped
    run (skip: why) has no parts."""
    if skip:
        rec.update(ok=False, skipped=True, error=skip)
        return rec
    errors = []
    for role in ("high", "low"):
        part = read_part(role)
        if part is None:
            continue
        if part["ok"]:
            why = check(role, part.get("json") or {}, rec)
            if why:
                part.update(ok=False, error=why)
        if not part["ok"]:
            errors.append("%s: %s" % (role, part.get("error", "failed")))
        rec[role] = part
    if more_errors:
        errors += more_errors(rec)
    rec["ok"] = not errors and ("high" in rec or "low" in rec)
    if errors:
        rec["error"] = "; ".join(errors)
    return rec


def pair_record_args(kind, configs=None, mps=False, more=None):
    """For report_main's record: what adds the arguments of a two-process report's record command:
    more(parser) first when given, --config (one of configs when given), --round, --gpuprio 0|1,
    --mps 0|1 (when mps), --skip WHY, and --ROLE-KIND, --ROLE-err and --ROLE-rc for high and low."""
    def add(r):
        if more:
            more(r)
        r.add_argument("--config", required=True, choices=configs)
        r.add_argument("--round", required=True)
        r.add_argument("--gpuprio", default="0")
        if mps:
            r.add_argument("--mps", default="0")
        r.add_argument("--skip")
        for role in ("high", "low"):
            for suffix in (kind, "err"):
                r.add_argument("--%s-%s" % (role, suffix))
            r.add_argument("--%s-rc" % role, default="-1")
    return add


def js_of(r, role):
    """A two-process record's ROLE part's JSON line ({} when there is none)."""
    return (r.get(role) or {}).get("json") or {}


def figure_bits(rec, fig, figures):
    """For `brief`: "LABEL=VALUE" for each (key, label, spec) of figures whose fig(rec, key) is not None."""
    values = [(label, spec, fig(rec, key)) for key, label, spec in figures]
    return ["%s=%s" % (label, format(v, spec)) for label, spec, v in values if v is not None]


def server_brief(rec, n_label, other):
    """`brief` of a server (the high part) beside another job: "skipped", or the server's n, p50 and
    p99 (after n_label), other (the other job's figure; None: left out), "cut short", and
    "FAILED: ERROR"."""
    if rec.get("skipped"):
        return "skipped"
    h = js_of(rec, "high")
    bits = []
    if rec.get("ok") and h.get("p50_ms") is not None:
        bits.append("%sn=%s p50=%.3f p99=%.3f ms" % (n_label, h.get("requests_done"), h["p50_ms"], h["p99_ms"]))
    if other is not None:
        bits.append(other)
    if h.get("cut_short"):
        bits.append("cut short")
    if not rec.get("ok"):
        bits.append("FAILED: %s" % (rec.get("error") or "")[:200])
    return " ".join(bits)


def report_main(who, describe, brief, build, text, record=None, commands=None):
    """main() of a report script: `record` when record is (a function adding its arguments to the
    parser, make_record(args)), then `brief < RECORD` (one line of figures for the progress log) and
    `report RUNS.jsonl OUT.json OUT.txt` (build(runs) into OUT.json, its text(rep) into OUT.txt);
    commands(sub), when given, adds the script's own subcommands first and returns
    {name: run(args)}. The exit status: a report's is 1 (and one line each on stderr, describe(run)
    saying which) when a native run failed or there were no runs; runs under gpuprio may fail (that
    is a result, recorded in the table)."""
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    own = commands(sub) if commands else {}
    if record:
        record[0](sub.add_parser("record"))
    sub.add_parser("brief")
    rp = sub.add_parser("report")
    rp.add_argument("runs")
    rp.add_argument("out_json")
    rp.add_argument("out_txt")
    a = p.parse_args()
    if a.cmd in own:
        return own[a.cmd](a)
    if a.cmd == "record":
        print(json.dumps(record[1](a)))
        return 0
    if a.cmd == "brief":
        try:
            print(brief(json.loads(sys.stdin.read())))
        except ValueError:
            print("(no record)")
        return 0
    runs = read_jsonl(a.runs)
    rep = build(runs)
    write_report(rep, text(rep), a.out_json, a.out_txt)
    failed = [r for r in runs if not r.get("gpuprio") and not r.get("ok")]
    for r in failed:
        print("%s: native run failed: %s: %s" % (who, describe(r), r.get("error", "")), file=sys.stderr)
    return 1 if failed or not runs else 0


def main():
    """`bench_stats.py record --out F --err F --rc N [--skip WHY] [--skip-error TEXT] [--stderr-always]
    KEY=VALUE...`: the record of a one-process run (flat_record) on stdout, for the shell runners.
    VALUEs are JSON where they parse as JSON (numbers, true/false), strings otherwise."""
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("--out")
    r.add_argument("--err")
    r.add_argument("--rc", type=int, required=True)
    r.add_argument("--skip")
    r.add_argument("--skip-error")
    r.add_argument("--stderr-always", action="store_true")
    r.add_argument("fields", nargs="*")
    a = p.parse_args()
    fields = {}
    for kv in a.fields:
        k, _, v = kv.partition("=")
        try:
            fields[k] = json.loads(v)
        except ValueError:
            fields[k] = v
    print(json.dumps(flat_record(fields, a.out, a.err, a.rc, a.skip, a.skip_error, a.stderr_always)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
