"""`gpuprio top`: the live view (a terminal screen redrawn every --interval), --once, --json and
--json --watch, over the samples of segments.py and the report of top_report.py.
"""

import argparse
import json
import math
import os
import select
import signal
import sys
import termios
import time
import tty

from .run import check_domain
from .segment_layout import DELAY_BUCKETS
from .segments import add_shm_dir_option, shm_dir_of, take_sample
from .top_report import top_report
from .util import OutputError, UsageError, ascii_text, plural, write_out


INTERVAL_MAX_S = 86400

# The terminal, for the live view (VT100/xterm sequences every terminal emulator takes).
ALTERNATE_SCREEN_ON, ALTERNATE_SCREEN_OFF = "\x1b[?1049h", "\x1b[?1049l"
CURSOR_HIDE, CURSOR_SHOW = "\x1b[?25l", "\x1b[?25h"
CURSOR_HOME, CLEAR_SCREEN, CLEAR_TO_LINE_END, CLEAR_BELOW = "\x1b[H", "\x1b[2J", "\x1b[K", "\x1b[J"


class Stop(Exception):
    """A terminating signal arrived during the live view: restore the terminal, then exit."""

    def __init__(self, status):
        super().__init__(status)
        self.status = status


def format_rate(value):
    if value is None:
        return "-"
    return f"{value:.1f}" if value < 1000 else f"{value:.0f}"


def format_delay(us, bucket):
    if us is None:
        return "-"
    return f"{us}+" if bucket == DELAY_BUCKETS - 1 else str(us)


def format_priority(value, name=None):
    if value is None:
        return "-"
    return f"{value} {name}" if name else str(value)


def format_seconds(value):
    return "-" if value is None else f"{value:.1f}s"


# (title, width; negative: left-aligned), in the order of the row cells.
TOP_COLUMNS = (("PID", 7), ("COMMAND", -15), ("PRIORITY", -9), ("ACTIVE", 6), ("OPS/S", 9),
               ("QUEUED", 7), ("QUEUED_US", 10), ("INFLIGHT", 8), ("INFL_US", 9),
               ("P50_US", 8), ("P99_US", 8), ("HELD", -4), ("HB_STILL", 8), ("STATUS", 0))


def format_row(cells):
    parts = []
    for (title, width), cell in zip(TOP_COLUMNS, cells):
        parts.append(f"{cell:<{-width}}" if width < 0 else f"{cell:>{width}}")
    return " ".join(parts).rstrip()


def process_cells(p):
    if p["liveness"] == "dead":
        status = f"DEAD: {p['liveness_detail']}"
    elif p["liveness"] == "alive":
        status = ("other pid namespace" if p["liveness_detail"] == "in another pid namespace"
                  else p["liveness_detail"])
    else:
        status = f"? {p['liveness_detail']}"
    return (str(p["pid"]), p["command"][:15],
            format_priority(p["priority"], p["priority_name"]),
            format_priority(p["active_priority"]), format_rate(p["ops_per_s"]),
            str(p["queued_ops"]), str(p["queued_estimated_us"]), str(p["in_flight_ops"]),
            str(p["in_flight_estimated_us"]),
            format_delay(p["delay_p50_us"], p["delay_p50_bucket"]),
            format_delay(p["delay_p99_us"], p["delay_p99_bucket"]), "yes" if p["held"] else "",
            format_seconds(p["heartbeat_unchanged_s"]), status)


def top_lines(report, options, live):
    """The table of one refresh, as lines of printable ASCII."""
    rows = [p for gpu in report["gpus"] for p in gpu["processes"]]
    dead = sum(1 for p in rows if p["liveness"] == "dead")
    title = (f"gpuprio top - {time.strftime('%H:%M:%S')} - "
             f"{plural(len(report['gpus']), 'GPU segment')}, "
             f"{plural(len(rows) - dead, 'process', 'es')}"
             f"{', ' + plural(dead, 'dead slot') if dead else ''} - "
             f"interval {options['interval']:g} s")
    lines = [title + (" - q quits" if live else "")]
    if not report["gpus"]:
        where = ascii_text(options["shm_dir"])
        scope = f" of domain {options['domain']}" if options["domain"] else ""
        lines.append(f"no GPUs: no gpuprio segment{scope} of this user or its groups in {where}")
    for gpu in report["gpus"]:
        high_water = gpu["priority_high_water"]
        lines.append("")
        lines.append(f"{gpu['uuid']}  domain {gpu['domain']}  {gpu['shared_with']} "
                     f"{gpu['owner_id']}  highest priority seen "
                     f"{'-' if high_water is None else high_water}"
                     + (f"  in {ascii_text(os.path.basename(gpu['directory']))}"
                        if gpu["alternate_directory"] else ""))
        lines.append(format_row(column for column, _ in TOP_COLUMNS))
        if not gpu["processes"]:
            lines.append("  (no processes)")
        for p in gpu["processes"]:
            lines.append(format_row(process_cells(p)))
        for skipped in gpu["skipped_slots"]:
            lines.append(f"  slot {skipped['slot']} skipped: no owner holds its lock, and "
                         f"{ascii_text(skipped['why'])}")
    if report["ignored"]:
        lines.append("")
    for entry in report["ignored"]:
        lines.append(f"ignored: {ascii_text(entry['path'])}: {ascii_text(entry['why'])}")
    return lines


