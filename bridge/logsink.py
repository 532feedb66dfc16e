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
import queue
import threading

__all__ = ["ThreadedHandler", "MAX_QUEUED_RECORDS", "FLUSH_SECONDS"]

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
