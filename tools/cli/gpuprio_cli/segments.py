"""Reading the per-GPU shared-memory segments (read only: never mapped, written or locked):
finding the segment directories of this user and its groups, checking and parsing a segment file
at the offsets of segment_layout.py, asking whether a slot's owner still holds its lock, and a
slot's liveness as /proc sees its process. Used by `top`, `doctor`, `clean-segments` and
`exporter`.
"""

import errno
import fcntl
import os
import stat
import struct
import time

from .segment_layout import (
    DIRECTORY_NAME, HEADER_BYTES, HEADER_FIELDS, LAYOUT_VERSION, LEVEL_ROW_BYTES, LEVEL_ROW_FIELDS,
    LEVEL_ROWS, LEVEL_ROWS_OFFSET, NO_PRIORITY, PRIORITY_MAX,
    PRIORITY_MIN, READY_WORD, SEGMENT_BYTES, SEGMENT_FILE_NAME, SEGMENT_MAGIC, SHM_DIR, SLOT_BYTES,
    SLOT_CLAIMED, SLOT_COUNT, SLOT_FIELDS, SLOT_FREE, SLOT_GAUGES, SLOT_LIVE, SLOT_PRIORITIES,
    WHOLE_DEVICE_WINDOW_S, level_stamp)
from .util import UsageError, ascii_text


PID_MAX = 2**31 - 1  # pid_t

# Liveness is not in the segment: the owner of slot i holds an open-file-description write lock
# on the byte at HEADER_BYTES + i * SLOT_BYTES of the file (SlotLockOffset), which the kernel drops
# when the process exits, dies or execs. F_OFD_GETLK asks whether anyone holds it without taking
# a lock, and works on top's read-only descriptor. Python's fcntl has the name from 3.9 on; 36 is
# its value on every Linux architecture.
F_OFD_GETLK = getattr(fcntl, "F_OFD_GETLK", 36)
# struct flock on 64-bit Linux (x86-64, aarch64; checked with offsetof): short l_type, short
# l_whence, 4 bytes of padding, off_t l_start, off_t l_len, pid_t l_pid, 4 bytes of padding.
FLOCK = struct.Struct("@hhqqi4x")


class BadSegment(Exception):
    """A segment (or directory) top cannot show: reported as one "ignored" line, never a
    traceback."""

    def __init__(self, why):
        super().__init__(why)
        self.why = why


def command_text(raw):
    """ProcessSlot::command (NUL-padded bytes, untrusted) as printable ASCII, \\xNN escapes
    for the other bytes."""
    raw = raw.split(b"\0", 1)[0]
    return "".join(chr(b) if 0x20 <= b <= 0x7e else f"\\x{b:02x}" for b in raw)


def format_gpu_uuid(raw):
    """The 16 bytes of a CUDA UUID as nvidia-smi prints them: GPU-xxxxxxxx-xxxx-xxxx-xxxx-x*12."""
    h = raw.hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def priority_or_none(value):
    return None if value == NO_PRIORITY else value


def whole_device_priority(slot, now_s):
    """The slot's level that launched work needing the whole GPU (a CUDA graph) within the
    library's window before now_s (CLOCK_REALTIME seconds), or None: less important work on the
    GPU is then held rather than confined (docs/isolation.md). A stamp more than a second ahead
    of now_s is garbage, as the library takes it."""
    stamp = level_stamp(slot["last_whole_device"])
    if stamp is None or not -1.0 <= now_s - stamp[1] <= WHOLE_DEVICE_WINDOW_S:
        return None
    return stamp[0]


def unpack_fields(data, base, fields):
    values = {}
    for name, (offset, fmt) in fields.items():
        unpacked = struct.unpack_from(fmt, data, base + offset)
        values[name] = unpacked[0] if len(unpacked) == 1 else list(unpacked)
    return values


def check_priority(where, value):
    if not (PRIORITY_MIN <= value <= PRIORITY_MAX or value == NO_PRIORITY):
        raise BadSegment(f"{where} is {value}, not a priority in [{PRIORITY_MIN}, {PRIORITY_MAX}] "
                         f"or {NO_PRIORITY} (none)")


