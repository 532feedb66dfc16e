"""Logging never blocks the bridge: records go to a daemon thread (``bridge/system/logsink.py``)."""

from __future__ import annotations

import logging
import threading

import pytest

from bridge.system import logsink
from bridge.system.logsink import ThreadedHandler


class _Blocked(logging.Handler):
    """A target that blocks like a write to a full stderr pipe, until released."""

    def __init__(self) -> None:
        super().__init__()
        self.unblock = threading.Event()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.unblock.wait(10)
        self.lines.append(record.getMessage())


def _logger(handler: logging.Handler, name: str) -> logging.Logger:
    logger = logging.getLogger(name)
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(logging.INFO)
    return logger


def test_logging_returns_at_once_while_the_writer_is_blocked_and_drops_past_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A client that never reads stderr cannot stop the caller; what overflows is counted and reported."""
    monkeypatch.setattr(logsink, "MAX_QUEUED_RECORDS", 5)
    target = _Blocked()
    handler = ThreadedHandler(target)
    logger = _logger(handler, "test.logsink.blocked")
    done = threading.Event()

    def log_many() -> None:
        for number in range(50):
            logger.info("record %d", number)
        done.set()

    threading.Thread(target=log_many, daemon=True).start()
    assert done.wait(5), "logging blocked behind a writer that does not write"
    assert handler.dropped > 0
    dropped = handler.dropped
    target.unblock.set()
    for _ in range(500):  # until the writer has drained the queue (bounded: 5 s)
        if len(target.lines) >= 5:
            break
        threading.Event().wait(0.01)
    logger.info("after")
    handler.flush_and_stop()
    assert target.lines[0] == "record 0"
    assert target.lines[-2:] == [f"{dropped} log records dropped: stderr was not read", "after"]


def test_records_are_frozen_when_logged_and_all_written_by_the_exit() -> None:
    """Arguments changed after the call do not change the line; flush_and_stop writes everything queued."""
    target = _Blocked()
    target.unblock.set()
    handler = ThreadedHandler(target)
    logger = _logger(handler, "test.logsink.frozen")
    values = ["before"]
    logger.info("value %s", values)
    values[0] = "after"
    try:
        raise ValueError("boom")
    except ValueError:
        logger.exception("failed")
    handler.flush_and_stop()
    assert target.lines == ["value ['before']", "failed"]
