"""Where the diagnostics go and which ones (bridge/cli/diagnostics.py, ``setup_logging``):
``--log-level`` is the bridge's own level; the libraries under it speak from ``warning``."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from bridge.cli.diagnostics import setup_logging


def _logged(tmp_path: Path, level: str) -> list[str]:
    log_file = tmp_path / "bridge.log"
    setup_logging(level, log_file)
    try:
        logging.getLogger("asyncio").debug("Using selector: EpollSelector")
        logging.getLogger("filelock").debug("Attempting to acquire lock")
        logging.getLogger("httpcore.connection").debug("connect_tcp.started")
        logging.getLogger("asyncio").warning("Executing <Task> took 0.2 seconds")
        logging.getLogger("filelock").error("the lock file is gone")
        logging.getLogger("bridge.trace").debug("client→app request initialize id 0 (146 bytes)")
        logging.getLogger("bridge").info("starting MyApp")
        logging.getLogger("bridge").warning("MyApp exited")
    finally:
        for handler in logging.getLogger().handlers:
            handler.close()  # (writes what its thread still holds)
    return [line.split(" mcp-app-bridge ", 1)[1] for line in log_file.read_text(encoding="utf-8").splitlines()]


def test_debug_is_the_bridges_own_and_other_libraries_keep_their_warnings(tmp_path: Path) -> None:
    """``--log-level debug`` showed asyncio's "Using selector" and filelock's every acquire
    and release among the bridge's trace (newcomer finding): now only the bridge's
    loggers speak below warning; another library's warnings and errors still show."""
    assert _logged(tmp_path, "debug") == [
        "WARNING asyncio: Executing <Task> took 0.2 seconds",
        "ERROR filelock: the lock file is gone",
        "DEBUG bridge.trace: client→app request initialize id 0 (146 bytes)",
        "INFO bridge: starting MyApp",
        "WARNING bridge: MyApp exited",
    ]


@pytest.mark.parametrize(
    ("level", "expected"),
    [
        ("warning", ["WARNING asyncio: Executing <Task> took 0.2 seconds", "ERROR filelock: the lock file is gone", "WARNING bridge: MyApp exited"]),
        ("error", ["ERROR filelock: the lock file is gone"]),
    ],
)
def test_a_higher_level_holds_for_every_logger(tmp_path: Path, level: str, expected: list[str]) -> None:
    assert _logged(tmp_path, level) == expected
