#!/usr/bin/env python3
"""Writes gpuprio shared-memory segment files for tests of `gpuprio top`; standard library only.

The layout is scheduler/coordinator/segment_layout.h's (layout version 2): a 4096-byte
SegmentHeader, then 64 ProcessSlots of 4096 bytes, little-endian. The offsets are written out
here again rather than taken from tools/cli/gpuprio_cli/segment_layout.py, so a slip in one copy
shows as a test failure instead of agreeing with itself; both were measured with offsetof on that
header.

Where the library keeps them (segment_directory.h): in GPUPRIO_SHM_DIR, a directory per owner,
directory_name() (gpuprio-v2-u<uid>, mode 0700, or gpuprio-v2-g<gid>, 02770), and in it one file
per segment, segment_name() (<domain>-<uuid>). This module writes files only: the caller makes
the directories. Nor does it hold the slots' locks (the owner of slot i holds a write lock on
byte lock_offset(i) of the file, which is what makes the slot live): the caller takes them.

As a module:

    spec = {"uuid": "00112233445566778899aabbccddeeff",
            "slots": [{"index": 0, "pid": os.getpid(), "command": "train",
                       "default_priority": -1, "ops_dispatched": 10,
                       "histogram": {"3": 90, "10": 9}}]}
    directory = os.path.join(shm_dir, directory_name())
    os.mkdir(directory, 0o700)
    write_segment(os.path.join(directory, segment_name(spec["uuid"])), spec)

From the command line (SPEC is the same JSON, or @FILE holding it):

    segment_writer.py PATH SPEC

Spec keys, all optional:
  uuid          32 lowercase hex digits, the GPU's (default all zero)
  header        overrides of SegmentHeader fields: magic (a string), layout_version,
                header_bytes, slot_bytes, slot_count, ready, creator_pid, priority_high_water,
                device_uuid (hex; default: uuid)
  slots         a list of slots, each {"index", ...}: state (default 2, live), generation
                (default 1), pid, start_time_ticks and pid_namespace (default: those of the pid's
                process as /proc shows them here, 0 if it does not exist), heartbeat (the counter,
                default 1), default_priority, active_priority, max_seen_priority, held,
                command (a string, or command_hex for raw bytes), ops_dispatched, ops_direct,
                queued_ops, queued_estimated_ns, in_flight_ops, in_flight_estimated_ns,
                held_ns_total, isolation_reserved_sms, isolation_device_sms,
                confined_in_flight_ops, confined_in_flight_estimated_ns, last_drop and
                last_whole_device (level stamps: (microseconds of CLOCK_REALTIME << 8) | level
                key), histogram ({"bucket":
                count}), levels (a list of {"row": 0..3 (3: other_levels), "level" or a raw
                "level_key", ops_dispatched, ops_direct, ops_confined, histogram}) and raw_fields
                ({"offset": [struct format, value]}) to write anything anywhere in the slot
  random_bytes  a seed: the whole file is random bytes from it (the size of a segment)
  truncate_to   set the file's size to this many bytes after writing it (larger: sparse)
  mode          the file's permission bits as an octal string (default "0600")
"""

import json
import os
import random
import struct
import sys

LAYOUT_VERSION = 2
MAGIC = b"gpuprioS"
READY_WORD = 0x52454459
HEADER_BYTES = 4096
SLOT_BYTES = 4096
SLOT_COUNT = 64
SEGMENT_BYTES = HEADER_BYTES + SLOT_COUNT * SLOT_BYTES
NO_PRIORITY = -101
DELAY_BUCKETS = 48
SLOT_LIVE = 2