def parse_top_options(args, environ):
    try:
        interval = float(args.interval)
    except ValueError:
        interval = math.nan
    if not (math.isfinite(interval) and 0 < interval <= INTERVAL_MAX_S):
        raise UsageError(f"--interval: {args.interval!r} is not a number of seconds in "
                         f"(0, {INTERVAL_MAX_S}]")
    iterations = None
    if args.iterations is not None:
        try:
            iterations = int(args.iterations, 10)
        except ValueError:
            iterations = 0
        if iterations < 1:
            raise UsageError(f"--iterations: {args.iterations!r} is not a whole number >= 1")
    domain = None if args.domain is None else check_domain("--domain", args.domain)
    if args.watch and not args.json:
        raise UsageError("--watch goes with --json (the table view refreshes by itself)")
    if args.once and args.watch:
        raise UsageError("--once and --watch contradict each other")
    shm_dir = shm_dir_of(args, environ)
    return {"interval": interval, "iterations": iterations, "domain": domain,
            "shm_dir": shm_dir,
            "next_shm_dir": os.path.abspath(args.next_shm_dir or shm_dir)}


class Sampler:
    """Takes the samples; with the test hook --next-shm-dir, the ones after the first read
    another directory (so a test can change counters between two samples without a race)."""

    def __init__(self, options):
        self.options = options
        self.taken = 0

    def sample(self):
        directory = self.options["next_shm_dir" if self.taken else "shm_dir"]
        self.taken += 1
        return take_sample(directory, self.options["domain"])


def top_pair(options):
    """The report of two samples `--interval` apart (--once, --json)."""
    sampler = Sampler(options)
    first = sampler.sample()
    time.sleep(options["interval"])
    return top_report(first, sampler.sample())


def json_text(report):
    # Strict JSON: every number is an int or a finite float; ASCII-only.
    return json.dumps(report, sort_keys=True, allow_nan=False) + "\n"


def top_json_watch(options):
    """One JSON object per line, each of a sample against the one before it."""
    sampler = Sampler(options)
    before = sampler.sample()
    printed = 0
    while options["iterations"] is None or printed < options["iterations"]:
        time.sleep(options["interval"])
        now = sampler.sample()
        write_out(json_text(top_report(before, now)))
        printed += 1
        before = now
    return 0


def top_batch(options):
    """The live view when stdout is no terminal: each refresh printed after the last."""
    sampler = Sampler(options)
    before = None
    frames = 0
    while True:
        now = sampler.sample()
        write_out(("\n" if frames else "") + "\n".join(top_lines(top_report(before, now), options,
                                                               live=False)) + "\n")
        frames += 1
        if options["iterations"] is not None and frames >= options["iterations"]:
            return 0
        before = now
        time.sleep(options["interval"])


class Screen:
    """Draws a frame in place on the terminal on stdout; full redraw after a resize."""

    def __init__(self, fd):
        self.fd = fd
        self.size = None

    def draw(self, lines, force_clear=False):
        try:
            columns, rows = os.get_terminal_size(self.fd)
        except OSError:
            columns, rows = 80, 24
        clear = force_clear or (columns, rows) != self.size
        self.size = (columns, rows)
        rows = max(rows, 1)
        if len(lines) > rows:
            hidden = len(lines) - rows + 1
            lines = lines[:rows - 1] + [f"... {hidden} more lines: enlarge the terminal"]
        # One column short of the edge: writing the last column leaves the cursor pending a
        # wrap, where clearing to the line's end would erase that column on some terminals.
        width = max(columns - 1, 1)
        write_out((CLEAR_SCREEN if clear else "") + CURSOR_HOME
                  + "\r\n".join(line[:width] + CLEAR_TO_LINE_END for line in lines)
                  + CLEAR_BELOW)


