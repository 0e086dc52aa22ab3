"""The per-GPU shared-memory segment's layout as the C++ side defines it
(scheduler/coordinator/segment_layout.h and segment_directory.h): constants, the header's and a
slot's fields (name -> (offset, struct format)) and the names of the directories and files.

The one copy of the layout in the CLI: `top`, `doctor`, `clean-segments` and `exporter` read the
segments through segments.py, which takes every offset from here. It imports nothing from the
package (tests/tools/segment_layout_agreement_test loads this file alone and checks every field's
offset and size, and the constants, against the C++ header).
"""

import re


# The priority range of hook/include/gpuprio.h (segments of `gpuprio top` are checked against it).
PRIORITY_MIN = -100  # GPUPRIO_PRIORITY_MIN
PRIORITY_MAX = 100  # GPUPRIO_PRIORITY_MAX

# The per-GPU shared-memory segment, layout version 2, as scheduler/coordinator/segment_layout.h
# defines it: a SegmentHeader of HEADER_BYTES, then SLOT_COUNT ProcessSlots of SLOT_BYTES each,
# little-endian. The offsets below were measured with offsetof on that header (x86-64); the header
# static_asserts the sizes and ProcessSlot::delay_histogram's offset. Change them together with
# kLayoutVersion there: the version is also part of the directory's name, so a reader of another
# version never reads these offsets from a segment laid out differently.
SHM_DIR = "/dev/shm"  # GPUPRIO_SHM_DIR's default (segment_options.h)
LAYOUT_VERSION = 2  # kLayoutVersion
SEGMENT_MAGIC = b"gpuprioS"  # kSegmentMagic
READY_WORD = 0x52454459  # kReadyWord: the creator has filled in the header
HEADER_BYTES = 4096  # kHeaderBytes
SLOT_BYTES = 4096  # kSlotBytes
SLOT_COUNT = 64  # kSlotCount
SEGMENT_BYTES = HEADER_BYTES + SLOT_COUNT * SLOT_BYTES  # kSegmentBytes
NO_PRIORITY = PRIORITY_MIN - 1  # kNoPriority: no work of any level
DELAY_BUCKETS = 48  # kDelayBuckets
SLOT_FREE, SLOT_CLAIMED, SLOT_LIVE = 0, 1, 2  # SlotState, the low 8 bits of state_word

# name -> (offset, struct format) of the fields top reads; the rest is not looked at.
HEADER_FIELDS = {
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
SLOT_FIELDS = {  # offsets within one ProcessSlot
    "state_word": (0, "<Q"),
    "pid": (8, "<I"),
    "start_time_ticks": (16, "<Q"),
    "pid_namespace": (24, "<Q"),
    "heartbeat": (32, "<Q"),  # a counter its owner bumps at least once a second, not a time
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
    "delay_histogram": (144, f"<{DELAY_BUCKETS}Q"),
    # Written by libraries since the level rows (older ones left these bytes zero).
    "isolation_reserved_sms": (2136, "<i"),
    "isolation_device_sms": (2140, "<i"),
    "confined_in_flight_ops": (2144, "<q"),
    "confined_in_flight_estimated_ns": (2152, "<q"),
    # Level stamps (level_stamp below), written by libraries since the request gap (older ones
    # left these bytes zero): when the process last lowered its active level and from which
    # level; when a level of it last launched work needing the whole GPU (a CUDA graph).
    "last_drop": (2160, "<Q"),
    "last_whole_device": (3832, "<Q"),
}
# How long a level's whole-device work keeps less important work unconfined (the library's
# activity window, SchedulerOptions::ceiling_window_ns).
WHOLE_DEVICE_WINDOW_S = 0.5


def level_stamp(word):
    """(priority, CLOCK_REALTIME seconds) of a level stamp, ((microseconds << 8) | priority -
    PRIORITY_MIN + 1; LevelStampWord), or None for 0 and for a key that is no level."""
    priority = (word & 0xff) + PRIORITY_MIN - 1
    if word == 0 or not PRIORITY_MIN <= priority <= PRIORITY_MAX:
        return None
    return priority, (word >> 8) / 1e6


# A slot's per-level rows (LevelRow): LEVEL_ROWS claimed by the first levels that counted an op,
# then one more (other_levels) for every other level. level_key is 0 while a row is unused, else
# priority - PRIORITY_MIN + 1; other_levels' key means nothing.
LEVEL_ROWS = 3  # kLevelRows
LEVEL_ROWS_OFFSET = 2168  # offsetof(ProcessSlot, level_rows)
LEVEL_ROW_BYTES = 32 + 8 * DELAY_BUCKETS  # sizeof(LevelRow)
LEVEL_ROW_FIELDS = {  # offsets within one LevelRow
    "level_key": (0, "<I"),
    "ops_dispatched": (8, "<Q"),
    "ops_direct": (16, "<Q"),
    "ops_confined": (24, "<Q"),
    "delay_histogram": (32, f"<{DELAY_BUCKETS}Q"),
}
SLOT_GAUGES = ("queued_ops", "queued_estimated_ns", "in_flight_ops", "in_flight_estimated_ns",
               "isolation_reserved_sms", "isolation_device_sms", "confined_in_flight_ops",
               "confined_in_flight_estimated_ns")
SLOT_PRIORITIES = ("default_priority", "active_priority", "max_seen_priority")

# Where the segments are (segment_directory.h): GPUPRIO_SHM_DIR holds one directory per owner,
# gpuprio-v2-u<uid> (the user's, mode 0700) or gpuprio-v2-g<gid> (shared by group gid, 02770, no
# access for others). When something invalid holds that name, the owner's processes use the first
# valid "<that name>.<suffix>" by name instead (the library makes the suffix 16 hex digits, and
# takes any). In a directory, one file per segment: <domain>-<GPU uuid as 32 lowercase hex>.
# [0-9], not \d, which would also take other scripts' digits; ids have no leading zeros.
DIRECTORY_NAME = re.compile(r"gpuprio-v([0-9]{1,9})-([ug])(0|[1-9][0-9]{0,9})(?=[-.]|$)")
SEGMENT_FILE_NAME = re.compile(r"([A-Za-z0-9_.-]{1,64})-([0-9a-f]{32})")
DOMAIN_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