# SegmentHeader: name -> (offset, struct format).
HEADER = {
    "magic": (0, "8s"),
    "layout_version": (8, "<I"),
    "header_bytes": (12, "<I"),
    "slot_bytes": (16, "<I"),
    "slot_count": (20, "<I"),
    "device_uuid": (24, "16s"),
    "ready": (40, "<I"),
    "creator_pid": (44, "<I"),
    "priority_high_water": (48, "<i"),
}
# ProcessSlot, offsets within the slot.
SLOT = {
    "state_word": (0, "<Q"),
    "pid": (8, "<I"),
    "start_time_ticks": (16, "<Q"),
    "pid_namespace": (24, "<Q"),
    "heartbeat": (32, "<Q"),
    "default_priority": (40, "<i"),
    "active_priority": (44, "<i"),
    "max_seen_priority": (48, "<i"),
    "held": (52, "<I"),
    "command": (56, "32s"),
    "ops_dispatched": (88, "<Q"),
    "ops_direct": (96, "<Q"),
    "queued_ops": (104, "<q"),
    "queued_estimated_ns": (112, "<q"),
    "in_flight_ops": (120, "<q"),
    "in_flight_estimated_ns": (128, "<q"),
    "held_ns_total": (136, "<Q"),
    "isolation_reserved_sms": (2136, "<i"),
    "isolation_device_sms": (2140, "<i"),
    "confined_in_flight_ops": (2144, "<q"),
    "confined_in_flight_estimated_ns": (2152, "<q"),
    "last_drop": (2160, "<Q"),
    "last_whole_device": (3832, "<Q"),
}
# The slot's per-level rows (LevelRow): LEVEL_ROWS claimed ones, then other_levels.
LEVEL_ROWS = 3
LEVEL_ROWS_OFFSET = 2168
LEVEL_ROW_BYTES = 32 + 8 * DELAY_BUCKETS
LEVEL_ROW = {
    "level_key": (0, "<I"),
    "ops_dispatched": (8, "<Q"),
    "ops_direct": (16, "<Q"),
    "ops_confined": (24, "<Q"),
}
LEVEL_ROW_HISTOGRAM_OFFSET = 32
HISTOGRAM_OFFSET = 144  # ProcessSlot::delay_histogram, DELAY_BUCKETS uint64 counts
LEVEL_LAST_SUBMIT_OFFSET = 528  # ProcessSlot::level_last_submit_unix_ns, 201 int64 (not written)


def directory_name(uid=None, gid=None):
    """gpuprio-v2-u<uid> (this user's by default), or gpuprio-v2-g<gid> for a group's."""
    owner = f"g{gid}" if gid is not None else f"u{os.getuid() if uid is None else uid}"
    return f"gpuprio-v{LAYOUT_VERSION}-{owner}"


def segment_name(uuid_hex, domain="default"):
    """<domain>-<uuid>: a segment's file name in its directory."""
    return f"{domain}-{uuid_hex}"


def lock_offset(index):
    """The byte of the segment file whose write lock slot `index`'s owner holds."""
    return HEADER_BYTES + index * SLOT_BYTES


