"""The one stdout writer: whole lines, in the order they were put, never interleaved, in a
fixed byte budget.

Every line for the client goes through :meth:`Outbox.put`; :meth:`Outbox.run` (one task)
writes them. Two paths, one order:

- **fast path**: when nothing is queued, waiting or being written, a line the descriptor
  takes at once (``write_now``: a pipe with room, at most ``PIPE_BUF`` bytes) is written
  inside ``put`` without a trip through the queue and the writer task (measured: a loop
  iteration costs about a tenth of a small call);
- otherwise the line joins the queue. The queue holds at most ``budget_bytes`` (each line
  counted with :data:`LINE_COST_BYTES` beside its own size), plus the one line that crossed
  it: while it is full, ``put`` waits, and the waiting puts go in the order they came.

A client that stops reading stdout therefore stops the bridge instead of growing it. The
puts that wait are the tasks that hold a reply or a message from the app: the GET stream
and SSE relays stop reading from the app, and :meth:`wait_for_room` is where the stdin
reader and new requests wait (``bridge/serve/dispatch.py``), so the bridge reads neither stdin
nor new replies until the client reads again. Nothing is dropped: once the client reads,
every line goes out in order.

The ordering invariant: a line that waits is in the line of waiters (``_turns``) *before*
``put`` waits, so a later line never takes the fast path past it. A closed stdout
(``OSError``) ends writing for good: :attr:`Outbox.gone` turns true, ``on_gone`` is called
once, and later lines are dropped quietly (nobody is left to read them).
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable
from typing import Protocol

from .fds import ByteSink

__all__ = ["Outbox", "ImmediateSink", "OUTPUT_BUDGET_BYTES", "LINE_COST_BYTES"]

log = logging.getLogger("bridge")

#: Bytes of lines queued for stdout before ``put`` waits (plus the one line that crossed it).
OUTPUT_BUDGET_BYTES = 64 * 1024 * 1024
#: What a queued line costs beside its own bytes (its object and queue slot, rounded up), so
#: that a flood of tiny lines is bounded too.
LINE_COST_BYTES = 256


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
        budget_bytes: bytes queued before ``put`` waits (default :data:`OUTPUT_BUDGET_BYTES`).
    """

    def __init__(self, sink: ByteSink, *, on_gone: Callable[[], None], budget_bytes: int | None = None) -> None:
        self._sink = sink
        self._write_now: Callable[[bytes], int] | None = getattr(sink, "write_now", None)
        self._on_gone = on_gone
        self._budget = OUTPUT_BUDGET_BYTES if budget_bytes is None else budget_bytes
        # The byte budget bounds the queue, not a count of lines.
        self._queue: collections.deque[bytes] = collections.deque()
        self._queued = asyncio.Event()  # set when the writer has a line to take or is done
        self._unwritten = 0  # lines handed to the queue and not written yet
        self._held_bytes = 0  # what those lines count against the budget
        self._turns: collections.deque[asyncio.Event] = collections.deque()  # puts waiting, oldest first
        self._room = asyncio.Event()  # set once there is room (for wait_for_room)
        self._closed = False
        #: stdout is closed: nothing more reaches the client.
        self.gone = False

    @property
    def held_bytes(self) -> int:
        """Bytes of queued lines not written yet (each with :data:`LINE_COST_BYTES`)."""
        return self._held_bytes

    @property
    def has_room(self) -> bool:
        """Whether a line put now would be queued without waiting (or dropped: stdout is gone)."""
        return (not self._turns and self._held_bytes < self._budget) or self.gone or self._closed

    async def wait_for_room(self) -> None:
        """Return once :attr:`has_room` (at once if it is): where the stdin reader and new
        requests wait while the client does not read."""
        while not self.has_room:
            if self._room.is_set():
                self._room = asyncio.Event()
            await self._room.wait()

    async def put(self, line: bytes) -> None:
        """Queue one whole line (ending in ``\\n``) for stdout; waits while the budget is
        used up. Never raises for a closed stdout or a closed outbox (the line is dropped)."""
        if self.gone or self._closed:
            return
        if not self._unwritten and not self._turns and self._write_now is not None:
            try:
                written = self._write_now(line)
            except OSError as exc:
                self._stdout_gone(exc)
                return
            if written == len(line):
                return
            line = line[written:]
        if self._turns or self._held_bytes >= self._budget:
            try:
                await self._wait_turn()
            except BaseException:
                self._pass_turn()  # if it was this one's turn, it is the next one's now
                raise
            if self.gone or self._closed:
                self._pass_turn()
                return
        self._queue.append(line)
        self._queued.set()
        self._unwritten += 1
        self._held_bytes += len(line) + LINE_COST_BYTES
        self._pass_turn()

    async def _wait_turn(self) -> None:
        """Wait until this put is the oldest waiting one and its line may be queued. The
        turn stays in ``_turns`` until this task runs again (and then queues its line
        without an ``await`` in between), so no later put overtakes it."""
        turn = asyncio.Event()
        self._turns.append(turn)
        try:
            await turn.wait()
        finally:
            self._turns.remove(turn)
        # (cancelled while waiting: the finally took it out; a woken turn is passed on by
        # the caller's _pass_turn once its line is queued)

    def _pass_turn(self) -> None:
        """Wake the oldest waiting put if its line may be queued now; else, if nothing
        waits and there is room, wake :meth:`wait_for_room`."""
        if self._turns:
            if self._held_bytes < self._budget or self.gone or self._closed:
                self._turns[0].set()
        else:
            self._signal_room()

    def _signal_room(self) -> None:
        if self.has_room:
            self._room.set()

    def close(self) -> None:
        """Accept no more lines; :meth:`run` returns once the queued ones are written."""
        self._closed = True
        self._queued.set()
        self._wake_all()

    async def run(self) -> None:
        """Write queued lines until :meth:`close` (then the rest) or cancellation."""
        queue = self._queue
        while True:
            if not queue:
                if self._closed:
                    return
                self._queued.clear()
                await self._queued.wait()
                continue
            line = queue.popleft()
            try:
                if not self.gone:
                    await self._sink.send(line)
            except OSError as exc:
                self._stdout_gone(exc)
            finally:
                self._unwritten -= 1
                self._held_bytes -= len(line) + LINE_COST_BYTES
                self._pass_turn()

    def _wake_all(self) -> None:
        for turn in self._turns:
            turn.set()
        self._room.set()

    def _stdout_gone(self, exc: OSError) -> None:
        if self.gone:
            return
        log.info("stdout closed (%s); shutting down", type(exc).__name__)
        self.gone = True
        self._wake_all()
        self._on_gone()
