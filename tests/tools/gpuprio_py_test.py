#!/usr/bin/env python3
"""Tests of tools/python/gpuprio.py; unittest, standard library only. Exits non-zero on failure.

Run twice by cli_test.cc: once plain (the module must be a warning no-op) and once with
libgpuprio.so preloaded and TEST_GPUPRIO_EXPECT_API=1 (the calls must reach the library). The
constants and the ctypes struct are checked against hook/include/gpuprio.h's text both times.
Paths are relative to this file, so it runs from the source tree and from Bazel runfiles alike.
"""

import ctypes
import os
import re
import sys
import threading
import unittest
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))  # not realpath: keep the runfiles tree
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "python"))

import gpuprio  # noqa: E402



def find_header():
    """gpuprio.h in the runfiles, else in the source tree this file (a runfiles link) comes from:
    hook/ does not export the header to other packages yet."""
    for root in (ROOT, os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(
            __file__))))):
        path = os.path.join(root, "hook", "include", "gpuprio.h")
        if os.path.isfile(path):
            return path
    raise FileNotFoundError("hook/include/gpuprio.h: neither in the runfiles nor the source tree")


HEADER = find_header()
EXPECT_API = os.environ.get("TEST_GPUPRIO_EXPECT_API") == "1"


def reset_module():
    """Forget the cached lookup and the once-only warning, as in a fresh process."""
    gpuprio._api = None
    gpuprio._warned = False


class HeaderMirrorTest(unittest.TestCase):
    """The Python mirror equals gpuprio.h: #defines, the stats struct, the function names."""

    @classmethod
    def setUpClass(cls):
        with open(HEADER, encoding="utf-8") as f:
            cls.text = f.read()

    def test_priority_constants_equal_the_header_defines(self):
        defines = dict(re.findall(
            r"^#define GPUPRIO_(PRIORITY_\w+)\s+\(?\s*(-?\d+)\s*\)?\s*$", self.text, re.M))
        self.assertTrue(defines, "no GPUPRIO_PRIORITY_* #define found in " + HEADER)
        mirrored = {name: getattr(gpuprio, name) for name in dir(gpuprio)
                    if name.startswith("PRIORITY_")}
        self.assertEqual(mirrored, {name: int(value) for name, value in defines.items()})

    def test_stats_struct_fields_equal_the_header_struct(self):
        body = re.search(r"typedef struct gpuprio_priority_stats \{(.*?)\}", self.text, re.S)
        self.assertIsNotNone(body)
        code = re.sub(r"/\*.*?\*/", "", body.group(1), flags=re.S)
        fields = re.findall(r"(u?int(?:8|16|32|64))_t\s+(\w+)\s*;", code)
        # ctypes.c_int32 may be ctypes.c_int itself: compare the type objects, not their names.
        self.assertEqual(list(gpuprio._PriorityStats._fields_),
                         [(name, getattr(ctypes, "c_" + c_type)) for c_type, name in fields])

    def test_every_header_function_has_a_signature(self):
        declared = set(re.findall(r"\b(gpuprio_\w+)\s*\(", self.text))
        self.assertEqual(set(gpuprio._SIGNATURES), declared)


class PriorityValuesTest(unittest.TestCase):
    """Bad priorities are errors whether or not the library is loaded."""

    def test_names_and_ints_convert(self):
        self.assertEqual(gpuprio.to_priority("high"), gpuprio.PRIORITY_HIGH)
        self.assertEqual(gpuprio.to_priority(" Low "), gpuprio.PRIORITY_LOW)
        self.assertEqual(gpuprio.to_priority("normal"), gpuprio.PRIORITY_NORMAL)
        self.assertEqual(gpuprio.to_priority(-100), -100)
        self.assertEqual(gpuprio.to_priority(100), 100)
        self.assertEqual(gpuprio.to_priority(gpuprio.PRIORITY_UNSET), gpuprio.PRIORITY_UNSET)

    def test_bad_values_raise(self):
        for bad in ("urgent", "", "1", 101, -101):
            with self.subTest(bad=bad), self.assertRaises(ValueError):
                gpuprio.to_priority(bad)
        for bad in (1.0, None, True):
            with self.subTest(bad=bad), self.assertRaises(TypeError):
                gpuprio.to_priority(bad)

    def test_context_manager_rejects_a_bad_value_before_the_body(self):
        ran = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with self.assertRaises(ValueError):
                with gpuprio.priority("urgent"):
                    ran.append(True)
        self.assertEqual(ran, [])


def read_version_file():
    """The first line of the repository's VERSION (in the runfiles: cli_test has it as data)."""
    with open(os.path.join(ROOT, "VERSION"), encoding="utf-8") as f:
        return f.readline().strip()