class Terminal:
    """The terminal's state for the live view: keys one at a time without echo, the alternate
    screen (the shell's screen comes back on exit, as with top), no cursor. Left on exit and
    around a suspension (Ctrl-Z), so the shell never inherits a terminal in that state."""

    def __init__(self, out_fd, in_fd):
        self.out_fd = out_fd
        self.in_fd = in_fd
        self.saved = termios.tcgetattr(in_fd) if in_fd is not None else None

    def enter(self):
        if self.saved is not None:
            # ISIG stays on: Ctrl-C is still SIGINT, Ctrl-Z still SIGTSTP.
            tty.setcbreak(self.in_fd, termios.TCSANOW)
        self._write(ALTERNATE_SCREEN_ON + CURSOR_HIDE)

    def leave(self):
        self._write(CURSOR_SHOW + ALTERNATE_SCREEN_OFF)
        if self.saved is not None:
            try:
                termios.tcsetattr(self.in_fd, termios.TCSADRAIN, self.saved)
            except termios.error:
                pass  # the terminal is gone

    def _write(self, text):
        # Straight to the descriptor: this also runs in a signal handler, which may have
        # interrupted a write to sys.stdout's buffer.
        try:
            os.write(self.out_fd, text.encode("ascii"))
        except OSError:
            pass  # the terminal is gone: nothing to restore on it


def top_live(options):
    """The live view on a terminal: redraws every --interval; q or Ctrl-C quits (exit 0)."""
    out_fd = sys.stdout.fileno()
    in_fd = sys.stdin.fileno() if sys.stdin is not None and sys.stdin.isatty() else None
    terminal = Terminal(out_fd, in_fd)
    screen = Screen(out_fd)
    redraw = []  # signals since the last frame that call for a full redraw
    saved_handlers = {}

    def on_resize(signum, frame):
        redraw.append(signum)

    def on_terminate(signum, frame):
        raise Stop(128 + signum)

    def on_suspend(signum, frame):
        terminal.leave()
        signal.signal(signal.SIGTSTP, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTSTP)  # stops here until the shell continues us
        signal.signal(signal.SIGTSTP, on_suspend)
        terminal.enter()
        redraw.append(signum)

    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        for signum, handler in ((signal.SIGWINCH, on_resize), (signal.SIGTSTP, on_suspend),
                                (signal.SIGTERM, on_terminate), (signal.SIGHUP, on_terminate)):
            saved_handlers[signum] = signal.signal(signum, handler)
        # Any signal writes a byte here, so a resize wakes the wait below at once.
        signal.set_wakeup_fd(wake_w)
        terminal.enter()
        sampler = Sampler(options)
        before = None
        frames = 0
        while True:
            now = sampler.sample()
            lines = top_lines(top_report(before, now), options, live=True)
            screen.draw(lines)
            frames += 1
            if options["iterations"] is not None and frames >= options["iterations"]:
                return 0
            before = now
            deadline = now["time_ns"] + int(options["interval"] * 1e9)
            quit_now, in_fd = wait_for_frame(deadline, wake_r, in_fd, redraw, screen, lines)
            if quit_now:
                return 0
    except KeyboardInterrupt:
        return 0
    except Stop as stop:
        return stop.status
    finally:
        terminal.leave()
        signal.set_wakeup_fd(-1)
        for signum, handler in saved_handlers.items():
            signal.signal(signum, handler)
        os.close(wake_r)
        os.close(wake_w)


def wait_for_frame(deadline, wake_r, in_fd, redraw, screen, lines):
    """Waits until deadline (CLOCK_MONOTONIC ns), drawing `lines` anew, whole, after a signal that
    asks for it (a resize, a resume) and reading keys from in_fd: (True if q was typed, in_fd,
    None once the terminal's input has ended)."""
    while True:
        remaining = deadline - time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        if remaining <= 0:
            return False, in_fd
        watched = [wake_r] + ([in_fd] if in_fd is not None else [])
        readable, _, _ = select.select(watched, [], [], remaining / 1e9)
        if wake_r in readable:
            try:
                while os.read(wake_r, 256):
                    pass
            except BlockingIOError:
                pass
        if redraw:
            redraw.clear()
            screen.draw(lines, force_clear=True)
        if in_fd is not None and in_fd in readable:
            try:
                keys = os.read(in_fd, 256)
            except OSError:
                keys = b""  # the terminal went away: nothing more to read there
            if not keys:
                in_fd = None
            elif b"q" in keys or b"Q" in keys:
                return True, in_fd


