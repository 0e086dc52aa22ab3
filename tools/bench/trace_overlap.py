#!/usr/bin/env python3
"""Where a server's requests lose time to a batch job on the same GPU, from two gpuprio traces.

  trace_overlap.py TRACE [TRACE] [--idle-ms 5] [--min-busy-ms 1] [--json OUT]

TRACE: the GPUPRIO_TRACE files (JSON, or .gz) of the two processes, in any order: the server is
the one whose GPU work carries the higher priority. With one file, the server's requests alone
(their GPU spans and busy time, to compare with a run beside the batch job). Times are put on one clock with each file's
baseTimeNanoseconds (CUPTI's clock, shared by the processes of one machine).

The server's GPU work is cut into requests at idle gaps longer than --idle-ms. For each request it
reports the batch job's GPU work that overlapped it, split by cause:
  carried in  batch work already running when the request's first kernel started: nothing can stop
              it, only keep it short;
  admitted    batch work that started while the request ran: the scheduler let it in (a hold
              bound, a gap longer than the request gap, or work not held).
and the requests' GPU spans with and without each, so the cost of each cause is shown, not guessed.
Inside requests, the server's steps (runs of its kernels with no idle gap over --step-gap-us): each
step's GPU span against its kernels' summed time, and the idle GPU time before it, where the host
had not launched it yet: a slower step is GPU-side, a longer idle time host-side.
"""

import argparse
import gzip
import json
import statistics
import sys

GPU_PID_BASE = 1000000


def load_gpu_slices(path):
    """[(start_ns, end_ns, priority)] of the file's GPU slices, on the shared clock."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        trace = json.load(f)
    base = int(trace.get("baseTimeNanoseconds", 0))
    slices = []
    for event in trace.get("traceEvents", []):
        if event.get("ph") != "X" or not isinstance(event.get("pid"), int):
            continue
        if event["pid"] < GPU_PID_BASE:
            continue
        start = base + round(float(event["ts"]) * 1000)
        end = start + round(float(event.get("dur", 0)) * 1000)
        priority = (event.get("args") or {}).get("priority")
        slices.append((start, end, priority if isinstance(priority, int) else None))
    slices.sort()
    return slices


def top_priority(slices):
    known = [p for _, _, p in slices if p is not None]
    return max(known) if known else None


def requests_of(slices, idle_ns):
    """[(start, end, busy_ns, intervals)]: runs of GPU work separated by more than idle_ns of idle
    GPU; busy_ns sums the slices' lengths; intervals is the union of the slices, sorted."""
    requests = []
    for start, end, _ in slices:
        if requests and start - requests[-1][1] <= idle_ns:
            s, e, busy, intervals = requests[-1]
            if intervals and start <= intervals[-1][1]:
                intervals[-1] = (intervals[-1][0], max(intervals[-1][1], end))
            else:
                intervals.append((start, end))
            requests[-1] = (s, max(e, end), busy + (end - start), intervals)
        else:
            requests.append((start, end, end - start, [(start, end)]))
    return requests


def overlap_with(intervals, b_start, b_end):
    """How long [b_start, b_end) overlaps the sorted, disjoint intervals."""
    total = 0
    for start, end in intervals:
        if start >= b_end:
            break
        total += overlap(start, end, b_start, b_end)
    return total


def steps_of(slices, gap_ns):
    """The server's steps (a graph replay, a burst of eager kernels): runs of its GPU work with no
    idle gap over gap_ns. [(span_ns, busy_ns, idle_before_ns)]: the step's first kernel start to
    last end, its kernels' summed time, and the idle GPU time since the step before (None first).
    A step's span above its busy time is GPU time between its own kernels; the idle time before
    it is where the host had not yet launched it."""
    steps = []
    start = end = busy = None
    previous_end = None
    for s, e, _ in slices:
        if start is not None and s - end <= gap_ns:
            end = max(end, e)
            busy += e - s
            continue
        if start is not None:
            steps.append((end - start, busy, None if previous_end is None else start - previous_end))
            previous_end = end
        start, end, busy = s, e, e - s
    if start is not None:
        steps.append((end - start, busy, None if previous_end is None else start - previous_end))
    return steps