def parse_slot(data, base, index):
    """The live slot at data[base:base + SLOT_BYTES] as a dict, None for a free or claimed one
    (being filled in: readers skip it); BadSegment names a value out of its bounds."""
    state_word = struct.unpack_from("<Q", data, base)[0]
    state = state_word & 0xff
    if state in (SLOT_FREE, SLOT_CLAIMED):
        return None
    where = f"slot {index}"
    if state != SLOT_LIVE:
        raise BadSegment(f"{where}: state {state} is not free (0), claimed (1) or live (2)")
    slot = unpack_fields(data, base, SLOT_FIELDS)
    if not 1 <= slot["pid"] <= PID_MAX:
        raise BadSegment(f"{where}: pid {slot['pid']} is not in [1, {PID_MAX}]")
    for name in SLOT_PRIORITIES:
        check_priority(f"{where}: {name}", slot[name])
    if slot["held"] not in (0, 1):
        raise BadSegment(f"{where}: held is {slot['held']}, not 0 or 1")
    for name in SLOT_GAUGES:
        if slot[name] < 0:
            raise BadSegment(f"{where}: {name} is {slot[name]}, which cannot be negative")
    slot["index"] = index
    slot["command"] = command_text(slot["command"])
    slot["levels"] = parse_level_rows(data, base, where)
    return slot


def parse_level_rows(data, base, where):
    """The slot's per-level rows in use, as (level, row) pairs: level an int for a claimed row,
    "other" for the shared row (listed only once it counted something)."""
    rows, seen = [], set()
    for i in range(LEVEL_ROWS + 1):
        row = unpack_fields(data, base + LEVEL_ROWS_OFFSET + i * LEVEL_ROW_BYTES,
                            LEVEL_ROW_FIELDS)
        if i == LEVEL_ROWS:
            if row["ops_dispatched"] or row["ops_direct"]:
                rows.append(("other", row))
            continue
        key = row["level_key"]
        if key == 0:
            continue
        level = key - 1 + PRIORITY_MIN
        if not PRIORITY_MIN <= level <= PRIORITY_MAX:
            raise BadSegment(f"{where}: level row {i} has key {key}, not a level in "
                             f"[{PRIORITY_MIN}, {PRIORITY_MAX}]")
        if level in seen:
            raise BadSegment(f"{where}: level {level} has two rows")
        seen.add(level)
        rows.append((level, row))
    return rows


def slot_lock_held(fd, index):
    """Whether some process holds slot `index`'s lock (its owner runs): True or False, None when
    the kernel cannot say. Only asks: F_OFD_GETLK takes no lock."""
    query = FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, HEADER_BYTES + index * SLOT_BYTES, 1, 0)
    try:
        answer = fcntl.fcntl(fd, F_OFD_GETLK, query)
    except OSError:
        return None
    return FLOCK.unpack(answer)[0] != fcntl.F_UNLCK


def read_at(fd, size, offset):
    """Up to size bytes from offset (fewer only at the end of the file)."""
    chunks = []
    while size > 0:
        chunk = os.pread(fd, size, offset)
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def read_segment(dir_fd, file_name, owner):
    """One segment file in the directory dir_fd, checked: {"header" fields, "slots": [live-state
    slots, each with "lock_held"], "skipped_slots": [(index, why)]}. Only reads: the file is
    opened read-only and never mapped. owner is the directory's ("u" or "g", id). BadSegment
    says why it cannot be shown."""
    fd = open_segment(dir_fd, file_name)
    try:
        check_segment_file(fd, owner)
        try:
            data = read_at(fd, SEGMENT_BYTES, 0)
        except OSError as e:
            raise BadSegment(f"cannot read it: {e.strerror}")
        if len(data) != SEGMENT_BYTES:
            raise BadSegment(f"shrank to {len(data)} bytes while being read")
        header = parse_header(data, file_name)
        header["slots"], header["skipped_slots"] = read_slots(fd, data)
        return header
    finally:
        os.close(fd)


