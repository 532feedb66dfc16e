"""The rule behind the quick round (``python -m pytest -m "not process and not slow"``): a test that
starts a subprocess, in its body or in a fixture it asks for, is marked ``process``. A test
marked ``frozen``, ``interop`` or ``clients`` starts one by its nature: it gets the
``process`` mark at collection, so the quick round leaves it out too.

A pytest plugin (the root ``conftest.py`` loads it): while a test without the mark is set
up and run, ``subprocess.Popen`` (which ``subprocess.run``, asyncio's
subprocesses and the SDK's stdio client all go through) records each command it starts,
and the test fails naming the first one. A session fixture (``app_server``) counts for
the first test that asks for it, so every test that asks for it needs the mark. Other
ways to start a process (``os.fork``, ``os.posix_spawn``, ``multiprocessing``) are not
watched: the suite does not use them.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Generator, Iterator
from typing import Any

import pytest

IMPLYING_PROCESS = ("frozen", "interop", "clients")
"""Marks whose tests start subprocesses by their nature: each also gets ``process``."""


@contextlib.contextmanager
def watching() -> Iterator[list[str]]:
    """Within the block, every command ``subprocess.Popen`` starts is appended (as text) to
    the list yielded; the command still starts."""
    started: list[str] = []
    original = subprocess.Popen.__init__

    def recording(self: subprocess.Popen[Any], args: Any, *more: Any, **options: Any) -> None:
        started.append(args if isinstance(args, str) else " ".join(str(arg) for arg in args))
        original(self, args, *more, **options)

    subprocess.Popen.__init__ = recording  # type: ignore[method-assign]
    try:
        yield started
    finally:
        subprocess.Popen.__init__ = original  # type: ignore[method-assign]


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by mark
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("process") is None and any(item.get_closest_marker(name) for name in IMPLYING_PROCESS):
            item.add_marker(pytest.mark.process)


def _guarded(item: pytest.Item, phase: str) -> Generator[None, object, object]:
    if item.get_closest_marker("process") is not None:
        return (yield)
    with watching() as started:
        outcome = yield
    if started:
        pytest.fail(
            f"{item.nodeid} started a subprocess in its {phase} ({started[0][:200]}) but is not marked "
            f"`process`: mark it (@pytest.mark.process), so that the quick round (-m \"not process and not slow\") leaves it out",
            pytrace=False,
        )
    return outcome


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _guarded(item, "setup"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _guarded(item, "call"))
