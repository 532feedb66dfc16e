"""Log records written by a daemon thread: the event loop never waits on stderr.

A client that never reads the bridge's stderr fills the pipe (64 KiB); a log call on the
loop's thread would then block, and with it every reply and the reaction to stdin EOF.
Here the caller formats the record and queues the text; a daemon thread, started with the
first record, writes it through the real handler. At most :data:`MAX_QUEUED_RECORDS` wait;
beyond that records are dropped, and their number is logged once there is room again. At
exit the thread gets :data:`FLUSH_SECONDS` to write what is queued.

(``logging.handlers.QueueListener`` does the same, but importing ``logging.handlers`` pulls
in ``pickle`` and ``socket`` and costs the idle bridge about 1.5 MB.)
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import stat
import threading
from pathlib import Path
from typing import BinaryIO

__all__ = ["ThreadedHandler", "MAX_QUEUED_RECORDS", "FLUSH_SECONDS", "open_log_file"]

#: Records waiting to be written; more are dropped and counted.
MAX_QUEUED_RECORDS = 10_000
#: How long the exit waits for the queued records to be written.
FLUSH_SECONDS = 1.0


class ThreadedHandler(logging.Handler):
    """Queue each record for ``target`` (which does the writing, in a daemon thread).

    Args:
        target: the handler that writes (a ``StreamHandler`` on stderr, a ``FileHandler``).
    """

    def __init__(self, target: logging.Handler) -> None:
        super().__init__()
        self._target = target
        self._records: queue.Queue[logging.LogRecord | None] = queue.Queue(MAX_QUEUED_RECORDS)
        self._thread: threading.Thread | None = None
        self._lock_start = threading.Lock()
        self.dropped = 0

    def emit(self, record: logging.LogRecord) -> None:
        # Freeze the record here: its arguments may change once the caller goes on.
        frozen = logging.makeLogRecord(record.__dict__)
        frozen.msg = record.getMessage()
        frozen.args = None
        if record.exc_info and not record.exc_text:
            frozen.exc_text = logging.Formatter().formatException(record.exc_info)
        frozen.exc_info = None
        self._start()
        try:
            if self.dropped:
                note = logging.makeLogRecord(
                    {"name": "bridge", "levelno": logging.WARNING, "levelname": "WARNING",
                     "msg": f"{self.dropped} log records dropped: stderr was not read"}
                )
                self._records.put_nowait(note)
                self.dropped = 0
            self._records.put_nowait(frozen)
        except queue.Full:
            self.dropped += 1

    def _start(self) -> None:
        if self._thread is not None:
            return
        with self._lock_start:
            if self._thread is None:
                thread = threading.Thread(target=self._write, name="mcp-app-bridge log", daemon=True)
                thread.start()
                self._thread = thread
                atexit.register(self.flush_and_stop)

    def _write(self) -> None:
        while (record := self._records.get()) is not None:
            self._target.handle(record)

    def flush_and_stop(self) -> None:
        """Write what is queued (bounded by :data:`FLUSH_SECONDS`) and stop the thread."""
        thread = self._thread
        if thread is None:
            return
        try:
            self._records.put(None, timeout=FLUSH_SECONDS)
        except queue.Full:
            return
        thread.join(FLUSH_SECONDS)

    def close(self) -> None:
        self.flush_and_stop()
        self._target.close()
        super().close()


def open_log_file(path: Path) -> BinaryIO:
    """Open ``path`` for appending log lines (``--log-file``, the launched app's ``--launch-log``).

    A new file is created with mode 0600; an existing one keeps its mode. A symbolic link
    is never followed (``O_NOFOLLOW``), and the file must be a regular file of this user's,
    so a link or a file planted by someone else cannot redirect what is appended.

    Raises:
        OSError: the file cannot be opened, is a symbolic link (``ELOOP``), is not a
            regular file, or belongs to another user (the message says which).
    """
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    flags |= getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    if not hasattr(os, "O_NOFOLLOW") and os.path.islink(path):  # pragma: no cover - Windows
        raise OSError(f"{path} is a symbolic link, which a log file is never written through")
    try:
        descriptor = os.open(path, flags, 0o600)
    except OSError as exc:
        if os.path.islink(path):
            raise OSError(f"{path} is a symbolic link, which a log file is never written through") from None
        raise OSError(f"{path}: {exc.strerror}") from None
    status = os.fstat(descriptor)
    problem = None
    if not stat.S_ISREG(status.st_mode) and not stat.S_ISCHR(status.st_mode):  # /dev/null is fine
        problem = "is not a regular file"
    elif os.name == "posix" and stat.S_ISREG(status.st_mode) and status.st_uid != os.geteuid():  # type: ignore[attr-defined,unused-ignore]  # POSIX only; mypy cannot narrow os.name
        problem = f"belongs to uid {status.st_uid}, not to the user running the bridge"
    if problem is not None:
        os.close(descriptor)
        raise OSError(f"{path} {problem}")
    return os.fdopen(descriptor, "ab")