def open_segment(dir_fd, file_name):
    """A read-only descriptor of the file; Vanished if it is gone, BadSegment if it cannot be
    opened or is a symbolic link."""
    try:
        # O_NONBLOCK: a FIFO by that name must not hang top; O_NOFOLLOW: a link is not a segment.
        return os.open(file_name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                       dir_fd=dir_fd)
    except OSError as e:
        if e.errno == errno.ENOENT:
            raise Vanished()
        if e.errno == errno.ELOOP:
            raise BadSegment("is a symbolic link, not a segment")
        raise BadSegment(f"cannot open it: {e.strerror}")


def check_segment_file(fd, owner):
    """BadSegment unless the open file is a regular one, owned and protected as its directory
    (owner: ("u" or "g", id)) calls for, of exactly SEGMENT_BYTES; nothing of it is read."""
    try:
        info = os.fstat(fd)
    except OSError as e:
        raise BadSegment(f"cannot read it: {e.strerror}")
    if not stat.S_ISREG(info.st_mode):
        raise BadSegment("is not a regular file")
    # A segment is only as trustworthy as whoever could write it. The same checks as the
    # library's (device_segment.cc CheckSegmentFile), which refuses such a file.
    scope, owner_id = owner
    mode = stat.S_IMODE(info.st_mode)
    if scope == "u":
        if info.st_uid != owner_id:
            raise BadSegment(f"belongs to uid {info.st_uid}, not to its directory's owner "
                             f"(uid {owner_id})")
        if mode & 0o077:
            raise BadSegment(f"has mode {mode:04o}, not 0600: others could write it")
    else:
        if info.st_gid != owner_id:
            raise BadSegment(f"belongs to gid {info.st_gid}, not to its directory's group "
                             f"(gid {owner_id})")
        if (mode & 0o007) or (mode & 0o060) != 0o060:
            raise BadSegment(f"has mode {mode:04o}, not 0660")
    # The size before anything is read, in the library's order (device_segment.cc): a
    # creator sizes the file first, so an empty one may be still being set up; any other
    # size (a sparse terabyte, for one) is wrong whatever its first bytes hold.
    if info.st_size == 0:
        raise BadSegment("is empty: its creator has not set it up yet (or died before it did)")
    if info.st_size != SEGMENT_BYTES:
        raise BadSegment(f"is {info.st_size} bytes, not {SEGMENT_BYTES} ({HEADER_BYTES}-byte "
                         f"header and {SLOT_COUNT} slots of {SLOT_BYTES} bytes): truncated "
                         f"or not a segment")


def parse_header(data, file_name):
    """The header fields of the segment's bytes, checked (BadSegment): magic, layout, sizes,
    ready word, the GPU its name gives, the priority high-water mark."""
    # The creator fills in the header, magic first and the ready word last.
    if data[:8] == bytes(8):
        raise BadSegment("is not ready: its creator has not filled in the header yet (or "
                         "died doing so)")
    if data[:8] != SEGMENT_MAGIC:
        raise BadSegment(f"its magic {ascii_text(repr(data[:8]))} is not "
                         f"{ascii_text(repr(SEGMENT_MAGIC))}: not a gpuprio segment")
    header = unpack_fields(data, 0, HEADER_FIELDS)
    if header["layout_version"] != LAYOUT_VERSION:
        raise BadSegment(f"layout version {header['layout_version']}; this gpuprio reads "
                         f"version {LAYOUT_VERSION}")
    for key, expected in (("header_bytes", HEADER_BYTES), ("slot_bytes", SLOT_BYTES),
                          ("slot_count", SLOT_COUNT)):
        if header[key] != expected:
            raise BadSegment(f"its {key} is {header[key]}, not {expected}")
    if header["ready"] != READY_WORD:
        raise BadSegment("is not ready: its creator has not finished filling in the header "
                         "(or died doing so)")
    uuid_hex = SEGMENT_FILE_NAME.fullmatch(file_name)[2]
    if header["device_uuid"].hex() != uuid_hex:
        raise BadSegment(f"holds {format_gpu_uuid(header['device_uuid'])}, but its name says "
                         f"{format_gpu_uuid(bytes.fromhex(uuid_hex))}")
    check_priority("priority_high_water", header["priority_high_water"])
    return header


