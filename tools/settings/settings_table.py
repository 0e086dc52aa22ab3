#!/usr/bin/env python3
"""docs/user_guide.md's tables of GPUPRIO_* variables, generated from scheduler/base/env_vars.def.

    tools/settings/settings_table.py            rewrite the tables in the user guide
    tools/settings/settings_table.py --check    exit 1, naming the first difference, if they differ

The table is the one place a variable's values, default and meaning are written; the guide shows
them. Each generated table sits between two marker lines of the guide,

    <!-- BEGIN settings table: SECTION ... -->
    <!-- END settings table -->

and SECTION picks its rows, in the table's order: `tools` the variables only gpuprio's tools read
(READ_BY kTools), `tracing` the tracer's (GPUPRIO_TRACE*, GPUPRIO_CUPTI_*), `library` the rest.
Everything outside the markers is the guide's own text. Standard library only (the test runs it
under python3 -I -S).
"""

import argparse
import csv
import difflib
import os
import re
import sys

TABLE_PATH = os.path.join("scheduler", "base", "env_vars.def")
DOC_PATH = os.path.join("docs", "user_guide.md")
SECTIONS = ("library", "tracing", "tools")
BEGIN = re.compile(r"<!-- BEGIN settings table: (\w+)\b.*-->$")
END = "<!-- END settings table -->"
HEADER = ["| variable | values | default | meaning |", "|---|---|---|---|"]
KINDS = ("kChoice", "kInteger", "kPriority", "kText")
ENTRY = "GPUPRIO_ENV_VAR("


class TableError(Exception):
    """A table or guide this script cannot use; the message says which line and why."""


def repo_root():
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))


def parse_table(text):
    """env_vars.def's entries as dicts, in order. Each entry is read as the launcher reads it
    (csv, nine fields) and held to the rules that make that reading the C++ compiler's too."""
    entries = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line.startswith(ENTRY):
            continue
        where = f"env_vars.def:{number}"
        if not line.endswith(")"):
            raise TableError(f"{where}: an entry must be one line ending in ')'")
        body = line[len(ENTRY):-1]
        # A '\' escape or a '"' inside a string reads differently in C++ and in csv.
        if "\\" in body:
            raise TableError(f"{where}: '\\' in an entry")
        fields = next(csv.reader([body], skipinitialspace=True))
        if len(fields) != 9:
            raise TableError(f"{where}: {len(fields)} fields, not 9 (the launcher unpacks nine)")
        if body.count('"') != 6:
            raise TableError(f"{where}: DEFAULT, ACCEPTED and MEANING must be plain \"...\" "
                             f"strings without '\"' inside")
        name, read_by, loads_code, kind, low, high, default, accepted, meaning = fields
        if not re.fullmatch(r"GPUPRIO_[A-Z0-9_]+", name):
            raise TableError(f"{where}: {name!r} is not a GPUPRIO_ name")
        if read_by not in ("kLibrary", "kTools") or loads_code not in ("true", "false"):
            raise TableError(f"{where}: READ_BY or LOADS_CODE_OR_WRITES_FILE is not one of its "
                             f"words")
        if kind not in KINDS:
            raise TableError(f"{where}: KIND {kind!r} is not one of {', '.join(KINDS)}")
        try:
            low, high = int(low), int(high)
        except ValueError:
            raise TableError(f"{where}: MIN and MAX must be integers") from None
        if "|" in meaning or (kind == "kText" and "|" in accepted):
            raise TableError(f"{where}: '|' would split the guide's table cell")
        entries.append({"name": name, "read_by": read_by, "kind": kind, "min": low,
                        "max": high, "default": default, "accepted": accepted,
                        "meaning": meaning})
    if not entries:
        raise TableError("env_vars.def: no GPUPRIO_ENV_VAR entries")
    return entries


def section_of(entry):
    if entry["read_by"] == "kTools":
        return "tools"
    if entry["name"].startswith(("GPUPRIO_TRACE", "GPUPRIO_CUPTI_")):
        return "tracing"
    return "library"


def words(entry):
    return ", ".join(f"`{word}`" for word in entry["accepted"].split("|"))


def values_cell(entry):
    kind = entry["kind"]
    if kind == "kChoice":
        return words(entry)
    if kind == "kInteger":
        return f"{entry['min']}..{entry['max']}"
    if kind == "kPriority":
        return f"{words(entry)}, or {entry['min']}..{entry['max']}"
    return entry["accepted"]


def default_cell(entry):
    if entry["default"] == "":
        return "unset"
    if entry["kind"] == "kInteger":
        return entry["default"]
    return f"`{entry['default']}`"


def rows(entries, section):
    return [f"| `{e['name']}` | {values_cell(e)} | {default_cell(e)} | {e['meaning']} |"
            for e in entries if section_of(e) == section]


def generate(doc_text, entries):
    """The guide with every marked table made from `entries`."""
    out = []
    seen = []
    lines = doc_text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        match = BEGIN.match(line)
        i += 1
        if not match:
            out.append(line)
            continue
        section = match.group(1)
        if section not in SECTIONS:
            raise TableError(f"line {i}: section {section!r} is not one of {', '.join(SECTIONS)}")
        if section in seen:
            raise TableError(f"line {i}: a second {section} table")
        seen.append(section)
        while i < len(lines) and lines[i] != END:
            if BEGIN.match(lines[i]):
                raise TableError(f"line {i + 1}: a table begins inside the {section} table")
            i += 1
        if i == len(lines):
            raise TableError(f"the {section} table has no {END!r} line")
        i += 1
        # Blank lines around the table, so that no Markdown reader takes a marker for a row.
        out.extend([line, ""] + HEADER + rows(entries, section) + ["", END])
    missing = [s for s in SECTIONS if s not in seen and rows(entries, s)]
    if missing:
        raise TableError(f"no table marked for {', '.join(missing)} "
                         f"('<!-- BEGIN settings table: {missing[0]} -->')")
    return "\n".join(out)


def first_difference(old, new, path):
    diff = difflib.unified_diff(old.split("\n"), new.split("\n"), path, "generated", n=0,
                                lineterm="")
    return "\n".join(list(diff)[:12])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 if the guide's tables differ from the table's")
    parser.add_argument("--table", default=os.path.join(repo_root(), TABLE_PATH))
    parser.add_argument("--doc", default=os.path.join(repo_root(), DOC_PATH))
    args = parser.parse_args(argv)
    try:
        with open(args.table, encoding="utf-8") as f:
            entries = parse_table(f.read())
        with open(args.doc, encoding="utf-8") as f:
            doc = f.read()
        generated = generate(doc, entries)
    except (OSError, TableError) as e:
        print(f"settings_table: {e}", file=sys.stderr)
        return 2
    if generated == doc:
        return 0
    if args.check:
        print(f"settings_table: {args.doc} differs from {args.table}; run "
              f"tools/settings/settings_table.py to regenerate its tables\n"
              f"{first_difference(doc, generated, args.doc)}", file=sys.stderr)
        return 1
    with open(args.doc, "w", encoding="utf-8") as f:
        f.write(generated)
    return 0


if __name__ == "__main__":
    sys.exit(main())
