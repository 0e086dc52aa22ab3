"""tools/settings/settings_table.py: docs/user_guide.md's variable tables are the ones it makes
from scheduler/base/env_vars.def, and it refuses tables the launcher or the compiler would read
differently.

    python3 settings_table_test.py SCRIPT TABLE DOC
"""

import importlib.util
import os
import shutil
import sys
import tempfile
import unittest

SCRIPT, TABLE, DOC = sys.argv[1:4]
del sys.argv[1:4]

spec = importlib.util.spec_from_file_location("settings_table", SCRIPT)
settings_table = importlib.util.module_from_spec(spec)
spec.loader.exec_module(settings_table)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


class UserGuideTest(unittest.TestCase):
    def test_the_guide_is_generated_from_the_table(self):
        doc = read(DOC)
        generated = settings_table.generate(doc, settings_table.parse_table(read(TABLE)))
        self.assertTrue(
            generated == doc,
            "docs/user_guide.md's variable tables differ from scheduler/base/env_vars.def; run "
            "tools/settings/settings_table.py\n" +
            settings_table.first_difference(doc, generated, "docs/user_guide.md"))

    def test_every_variable_is_in_one_table_row(self):
        entries = settings_table.parse_table(read(TABLE))
        marked = []  # the lines between the markers
        inside = False
        for line in read(DOC).split("\n"):
            if settings_table.BEGIN.match(line) or line == settings_table.END:
                inside = not inside
            elif inside:
                marked.append(line)
        self.assertEqual(len(marked), len(entries) + 3 * 4)  # header, rule, two blank lines
        for entry in entries:
            with self.subTest(entry["name"]):
                self.assertEqual(sum(line.startswith(f"| `{entry['name']}` |")
                                     for line in marked), 1)

    def test_the_check_passes_and_changes_nothing(self):
        before = read(DOC)
        self.assertEqual(settings_table.main(["--check", "--table", TABLE, "--doc", DOC]), 0)
        self.assertEqual(read(DOC), before)


class GeneratorTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        self.table = os.path.join(self.dir, "env_vars.def")
        self.doc = os.path.join(self.dir, "user_guide.md")
        shutil.copy(TABLE, self.table)
        shutil.copy(DOC, self.doc)

    def tearDown(self):
        shutil.rmtree(self.dir)

    def edit(self, path, old, new):
        text = read(path)
        self.assertIn(old, text)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text.replace(old, new, 1))

    def run_main(self, *args):
        return settings_table.main(list(args) + ["--table", self.table, "--doc", self.doc])

    def test_a_changed_default_fails_the_check_until_regenerated(self):
        self.edit(self.table, 'kInteger, 0, 1024, "16"', 'kInteger, 0, 1024, "24"')
        self.assertEqual(self.run_main("--check"), 1)
        self.assertEqual(self.run_main(), 0)
        self.assertIn("| `GPUPRIO_RESERVED_SMS` | 0..1024 | 24 |", read(self.doc))
        self.assertEqual(self.run_main("--check"), 0)

    def test_a_hand_edit_of_a_table_fails_the_check(self):
        self.edit(self.doc, "| `GPUPRIO_BUDGET_US` | 1..10000000 | 2000 |",
                  "| `GPUPRIO_BUDGET_US` | 1..10000000 | 3000 |")
        self.assertEqual(self.run_main("--check"), 1)

    def test_text_outside_the_markers_is_kept(self):
        self.edit(self.doc, "One rule for every variable:", "One rule, edited, for every variable:")
        self.assertEqual(self.run_main("--check"), 0)

    def test_values_and_defaults_by_kind(self):
        entries = {e["name"]: e for e in settings_table.parse_table(read(TABLE))}
        self.assertEqual(settings_table.values_cell(entries["GPUPRIO_PRIORITY"]),
                         "`low`, `normal`, `high`, or -100..100")
        self.assertEqual(settings_table.default_cell(entries["GPUPRIO_TRACE"]), "unset")
        self.assertEqual(settings_table.default_cell(entries["GPUPRIO_BUDGET_US"]), "2000")
        self.assertEqual(settings_table.default_cell(entries["GPUPRIO_MODE"]), "`schedule`")
        self.assertEqual(settings_table.section_of(entries["GPUPRIO_LIB"]), "tools")
        self.assertEqual(settings_table.section_of(entries["GPUPRIO_CUPTI_LIBRARY"]), "tracing")
        self.assertEqual(settings_table.section_of(entries["GPUPRIO_SHM_DIR"]), "library")

    def test_entries_the_launcher_or_the_compiler_would_read_differently_are_refused(self):
        line = ('GPUPRIO_ENV_VAR(GPUPRIO_X, kLibrary, false, kInteger, 0, 9, "1", "", '
                '"MEANING")')
        self.assertEqual(len(settings_table.parse_table(line.replace("MEANING", "ok"))), 1)
        for meaning, why in (('say ""hi""', "'\"'"), ("a \\n b", "'\\'"),
                             ("a | b", "'|'"), ('a", "b', "nine")):
            with self.subTest(meaning):
                with self.assertRaises(settings_table.TableError) as caught:
                    settings_table.parse_table(line.replace("MEANING", meaning))
                self.assertIn(why, str(caught.exception))

    def test_a_missing_or_broken_marker_is_refused(self):
        self.edit(self.doc, "<!-- BEGIN settings table: tools", "<!-- settings table: tools")
        self.assertEqual(self.run_main("--check"), 2)
        shutil.copy(DOC, self.doc)
        text = read(self.doc)
        end = text.index(settings_table.END, text.index("settings table: tools"))
        with open(self.doc, "w", encoding="utf-8") as f:
            f.write(text[:end] + text[end + len(settings_table.END):])
        self.assertEqual(self.run_main("--check"), 2)


if __name__ == "__main__":
    unittest.main()