def overlap(a_start, a_end, b_start, b_end):
    return max(0, min(a_end, b_end) - max(a_start, b_start))


def analyse(server, batch, idle_ns):
    requests = requests_of(server, idle_ns)
    rows = []
    j = 0
    for start, end, busy, intervals in requests:
        # Batch slices are sorted by start: those at the front that ended before this request
        # ended before every later one too.
        while j < len(batch) and batch[j][1] <= start:
            j += 1
        carried = admitted = 0
        carried_ops = admitted_ops = 0
        contended = 0  # batch work running at the same time as the server's own kernels
        longest_carried = 0
        for b_start, b_end, _ in batch[j:]:
            if b_start >= end:
                break
            o = overlap(start, end, b_start, b_end)
            if o == 0:
                continue
            contended += overlap_with(intervals, b_start, b_end)
            if b_start < start:
                carried += o
                carried_ops += 1
                longest_carried = max(longest_carried, b_end - start)
            else:
                admitted += o
                admitted_ops += 1
        rows.append({"span_ns": end - start, "busy_ns": busy, "carried_ns": carried,
                     "carried_ops": carried_ops, "carried_tail_ns": longest_carried,
                     "admitted_ns": admitted, "admitted_ops": admitted_ops,
                     "contended_ns": contended})
    return rows