class VersionTest(unittest.TestCase):
    """__version__ comes from VERSION; version() is the library's when it is loaded."""

    def test_module_version_is_the_version_file(self):
        self.assertEqual(gpuprio.__version__, read_version_file())

    def test_version_is_the_library_or_module_version_and_never_warns(self):
        reset_module()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.assertEqual(gpuprio.version(), read_version_file())
        self.assertEqual(caught, [])
        if EXPECT_API:
            raw = ctypes.CDLL(None).gpuprio_version
            raw.restype = ctypes.c_char_p
            self.assertEqual(gpuprio.version(), raw().decode("ascii"))


@unittest.skipIf(EXPECT_API, "libgpuprio.so is preloaded in this run")
class WithoutLibraryTest(unittest.TestCase):
    """Without libgpuprio.so every call is a no-op, and the first one warns, once."""

    def setUp(self):
        reset_module()

    def test_not_available(self):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.assertFalse(gpuprio.available())
        self.assertEqual(caught, [], "available() must not warn")

    def test_calls_are_no_ops_that_warn_once(self):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.assertIsNone(gpuprio.set_thread_priority("high"))
            self.assertEqual(gpuprio.get_thread_priority(), gpuprio.PRIORITY_UNSET)
            self.assertIsNone(gpuprio.default_priority())
            self.assertIsNone(gpuprio.mode())
            self.assertEqual(gpuprio.stats(), [])
            with gpuprio.priority("low"):
                pass
        self.assertEqual(len(caught), 1, [str(w.message) for w in caught])
        self.assertIs(caught[0].category, RuntimeWarning)
        self.assertIn("libgpuprio.so is not loaded", str(caught[0].message))
        self.assertEqual(os.path.basename(caught[0].filename), os.path.basename(__file__),
                         "the warning should point at the caller")

    def test_context_manager_runs_the_body_and_propagates_exceptions(self):
        ran = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with self.assertRaises(KeyError):
                with gpuprio.priority("high"):
                    ran.append(True)
                    raise KeyError("body")

            @gpuprio.priority(5)
            def decorated():
                return "result"

            self.assertEqual(decorated(), "result")
        self.assertEqual(ran, [True])


@unittest.skipUnless(EXPECT_API, "libgpuprio.so is not preloaded in this run")
class WithLibraryTest(unittest.TestCase):
    """With libgpuprio.so preloaded (GPUPRIO_MODE=passthrough, GPUPRIO_PRIORITY=low) calls reach
    the library."""

    def setUp(self):
        reset_module()
        gpuprio.set_thread_priority(gpuprio.PRIORITY_UNSET)

    def tearDown(self):
        gpuprio.set_thread_priority(gpuprio.PRIORITY_UNSET)

    def test_available_without_warnings(self):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.assertTrue(gpuprio.available())
            self.assertEqual(gpuprio.mode(), "passthrough")
            self.assertIsInstance(gpuprio.stats(), list)
            # cli_test sets GPUPRIO_PRIORITY=low for this run.
            self.assertEqual(gpuprio.default_priority(), gpuprio.PRIORITY_LOW)
        self.assertEqual(caught, [])

    def test_set_and_get_thread_priority(self):
        self.assertEqual(gpuprio.get_thread_priority(), gpuprio.PRIORITY_UNSET)
        gpuprio.set_thread_priority("low")
        self.assertEqual(gpuprio.get_thread_priority(), gpuprio.PRIORITY_LOW)
        gpuprio.set_thread_priority(42)
        self.assertEqual(gpuprio.get_thread_priority(), 42)

    def test_priority_sets_high_and_restores_unset(self):
        with gpuprio.priority("high"):
            self.assertEqual(gpuprio.get_thread_priority(), 1)
        self.assertEqual(gpuprio.get_thread_priority(), gpuprio.PRIORITY_UNSET)

    def test_priority_restores_the_previous_value_when_the_body_raises(self):
        gpuprio.set_thread_priority(-5)
        with self.assertRaises(RuntimeError):
            with gpuprio.priority("high"):
                self.assertEqual(gpuprio.get_thread_priority(), 1)
                raise RuntimeError("body")
        self.assertEqual(gpuprio.get_thread_priority(), -5)

    def test_priorities_nest(self):
        with gpuprio.priority("low"):
            with gpuprio.priority(7):
                self.assertEqual(gpuprio.get_thread_priority(), 7)
            self.assertEqual(gpuprio.get_thread_priority(), gpuprio.PRIORITY_LOW)
        self.assertEqual(gpuprio.get_thread_priority(), gpuprio.PRIORITY_UNSET)

    def test_priority_is_per_thread(self):
        seen = []
        with gpuprio.priority("high"):
            other = threading.Thread(target=lambda: seen.append(gpuprio.get_thread_priority()))
            other.start()
            other.join()
        self.assertEqual(seen, [gpuprio.PRIORITY_UNSET])


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() and result.testsRun > 0 else 1)
