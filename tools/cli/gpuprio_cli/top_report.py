"""What `gpuprio top` makes of two samples of the segments: per process its rates, queues,
delay percentiles (from the slot's delay histogram) and heartbeat, per GPU the processes sorted
live first.
"""

import math
import time

from .segment_layout import DELAY_BUCKETS, NO_PRIORITY
from .segments import (format_gpu_uuid, liveness, pid_namespace_inode, priority_or_none,
                       whole_device_priority)


PRIORITY_NAME_OF = {-1: "low", 0: "normal", 1: "high"}  # hook/config.cc ParsePriority


def bucket_upper_us(bucket):
    """The smallest whole number of microseconds that no delay in `bucket` reaches; None for
    the last bucket, which has no upper bound.

    DelayBucket (segment_layout.h) buckets whole microseconds (the delay's ns / 1000, rounded
    down): bucket 0 holds delays under 1 us, bucket b >= 1 the whole values in
    [2^((b-1)/2), 2^(b/2)), whose smallest whole upper bound is ceil(2^(b/2)), i.e. for odd
    b = 2k+1 ceil(2^k * sqrt(2)) = isqrt(2 * 4^k - 1) + 1 (2 * 4^k is no square).
    """
    if bucket >= DELAY_BUCKETS - 1:
        return None
    if bucket == 0:
        return 1
    if bucket % 2 == 0:
        return 2 ** (bucket // 2)
    k = (bucket - 1) // 2
    return math.isqrt(2 * 4**k - 1) + 1


def histogram_percentile(counts, p):
    """(bucket, us) of the nearest-rank p-th percentile of a histogram: us is the bucket's upper
    bound (the last bucket reports its lower bound); None when it counts nothing."""
    total = sum(counts)
    if total == 0:
        return None
    rank = max(1, -(-p * total // 100))  # ceil(p% of total), exactly
    seen = 0
    for bucket, count in enumerate(counts):
        seen += count
        if seen >= rank:
            upper = bucket_upper_us(bucket)
            return bucket, upper if upper is not None else bucket_upper_us(bucket - 1)
    return None  # not reached: seen ends at total >= rank


def process_entry(slot, before, elapsed_ns, own_namespace, heartbeat_unchanged_ns):
    """One process's row (the --json object); before is the same slot in the previous sample
    (same claim, same process) or None."""
    ops_total = slot["ops_dispatched"] + slot["ops_direct"]
    ops_per_s = delay = None
    if before is not None and elapsed_ns:
        ops_delta = ops_total - before["ops_dispatched"] - before["ops_direct"]
        if ops_delta >= 0:  # counters only grow; anything else is not this process's history
            ops_per_s = round(ops_delta * 1e9 / elapsed_ns, 3)
        deltas = [new - old for new, old in zip(slot["delay_histogram"],
                                                before["delay_histogram"])]
        if min(deltas) >= 0:
            delay = deltas
    delay_ops = sum(delay) if delay is not None else None
    p50 = histogram_percentile(delay, 50) if delay else None
    p99 = histogram_percentile(delay, 99) if delay else None
    alive, detail = liveness(slot, own_namespace)
    priority = priority_or_none(slot["default_priority"])
    return {
        "slot": slot["index"],
        "pid": slot["pid"],
        "command": slot["command"],
        "priority": priority,
        "priority_name": PRIORITY_NAME_OF.get(priority),
        "active_priority": priority_or_none(slot["active_priority"]),
        "max_seen_priority": priority_or_none(slot["max_seen_priority"]),
        "ops_dispatched": slot["ops_dispatched"],
        "ops_direct": slot["ops_direct"],
        "ops_total": ops_total,
        "ops_per_s": ops_per_s,
        "queued_ops": slot["queued_ops"],
        "queued_estimated_us": slot["queued_estimated_ns"] // 1000,
        "in_flight_ops": slot["in_flight_ops"],
        "in_flight_estimated_us": slot["in_flight_estimated_ns"] // 1000,
        "delay_ops": delay_ops,
        "delay_p50_us": p50[1] if p50 else None,
        "delay_p50_bucket": p50[0] if p50 else None,
        "delay_p99_us": p99[1] if p99 else None,
        "delay_p99_bucket": p99[0] if p99 else None,
        "held": slot["held"] == 1,
        "held_ns_total": slot["held_ns_total"],
        "whole_device_priority": whole_device_priority(slot, time.time()),
        "heartbeat": slot["heartbeat"],
        "heartbeat_unchanged_s": (round(heartbeat_unchanged_ns / 1e9, 3)
                                  if heartbeat_unchanged_ns is not None else None),
        "liveness": alive,
        "liveness_detail": detail,
    }


def same_process(a, b):
    """Two samples of a slot hold the same claim by the same process."""
    return all(a[key] == b[key] for key in ("state_word", "pid", "start_time_ticks",
                                            "pid_namespace"))


def track_heartbeat(slot, old, now_ns):
    """How long (ns) top has seen the slot's heartbeat counter keep its value, on top's own
    clock: since the first sample that showed the value, so 0 when it changed since the previous
    sample; None without an earlier sample of the same claim. The counter says nothing by its
    value (a garbage one included), only by whether it moves. Carries the time the value was
    first seen into `slot` (take_sample set it to the sample's time), for the next sample."""
    if old is None:
        return None
    if old["heartbeat"] == slot["heartbeat"]:
        slot["heartbeat_since_ns"] = old["heartbeat_since_ns"]
    return now_ns - slot["heartbeat_since_ns"]


def top_report(before, now):
    """What one refresh shows, as the --json object: `now` against the sample `before` it (None
    for the first one: no rates, no percentiles, no heartbeat ages). Each report carries
    into `now` since when every heartbeat has kept its value: make them in sample order."""
    elapsed_ns = now["time_ns"] - before["time_ns"] if before is not None else None
    own_namespace = pid_namespace_inode()
    gpus = []
    for key, segment in sorted(now["segments"].items(),
                               key=lambda item: (item[1]["uuid"], item[1]["domain"],
                                                 item[1]["scope"] != "u", item[1]["owner"],
                                                 item[0])):
        earlier = before["segments"].get(key) if before is not None else None
        earlier_slots = {s["index"]: s for s in earlier["slots"]} if earlier else {}
        processes = []
        for slot in segment["slots"]:
            old = earlier_slots.get(slot["index"])
            if old is not None and not same_process(old, slot):
                old = None
            unchanged_ns = track_heartbeat(slot, old, now["time_ns"])
            processes.append(process_entry(slot, old, elapsed_ns, own_namespace, unchanged_ns))
        # The running processes by priority, then the slots nobody owns.
        processes.sort(key=lambda p: (p["liveness"] == "dead",
                                      -(NO_PRIORITY if p["priority"] is None else p["priority"]),
                                      p["pid"], p["slot"]))
        gpus.append({
            "uuid": format_gpu_uuid(bytes.fromhex(segment["uuid"])),
            "segment": segment["path"],
            "directory": segment["directory"],
            "alternate_directory": segment["alternate"] is not None,
            "domain": segment["domain"],
            "shared_with": "group" if segment["scope"] == "g" else "user",
            "owner_id": segment["owner"],
            "creator_pid": segment["creator_pid"],
            "priority_high_water": priority_or_none(segment["priority_high_water"]),
            "processes": processes,
            "skipped_slots": [{"slot": index, "why": why}
                              for index, why in segment["skipped_slots"]],
        })
    return {
        "gpus": gpus,
        "ignored": [{"path": path, "why": why} for path, why in now["ignored"]],
        "interval_s": round(elapsed_ns / 1e9, 6) if elapsed_ns is not None else None,
    }
