"""Fail a CI step whose tests were skipped where they must run (the workflow's named-pipes job).

    python .ci/strict_skips.py --none-skipped REPORT.xml [TEST_FILE ...]
    python .ci/strict_skips.py --each-file-ran REPORT.xml TEST_FILE ...

REPORT.xml is pytest's ``--junitxml`` report. ``--none-skipped``: every test ran and passed
(no skip at all: these tests exist to run on this OS), and at least one did. With
``--each-file-ran``: each TEST_FILE had at least one test that passed (a file may skip some
of its tests on this OS, never all of them: a module-level skip or a wrong marker would
otherwise turn a whole file off unnoticed, with the step still green). With
``--none-skipped``, TEST_FILEs given must each have run too. Exit status 1 with one line per
finding (as a GitHub error annotation), 0 otherwise. Standard library only.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ElementTree
from collections import Counter
from pathlib import PurePosixPath


def module_of(test_file: str) -> str:
    """``tests/transport/test_x.py`` -> ``tests.transport.test_x`` (pytest's junit classname)."""
    return ".".join(PurePosixPath(test_file.replace("\\", "/")).with_suffix("").parts)


def findings(report: str, test_files: list[str], *, none_skipped: bool) -> list[str]:
    cases = ElementTree.parse(report).getroot().iter("testcase")
    passed: Counter[str] = Counter()
    problems: list[str] = []
    total = 0
    for case in cases:
        total += 1
        where = f"{case.get('classname', '')}::{case.get('name', '')}"
        outcome = next((child.tag for child in case if child.tag in ("skipped", "failure", "error")), "passed")
        if outcome == "passed":
            passed[case.get("classname", "")] += 1
        elif outcome == "skipped" and none_skipped:
            skipped = case.find("skipped")
            message = skipped.get("message", "") if skipped is not None else ""
            problems.append(f"skipped where it must run: {where} ({message})")
    if total == 0:
        problems.append(f"{report}: no test ran at all")
    for test_file in test_files:
        module = module_of(test_file)
        if not any(count for name, count in passed.items() if name == module or name.startswith(module + ".")):
            problems.append(f"no test of {test_file} passed here: every one was skipped, deselected or failed")
    return problems


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in ("--none-skipped", "--each-file-ran"):
        print(__doc__, file=sys.stderr)
        return 2
    mode, report, test_files = argv[0], argv[1], argv[2:]
    if mode == "--each-file-ran" and not test_files:
        print("--each-file-ran needs the test files", file=sys.stderr)
        return 2
    problems = findings(report, test_files, none_skipped=mode == "--none-skipped")
    for problem in problems:
        print(f"::error::{problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