def pct(values, q):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def summarise(rows):
    def ms(v):
        return v / 1e6

    n = len(rows)
    clean = [r for r in rows if r["carried_ns"] == 0 and r["admitted_ns"] == 0]
    carried = [r for r in rows if r["carried_ns"] > 0 and r["admitted_ns"] == 0]
    admitted = [r for r in rows if r["admitted_ns"] > 0]

    def group(name, group_rows):
        spans = [ms(r["span_ns"]) for r in group_rows]
        return {"group": name, "requests": len(group_rows),
                "span_p50_ms": pct(spans, 0.5), "span_p90_ms": pct(spans, 0.9),
                "busy_p50_ms": pct([ms(r["busy_ns"]) for r in group_rows], 0.5)}

    return {
        "requests": n,
        "with_carried_in": sum(1 for r in rows if r["carried_ns"] > 0),
        "with_admitted": len(admitted),
        "carried_in_ms_p50_p90_max": [pct([ms(r["carried_ns"]) for r in rows if r["carried_ns"]], q)
                                      for q in (0.5, 0.9, 1.0)],
        "carried_tail_ms_p50_p90_max": [
            pct([ms(r["carried_tail_ns"]) for r in rows if r["carried_ns"]], q)
            for q in (0.5, 0.9, 1.0)],
        "admitted_ms_p50_p90_max": [pct([ms(r["admitted_ns"]) for r in admitted], q)
                                    for q in (0.5, 0.9, 1.0)],
        "contended_ms_p50_p90_max": [pct([ms(r["contended_ns"]) for r in rows], q)
                                     for q in (0.5, 0.9, 1.0)],
        "busy_ms_p50_p90": [pct([ms(r["busy_ns"]) for r in rows], q) for q in (0.5, 0.9)],
        "admitted_ops_p50_max": [pct([r["admitted_ops"] for r in admitted], q) for q in (0.5, 1.0)],
        "groups": [group("no batch work", clean), group("carried in only", carried),
                   group("batch work admitted", admitted)],
    }


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("traces", nargs="+")
    parser.add_argument("--idle-ms", type=float, default=5.0,
                        help="server GPU idle that ends a request (default 5)")
    parser.add_argument("--min-busy-ms", type=float, default=1.0,
                        help="runs of server GPU work shorter than this are no request (default 1)")
    parser.add_argument("--step-gap-us", type=float, default=20.0,
                        help="server GPU idle that ends a step (a graph replay, a burst of "
                        "kernels) inside a request (default 20)")
    parser.add_argument("--skip", type=int, default=3,
                        help="requests dropped at the start (warm-up; default 3)")
    parser.add_argument("--json", help="also write the summary and the per-request rows here")
    args = parser.parse_args(argv)
    if len(args.traces) > 2:
        parser.error("one or two traces")
    loaded = [(path, load_gpu_slices(path)) for path in args.traces]
    loaded.sort(key=lambda item: (top_priority(item[1]) is None, -(top_priority(item[1]) or 0)))
    server_path, server = loaded[0]
    batch_path, batch = loaded[1] if len(loaded) > 1 else ("none", [])
    if batch and top_priority(server) == top_priority(batch):
        print("trace_overlap: both traces' GPU work has the same top priority; "
              "cannot tell the server from the batch job", file=sys.stderr)
        return 2
    rows = [r for r in analyse(server, batch, int(args.idle_ms * 1e6))
            if r["busy_ns"] >= args.min_busy_ms * 1e6][args.skip:]
    # The last request may be cut by the end of the trace.
    rows = rows[:-1] if len(rows) > 1 else rows
    summary = summarise(rows)
    summary.update({"server_trace": server_path, "batch_trace": batch_path,
                    "server_priority": top_priority(server), "batch_priority": top_priority(batch),
                    "idle_ms": args.idle_ms})
    print(f"server {server_path} (priority {summary['server_priority']}), batch {batch_path} "
          f"(priority {summary['batch_priority']}); requests cut at {args.idle_ms} ms of idle GPU")
    print(f"requests {summary['requests']}: with batch work carried in {summary['with_carried_in']}, "
          f"with batch work admitted during them {summary['with_admitted']}")
    print("carried-in overlap ms p50/p90/max: %.3f / %.3f / %.3f" %
          tuple(summary["carried_in_ms_p50_p90_max"]))
    print("carried-in kernel's remaining time at request start ms p50/p90/max: %.3f / %.3f / %.3f"
          % tuple(summary["carried_tail_ms_p50_p90_max"]))
    print("admitted overlap ms p50/p90/max: %.3f / %.3f / %.3f" %
          tuple(summary["admitted_ms_p50_p90_max"]))
    print("batch work beside the server's own kernels per request ms p50/p90/max: "
          "%.3f / %.3f / %.3f" % tuple(summary["contended_ms_p50_p90_max"]))
    print("server GPU busy (sum of its kernels) per request ms p50/p90: %.3f / %.3f" %
          tuple(summary["busy_ms_p50_p90"]))
    for g in summary["groups"]:
        print(f"  {g['group']:<22} {g['requests']:>5} requests  GPU span p50 {g['span_p50_ms']:.3f} ms"
              f"  p90 {g['span_p90_ms']:.3f} ms  GPU busy p50 {g['busy_p50_ms']:.3f} ms")
    steps = steps_of(server, int(args.step_gap_us * 1000))
    inside = [st for st in steps if st[2] is not None and st[2] <= args.idle_ms * 1e6]
    summary["steps"] = {
        "count": len(inside), "step_gap_us": args.step_gap_us,
        "span_us_p50_p90": [pct([st[0] / 1e3 for st in inside], q) for q in (0.5, 0.9)],
        "busy_us_p50_p90": [pct([st[1] / 1e3 for st in inside], q) for q in (0.5, 0.9)],
        "idle_before_us_p50_p90": [pct([st[2] / 1e3 for st in inside], q) for q in (0.5, 0.9)],
    }
    st = summary["steps"]
    print("server steps inside requests (cut at %.0f us of idle GPU): %d; GPU span us p50/p90 "
          "%.1f / %.1f, its kernels' time %.1f / %.1f; idle GPU before each (the host's share) "
          "%.1f / %.1f" % (args.step_gap_us, st["count"], *st["span_us_p50_p90"], *st["busy_us_p50_p90"],
                           *st["idle_before_us_p50_p90"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": summary, "requests": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
