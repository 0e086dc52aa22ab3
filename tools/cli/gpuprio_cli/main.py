"""The `gpuprio` command line: the top-level parser, each subcommand's own from its module, and
main(), which turns usage errors into one line on stderr and exit 2.
"""

import os
import sys

from . import clean_segments, doctor, exporter, mps, run, top, trace_merge, trace_summarize
from .trace_summarize import SUMMARIZE_USAGE
from .util import EXIT_USAGE, Parser, UsageError, print_version


def make_parser():
    parser = Parser(
        prog="gpuprio",
        description="Run CUDA programs under gpuprio, the GPU priority scheduler.",
        epilog="'gpuprio SUBCOMMAND --help' describes each subcommand.")
    parser.add_argument("--version", action="store_true",
                        help="print gpuprio's version and exit")
    subcommands = parser.add_subparsers(dest="subcommand", metavar="SUBCOMMAND",
                                        parser_class=Parser)
    run.add_parsers(subcommands)
    trace = subcommands.add_parser(
        "trace", help="read a trace written with --trace / GPUPRIO_TRACE",
        usage=SUMMARIZE_USAGE,
        description="Tools for gpuprio's Chrome traces (docs/trace_format.md).")
    trace_commands = trace.add_subparsers(dest="trace_command", metavar="COMMAND",
                                          parser_class=Parser, required=True)
    trace_summarize.add_parser(trace_commands)
    trace_merge.add_parser(trace_commands)
    top.add_parser(subcommands)
    doctor.add_parser(subcommands)
    clean_segments.add_parser(subcommands)
    exporter.add_parser(subcommands)
    mps.add_parser(subcommands)
    return parser


def subcommand_named(argv):
    """The subcommand argv names, for the error prefix (None if there is none)."""
    return (argv[0] if argv and argv[0] in ("run", "env", "trace", "top", "doctor",
                                           "clean-segments", "exporter", "mps") else None)


def main(argv, environ, parser=None):
    """Runs the subcommand argv names; its exit status. parser: make_parser()'s (a test may build
    it once for many calls)."""
    if parser is None:
        parser = make_parser()
    try:
        args = parser.parse_args(argv)
        if args.version:
            return print_version()
        if args.subcommand is None:
            raise UsageError("no subcommand given", point_to_help=True)
        return args.handler(args, environ)
    except UsageError as e:
        subcommand = subcommand_named(argv)
        prog = f"gpuprio {subcommand}" if subcommand else "gpuprio"
        hint = f" (see '{prog} --help')" if e.point_to_help else ""
        print(f"{prog}: error: {e}{hint}", file=sys.stderr)
        return EXIT_USAGE


def entry():
    """The installed `gpuprio` command (the wheel's console script)."""
    sys.exit(main(sys.argv[1:], dict(os.environ)))
