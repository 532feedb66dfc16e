"""The bridge's own keep-alive HTTP/1.1 pool for the app's ``http://`` endpoint on loopback.

Why it exists: measured with ``bench/profile_bridge.py``, about three quarters of the
bridge's CPU per call went to httpx's default transport (httpcore's pool, h11's
event machinery and anyio cancel scopes around every socket operation), which capped
the bridge at a quarter of a direct client's throughput (docs/benchmarks.md).
The bridge needs a small part of HTTP: one request at a time per keep-alive
connection, no TLS, no proxies, no redirects, no compression, no ``Expect``. This
module does the I/O of that part on ``asyncio`` protocols; the bytes are made and read by
the sans-I/O ``http1.py``. ``https://`` goes through httpx (``httpx_adapter.py``).

- persistence (RFC 9112 §9.3): a connection goes back to the pool only when its response
  was read to the end and the parser says it may persist; a pooled connection the server
  has closed (or that holds stray bytes) is never reused;
- flow control: a response body is buffered up to :data:`HIGH_WATER_BYTES` before the
  socket stops being read, so a huge reply costs bounded memory until it is consumed.

Timeouts, in seconds: ``connect`` (opening a connection); ``read``: the response head must
be complete within it of sending the request (a head dripped a byte at a time is cut off
too); a body read whole (:meth:`Http11Response.read_whole`) must be complete within it
of the call, and a streamed body may be silent no longer (``None``: no bound); ``pool`` (waiting for a free connection). A
request whose bytes the app stops reading ends with the head's bound (no separate write
timeout). Failures raise the ``TransportError`` subclasses of ``base.py``; none of their
messages holds a header value.
"""

from __future__ import annotations

import asyncio
import collections
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterable

from ..core.pipeurl import PIPE_PREFIX
from .base import ConnectionBroken, PoolTimeout
from .connection import HIGH_WATER_BYTES, Connection, fail
from .http1 import (
    END,
    MAX_HEAD_BYTES,
    NEED_DATA,
    Head,
    Headers,
    ResponseParser,
    asks_to_close,
    encode_request_head,
    parse_url,
)
from .unixlink import connect_unix
from .verifiedconnect import connect_first_verified

__all__ = ["Http11Pool", "Http11Response", "Headers", "MAX_HEAD_BYTES", "HIGH_WATER_BYTES"]

_HEAD_LATE = "no complete response head within the read timeout of sending the request"
_BODY_LATE = "the response body did not arrive complete within the read timeout"
_SILENT = "no response bytes within the read timeout"

#: A connection idle for this long has its socket checked (one ``poll``) before reuse, as
#: httpcore does: servers close idle keep-alive connections (uvicorn after 5 s), and a
#: request sent as the close crosses it would fail. Busy connections skip the syscall.
QUIET_CHECK_AFTER_SECONDS = 1.0
#: Request bodies up to this size are sent in the same write as the head.
_JOIN_BODY_BYTES = 64 * 1024

class Http11Response:
    """A response whose head has arrived; the body is read with :meth:`aiter_bytes` or
    :meth:`read_whole`.

    Attributes:
        status_code: the final status (1xx responses are skipped).
        http_version: ``"HTTP/1.1"`` or ``"HTTP/1.0"``.
        headers: the response's fields (:class:`~bridge.transport.http1.Headers`).

    :meth:`aclose` must be called (``bridge/streamable/upstream.py`` does, on every path): it returns the
    connection to the pool when the body was read to the end and the connection may
    persist, and closes it otherwise.
    """

    __slots__ = ("status_code", "http_version", "headers", "_pool", "_connection", "_read_timeout")

    def __init__(self, pool: Http11Pool, connection: Connection, head: Head, read_timeout: float | None) -> None:
        self.status_code = head.status_code
        self.http_version = head.http_version
        self.headers = head.headers
        self._pool = pool
        self._connection: Connection | None = connection
        self._read_timeout = read_timeout

    @property
    def keep_alive(self) -> bool:
        """Whether the connection may serve another request once this response is read."""
        return self._connection is not None and self._connection.parser.keep_alive

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        """Yield the body's bytes as they arrive (de-chunked), in chunks of any size.

        Raises:
            ReadTimeout: the server went silent for longer than the read timeout.
            ConnectionBroken: the connection ended before the body did.
            ProtocolViolation: the chunked framing is malformed.
        """
        connection = self._connection
        if connection is None:
            return
        parser = connection.parser
        loop = asyncio.get_running_loop()
        while True:
            event = parser.next_event()
            if event is NEED_DATA:
                if connection.closed:
                    raise ConnectionBroken(connection.lost_reason())
                timeout_at = None if self._read_timeout is None else loop.time() + self._read_timeout
                await connection.wait_for_data(timeout_at, _SILENT)
            elif event is END:
                return
            else:
                connection.consumed()
                yield event.data  # type: ignore[union-attr]

    async def read_whole(self, limit: int, suffix: bytes = b"") -> bytes | None:
        """The whole ``Content-Length`` body plus ``suffix``, as one ``bytes`` made in one
        copy, or ``None`` (nothing read) when the body is framed otherwise or is longer
        than ``limit`` bytes: the caller then streams it with :meth:`aiter_bytes`.

        For large bodies: chunks and a join would touch the body's size in fresh memory
        twice more (page faults, measured in bench/README.md). The body must be complete
        within the read timeout of this call (a body dripped a byte at a time is cut off).

        Raises:
            ReadTimeout, ConnectionBroken: as :meth:`aiter_bytes`.
        """
        connection = self._connection
        if connection is None:
            return None
        parser = connection.parser
        remaining = parser.length_body_remaining()
        if remaining is None or remaining > limit:
            return None
        connection.expect_bytes(remaining)
        connection.consumed()  # reading again if it had paused
        timeout_at = None if self._read_timeout is None else asyncio.get_running_loop().time() + self._read_timeout
        try:
            while (body := parser.take_length_body(suffix)) is None:
                if connection.closed:
                    raise ConnectionBroken(connection.lost_reason())
                await connection.wait_for_data(timeout_at, _BODY_LATE)
        finally:
            connection.expect_done()
        connection.consumed()
        return body

    async def aread(self) -> bytes:
        """The whole body (for short bodies; large ones are streamed by the caller)."""
        return b"".join([chunk async for chunk in self.aiter_bytes()])

    async def aclose(self) -> None:
        """Release the connection: back to the pool if reusable, else closed."""
        connection, self._connection = self._connection, None
        if connection is None:
            return
        parser = connection.parser
        self._pool.release(connection, reusable=parser.complete and parser.keep_alive and connection.usable())


