"""The test files themselves: pytest imports each as a top-level module named by its file
(tests/ has no ``__init__.py``; pyproject's ``pythonpath``), so two files with one name
break the collection of any run that holds both ("import file mismatch"). Off Windows the
clash between tests/process/test_namedpipe.py and tests/system/test_namedpipe.py stayed
hidden, because the first skipped itself while being imported; on Windows, where both
import, the whole suite stopped at collection."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_no_two_test_files_share_a_name() -> None:
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        if "node_modules" not in path.parts:
            by_name[path.name].append(str(path.relative_to(TESTS)))
    assert not {name: paths for name, paths in by_name.items() if len(paths) > 1}
