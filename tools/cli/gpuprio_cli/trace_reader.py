"""The bounded, streaming reader of gpuprio's Chrome traces, shared by `trace summarize` and
`trace merge`: only regular files are opened, gzip is expanded a piece at a time within
--max-input-mb, the JSON document is read value by value with no value over MAX_VALUE_MB, and the
events' fields are taken with typed getters that raise BadField instead of guessing.
"""

import codecs
import errno
import itertools
import json
import math
import os
import re
import stat
import sys
import zlib

from .util import UsageError


GZIP_MAGIC = b"\x1f\x8b"

# The writer's times are int64 nanoseconds, so as microseconds they lie within +-MAX_ABS_US; any
# sum or difference the summary takes of such values stays a finite float.
MAX_ABS_US = 2**63 / 1000

# Bounds on what summarize reads and keeps, so that no file takes the machine's memory or is read
# without end: gzip expands a file of spaces a thousandfold, and /dev/zero never ends. Each
# default takes about 3 million ops of the "realistic" trace of docs/trace_format.md ("Sizes").
MiB = 1 << 20
MAX_INPUT_MB = 2048  # --max-input-mb: JSON text read, counted after decompressing
MAX_MEMORY_MB = 1024  # --max-memory-mb: what the summary keeps of the ops and names
# One value of the document (an event, otherData, a key) as text. gpuprio's events are under
# 10 KiB even with long demangled names; a value is held as text and as objects while it is read,
# and the objects of 1 MiB of JSON can take 60 MiB ([[], [], ...]).
MAX_VALUE_MB = 1
READ_BYTES = MiB  # one read of the file, and at most this much decompressed at a time


class BadField(Exception):
    """A field `trace summarize` reads is missing or has the wrong type or range."""

    def __init__(self, field, problem):
        super().__init__(problem)
        self.field = field  # "ts", "args.op_id", "" for the event itself
        self.problem = problem  # "is missing", "is a string '3', not a number", ...


def add_limit_options(parser, input_help, memory_help):
    """--max-input-mb N and --max-memory-mb N (defaults MAX_INPUT_MB and MAX_MEMORY_MB), each help
    text followed by its default."""
    parser.add_argument("--max-input-mb", type=int, default=MAX_INPUT_MB, metavar="N",
                        help=f"{input_help} (default {MAX_INPUT_MB}; 0: no limit)")
    parser.add_argument("--max-memory-mb", type=int, default=MAX_MEMORY_MB, metavar="N",
                        help=f"{memory_help} (default {MAX_MEMORY_MB}; 0: no limit)")


