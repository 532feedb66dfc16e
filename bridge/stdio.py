"""The stdio ends: raw file-descriptor reads and writes, each in its own daemon thread.

Why threads and raw descriptors (DESIGN.md §2.1–§2.2, HAZARDS B05–B07, B10, B16, B17):

- ``os.read(fd, n)`` returns whatever one read yields, so a message is seen as soon as its
  newline arrives. ``sys.stdin.buffer.read(n)`` would wait for ``n`` bytes or EOF, and
  asyncio's pipe APIs cannot read Windows stdin at all.
- ``os.write(fd, …)`` sends UTF-8 bytes with no text layer: no locale encoding, no newline
  translation, nothing left in a buffer (a frozen executable ignores ``PYTHONUNBUFFERED``).
- The threads are daemons, so a read blocked on a pipe the client never closes, or a write
  to a client that stopped reading, can never keep the process alive at exit. anyio's worker
  threads are not daemons, which is why they are not used here.

Tests inject their own ends with the same two methods: ``receive()`` and ``send(data)``.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from typing import Any, Protocol

import anyio
import anyio.from_thread
import anyio.lowlevel

__all__ = ["ByteSource", "ByteSink", "FdReader", "FdWriter", "DEFAULT_READ_BYTES"]

#: Bytes asked for per read. A pipe hands over at most its buffer (64 KiB on Linux) per read;
#: a larger request costs nothing and helps with files and sockets.
DEFAULT_READ_BYTES = 256 * 1024


class ByteSource(Protocol):
    """Where the bridge reads the client's bytes from."""

    async def receive(self) -> bytes:
        """Return the next chunk (any length ≥ 1), or ``b""`` once input has ended."""
        ...


class ByteSink(Protocol):
    """Where the bridge writes its lines to."""

    async def send(self, data: bytes) -> None:
        """Write all of ``data``. Raises ``OSError`` (e.g. ``BrokenPipeError``) when the
        reader has gone."""
        ...


class _DaemonCaller:
    """Runs blocking calls one at a time in a daemon thread and hands results to the loop."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], anyio.Event, list[Any]] | None] = (
            queue.SimpleQueue()
        )
        self._thread: threading.Thread | None = None
        self._token: Any = None

    async def call(self, func: Callable[[], Any]) -> Any:
        if self._thread is None:
            self._token = anyio.lowlevel.current_token()
            self._thread = threading.Thread(target=self._work, name=self._name, daemon=True)
            self._thread.start()
        done = anyio.Event()
        outcome: list[Any] = []
        self._jobs.put((func, done, outcome))
        await done.wait()
        ok, value = outcome
        if not ok:
            raise value
        return value

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            func, done, outcome = job
            try:
                outcome[:] = [True, func()]
            except BaseException as exc:  # handed to the awaiting task, raised there
                outcome[:] = [False, exc]
            try:
                anyio.from_thread.run_sync(done.set, token=self._token)
            except Exception:  # the event loop has finished: nobody is waiting any more
                return


class FdReader:
    """Read chunks from a file descriptor (the process's stdin by default).

    Args:
        fd: the descriptor to read; it is not closed by this object.
        read_bytes: the most bytes asked for per read.
    """

    def __init__(self, fd: int = 0, read_bytes: int = DEFAULT_READ_BYTES) -> None:
        self._fd = fd
        self._read_bytes = read_bytes
        self._caller = _DaemonCaller("mcp-app-bridge stdin")
        self._eof = False

    async def receive(self) -> bytes:
        """Return the next chunk, or ``b""`` at EOF (and on every later call). A read error
        (for example an invalid handle) counts as EOF."""
        if self._eof:
            return b""
        try:
            data: bytes = await self._caller.call(lambda: os.read(self._fd, self._read_bytes))
        except OSError:
            data = b""
        if not data:
            self._eof = True
        return data


class FdWriter:
    """Write bytes to a file descriptor (the wire: a private duplicate of fd 1)."""

    def __init__(self, fd: int = 1) -> None:
        self._fd = fd
        self._caller = _DaemonCaller("mcp-app-bridge stdout")

    async def send(self, data: bytes) -> None:
        """Write all of ``data``; raises ``OSError`` when the client closed its end."""
        await self._caller.call(lambda: _write_all(self._fd, data))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
