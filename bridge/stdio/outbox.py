"""The one stdout writer: whole lines, in the order they were put, never interleaved.

Every line for the client goes through :meth:`Outbox.put`; :meth:`Outbox.run` (one task)
writes them. Two paths, one order:

- **fast path**: when nothing is queued or being written, a line the descriptor takes at
  once (``write_now``: a pipe with room, at most ``PIPE_BUF`` bytes) is written inside
  ``put`` without a trip through the queue and the writer task (measured: a loop
  iteration costs about a tenth of a small call);
- otherwise the line joins a bounded queue (``queue_lines``) and ``put`` waits while the
  queue is full: a client that reads slowly slows the bridge down instead of growing it.

The ordering invariant: a line is counted in ``_unwritten`` *before* ``put`` waits for room,
so a later line never takes the fast path past it. A closed stdout (``OSError``) ends
writing for good: :attr:`Outbox.gone` turns true, ``on_gone`` is called once, and later
lines are dropped quietly (nobody is left to read them).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

import anyio

from .fds import ByteSink

__all__ = ["Outbox", "ImmediateSink", "OUTPUT_QUEUE_LINES"]

log = logging.getLogger("bridge")

#: Lines queued for the writer before ``put`` waits (backpressure from a slow client).
OUTPUT_QUEUE_LINES = 64


class ImmediateSink(ByteSink, Protocol):
    """A sink that can also write without waiting (``bridge.stdio.fds.FdWriter``)."""

    def write_now(self, data: bytes) -> int:
        """Write what goes without blocking; return how many bytes went (0: none)."""
        ...


class Outbox:
    """The stdout writer.

    Args:
        sink: where lines go; ``send(bytes)`` raises ``OSError`` once the client is gone.
            A ``write_now(bytes) -> int`` method (:class:`ImmediateSink`) enables the fast path.
        on_gone: called once when stdout turns out to be closed.
        queue_lines: lines queued before ``put`` waits.
    """

    def __init__(self, sink: ByteSink, *, on_gone: Callable[[], None], queue_lines: int = OUTPUT_QUEUE_LINES) -> None:
        self._sink = sink
        self._write_now: Callable[[bytes], int] | None = getattr(sink, "write_now", None)
        self._on_gone = on_gone
        self._send, self._receive = anyio.create_memory_object_stream[bytes](queue_lines)
        self._unwritten = 0  # lines handed to the queue and not written yet
        self._closed = False
        #: stdout is closed: nothing more reaches the client.
        self.gone = False

    async def put(self, line: bytes) -> None:
        """Queue one whole line (ending in ``\\n``) for stdout; waits while the queue is full.
        Never raises for a closed stdout or a closed outbox (the line is dropped)."""
        try:
            if not self._unwritten and self._write_now is not None and not self.gone and not self._closed:
                try:
                    written = self._write_now(line)
                except OSError as exc:
                    self._stdout_gone(exc)
                    return
                if written == len(line):
                    return
                line = line[written:]
            self._send.send_nowait(line)
            self._unwritten += 1
        except anyio.WouldBlock:
            self._unwritten += 1  # counted before waiting: a later line must queue behind this one
            try:
                await self._send.send(line)
            except BaseException as exc:
                self._unwritten -= 1
                if not isinstance(exc, (anyio.ClosedResourceError, anyio.BrokenResourceError)):
                    raise
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # the run is over; nothing more reaches the client

    def close(self) -> None:
        """Accept no more lines; :meth:`run` returns once the queued ones are written."""
        self._closed = True
        self._send.close()

    async def run(self) -> None:
        """Write queued lines until :meth:`close` (then the rest) or cancellation."""
        async with self._receive:
            while True:
                try:
                    line = self._receive.receive_nowait()
                except anyio.WouldBlock:
                    try:
                        line = await self._receive.receive()
                    except anyio.EndOfStream:
                        return
                except anyio.EndOfStream:
                    return
                try:
                    if not self.gone:
                        await self._sink.send(line)
                except OSError as exc:
                    self._stdout_gone(exc)
                finally:
                    self._unwritten -= 1

    def _stdout_gone(self, exc: OSError) -> None:
        if self.gone:
            return
        log.info("stdout closed (%s); shutting down", type(exc).__name__)
        self.gone = True
        self._on_gone()