def describe(value):
    """A JSON value in a few words, for error messages: never all of a long or nested value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if value != value else "infinite (Infinity, or a literal like 1e400)"
    if isinstance(value, int):
        text = repr(value)  # up to Python's 4300 digits: the parser refuses longer literals
        return text if len(text) <= 24 else f"an integer of {len(text.lstrip('-'))} digits"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        shown = repr(value[:40]) + ("..." if len(value) > 40 else "")
        return f"a string {shown}"
    return "a list" if isinstance(value, list) else "an object"


def field_value(container, key, prefix, required):
    """container[key], or None when it is optional and absent or null."""
    if key not in container:
        if required:
            raise BadField(prefix + key, "is missing")
        return None
    value = container[key]
    if value is None and required:
        raise BadField(prefix + key, "is null")
    return value


def micros_field(container, key, prefix=""):
    """A required time or duration in microseconds: a finite number within +-MAX_ABS_US."""
    value = field_value(container, key, prefix, required=True)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadField(prefix + key, f"is {describe(value)}, not a number")
    # ints compare exactly (no float conversion to overflow); NaN fails every comparison.
    if not -MAX_ABS_US <= value <= MAX_ABS_US:
        raise BadField(prefix + key, f"is {describe(value)}, not a number of microseconds in "
                                     f"[{-MAX_ABS_US:.3g}, {MAX_ABS_US:.3g}]")
    return float(value)


def integer_field(container, key, low, high, prefix="", required=False):
    value = field_value(container, key, prefix, required)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise BadField(prefix + key, f"is {describe(value)}, not an integer in [{low}, {high}]")
    return value


def string_field(container, key, prefix="", required=False):
    value = field_value(container, key, prefix, required)
    if value is not None and not isinstance(value, str):
        raise BadField(prefix + key, f"is {describe(value)}, not a string")
    return value


def bool_field(container, key, prefix=""):
    value = field_value(container, key, prefix, required=False)
    if value is not None and not isinstance(value, bool):
        raise BadField(prefix + key, f"is {describe(value)}, not true or false")
    return bool(value)


# What FILE may be instead of a regular file, with what to do about it.
FILE_KINDS = ((stat.S_ISFIFO, "a pipe or FIFO", ": save the trace to a file first (gzipped ones "
                                                 "are read as they are)"),
              (stat.S_ISCHR, "a character device", ""),
              (stat.S_ISBLK, "a block device", ""),
              (stat.S_ISSOCK, "a socket", ""))


def open_trace(path):
    """A descriptor to read the regular file at path; UsageError for anything else."""
    try:
        # Told from the name before opening: opening a FIFO waits for a writer, and a device may
        # act on being opened. Should a FIFO have taken the file's place since, O_NONBLOCK keeps
        # the open from waiting and fstat tells.
        mode = os.stat(path).st_mode
        if stat.S_ISREG(mode):
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
            mode = os.fstat(fd).st_mode
            if stat.S_ISREG(mode):
                return fd
            os.close(fd)
    except OSError as e:
        raise UsageError(f"cannot read {path!r}: {e.strerror or e}")
    if stat.S_ISDIR(mode):
        raise UsageError(f"cannot read {path!r}: {os.strerror(errno.EISDIR)}")
    kind, advice = next(((name, advice) for test, name, advice in FILE_KINDS if test(mode)),
                        ("a special file", ""))
    raise UsageError(f"cannot read {path!r}: it is {kind}, not a regular file{advice}")


def gunzip(pieces, path):
    """The data of the gzip members in pieces (bytes), at most READ_BYTES at a time however much
    a piece expands."""
    member = None
    for data in pieces:
        while True:
            if member is None:
                data = data.lstrip(b"\0")  # gzip allows zeros after a member
                if not data:
                    break
                member = zlib.decompressobj(16 + zlib.MAX_WBITS)  # checks CRC and length too
            try:
                out = member.decompress(data, READ_BYTES)
            except zlib.error as e:
                raise UsageError(f"{path!r} is not a valid gzip file: {e}")
            data = member.unconsumed_tail
            if out:
                yield out
            if member.eof:
                data, member = member.unused_data, None
            elif not data and len(out) < READ_BYTES:
                break  # the rest of the output needs the next piece
    if member is not None:
        raise UsageError(f"{path!r} is not a valid gzip file: Compressed file ended before the "
                         f"end-of-stream marker was reached")


class TraceText:
    """The text of a trace file, a piece at a time: gunzipped as it is read if it starts as gzip
    does, checked as UTF-8 (a leading BOM dropped), and at most max_input_mb MiB of it (0: no
    limit). Problems are UsageErrors."""

    def __init__(self, path, max_input_mb):
        self.path = path
        self.max_input_mb = max_input_mb
        self.gzip = False
        self.size = 0  # bytes of the (decompressed) data so far
        self.blank = True  # nothing but ASCII whitespace so far
        self.fd = open_trace(path)
        self.data = self._data()
        self.pieces = self._text()

    def close(self):
        self.pieces.close()
        self.data.close()
        os.close(self.fd)

    def read(self):
        """The next piece of text ("" when a piece ended within a character); None at the end."""
        return next(self.pieces, None)

    def too_long(self):
        where = " once decompressed" if self.gzip else ""
        return UsageError(f"{self.path!r} holds more than {self.max_input_mb} MiB of JSON{where} "
                          f"(--max-input-mb); give a larger --max-input-mb, or 0 for no limit")

    def _raw(self):
        while True:
            try:
                piece = os.read(self.fd, READ_BYTES)
            except OSError as e:
                raise UsageError(f"cannot read {self.path!r}: {e.strerror or e}")
            if not piece:
                return
            yield piece

    def _data(self):
        raw = self._raw()
        head = b""
        for piece in raw:
            head += piece
            if len(head) >= len(GZIP_MAGIC):
                break
        if head.startswith(GZIP_MAGIC):
            self.gzip = True
            yield from gunzip(itertools.chain([head], raw), self.path)
            return
        # Refused before reading it all, where the size is known.
        if self.max_input_mb and os.fstat(self.fd).st_size > self.max_input_mb * MiB:
            raise self.too_long()
        yield head
        yield from raw

    def _text(self):
        decoder = codecs.getincrementaldecoder("utf-8")()
        offset = 0  # of the next byte for the decoder, in the data
        head = b""  # the first bytes, until they tell whether the data starts with a BOM
        for data in self.data:
            self._count(data)
            if head is not None:
                head += data
                if len(head) < len(codecs.BOM_UTF8) and codecs.BOM_UTF8.startswith(head):
                    continue
                data, head = head, None
                if data.startswith(codecs.BOM_UTF8):
                    data = data[len(codecs.BOM_UTF8):]
                    offset = len(codecs.BOM_UTF8)
            yield self._decode(decoder, data, offset)
            offset += len(data)
        yield self._decode(decoder, head or b"", offset, final=True)

    def _count(self, data):
        self.size += len(data)
        if self.max_input_mb and self.size > self.max_input_mb * MiB:
            raise self.too_long()
        if self.blank and data.strip():
            self.blank = False

    def _decode(self, decoder, data, offset, final=False):
        held = decoder.getstate()[0]  # the start of a character cut by the previous piece
        try:
            return decoder.decode(data, final)
        except UnicodeDecodeError as e:
            where = " of the decompressed data" if self.gzip else ""
            problem = (f"{self.path!r} is not UTF-8 text: byte 0x{e.object[e.start]:02x} at "
                       f"offset {offset - len(held) + e.start}{where}")
        # A damaged gzip file is reported as such, as when it was decompressed whole first.
        for data in self.data:
            self._count(data)
        raise UsageError(problem)


JSON_SPACE = re.compile(r"[ \t\n\r]*")  # json.decoder.WHITESPACE
# How far before the end of the text read so far json can report an error that more text would
# cure, or a number that more text would change: a cut literal (-Infinity) or escape (\uXXXX) is
# reported where it starts, 1e+5 cut after the 1 reads as 1; a cut string is reported as
# unterminated, wherever it starts.
CUT_REACH = 16


class JsonReader:
    """One JSON document read from a TraceText as the file is read. Each value is parsed by
    json's own scanner, so its objects are those json.loads makes, from a window of text that
    holds it and at most a piece past it; a value longer than MAX_VALUE_MB is refused. Errors
    are json.loads's messages, with positions in the whole text."""

    def __init__(self, source, path):
        self.source = source
        self.path = path
        self.scan = json.JSONDecoder().scan_once
        self.text = ""  # the window
        self.pos = 0  # where reading goes on, in the window
        self.start = 0  # characters before the window
        self.lines = 0  # newlines before the window
        self.last_newline = -1  # where the last of them is, in the whole text
        self.ended = False  # the window holds the end of the text

    def more(self):
        """Appends the next piece of text to the window, dropping what was read; False at the
        end of the text."""
        while not self.ended:
            piece = self.source.read()
            if piece is None:
                self.ended = True
            elif piece:
                done = self.pos
                newlines = self.text.count("\n", 0, done)
                if newlines:
                    self.lines += newlines
                    self.last_newline = self.start + self.text.rfind("\n", 0, done)
                self.start += done
                self.text = self.text[done:] + piece
                self.pos = 0
                return True
        return False

    def peek(self):
        """The next character that is not JSON whitespace ("" at the end), not consumed."""
        while True:
            self.pos = JSON_SPACE.match(self.text, self.pos).end()
            if self.pos < len(self.text):
                return self.text[self.pos]
            if not self.more():
                return ""

    def expect(self, character, message):
        if self.peek() != character:
            self.fail(message, self.pos)
        self.pos += 1

    def value(self, too_long):
        """The JSON value after any whitespace; too_long() is the message if it is longer than
        MAX_VALUE_MB."""
        self.peek()
        while True:
            error, too_deep = None, False  # error: json's (message, position)
            try:
                value, end = self.scan(self.text, self.pos)
                # A number that ends near the end of the window may go on past it (1e5 cut
                # after the 1 reads as 1).
                if end < len(self.text) - CUT_REACH or self.ended:
                    self.pos = end
                    return value
            except StopIteration as e:  # what json.loads reports as "Expecting value"
                error = ("Expecting value", e.value)
            except json.JSONDecodeError as e:
                error = (e.msg, e.pos)
            except RecursionError:  # the parser recurses per nesting level
                # Raising the error for a value cut at its deepest level takes a few levels
                # more than parsing the whole value does: it is judged whole.
                too_deep = True
            except ValueError:  # int() refuses long literals: converting them takes quadratic time
                self.refuse(f"{self.path!r} is not a gpuprio trace: it has an integer literal "
                            f"of more than {sys.get_int_max_str_digits()} digits")
            if error is not None and (self.ended or not (
                    error[0].startswith("Unterminated string")
                    or error[1] >= len(self.text) - CUT_REACH)):
                self.fail(*error)
            length = len(self.text) - self.pos
            if too_deep and (self.ended or length > MAX_VALUE_MB * MiB):
                self.refuse(f"{self.path!r} is not a gpuprio trace: its JSON nests arrays and "
                            f"objects too deeply to read (more than about "
                            f"{sys.getrecursionlimit()} levels; a gpuprio trace has 4)")
            if length > MAX_VALUE_MB * MiB:
                raise UsageError(too_long())
            # The window grows by as much as it holds of the value, so a long value is parsed
            # again a few times, not once per piece.
            while len(self.text) - self.pos < min(2 * length + 1, MAX_VALUE_MB * MiB + 1):
                if not self.more():
                    break

    def end(self):
        if self.peek():
            self.fail("Extra data", self.pos)

    def refuse(self, message):
        """UsageError(message), unless the file is empty or not UTF-8 further on, which
        json.loads, given the file whole, would have found first: read on to find out."""
        while self.source.read() is not None:
            pass
        if self.source.blank:
            raise UsageError(f"{self.path!r} is empty: no JSON trace in it")
        raise UsageError(message)

    def fail(self, message, pos):
        """json's error at the window's pos (JSON's whitespace is fewer characters than what
        makes a file empty, which refuse() tells)."""
        line = self.lines + self.text.count("\n", 0, pos) + 1
        newline = self.text.rfind("\n", 0, pos)
        column = pos - newline if newline >= 0 else self.start + pos - self.last_newline
        self.refuse(f"{self.path!r} is not valid JSON: {message}: line {line} column {column} "
                    f"(char {self.start + pos})")