def read_slots(fd, data):
    """(slots in a live state, each with "lock_held"; [(index, why)] of the slots no process
    owns whose values are out of bounds) of the segment's bytes; a bad slot is read once more
    from fd. BadSegment when a slot whose owner runs is bad twice."""
    slots, skipped = [], []
    for index in range(SLOT_COUNT):
        base = HEADER_BYTES + index * SLOT_BYTES
        try:
            slot = parse_slot(data, base, index)
        except BadSegment:
            # Its owner may have been claiming or freeing it while we read: a torn copy of a
            # slot in motion is no damage. Read it once more; wrong twice is wrong.
            try:
                again = read_at(fd, SLOT_BYTES, base)
            except OSError as e:
                raise BadSegment(f"cannot read it: {e.strerror}")
            if len(again) != SLOT_BYTES:
                raise BadSegment("shrank while being read")
            try:
                slot = parse_slot(again, 0, index)
            except BadSegment as bad:
                # Garbage that no process owns is no process (the library frees such a
                # slot); garbage in a slot whose owner runs makes the whole segment suspect.
                if slot_lock_held(fd, index) is False:
                    skipped.append((index, bad.why.removeprefix(f"slot {index}: ")))
                    continue
                raise
        if slot is not None:
            slot["lock_held"] = slot_lock_held(fd, index)
            slots.append(slot)
    return slots, skipped


def own_ids():
    """(uids, gids) whose segments are this user's: real and effective ids, supplementary groups."""
    return ({os.getuid(), os.geteuid()},
            {os.getgid(), os.getegid(), *os.getgroups()})


def directory_problem(info, scope, owner_id):
    """Why a directory's lstat/fstat does not make it the one for (scope, owner_id), None if it
    does: segment_directory.cc's CheckSegmentDirectory."""
    if stat.S_ISLNK(info.st_mode):
        return "is a symbolic link, not a directory"
    if not stat.S_ISDIR(info.st_mode):
        return "is not a directory"
    mode = stat.S_IMODE(info.st_mode)
    if scope == "u":
        if info.st_uid != owner_id:
            return f"belongs to user {info.st_uid}, not to this user ({owner_id})"
        if mode & 0o077:
            return f"has mode {mode:04o}, not 0700"
    else:
        if info.st_gid != owner_id:
            return f"belongs to group {info.st_gid}, not {owner_id}"
        if (mode & 0o007) or (mode & 0o070) != 0o070:
            return f"has mode {mode:04o}, not 2770"
    return None


class Vanished(Exception):
    """An entry listed a moment ago is gone (its owner removed it): nothing to report."""


