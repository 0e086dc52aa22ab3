"""`gpuprio clean-segments`: removes this user's segment files that no process uses (no slot lock
held, open in no process /proc shows, old enough), never one in use.
"""

import errno
import os
import stat
import time

from .run import check_domain
from .segment_layout import SLOT_COUNT
from .segments import (
    BadSegment, Vanished, add_shm_dir_option, format_gpu_uuid, read_segment, segment_files,
    shm_dir_of, slot_lock_held)
from .util import age_text, ascii_text, plural_text


# A segment file younger than this is never removed: its creator may still be setting it up
# (openers wait up to 2 s for it, segment_options.h), possibly from a pid namespace whose
# processes /proc here does not show.
CLEAN_MIN_AGE_S = 10


def segment_openers(keys):
    """{(st_dev, st_ino): sorted pids} of the processes this /proc shows holding one of `keys`
    open (those this user may look into; a process in another pid namespace is not seen), this
    one excepted."""
    found = {}
    try:
        pids = [name for name in os.listdir("/proc")
                if name.isdigit() and int(name) != os.getpid()]
    except OSError:
        return found
    for pid in pids:
        fd_dir = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue  # gone, or another user's
        for fd in fds:
            try:
                info = os.stat(os.path.join(fd_dir, fd))
            except OSError:
                continue
            key = (info.st_dev, info.st_ino)
            if key in keys:
                found.setdefault(key, set()).add(int(pid))
    return {key: sorted(pids) for key, pids in found.items()}


def held_slots(fd):
    """The slots whose lock some process holds (their owners run), and whether any lock could
    not be queried: ([index], unknown)."""
    held, unknown = [], False
    for index in range(SLOT_COUNT):
        answer = slot_lock_held(fd, index)
        if answer is None:
            unknown = True
        elif answer:
            held.append(index)
    return held, unknown


def scan_segments(shm_dir, domain=None):
    """Every segment file in this user's and its groups' directories of shm_dir (of `domain` if
    given), each judged: {"shm_dir", "segments": [...], "ignored": [{"path", "why"}]}.

    A segment's "state": "in use" while some process holds one of its slot locks (the kernel drops
    them when the process exits, so no slot written into the file can fake one), "opened" when no
    lock is held but a process here has the file open (it is attaching, or failed to), "stale"
    when neither (nobody uses it: gpuprio processes that come later reuse it as it is, or remove
    nothing; `gpuprio clean-segments` removes it), "unknown" when its locks cannot be queried.
    "removable": stale, this user's own file, and at least CLEAN_MIN_AGE_S old. "problem": why
    the library would refuse it (a damaged or foreign segment: processes of that domain on that
    GPU then do not coordinate), or None. UsageError when shm_dir cannot be listed."""
    segments, ignored = [], []
    now = time.time()
    for directory, (scope, owner_id, _, dir_fd, _), file_name, match in segment_files(
            shm_dir, domain, ignored):
        entry = judge_segment(dir_fd, file_name, (scope, owner_id), now)
        if entry is None:
            continue  # gone meanwhile
        entry.update({"path": os.path.join(directory, file_name), "directory": directory,
                      "domain": match[1], "gpu": format_gpu_uuid(bytes.fromhex(match[2]))})
        segments.append(entry)
    candidates = {(s["dev"], s["ino"]): s for s in segments if s["state"] == "stale"}
    for key, pids in segment_openers(set(candidates)).items():
        candidates[key].update({"state": "opened", "removable": False, "opened_by": pids})
    return {"shm_dir": shm_dir, "segments": segments,
            "ignored": [{"path": path, "why": why} for path, why in ignored]}


def judge_segment(dir_fd, file_name, owner, now):
    """One segment file judged for scan_segments, None if it vanished. Opened read-only, never
    mapped: querying the locks (F_OFD_GETLK) takes none."""
    try:
        fd = os.open(file_name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=dir_fd)
    except OSError as e:
        if e.errno == errno.ENOENT:
            return None
        why = ("is a symbolic link, not a segment" if e.errno == errno.ELOOP
               else f"cannot open it: {e.strerror}")
        return {"state": "unknown", "removable": False, "problem": why, "dev": None, "ino": None,
                "processes": [], "held_slots": 0, "own": False, "age_s": None}
    try:
        info = os.fstat(fd)
        own = info.st_uid in (os.getuid(), os.geteuid())
        entry = {"dev": info.st_dev, "ino": info.st_ino, "own": own,
                 "age_s": max(0.0, now - info.st_mtime), "problem": None, "processes": []}
        if not stat.S_ISREG(info.st_mode):
            entry.update({"state": "unknown", "removable": False, "held_slots": 0,
                          "problem": "is not a regular file"})
            return entry
        held, unknown = held_slots(fd)
        entry["held_slots"] = len(held)
    finally:
        os.close(fd)
    # What top would show of it (its checks are the library's), for the processes and problems.
    try:
        segment = read_segment(dir_fd, file_name, owner)
    except Vanished:
        return None
    except BadSegment as bad:
        entry["problem"] = bad.why
    else:
        entry["processes"] = [{"slot": slot["index"], "pid": slot["pid"],
                               "command": slot["command"]}
                              for slot in segment["slots"] if slot["lock_held"]]
    if held:
        entry["state"] = "in use"
    elif unknown:
        entry["state"] = "unknown"
    else:
        entry["state"] = "stale"
    entry["removable"] = (entry["state"] == "stale" and own
                          and entry["age_s"] >= CLEAN_MIN_AGE_S)
    return entry


