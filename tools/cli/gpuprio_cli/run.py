"""`gpuprio run` and `gpuprio env`: the GPUPRIO_* options checked as the library checks them
(scheduler/base/env_vars.def, read at run time), the library found, LD_PRELOAD built, and the
command exec'd (or the `export` lines printed).
"""

import argparse
import csv
import os
import shlex
import signal
import sys

from .segment_layout import DOMAIN_NAME, PRIORITY_MAX, PRIORITY_MIN
from .util import (
    EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND, UsageError, ascii_integer, launcher_dir)


# What the library accepts for each GPUPRIO_* variable: scheduler/base/env_vars.def, the table the
# library is compiled from, read here at run time (packages install it beside the launcher).
ENV_TABLE_NAME = "env_vars.def"
ASCII_SPACE = " \t\n\v\f\r"  # what the library trims (absl::StripAsciiWhitespace)

LIB_NAME = "libgpuprio.so"


def env_table_candidates():
    script_dir = launcher_dir()
    return [os.path.join(script_dir, ENV_TABLE_NAME),
            os.path.normpath(os.path.join(script_dir, "..", "..", "scheduler", "base",
                                          ENV_TABLE_NAME))]


def parse_env_table(text):
    """env_vars.def's GPUPRIO_ENV_VAR(...) lines -> {name: entry dict}."""
    table = {}
    for line in text.splitlines():
        line = line.strip()
        if not (line.startswith("GPUPRIO_ENV_VAR(") and line.endswith(")")):
            continue
        fields = next(csv.reader([line[len("GPUPRIO_ENV_VAR("):-1]], skipinitialspace=True))
        name, read_by, loads_code, kind, low, high, default, accepted, meaning = fields
        table[name] = {"name": name, "read_by": read_by, "kind": kind, "min": int(low),
                       "max": int(high), "default": default, "meaning": meaning,
                       "accepted": accepted.split("|") if kind in ("kChoice", "kPriority")
                       else accepted}
    return table


_env_table = None
_env_table_read = False


def read_env_table():
    """The table, or None when it cannot be found (read once)."""
    global _env_table, _env_table_read
    if not _env_table_read:
        _env_table_read = True
        for path in env_table_candidates():
            try:
                with open(path, encoding="utf-8") as f:
                    _env_table = parse_env_table(f.read())
                break
            except (OSError, ValueError):
                continue
    return _env_table


_env_table_warned = False


def env_table():
    """The table, or {} (with one warning) when it cannot be found: the library still checks."""
    global _env_table_warned
    table = read_env_table()
    if table is None:
        if not _env_table_warned:
            _env_table_warned = True
            print(f"gpuprio: warning: {ENV_TABLE_NAME} not found (looked in "
                  f"{', '.join(env_table_candidates())}); values are passed on unchecked",
                  file=sys.stderr)
        return {}
    return table


def library_default(name, quote=False):
    """"; the library's default is D" for the help of an option, D from the table; "" when the
    table is not there (help needs no warning)."""
    entry = (read_env_table() or {}).get(name)
    if entry is None:
        return ""
    default = f"'{entry['default']}'" if quote else entry["default"]
    return f"; the library's default is {default}"


def table_range(name):
    """"in [MIN, MAX]" of an integer entry, from the table ("" without it)."""
    entry = (read_env_table() or {}).get(name)
    return f"in [{entry['min']}, {entry['max']}]" if entry else ""


def check_env_value(option, name, text):
    """`text` as the library would accept it for `name`, canonical; UsageError otherwise."""
    entry = env_table().get(name)
    value = text.strip(ASCII_SPACE)
    if not value:
        raise UsageError(f"{option}: empty value")
    if entry is None:
        return value
    kind, low, high, accepted = entry["kind"], entry["min"], entry["max"], entry["accepted"]
    lowered = value.lower() if value.isascii() else value
    if kind in ("kChoice", "kPriority") and lowered in accepted:
        return lowered
    if kind in ("kInteger", "kPriority"):
        number = ascii_integer(value)
        if number is not None and low <= number <= high:
            return str(number)
    if kind == "kChoice":
        raise UsageError(f"{option}: {text!r} is not one of {', '.join(accepted)} ({name})")
    if kind == "kPriority":
        raise UsageError(f"{option}: {text!r} is not {', '.join(accepted)} or an integer in "
                         f"[{low}, {high}] ({name})")
    if kind == "kInteger":
        raise UsageError(f"{option}: {text!r} is not an integer in [{low}, {high}] ({name})")
    return value


