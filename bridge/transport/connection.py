"""One keep-alive connection of the pool (``pool.py``): the asyncio side of the socket.

Its bytes go straight into the current exchange's sans-I/O parser (``http1.py``); one
waiter at a time is woken when bytes arrive or the connection ends.
"""

from __future__ import annotations

import asyncio
import select
import sys

from .base import ConnectionBroken, ReadTimeout
from .http1 import ResponseParser

__all__ = ["Connection", "fail", "HIGH_WATER_BYTES", "RECV_BYTES", "FIRST_RECV_BYTES", "WHOLE_RECV_BYTES"]

#: Bytes read from the socket at a time, into one buffer per connection: 16 KiB at first
#: (an idle connection holds little), 64 KiB once a read fills it.
FIRST_RECV_BYTES = 16 * 1024
RECV_BYTES = 64 * 1024
#: While a large body is read whole (:meth:`Connection.expect_bytes`), reads take up to this
#: at once: a sixteenth of the trips through the event loop of 64 KiB reads.
WHOLE_RECV_BYTES = 1024 * 1024
#: A response body is buffered up to this before the socket stops being read.
HIGH_WATER_BYTES = 4 * 1024 * 1024


class _Wakeup:
    """One waiter at a time, woken by :meth:`set` or failed at a loop time: a bare future,
    no ``asyncio.Event`` nor ``wait_for`` task per wait.

    The read timeout's timer is lazy: one ``call_at`` stays armed across waits, and a wait
    whose bound is no earlier than the armed one (each exchange's is later than the last's)
    only notes its bound. When the timer fires early for the bound now in force, it is armed
    again for it; with no bounded wait in progress it does nothing. So a wait costs no timer
    of its own (a ``call_at`` and its cancel were 2.8 µs, a percent of a call's CPU), a
    bound is never cut short, and an idle connection is woken at most once, one read
    timeout after its last wait. :meth:`close` disarms it."""

    __slots__ = ("_future", "_timer", "_timeout_at", "_late")

    def __init__(self) -> None:
        self._future: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timeout_at: float | None = None  # the bound of the wait in progress
        self._late = ""  # what its ReadTimeout says

    def set(self) -> None:
        future = self._future
        if future is not None and not future.done():
            future.set_result(None)

    async def wait(self, timeout_at: float | None, late: str) -> None:
        """Wait for :meth:`set`; raise :class:`ReadTimeout` (saying ``late``) at loop time
        ``timeout_at`` (``None``: never)."""
        loop = asyncio.get_running_loop()
        future = self._future = loop.create_future()
        self._timeout_at, self._late = timeout_at, late
        if timeout_at is not None:
            timer = self._timer
            if timer is None or timer.when() > timeout_at:
                if timer is not None:
                    timer.cancel()
                self._timer = loop.call_at(timeout_at, self._on_timer)
        try:
            await future
        finally:
            self._future = self._timeout_at = None

    def close(self) -> None:
        """Disarm the timer (the connection is gone)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _on_timer(self) -> None:
        self._timer = None
        future, timeout_at = self._future, self._timeout_at
        if future is None or future.done() or timeout_at is None:
            return  # no bounded wait now: the next one arms the timer again
        loop = future.get_loop()
        if loop.time() < timeout_at:  # armed for an earlier wait's bound
            self._timer = loop.call_at(timeout_at, self._on_timer)
        else:
            future.set_exception(ReadTimeout(self._late))


def fail(future: asyncio.Future[None], error: Exception) -> None:
    if not future.done():
        future.set_exception(error)


class Connection(asyncio.BufferedProtocol):
    """One keep-alive connection: its socket's bytes go straight into the current
    exchange's :class:`~bridge.transport.http1.ResponseParser`; one waiter is woken by them.

    A buffered protocol: the socket is read into one buffer of :data:`RECV_BYTES` made
    once, where a plain protocol gets a fresh 256 KiB ``bytes`` per read from asyncio (an
    mmap and page faults each time: 15 µs against 2 µs, measured)."""

    def __init__(self, key: tuple[str, int]) -> None:
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.parser = ResponseParser()  # replaced per exchange; between them, it catches stray bytes
        self.closed = False  # EOF or loss seen: never reuse
        self.error: BaseException | None = None
        self.wakeup = _Wakeup()
        self._paused = False
        self.exchanges = 0
        self.busy = False  # held by an exchange (the pool's accounting)
        self.idle_since = 0.0  # time.monotonic() when it went back to the pool
        #: Buffered bytes at which the socket stops being read (raised for a whole-body read).
        self.high_water_bytes = HIGH_WATER_BYTES
        #: The waiter is woken by arriving bytes only once this many are buffered (EOF
        #: and loss always wake it): a body read whole wakes its reader once, not per read.
        self.wake_at_bytes = 0
        self._received = memoryview(bytearray(FIRST_RECV_BYTES))

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._received

    def buffer_updated(self, nbytes: int) -> None:
        parser = self.parser
        parser.receive_data(self._received[:nbytes])
        if nbytes == len(self._received) < RECV_BYTES:
            self._received = memoryview(bytearray(RECV_BYTES))  # a large body: read more at once
        buffered = parser.buffered_bytes
        if buffered > self.high_water_bytes and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()
        if buffered >= self.wake_at_bytes:
            self.wakeup.set()

    def eof_received(self) -> bool:
        self.closed = True
        self.parser.receive_data(b"")
        self.wakeup.set()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.error = exc
        self.wakeup.set()
        self.wakeup.close()

    # used by the exchange
    def expect_bytes(self, total: int) -> None:
        """A body is read whole: buffer up to ``total`` bytes without pausing the socket,
        wake the waiter only once they are all buffered, and read in larger pieces while
        more than :data:`RECV_BYTES` are to come. :meth:`expect_done` undoes it."""
        self.high_water_bytes = max(HIGH_WATER_BYTES, total + 1)
        self.wake_at_bytes = total
        to_come = total - self.parser.buffered_bytes
        if to_come > RECV_BYTES:
            self._received = memoryview(bytearray(min(to_come, WHOLE_RECV_BYTES)))

    def expect_done(self) -> None:
        self.high_water_bytes = HIGH_WATER_BYTES
        self.wake_at_bytes = 0
        if len(self._received) > RECV_BYTES:
            self._received = memoryview(bytearray(RECV_BYTES))  # an idle connection holds little

    def consumed(self) -> None:
        """The reader took bytes from the parser: read the socket again when it is low."""
        if self._paused and self.parser.buffered_bytes <= self.high_water_bytes // 4 and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()

    async def wait_for_data(self, timeout_at: float | None, late: str) -> None:
        """Wait until bytes arrive or the connection ends, at most until loop time ``timeout_at``.

        Raises:
            ReadTimeout: (saying ``late``) nothing arrived in time.
            ConnectionBroken: the connection had already ended.
        """
        if self.closed:
            raise ConnectionBroken(self.lost_reason())
        await self.wakeup.wait(timeout_at, late)

    def lost_reason(self) -> str:
        if self.error is None:
            return "the server closed the connection before the response was complete"
        return f"the connection failed ({type(self.error).__name__}: {self.error})"

    def usable(self) -> bool:
        return (
            not self.closed
            and not self.parser.buffered_bytes
            and self.transport is not None
            and not self.transport.is_closing()
        )

    def quiet(self) -> bool:
        """Whether the socket itself has nothing to read, checked without waiting: an EOF
        (the server closed the idle connection) or stray bytes the event loop has not
        processed yet make the connection unfit for another request."""
        sock = self.transport.get_extra_info("socket") if self.transport is not None else None
        if sock is None:
            return True
        try:
            if sys.platform != "win32":  # no poll there; select.select refuses descriptors >= FD_SETSIZE (1024)
                poller = select.poll()
                poller.register(sock, select.POLLIN)
                return not poller.poll(0)
            readable, _, _ = select.select([sock], [], [], 0)
        except (OSError, ValueError):
            return False
        return not readable

    def close(self) -> None:
        self.closed = True
        self.wakeup.close()
        if self.transport is not None:
            self.transport.abort()