def remove_segment(entry):
    """Unlinks a removable segment if its name still names the file judged (not a new segment
    created under that name since) and still nobody holds a slot of it or has it open:
    (None, False) when removed, else (why not, whether that is a failure rather than a process
    that came meanwhile)."""
    directory, name = os.path.split(entry["path"])
    try:
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        return f"cannot open {directory}: {e.strerror}", True
    try:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                         dir_fd=dir_fd)
        except OSError as e:
            if e.errno == errno.ENOENT:
                return "someone else removed it meanwhile", False
            return f"cannot open it: {e.strerror}", True
        try:
            info = os.fstat(fd)
            if (info.st_dev, info.st_ino) != (entry["dev"], entry["ino"]):
                return "a new segment has taken its name meanwhile", False
            held, unknown = held_slots(fd)
            if held or unknown:
                return "a process attached to it meanwhile", False
            if segment_openers({(info.st_dev, info.st_ino)}):
                return "a process opened it meanwhile", False
            try:
                os.unlink(name, dir_fd=dir_fd)
            except OSError as e:
                return f"cannot remove it: {e.strerror}", True
            return None, False
        finally:
            os.close(fd)
    finally:
        os.close(dir_fd)


def segment_line(entry):
    """How clean-segments and doctor describe one segment (printable ASCII)."""
    state = entry["state"]
    if state == "in use":
        who = ", ".join(f"pid {p['pid']} ({p['command']})" for p in entry["processes"])
        text = (f"in use: {plural_text(entry['held_slots'], 'process', 'processes')} attached"
                + (f" ({who})" if who else ""))
    elif state == "opened":
        text = ("no slot held, but open in pid " + ", ".join(map(str, entry["opened_by"]))
                + " (attaching, or out of slots)")
    elif state == "stale":
        text = f"stale: no process uses it (last changed {age_text(entry['age_s'])} ago)"
        if not entry["own"]:
            text += "; another member of the group made it"
        elif not entry["removable"]:
            text += f"; under {CLEAN_MIN_AGE_S} s old, so it may be being set up"
    else:
        text = "its slot locks cannot be queried"
    if entry["problem"]:
        text += f"; damaged or foreign: {entry['problem']}"
    return f"{ascii_text(entry['path'])}: {ascii_text(text)}"


def command_clean_segments(args, environ):
    shm_dir = shm_dir_of(args, environ)
    domain = None if args.domain is None else check_domain("--domain", args.domain)
    scan = scan_segments(shm_dir, domain)
    removed = failed = kept = 0
    verb = "would remove" if args.dry_run else "removed"
    for entry in scan["segments"]:
        if not entry["removable"]:
            kept += 1
            print(f"kept {segment_line(entry)}")
            continue
        why, failure = (None, False) if args.dry_run else remove_segment(entry)
        if why is None:
            removed += 1
            print(f"{verb} {segment_line(entry)}")
        else:
            kept += 1
            failed += failure
            print(f"kept {ascii_text(entry['path'])}: {ascii_text(why)}")
    for entry in scan["ignored"]:
        print(f"ignored: {ascii_text(entry['path'])}: {ascii_text(entry['why'])}")
    where = f"{shm_dir}" + (f", domain {domain}" if domain else "")
    done = "would be removed" if args.dry_run else "removed"
    print(f"{plural_text(removed, 'segment')} {done}, {kept} kept ({where})")
    return 1 if failed else 0


def add_parser(subcommands):
    """`gpuprio clean-segments`."""
    clean = subcommands.add_parser(
        "clean-segments", help="remove shared segments no process uses",
        usage="gpuprio clean-segments [--dry-run] [--domain NAME] [--shm-dir DIR]",
        description="Removes this user's segment files (in its directory and its groups' in "
                    "--shm-dir) that no process uses: no slot lock held, not open in any "
                    f"process /proc shows, and at least {CLEAN_MIN_AGE_S} s old. A segment in use "
                    "is never removed. Prints one line per segment (removed or kept, and why), "
                    "then a count. Exit 0, or 1 if a removal failed.",
        epilog="example: gpuprio clean-segments --dry-run")
    clean.add_argument("--dry-run", action="store_true",
                       help="say what would be removed, remove nothing")
    clean.add_argument("--domain", metavar="NAME",
                       help="only the segments of this GPUPRIO_DOMAIN (default: every domain)")
    add_shm_dir_option(clean, "to clean")
    clean.set_defaults(handler=command_clean_segments)