def process_start_time(pid):
    """Field 22 of /proc/<pid>/stat (clock ticks after boot), or 0 if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read()
    except OSError:
        return 0
    return int(text[text.rfind(b")") + 1:].split()[19])


def own_pid_namespace():
    return os.stat("/proc/self/ns/pid").st_ino


def pack_slot(buffer, spec):
    base = HEADER_BYTES + int(spec["index"]) * SLOT_BYTES
    pid = int(spec.get("pid", 0))
    values = {
        "state_word": (int(spec.get("generation", 1)) << 8) | int(spec.get("state", SLOT_LIVE)),
        "pid": pid,
        "start_time_ticks": spec.get("start_time_ticks", process_start_time(pid)),
        "pid_namespace": spec.get("pid_namespace", own_pid_namespace()),
        "heartbeat": spec.get("heartbeat", 1),
        "default_priority": spec.get("default_priority", 0),
        "active_priority": spec.get("active_priority", NO_PRIORITY),
        "max_seen_priority": spec.get("max_seen_priority", NO_PRIORITY),
        "command": (bytes.fromhex(spec["command_hex"]) if "command_hex" in spec
                    else spec.get("command", "").encode()),
    }
    for name in SLOT:
        if name not in values:
            values[name] = spec.get(name, 0)
    for name, (offset, fmt) in SLOT.items():
        struct.pack_into(fmt, buffer, base + offset, values[name])
    for bucket, count in spec.get("histogram", {}).items():
        bucket = int(bucket)
        assert 0 <= bucket < DELAY_BUCKETS, bucket
        struct.pack_into("<Q", buffer, base + HISTOGRAM_OFFSET + 8 * bucket, int(count))
    for row in spec.get("levels", []):
        pack_level_row(buffer, base, row)
    for offset, (fmt, value) in spec.get("raw_fields", {}).items():
        struct.pack_into(fmt, buffer, base + int(offset), value)


def pack_level_row(buffer, slot_base, spec):
    """Row spec["row"] (0..LEVEL_ROWS; LEVEL_ROWS is other_levels) of the slot at slot_base."""
    index = int(spec["row"])
    assert 0 <= index <= LEVEL_ROWS, index
    base = slot_base + LEVEL_ROWS_OFFSET + index * LEVEL_ROW_BYTES
    values = {"level_key": spec.get("level_key", int(spec.get("level", -101)) + 101)}
    for name, (offset, fmt) in LEVEL_ROW.items():
        struct.pack_into(fmt, buffer, base + offset, values.get(name, spec.get(name, 0)))
    for bucket, count in spec.get("histogram", {}).items():
        bucket = int(bucket)
        assert 0 <= bucket < DELAY_BUCKETS, bucket
        struct.pack_into("<Q", buffer, base + LEVEL_ROW_HISTOGRAM_OFFSET + 8 * bucket, int(count))


def segment_bytes(spec):
    """The file's content for `spec` (see the module's doc)."""
    if "random_bytes" in spec:
        return random.Random(spec["random_bytes"]).randbytes(SEGMENT_BYTES)
    buffer = bytearray(SEGMENT_BYTES)
    uuid_hex = spec.get("uuid", "0" * 32)
    header = {
        "magic": MAGIC,
        "layout_version": LAYOUT_VERSION,
        "header_bytes": HEADER_BYTES,
        "slot_bytes": SLOT_BYTES,
        "slot_count": SLOT_COUNT,
        "device_uuid": bytes.fromhex(uuid_hex),
        "ready": READY_WORD,
        "creator_pid": os.getpid(),
        "priority_high_water": NO_PRIORITY,
    }
    for name, value in spec.get("header", {}).items():
        if name == "magic":
            value = value.encode()
        elif name == "device_uuid":
            value = bytes.fromhex(value)
        header[name] = value
    for name, (offset, fmt) in HEADER.items():
        struct.pack_into(fmt, buffer, offset, header[name])
    for slot in spec.get("slots", []):
        pack_slot(buffer, slot)
    return bytes(buffer)


def write_segment(path, spec):
    """Writes the segment at `path`: into a temporary file renamed onto it, so a reader never
    sees it half written."""
    data = segment_bytes(spec)
    directory, name = os.path.split(path)
    # "~" is in no segment name: a reader never takes the temporary file for a segment.
    temporary = os.path.join(directory, f"{name}~{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if "truncate_to" in spec:
            os.ftruncate(fd, int(spec["truncate_to"]))
        os.fchmod(fd, int(spec.get("mode", "0600"), 8))
    finally:
        os.close(fd)
    os.rename(temporary, path)


def main(argv):
    if len(argv) != 2:
        print("usage: segment_writer.py PATH SPEC_JSON|@FILE", file=sys.stderr)
        return 2
    path, text = argv
    if text.startswith("@"):
        with open(text[1:], encoding="utf-8") as f:
            text = f.read()
    write_segment(path, json.loads(text))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