def command_top(args, environ):
    # A reader that stops early (`| head`) ends us quietly, as it does cat.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    options = parse_top_options(args, environ)
    if sys.stdout is None:  # started with stdout closed: Python gives no stream at all
        print("gpuprio top: error: standard output is closed", file=sys.stderr)
        return 1
    try:
        if args.json:
            if args.watch:
                return top_json_watch(options)
            write_out(json_text(top_pair(options)))
            return 0
        if args.once:
            write_out("\n".join(top_lines(top_pair(options), options, live=False)) + "\n")
            return 0
        if sys.stdout.isatty():
            return top_live(options)
        return top_batch(options)
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
    except OutputError as e:
        try:
            print(f"gpuprio top: error: cannot write to standard output: {e}", file=sys.stderr)
            # Python flushes stdout again at exit, and would report the same failure with a
            # traceback-like "Exception ignored" message: let that flush go to /dev/null.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass
        return 1


TOP_DESCRIPTION = """\
A live view of every gpuprio process on each GPU, read from the per-GPU shared-memory
segments (read only, never written) in this user's directory in --shm-dir,
gpuprio-v2-u<uid>, and in its groups', gpuprio-v2-g<gid>, or, where something else holds
such a name, in that name's valid '<name>.<suffix>' alternates. Redraws every --interval;
q or Ctrl-C quits. Not on a terminal, each refresh is printed after the last.

Columns (one row per slot; rates and percentiles are over the last interval, '-'
before the second refresh):
  PID        the process id (as seen in its own pid namespace)
  COMMAND    its name (/proc/PID/comm; other than printable ASCII escaped)
  PRIORITY   its default priority (GPUPRIO_PRIORITY), with the name of 1 high, 0 normal,
             -1 low
  ACTIVE     the highest priority with work queued or in flight ('-': none)
  OPS/S      ops issued per second (by the dispatcher and by the fast path)
  QUEUED     ops queued, not yet issued; QUEUED_US their estimated GPU time in us
  INFLIGHT   ops issued, not yet seen completed; INFL_US their estimated GPU time in us
  P50_US     queueing delay (submit to issue) of the ops issued in the interval:
  P99_US     the histogram bucket's upper bound in us ('N+': N us or more; '-': no ops)
  HELD       'yes' while its dispatcher holds work back for more important work
  HB_STILL   seconds for which top has seen the slot's heartbeat counter not change, on
             its own clock, from the first sample that showed its value (0.0s: it moved
             since the last refresh; '-' before the second refresh: a counter says
             nothing by its value). A running process bumps it at least once a second;
             one unchanged for 2 s is stopped or stuck, and its peers stop deferring to it
  STATUS     a slot is live while its owner holds the slot's file lock: '' for a live
             one ('other pid namespace' when its pid is not this namespace's); 'DEAD:
             no owner holds its lock; ...' for one nobody owns (its process exited, was
             killed or exec'd, or never owned it; /proc's view of the pid follows). Dead
             slots are listed after the live ones until a gpuprio process frees them
Segments and directories that cannot be read or fail a check are listed as
'ignored: PATH: WHY'; a slot nobody owns whose values are out of bounds is left out
with a 'slot N skipped: WHY' line."""


def add_parser(subcommands):
    """`gpuprio top`."""
    top = subcommands.add_parser(
        "top", help="live view of the gpuprio processes sharing each GPU",
        usage="gpuprio top [--interval S] [--once | --json [--watch]] [--domain NAME]",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=TOP_DESCRIPTION,
        epilog="examples: gpuprio top; gpuprio top --once; gpuprio top --json | jq .")
    top.add_argument("--interval", metavar="S", default="1.0",
                     help="seconds between refreshes (default 1.0)")
    top.add_argument("--once", action="store_true",
                     help="take two samples --interval apart, print one table and exit")
    top.add_argument("--json", action="store_true",
                     help="like --once, but print one JSON object (with --watch: one per "
                          "refresh, a line each)")
    top.add_argument("--watch", action="store_true",
                     help="with --json: keep printing, one object per refresh")
    top.add_argument("--domain", metavar="NAME",
                     help="only the segments of this GPUPRIO_DOMAIN (default: all domains)")
    top.add_argument("--iterations", metavar="N",
                     help="stop after N refreshes (default: until q or Ctrl-C)")
    add_shm_dir_option(top, "whose segment directories to read")
    # Test hook: the samples after the first read this directory, so a test can change the
    # counters between two samples without racing top.
    top.add_argument("--next-shm-dir", metavar="DIR", help=argparse.SUPPRESS)
    top.set_defaults(handler=command_top)
