#!/usr/bin/env python3
"""Counts Catch2 test cases in Bazel test logs, for tools/test.sh.

  catch2_summary.py --label NAME TESTLOGS_DIR BAZEL_RC BAZEL_OUTPUT
                                                         -> "NAME: P passed, F failed (T targets)"
  catch2_summary.py --total LINE...                      -> "P passed, F failed" (exit 1 if F > 0)

Only the targets `bazel test` reported in BAZEL_OUTPUT (the captured console output) are counted,
from their own test.log, so logs left by earlier runs never count. A target whose log has no
Catch2 summary (it crashed, timed out or never built) counts as one failed test case, so a broken
binary can never make the total look clean.
"""
import os
import re
import sys

ALL_PASSED = re.compile(r"All tests passed \((\d+) assertions? in (\d+) test cases?\)")
MIXED = re.compile(r"test cases:\s*(\d+)\s*\|\s*(\d+) passed\s*\|\s*(\d+) failed")
ALL_FAILED = re.compile(r"test cases:\s*(\d+)\s*\|\s*(\d+) failed")
LINE = re.compile(r"(?:\w+: )?(\d+) passed, (\d+) failed")


def count_log(text):
    """Returns (passed, failed) for the last Catch2 run in a log, or None."""
    last = None
    for line in text.splitlines():
        m = ALL_PASSED.search(line)
        if m:
            last = (int(m.group(2)), 0)
            continue
        m = MIXED.search(line)
        if m:
            last = (int(m.group(2)), int(m.group(3)))
            continue
        m = ALL_FAILED.search(line)
        if m:
            last = (0, int(m.group(2)))
    return last


TARGET_LINE = re.compile(r"^//([^\s:]*):(\S+)\s+(?:\(cached\) )?(PASSED|FAILED|TIMEOUT|NO STATUS|"
                         r"FAILED TO BUILD|FLAKY|INCOMPLETE)")


def label_mode(label, testlogs, bazel_rc, bazel_output):
    passed = failed = targets = 0
    with open(bazel_output, errors="replace") as f:
        reported = [TARGET_LINE.match(line) for line in f]
    for m in filter(None, reported):
        targets += 1
        log = os.path.join(testlogs, m.group(1), m.group(2), "test.log")
        counted = None
        if m.group(3) in ("PASSED", "FAILED", "FLAKY") and os.path.isfile(log):
            with open(log, errors="replace") as f:
                counted = count_log(f.read())
        if counted is None:
            failed += 1
        else:
            passed += counted[0]
            failed += counted[1]
    if bazel_rc not in ("0", "4") and failed == 0:
        failed = 1  # the build itself failed
    print(f"{label}: {passed} passed, {failed} failed ({targets} targets)")
    return 0


def total_mode(lines):
    passed = failed = 0
    for line in lines:
        m = LINE.search(line)
        if m:
            passed += int(m.group(1))
            failed += int(m.group(2))
        else:
            failed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


def main(argv):
    if len(argv) >= 2 and argv[1] == "--total":
        return total_mode(argv[2:])
    if len(argv) == 6 and argv[1] == "--label":
        return label_mode(argv[2], argv[3], argv[4], argv[5])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