def check_domain(option, text):
    """A GPUPRIO_DOMAIN as the library accepts it (segment_name.cc ValidDomain): 1 to 64 of
    A-Z a-z 0-9 _ . -, not "." or "..", after trimming ASCII whitespace; UsageError otherwise
    (the library would run uncoordinated)."""
    value = text.strip(ASCII_SPACE)
    if not DOMAIN_NAME.fullmatch(value) or value in (".", ".."):
        raise UsageError(f"{option}: {text!r} is not a domain name: 1 to 64 of A-Z a-z 0-9 _ . -, "
                         f"not . or .. (GPUPRIO_DOMAIN)")
    return value


def parse_trace(text):
    """An absolute path (the program may change directory) in an existing directory."""
    if not text:
        raise UsageError("--trace: empty path")
    path = os.path.abspath(text)
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        raise UsageError(f"--trace: directory {directory!r} does not exist")
    if os.path.isdir(path):
        raise UsageError(f"--trace: {text!r} is a directory, not a file")
    return path


def find_library(lib_option, environ):
    """--lib, else $GPUPRIO_LIB, else library_candidates()' first file (real paths)."""
    for source, path in (("--lib", lib_option), ("GPUPRIO_LIB", environ.get("GPUPRIO_LIB"))):
        if path:
            if not os.path.isfile(path):
                raise UsageError(f"{source}: {path!r} is not a file")
            return os.path.abspath(path)
    candidates = library_candidates()
    for path in candidates:
        if os.path.isfile(path):
            return path
    raise UsageError(
        f"cannot find {LIB_NAME}: pass --lib PATH or set GPUPRIO_LIB "
        f"(looked in {', '.join(candidates)})")


def library_candidates():
    """Where the library is looked for without --lib or GPUPRIO_LIB: the checkout's build tree,
    then the lib/ directory beside the launcher (the wheel's gpuprio/lib, kept out of the Python
    package's modules), then beside it (the .deb's /usr/lib/gpuprio)."""
    script_dir = launcher_dir()
    return [
        os.path.normpath(os.path.join(script_dir, "..", "..", "bazel-bin", "hook", LIB_NAME)),
        os.path.join(script_dir, "lib", LIB_NAME),
        os.path.join(script_dir, LIB_NAME),
    ]


def prepend_preload(lib, current):
    """LD_PRELOAD with `lib` first; other entries kept in order, an earlier copy of `lib` dropped.

    ld.so accepts both ':' and ' ' as separators; the result uses ':'.
    """
    entries = [e for e in current.replace(" ", ":").split(":") if e] if current else []
    same = os.path.realpath(lib)
    kept = [e for e in entries if not (os.path.isabs(e) and os.path.realpath(e) == same)]
    return ":".join([lib] + kept)


def build_environment(args, environ):
    """The variables to set, in a fixed order: LD_PRELOAD first, then GPUPRIO_*."""
    settings = [("LD_PRELOAD", prepend_preload(find_library(args.lib, environ),
                                               environ.get("LD_PRELOAD", "")))]
    for option, name, value in (("--priority", "GPUPRIO_PRIORITY", args.priority),
                                ("--mode", "GPUPRIO_MODE", args.mode),
                                ("--log", "GPUPRIO_LOG", args.log),
                                ("--budget-us", "GPUPRIO_BUDGET_US", args.budget_us),
                                ("--isolation", "GPUPRIO_ISOLATION", args.isolation),
                                ("--reserved-sms", "GPUPRIO_RESERVED_SMS", args.reserved_sms)):
        if value is not None:
            settings.append((name, check_env_value(option, name, value)))
    if args.domain is not None:
        settings.append(("GPUPRIO_DOMAIN", check_domain("--domain", args.domain)))
    if args.trace is not None:
        settings.append(("GPUPRIO_TRACE", parse_trace(args.trace)))
    return settings