class Http11Pool:
    """Keep-alive connections to ``http://`` origins, at most ``max_connections`` at once.

    Args:
        max_connections: connections open at the same time (idle or busy), all origins.
        connect_timeout_seconds: bound on opening one connection.
        pool_timeout_seconds: bound on waiting for a free connection when all are busy.
        max_overflow: connections that ``bounded=False`` requests may open beyond that.
        verify_connection: called with the socket of every NEW connection right after the
            TCP connect and before any byte is written (it may return an awaitable, which
            is awaited); whatever it raises reaches the caller of :meth:`request` after the
            socket is closed, and the connection is never pooled. When the host resolves
            to several addresses, a ``ListenerUnverifiedError`` (or ``AppUnreachableError``)
            for one of them skips it and the next one is tried (``verifiedconnect.py``).
    """

    def __init__(
        self,
        *,
        max_connections: int,
        connect_timeout_seconds: float,
        pool_timeout_seconds: float,
        max_overflow: int = 8,
        verify_connection: Callable[[socket.socket], object] | None = None,
    ) -> None:
        if max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        self._max = max_connections
        self._overflow = max_overflow  # extra connections for bounded=False requests, no more
        self._connect_timeout = connect_timeout_seconds
        self._pool_timeout = pool_timeout_seconds
        self._verify_connection = verify_connection
        self._idle: dict[tuple[str, int], list[Connection]] = {}
        self._connections: set[Connection] = set()  # open, idle or busy (see _opened/_closed_one)
        self._connecting = 0  # slots taken by connections being opened
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._targets: dict[str, tuple[tuple[str, int], str, str]] = {}
        self._closed = False

    @property
    def open_connections(self) -> int:
        """Connections open now, idle or busy, plus those being opened."""
        return len(self._connections) + self._connecting

    def _opened(self, connection: Connection) -> None:
        self._connections.add(connection)

    def _closed_one(self, connection: Connection) -> None:
        """Close ``connection`` and free its slot (idempotent: a second call changes nothing)."""
        connection.close()
        self._connections.discard(connection)

    async def request(
        self,
        method: str,
        url: str,
        headers: Iterable[tuple[str, str]],
        body: bytes | None = None,
        *,
        read_timeout_seconds: float | None,
        bounded: bool = True,
    ) -> Http11Response:
        """Send one request and return once the response's head has arrived.

        Args and raises: as ``bridge.transport.base.Transport.request``. After any error
        the connection is closed.
        """
        if self._closed:
            raise ConnectionBroken("the bridge's connection pool is closed")
        target = self._targets.get(url)
        if target is None:
            target = self._targets[url] = parse_url(url)
        key, path, authority = target
        head = encode_request_head(method, path, authority, headers, None if body is None else len(body))
        last = asks_to_close(head)
        connection = await self._acquire(key, bounded)
        try:
            transport = connection.transport
            assert transport is not None
            parser = connection.parser = ResponseParser(method, last=last)
            if body is not None and len(body) > _JOIN_BODY_BYTES:
                transport.write(head)
                transport.write(body)
            else:
                transport.write(head + body if body else head)
            connection.exchanges += 1
            deadline = None if read_timeout_seconds is None else asyncio.get_running_loop().time() + read_timeout_seconds
            while (event := parser.next_event()) is NEED_DATA:
                if connection.closed:
                    if not parser.buffered_bytes and connection.exchanges > 1:
                        raise ConnectionBroken("the server closed the kept-alive connection without responding")
                    raise ConnectionBroken("the server closed the connection without a complete response")
                await connection.wait_for_data(deadline, _HEAD_LATE)
            assert isinstance(event, Head)
            return Http11Response(self, connection, event, read_timeout_seconds)
        except BaseException:
            self._closed_one(connection)
            self._wake_one()
            raise

    async def _acquire(self, key: tuple[str, int], bounded: bool = True) -> Connection:
        idle = self._idle.get(key)
        while idle:
            connection = idle.pop()
            if connection.usable() and (
                time.monotonic() - connection.idle_since < QUIET_CHECK_AFTER_SECONDS or connection.quiet()
            ):
                connection.busy = True
                return connection
            self._closed_one(connection)
        if self.open_connections >= (self._max if bounded else self._max + self._overflow):
            spare = next((connections for connections in self._idle.values() if connections), None)
            if spare is None:
                await self._wait_for_room()
                return await self._acquire(key, bounded)
            self._closed_one(spare.pop(0))  # idle, to another origin (an app restarted on a new port)
        self._connecting += 1
        try:
            connection = await self._connect(key)
        except BaseException:
            self._wake_one()
            raise
        finally:
            self._connecting -= 1
        self._opened(connection)
        connection.busy = True
        return connection

    async def _wait_for_room(self) -> None:
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiters.append(waiter)
        timer = loop.call_later(
            self._pool_timeout, fail, waiter, PoolTimeout("no free connection to the app within the pool timeout")
        )
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._wake_one()  # woken for room it will not take: pass the turn on
            raise
        finally:
            # A waiter that was not woken (cancelled, or expired) stays queued, done:
            # _wake_one skips it. Searching the queue here cost O(waiters) per request,
            # which made a flood of pings quadratic (bench/flood.py --method ping).
            timer.cancel()

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def _connect(self, key: tuple[str, int]) -> Connection:
        """A new connection to ``key``, verified before any byte is written, by
        :func:`~bridge.transport.verifiedconnect.connect_first_verified`: a refused
        connection, or one the verifier refuses (another user's listener on ``::1`` while
        the app has ``127.0.0.1``), is closed unused and the next address is tried. The
        connect timeout bounds the whole. A Unix domain socket (``http+unix://``, its path
        as the key's host) is its one address; its file is checked first (``unixlink.py``).
        So is a named pipe (``npipe://``, ``pipelink.py``), its server checked by the
        verifier on its handle."""
        loop = asyncio.get_running_loop()
        host, port = key
        pipe = host.startswith(PIPE_PREFIX)
        unix = pipe or host.startswith("/")

        async def connect(address: str) -> Connection:
            if pipe:
                from .pipelink import connect_pipe  # Windows only: not loaded for sockets

                _transport, connection = await connect_pipe(address, lambda: Connection(key))
            elif unix:
                _transport, connection = await connect_unix(address, lambda: Connection(key), check_file=self._verify_connection is not None)
            else:
                _transport, connection = await loop.create_connection(lambda: Connection(key), address, port)
            return connection

        connection, _address, _skipped = await connect_first_verified(
            host, None if unix else port, connect=connect, verify=None if self._verify_connection is None else self._verify,
            close=Connection.close, timeout_seconds=self._connect_timeout,
        )
        return connection

    def _verify(self, connection: Connection) -> object:
        assert self._verify_connection is not None and connection.transport is not None
        transport = connection.transport
        end = transport.get_extra_info("socket")
        return self._verify_connection(transport.get_extra_info("pipe") if end is None else end)

    def release(self, connection: Connection, *, reusable: bool = True) -> None:
        """Return a connection after its exchange (``reusable=False``: close it)."""
        connection.busy = False
        if reusable and not self._closed:
            connection.idle_since = time.monotonic()
            self._idle.setdefault(connection.key, []).append(connection)
        else:
            self._closed_one(connection)
        self._wake_one()

    async def aclose(self) -> None:
        """Close every idle connection; busy ones close when their response is closed.

        Raises:
            AssertionError: the pool's count of open connections is off (a leak).
        """
        self._closed = True
        idle = [connection for connections in self._idle.values() for connection in connections]
        for connection in idle:
            self._closed_one(connection)
        self._idle.clear()
        # Every connection still counted is held by a response; one that is neither idle
        # nor busy would be a leaked slot (it shows up as a PoolTimeout much later).
        assert all(connection.busy for connection in self._connections), "a connection slot leaked"
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_exception(ConnectionBroken("the bridge's connection pool is closed"))
