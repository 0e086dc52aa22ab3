"""Shared pieces of the gpuprio CLI: usage errors and the one-line-error argument parser, the
exit codes, where the launcher lies (and so VERSION, env_vars.def and the library beside it), the
version, and text made safe for a terminal (printable ASCII, escapes for the rest).
"""

import argparse
import os
import re
import sys


# The launcher's path as it was run, set by the launcher before main(): tools/cli/gpuprio in a
# checkout or a Bazel runfiles tree, gpuprio/_cli.py in the wheel, /usr/lib/gpuprio/gpuprio in the
# .deb (where /usr/bin/gpuprio links). This package lies beside it in each, so the default is
# right too. VERSION, env_vars.def and the library are looked for beside the launcher.
LAUNCHER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "gpuprio")
# The product's version (docs/build.md, "Versions"): the launcher's STAMPED_VERSION line, copied
# here by the launcher; when empty, it is read from a file named VERSION beside the launcher (where
# a package installs it) or, in a checkout, from the repository's top-level VERSION, the one
# source of the version.
STAMPED_VERSION = ""
VERSION_PATTERN = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?")
EXIT_USAGE = 2
EXIT_NOT_EXECUTABLE = 126  # the shell's conventions for a command that cannot be run
EXIT_NOT_FOUND = 127


class UsageError(Exception):
    """Bad input: reported as one line on stderr, exit 2."""

    def __init__(self, message, point_to_help=False):
        super().__init__(message)
        self.point_to_help = point_to_help  # argparse's own messages name no accepted values


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (no usage dump), exit 2."""

    def error(self, message):
        raise UsageError(message, point_to_help=True)


def ascii_integer(value):
    """absl::SimpleAtoi's base-10 integers: an optional sign and ASCII digits; None otherwise."""
    if not re.fullmatch(r"[+-]?[0-9]+", value):
        return None
    return int(value, 10)


def launcher_dir():
    """The directory of the launcher's real path (symbolic links followed)."""
    return os.path.dirname(os.path.realpath(LAUNCHER))


def version_candidates():
    """Where VERSION may be: beside the launcher, then the checkout's root (as called, then
    real)."""
    candidates = []
    for script_dir in (os.path.dirname(os.path.abspath(LAUNCHER)), launcher_dir()):
        for path in (os.path.join(script_dir, "VERSION"),
                     os.path.normpath(os.path.join(script_dir, "..", "..", "VERSION"))):
            if path not in candidates:
                candidates.append(path)
    return candidates


def product_version():
    """The stamped version, else the first line of the first readable VERSION file; None if none
    is found or what is found is not MAJOR.MINOR.PATCH[-PRERELEASE]."""
    if STAMPED_VERSION:
        return STAMPED_VERSION
    for path in version_candidates():
        try:
            with open(path, encoding="utf-8") as f:
                text = f.readline().strip()
        except (OSError, UnicodeDecodeError):
            continue
        return text if VERSION_PATTERN.fullmatch(text) else None
    return None


def print_version():
    version = product_version()
    if version is None:
        print(f"gpuprio: error: no valid VERSION file found (looked in "
              f"{', '.join(version_candidates())})", file=sys.stderr)
        return 1
    print(f"gpuprio {version}")
    return 0


def printable(text):
    """text with control, format and unpaired surrogate characters escaped (\\x1b, \\u202e,
    \\ud800): names come from the trace and must not drive the terminal or break the encoder."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                   for c in text)


def ascii_text(text):
    """text with everything outside printable ASCII escaped: for the terminal, where only
    printable ASCII is sure to be one column wide and cannot drive the terminal."""
    return "".join(c if " " <= c <= "~" else c.encode("unicode_escape").decode("ascii")
                   for c in text)


def plural(count, word, suffix="s"):
    return f"{count} {word}{'' if count == 1 else suffix}"


class OutputError(Exception):
    """Writing to stdout failed (a closed descriptor, a terminal that went away)."""


def write_out(text):
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as e:
        raise OutputError(e.strerror or str(e))


def plural_text(count, word, plural_word=None):
    return f"{count} {word if count == 1 else (plural_word or word + 's')}"


def age_text(seconds):
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} days"