def command_run(args, environ):
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise UsageError("no command given: gpuprio run [options] -- CMD [ARGS...]")
    settings = build_environment(args, environ)
    # The library's start line (pid, mode, priority, budget, trace): a plain LD_PRELOAD is quiet.
    settings.append(("GPUPRIO_ANNOUNCE", "1"))
    child_env = dict(environ)
    child_env.update(settings)
    # One line when gpuprio processes of another priority share the command's GPUs without MPS
    # (mps.run_warning says when it stays quiet).
    from .mps import run_warning
    warning = run_warning(child_env)
    if warning:
        print(warning, file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    # Python starts with SIGPIPE and SIGXFSZ ignored, and an exec keeps ignored signals ignored:
    # give CMD the dispositions it would have had without gpuprio in front of it.
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    try:
        os.execvpe(command[0], command, child_env)
    except FileNotFoundError:
        print(f"gpuprio run: error: command not found: {command[0]}", file=sys.stderr)
        return EXIT_NOT_FOUND
    except OSError as e:
        print(f"gpuprio run: error: cannot run {command[0]}: {e.strerror}", file=sys.stderr)
        return EXIT_NOT_EXECUTABLE
    return 0  # not reached: execvpe does not return


def command_env(args, environ):
    for name, value in build_environment(args, environ):
        print(f"export {name}={shlex.quote(value)}")
    return 0


def add_config_options(parser):
    group = parser.add_argument_group("gpuprio settings (unset ones keep the environment's value)")
    for flag, metavar, text in (
            ("--priority", "P",
             "process default priority: low, normal, high or an integer in "
             f"[{PRIORITY_MIN}, {PRIORITY_MAX}], larger = more important (GPUPRIO_PRIORITY)"),
            ("--mode", "M", "schedule, passthrough or off (GPUPRIO_MODE)"),
            ("--log", "L", "error, warning, info or debug (GPUPRIO_LOG)"),
            ("--budget-us", "N",
             "in-flight budget of lower priorities, microseconds of estimated GPU time "
             f"(GPUPRIO_BUDGET_US{library_default('GPUPRIO_BUDGET_US')})"),
            ("--trace", "FILE", "write a Chrome trace to FILE (GPUPRIO_TRACE)"),
            ("--domain", "NAME",
             "coordinate only with processes of this domain: 1 to 64 of A-Z a-z 0-9 _ . - "
             f"(GPUPRIO_DOMAIN{library_default('GPUPRIO_DOMAIN', quote=True)})"),
            ("--isolation", "I",
             "spatial isolation: active, always, off or force "
             f"(GPUPRIO_ISOLATION{library_default('GPUPRIO_ISOLATION')})"),
            ("--reserved-sms", "N",
             "SMs kept free for more important work while lower work is confined, an integer "
             f"{table_range('GPUPRIO_RESERVED_SMS')}; 0 turns isolation off "
             f"(GPUPRIO_RESERVED_SMS{library_default('GPUPRIO_RESERVED_SMS')}: at least that "
             "many stay free, as the confined part is rounded down to the device's split "
             "granularity, so 20 on an H100 with 16)"),
            ("--lib", "PATH",
             f"{LIB_NAME} to preload (default: $GPUPRIO_LIB, else the Bazel build tree, "
             "else lib/ beside this script, else beside it)")):
        group.add_argument(flag, metavar=metavar, help=text)


def add_parsers(subcommands):
    """`gpuprio run` and `gpuprio env`."""
    run = subcommands.add_parser(
        "run", help="run a command with gpuprio preloaded",
        usage="gpuprio run [options] -- CMD [ARGS...]",
        description="Run CMD with libgpuprio.so first in LD_PRELOAD (existing entries kept) and "
                    "the GPUPRIO_* variables set. gpuprio replaces itself with CMD, so signals "
                    "and the exit code are CMD's.",
        epilog="example: gpuprio run --priority high -- python serve.py")
    add_config_options(run)
    run.add_argument("command", nargs=argparse.REMAINDER, metavar="CMD [ARGS...]",
                     help="the command to run, after '--'")
    run.set_defaults(handler=command_run)
    env = subcommands.add_parser(
        "env", help="print the export lines for a shell",
        usage="gpuprio env [options]",
        description="Print `export` lines that preload gpuprio and set the GPUPRIO_* variables "
                    "in the calling shell.",
        epilog='example: eval "$(gpuprio env --priority low)"')
    add_config_options(env)
    env.set_defaults(handler=command_env)