def open_directory(parent_fd, name, scope, owner_id):
    """The directory `name` in parent_fd, opened (never through a link) if it is valid for
    (scope, owner_id): its descriptor; BadSegment says why not."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK
                     | os.O_CLOEXEC, dir_fd=parent_fd)
    except OSError as e:
        if e.errno == errno.ENOENT:
            raise Vanished()
        try:
            why = directory_problem(os.stat(name, dir_fd=parent_fd, follow_symlinks=False),
                                    scope, owner_id)
        except OSError:
            why = None
        raise BadSegment(why or f"cannot open it: {e.strerror}")
    try:
        why = directory_problem(os.fstat(fd), scope, owner_id)
    except OSError as e:
        why = f"cannot read it: {e.strerror}"
    if why is not None:
        os.close(fd)
        raise BadSegment(why)
    return fd


def plausibly_ours(parent_fd, name, scope, owner_id):
    """Whether the entry `name` is this owner's own making (its user's, or of its group), so a
    fault in it is worth a line; anyone can put other entries by such names in GPUPRIO_SHM_DIR."""
    try:
        info = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
    except OSError:
        return False
    return (info.st_uid if scope == "u" else info.st_gid) == owner_id


def segment_directories(shm_dir, shm_fd, names, uids, gids):
    """Every directory in shm_dir (open as shm_fd) whose segments this user may see, and the ones
    refused: ([(scope, owner id, name, fd, alternate)], [(path, why)]). For each owner: the
    preferred name and every valid "<preferred>.<suffix>" (all of them: a process that started
    while another one was the first valid may still be in it)."""
    opened, refused = [], []
    owners = [("u", uid) for uid in sorted(uids)] + [("g", gid) for gid in sorted(gids)]
    try:
        for scope, owner_id in owners:
            preferred = f"gpuprio-v{LAYOUT_VERSION}-{scope}{owner_id}"
            preferred_why, alternates = None, []
            for name in names:
                if name != preferred and not name.startswith(preferred + "."):
                    continue
                try:
                    fd = open_directory(shm_fd, name, scope, owner_id)
                except Vanished:
                    continue
                except BadSegment as bad:
                    if name == preferred:
                        preferred_why = bad.why
                    elif plausibly_ours(shm_fd, name, scope, owner_id):
                        refused.append((os.path.join(shm_dir, name),
                                        f"{bad.why}; not used for segments"))
                    continue
                opened.append((scope, owner_id, name, fd, name != preferred))
                if name != preferred:
                    alternates.append(name)
            if preferred_why is not None:
                who = "this user's" if scope == "u" else f"group {owner_id}'s"
                instead = (f"{who} processes use {alternates[0]} instead" if alternates
                           else f"there is no valid {preferred}.* directory for {who} processes")
                refused.append((os.path.join(shm_dir, preferred), f"{preferred_why}; {instead}"))
    except BaseException:
        for _, _, _, fd, _ in opened:
            os.close(fd)
        raise
    return opened, refused


def owned_directories(shm_dir, other_versions=True):
    """(this user's and its groups' segment directories in shm_dir, open, as segment_directories
    gives them; [(path, why)] of the directories left out: refused ones and, with other_versions,
    ones of another layout version). UsageError when shm_dir cannot be listed."""
    uids, gids = own_ids()
    try:
        shm_fd = os.open(shm_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise UsageError(f"cannot list {shm_dir!r}: {e.strerror}")
    try:
        try:
            names = sorted(os.listdir(shm_fd))
        except OSError as e:
            raise UsageError(f"cannot list {shm_dir!r}: {e.strerror}")
        ignored = []
        for name in names:
            other = DIRECTORY_NAME.match(name)
            if (other and other_versions and int(other[1]) != LAYOUT_VERSION
                    and int(other[3]) in (uids if other[2] == "u" else gids)):
                ignored.append((os.path.join(shm_dir, name),
                                f"of layout version {int(other[1])}; this gpuprio reads version "
                                f"{LAYOUT_VERSION}: use the gpuprio that wrote it"))
        directories, refused = segment_directories(shm_dir, shm_fd, names, uids, gids)
    finally:
        os.close(shm_fd)
    return directories, ignored + refused


def segment_files(shm_dir, domain, ignored, other_versions=True):
    """Each segment file in this user's and its groups' directories of shm_dir (of `domain` if
    given), as (directory path, (scope, owner_id, dir_name, dir_fd, alternate), file name, the
    name's SEGMENT_FILE_NAME match); the directories stay open until the iteration ends. The
    directories left out (owned_directories) and those that cannot be listed are appended to
    ignored as (path, why). UsageError when shm_dir cannot be listed."""
    directories, left_out = owned_directories(shm_dir, other_versions)
    ignored += left_out
    try:
        for owned in directories:
            directory = os.path.join(shm_dir, owned[2])
            try:
                file_names = sorted(os.listdir(owned[3]))
            except OSError as e:
                ignored.append((directory, f"cannot list it: {e.strerror}"))
                continue
            for file_name in file_names:
                match = SEGMENT_FILE_NAME.fullmatch(file_name)
                if match is None or match[1] in (".", ".."):
                    continue  # not a segment's name: not gpuprio's
                if domain is None or match[1] == domain:
                    yield directory, owned, file_name, match
    finally:
        for owned in directories:
            os.close(owned[3])


def take_sample(shm_dir, domain):
    """Every segment of this user and its groups in shm_dir (of `domain` if given), read now:
    {"time_ns", "segments": {"directory/file": segment}, "ignored": [(path, why)]}."""
    time_ns = time.clock_gettime_ns(time.CLOCK_MONOTONIC)  # top's own clock, for heartbeats
    segments, ignored = {}, []
    for directory, owned, file_name, match in segment_files(shm_dir, domain, ignored,
                                                             other_versions=domain is None):
        scope, owner_id, dir_name, dir_fd, alternate = owned
        path = os.path.join(directory, file_name)
        try:
            segment = read_segment(dir_fd, file_name, (scope, owner_id))
        except Vanished:
            continue
        except BadSegment as bad:
            ignored.append((path, bad.why))
            continue
        segment.update({"scope": scope, "owner": owner_id, "domain": match[1],
                        "uuid": match[2], "path": path, "directory": directory,
                        "alternate": dir_name if alternate else None})
        for slot in segment["slots"]:
            slot["heartbeat_since_ns"] = time_ns  # top_report carries it on
        segments[f"{dir_name}/{file_name}"] = segment
    return {"time_ns": time_ns, "segments": segments, "ignored": ignored}


def pid_namespace_inode():
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None


def proc_view(slot, own_namespace):
    """What /proc here says of the slot's published pid: ("running" | "gone" | "unknown",
    detail)."""
    if own_namespace is None or slot["pid_namespace"] != own_namespace:
        # Its pid numbers another namespace's process: /proc here cannot judge it.
        return "unknown", "in another pid namespace"
    pid = slot["pid"]
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat_line = f.read()
    except (FileNotFoundError, ProcessLookupError):
        # /proc may hide other users' processes (hidepid): signal 0 only asks whether it exists.
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return "gone", "no such process"
        except OSError:
            pass
        return "unknown", "not in /proc (hidden: hidepid?)"
    except OSError as e:
        return "unknown", f"cannot read /proc/{pid}/stat: {e.strerror}"
    # comm (field 2) may hold spaces and parentheses: the fields after it follow the last ')'.
    # fields[0] is field 3 (state), fields[19] field 22 (start time in clock ticks).
    fields = stat_line[stat_line.rfind(b")") + 1:].split()
    try:
        state, start_time = fields[0], int(fields[19])
    except (IndexError, ValueError):
        return "unknown", f"cannot parse /proc/{pid}/stat"
    if state in (b"Z", b"X"):
        return "gone", "exited (zombie)"
    # 0: its owner could not read its own start time, and nothing can be compared.
    if slot["start_time_ticks"] != 0 and start_time != slot["start_time_ticks"]:
        return "gone", "pid reused by another process"
    return "running", "pid still runs"


def liveness(slot, own_namespace):
    """("alive" | "dead" | "unknown", detail) for a live-state slot. The slot's lock decides
    (segment_layout.h): held, its owner runs; free, nobody owns the slot (its process exited,
    was killed or exec'd, or the slot was never a process's), whatever the slot says. /proc only
    adds detail."""
    proc, detail = proc_view(slot, own_namespace)
    lock = slot["lock_held"]
    if lock is None:
        return "unknown", "its lock cannot be queried"
    if not lock:
        if proc == "running":
            detail = "its process exec'd, or never owned the slot"
        return "dead", f"no owner holds its lock; {detail}"
    if detail == "in another pid namespace":
        return "alive", detail
    if proc == "gone":
        return "alive", f"its lock is held, but /proc says of its pid: {detail}"
    return "alive", ""


def add_shm_dir_option(parser, what):
    """--shm-dir DIR, "the GPUPRIO_SHM_DIR WHAT" in its help; shm_dir_of reads it."""
    parser.add_argument("--shm-dir", metavar="DIR",
                        help=f"the GPUPRIO_SHM_DIR {what} (default: $GPUPRIO_SHM_DIR if set, "
                             f"else {SHM_DIR})")


def shm_dir_of(args, environ):
    """--shm-dir, else default_shm_dir(environ), as an absolute path."""
    return os.path.abspath(args.shm_dir if args.shm_dir is not None else default_shm_dir(environ))


def default_shm_dir(environ):
    """GPUPRIO_SHM_DIR as the library takes it (hook/config.cc: an absolute path), else
    /dev/shm: top looks where processes started from the same environment meet."""
    value = environ.get("GPUPRIO_SHM_DIR", "")
    if not value:
        return SHM_DIR
    if not value.startswith("/"):
        raise UsageError(f"GPUPRIO_SHM_DIR={value!r} is not an absolute directory path (gpuprio "
                         f"processes with it do not coordinate); give --shm-dir DIR")
    return value
