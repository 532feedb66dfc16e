"""The test files themselves: pytest imports each as a top-level module named by its file
(tests/ has no ``__init__.py``; pyproject's ``pythonpath``), so two files with one name
break the collection of any run that holds both ("import file mismatch"). Off Windows the
clash between tests/process/test_namedpipe.py and tests/system/test_namedpipe.py stayed
hidden, because the first skipped itself while being imported; on Windows, where both
import, the whole suite stopped at collection."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

TESTS = Path(__file__).resolve().parent


def test_no_two_test_files_share_a_name() -> None:
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        if "node_modules" not in path.parts:
            by_name[path.name].append(str(path.relative_to(TESTS)))
    assert not {name: paths for name, paths in by_name.items() if len(paths) > 1}


SPAWNING_TEST = """
import subprocess, sys

import pytest


def test_unmarked():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


@pytest.mark.process
def test_marked():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


@pytest.fixture
def started():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def test_through_a_fixture(started):
    pass


def test_plain():
    pass
"""


@pytest.mark.process
def test_a_test_that_starts_a_subprocess_without_the_process_mark_fails(pytester: pytest.Pytester) -> None:
    """The quick round (-m "not process") starts no subprocess because an unmarked test that
    starts one fails (support/spawnguard.py), whether in its body or in a fixture."""
    pytester.makeini("[pytest]\nmarkers =\n    process: starts a subprocess\n")
    pytester.makepyfile(SPAWNING_TEST)
    result = pytester.runpytest_inprocess("-p", "support.spawnguard")
    result.assert_outcomes(passed=2, failed=1, errors=1)
    printed = result.stdout.str()
    assert "test_unmarked started a subprocess in its call" in printed
    assert "test_through_a_fixture started a subprocess in its setup" in printed
