"""A lean HTTP/1.1 client for the app's ``http://`` endpoint on loopback.

Why it exists: measured with ``bench/profile_bridge.py``, about three quarters of the
bridge's CPU per call went to httpx's default transport (httpcore's pool, h11's
event machinery and anyio cancel scopes around every socket operation), which capped
the bridge at a quarter of a direct client's throughput (issue 7, README "Benchmarks").
The bridge needs a small part of HTTP: one request at a time per keep-alive
connection, no TLS, no proxies, no redirects, no compression, no ``Expect``. This
module does that part on ``asyncio`` protocols; ``https://`` endpoints, and every
transport a test injects, still go through httpx (``bridge/upstream.py``).

What it implements (RFC 9112, "HTTP/1.1"):

- request: ``METHOD target HTTP/1.1``, ``Host``, the caller's fields and
  ``Content-Length`` (§3, §6.2); field values with CR, LF, NUL or other controls are
  refused before anything is sent (§5, RFC 9110 §5.5), and the error never quotes them;
- response head: status line, fields, interim 1xx responses skipped (RFC 9110 §15.2),
  at most :data:`MAX_HEAD_BYTES`; a bare LF is accepted as a line end (§2.2);
- body length (§6.3): none for 1xx/204/304 and HEAD; ``Transfer-Encoding`` ending in
  ``chunked`` (§7.1, extensions and trailers skipped); ``Content-Length`` (differing
  repeated values refused); otherwise until the server closes;
- persistence (§9.3): a connection goes back to the pool only when its response was read
  to the end, and neither side said ``Connection: close`` (nor an HTTP/1.0 server without
  ``keep-alive``); a pooled connection the server has closed is never reused;
- flow control: a response body is buffered up to :data:`HIGH_WATER_BYTES` before the
  socket stops being read, so a huge reply costs bounded memory until it is consumed.

Timeouts, in seconds: ``connect`` (opening a connection), ``read`` (the longest silence
while waiting for response bytes; ``None``: no bound), ``pool`` (waiting for a free
connection). Failures raise the :class:`TransportError` subclasses below; none of their
messages holds a header value.
"""

from __future__ import annotations

import asyncio
import collections
import re
import select
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterable
from urllib.parse import urlsplit

import anyio

from .config import HTTP_TOKEN

__all__ = [
    "Http11Pool",
    "Http11Response",
    "TransportError",
    "ConnectFailed",
    "ConnectTimeout",
    "PoolTimeout",
    "ReadTimeout",
    "ConnectionBroken",
    "ProtocolViolation",
    "LocalProtocolError",
    "MAX_HEAD_BYTES",
    "HIGH_WATER_BYTES",
]

#: Largest response head (status line and fields) accepted: 64 KiB, as h11's default.
MAX_HEAD_BYTES = 64 * 1024
#: A connection idle for this long has its socket checked (one ``select``) before reuse, as
#: httpcore does: servers close idle keep-alive connections (uvicorn after 5 s), and a
#: request sent as the close crosses it would fail. Busy connections skip the syscall.
QUIET_CHECK_AFTER_SECONDS = 1.0
#: Bytes read from the socket at a time, into one buffer per connection: 16 KiB at first
#: (an idle connection holds little), 64 KiB once a read fills it.
FIRST_RECV_BYTES = 16 * 1024
RECV_BYTES = 64 * 1024
#: A response body is buffered up to this before the socket stops being read.
HIGH_WATER_BYTES = 4 * 1024 * 1024
#: Request bodies up to this size are sent in the same write as the head.
_JOIN_BODY_BYTES = 64 * 1024

# RFC 9110 §5.5: a field value is visible characters, SP and HTAB. Obsolete text
# (0x80-0xFF) passes, as in h11; everything else below 0x20, and DEL, is refused.
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_TOKEN = HTTP_TOKEN
_STATUS_LINE = re.compile(rb"^HTTP/1\.([01]) ([0-9]{3})(?: [^\r\n]*)?$")
# Fields this client writes itself (RFC 9112 §3.2, §6.2): a second copy would be ambiguous.
_OWN_FIELDS = frozenset({"host", "content-length", "transfer-encoding"})
_CHUNK_SIZE = re.compile(rb"^([0-9A-Fa-f]+)[ \t]*(?:;[^\r\n]*)?$")
# The same two rules for what the app sends (bytes).
_FIELD_NAME = re.compile(_TOKEN.pattern.encode("ascii"))
_BAD_RECEIVED_VALUE = re.compile(_BAD_VALUE.pattern.encode("ascii"))


class TransportError(Exception):
    """An HTTP exchange with the app failed. The message names no header value."""


class ConnectFailed(TransportError):
    """Nothing accepted the connection (refused, unreachable, name not resolved)."""


class ConnectTimeout(TransportError):
    """The connection was not accepted within the connect timeout."""


class PoolTimeout(TransportError):
    """No connection became free within the pool timeout."""


class ReadTimeout(TransportError):
    """The app sent nothing within the read timeout."""


class ConnectionBroken(TransportError):
    """The connection closed or failed before the response was complete."""


class ProtocolViolation(TransportError):
    """The app's bytes are not an HTTP/1.1 response this client can read."""


class LocalProtocolError(TransportError):
    """The request cannot be encoded (an invalid field name or value); nothing was sent."""


class Headers:
    """Response fields: ``get`` by any case; repeated fields joined with ``", "``.

    ``raw`` keeps the fields as received, in order, as ``(name, value)`` byte pairs.
    """

    __slots__ = ("raw", "_by_name")

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        self.raw = raw
        by_name: dict[str, str] = {}
        for name, value in raw:
            key = name.decode("latin-1").lower()
            text = value.decode("latin-1")
            by_name[key] = f"{by_name[key]}, {text}" if key in by_name else text
        self._by_name = by_name

    def get(self, name: str, default: str | None = None) -> str | None:
        return self._by_name.get(name.lower(), default)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._by_name


class _Connection(asyncio.BufferedProtocol):
    """One keep-alive connection: a receive buffer, and one waiter woken by new bytes.

    A buffered protocol: the socket is read into one buffer of :data:`RECV_BYTES` made
    once, where a plain protocol gets a fresh 256 KiB ``bytes`` per read from asyncio (an
    mmap and page faults each time: 15 µs against 2 µs, measured)."""

    def __init__(self, key: tuple[str, int]) -> None:
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.closed = False  # EOF or loss seen: never reuse
        self.error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False
        self.exchanges = 0
        self.idle_since = 0.0  # time.monotonic() when it went back to the pool
        #: Buffered bytes at which the socket stops being read (raised for a whole-body read).
        self.high_water_bytes = HIGH_WATER_BYTES
        self._received = memoryview(bytearray(FIRST_RECV_BYTES))

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._received

    def buffer_updated(self, nbytes: int) -> None:
        self.buffer += self._received[:nbytes]
        if nbytes == len(self._received) < RECV_BYTES:
            self._received = memoryview(bytearray(RECV_BYTES))  # a large body: read more at once
        if len(self.buffer) > self.high_water_bytes and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self.closed = True
        self._wake()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.error = exc
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # used by the exchange
    def consumed(self) -> None:
        """The reader took bytes out of ``buffer``: read the socket again when it is low."""
        if self._paused and len(self.buffer) <= self.high_water_bytes // 4 and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()

    async def wait_for_data(self, read_timeout_seconds: float | None) -> None:
        """Wait until bytes arrive or the connection ends.

        Raises:
            ReadTimeout: nothing arrived within ``read_timeout_seconds``.
            ConnectionBroken: the connection had already ended.
        """
        if self.closed:
            raise ConnectionBroken(_lost_reason(self.error))
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = None if read_timeout_seconds is None else loop.call_later(read_timeout_seconds, _expire, waiter)
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()

    def usable(self) -> bool:
        return not self.closed and not self.buffer and self.transport is not None and not self.transport.is_closing()

    def quiet(self) -> bool:
        """Whether the socket itself has nothing to read, checked without waiting: an EOF
        (the server closed the idle connection) or stray bytes the event loop has not
        processed yet make the connection unfit for another request."""
        sock = self.transport.get_extra_info("socket") if self.transport is not None else None
        if sock is None:
            return True
        try:
            if hasattr(select, "poll"):  # select.select refuses descriptors >= FD_SETSIZE (1024)
                poller = select.poll()
                poller.register(sock, select.POLLIN)
                return not poller.poll(0)
            readable, _, _ = select.select([sock], [], [], 0)
        except (OSError, ValueError):
            return False
        return not readable

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(ReadTimeout("no response bytes within the read timeout"))


def _lost_reason(error: BaseException | None) -> str:
    if error is None:
        return "the server closed the connection"
    return f"the connection failed ({type(error).__name__}: {error})"


class Http11Response:
    """A response whose head has arrived; the body is read with :meth:`aiter_bytes`.

    Attributes:
        status_code: the final status (1xx responses are skipped).
        http_version: ``"HTTP/1.1"`` or ``"HTTP/1.0"``.
        headers: the response's fields (:class:`Headers`).

    :meth:`aclose` must be called (``upstream.py`` does, on every path): it returns the
    connection to the pool when the body was read to the end and the connection may
    persist, and closes it otherwise.
    """

    def __init__(
        self,
        pool: Http11Pool,
        connection: _Connection,
        status_code: int,
        http_version: str,
        headers: Headers,
        body_mode: str,
        remaining: int,
        keep_alive: bool,
        read_timeout_seconds: float | None,
    ) -> None:
        self.status_code = status_code
        self.http_version = http_version
        self.headers = headers
        self._pool = pool
        self._connection: _Connection | None = connection
        self._mode = body_mode  # "none", "length", "chunked" or "close"
        self._remaining = remaining
        #: Whether the connection may serve another request once this response is read.
        self.keep_alive = keep_alive
        self._read_timeout = read_timeout_seconds
        self._complete = body_mode == "none" or (body_mode == "length" and remaining == 0)

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        """Yield the body's bytes as they arrive (de-chunked), in chunks of any size.

        Raises:
            ReadTimeout: the server went silent for longer than the read timeout.
            ConnectionBroken: the connection ended before the body did.
            ProtocolViolation: the chunked framing is malformed.
        """
        connection = self._connection
        if connection is None or self._complete:
            return
        if self._mode == "length":
            async for chunk in self._length_body(connection):
                yield chunk
        elif self._mode == "chunked":
            async for chunk in self._chunked_body(connection):
                yield chunk
        else:
            async for chunk in self._close_delimited_body(connection):
                yield chunk
        self._complete = True

    async def _take(self, connection: _Connection, most: int, where: str) -> bytes:
        """Up to ``most`` (> 0) body bytes: what the buffer holds, else the next that arrive."""
        buffer = connection.buffer
        while not buffer:
            if connection.closed:
                raise ConnectionBroken(f"the server closed the connection {where}")
            await connection.wait_for_data(self._read_timeout)
        take = min(len(buffer), most)
        chunk = bytes(buffer) if take == len(buffer) else bytes(buffer[:take])
        del buffer[:take]
        connection.consumed()
        return chunk

    async def _length_body(self, connection: _Connection) -> AsyncIterator[bytes]:
        while self._remaining:
            chunk = await self._take(connection, self._remaining, "before the body was complete")
            self._remaining -= len(chunk)
            yield chunk

    async def _chunked_body(self, connection: _Connection) -> AsyncIterator[bytes]:
        while True:
            line = await self._line(connection, "a chunk size")
            match = _CHUNK_SIZE.match(line)
            if match is None:
                raise ProtocolViolation("the app sent a malformed chunk size line")
            size = int(match.group(1), 16)
            if size == 0:
                while await self._line(connection, "the trailer"):
                    pass  # trailer fields are not used
                return
            while size:
                chunk = await self._take(connection, size, "inside a chunk")
                size -= len(chunk)
                yield chunk
            if await self._line(connection, "a chunk's end"):
                raise ProtocolViolation("the app sent chunk data longer than its size")

    async def _close_delimited_body(self, connection: _Connection) -> AsyncIterator[bytes]:
        buffer = connection.buffer
        while True:
            if buffer:
                chunk = bytes(buffer)
                buffer.clear()
                connection.consumed()
                yield chunk
            elif connection.closed:
                if connection.error is not None:  # reset or failed, not closed: maybe truncated
                    raise ConnectionBroken(_lost_reason(connection.error))
                return
            else:
                await connection.wait_for_data(self._read_timeout)

    async def _line(self, connection: _Connection, what: str) -> bytes:
        """One CRLF- (or LF-) terminated line from the buffer, without its end."""
        buffer = connection.buffer
        searched = 0
        while True:
            end = buffer.find(b"\n", searched)
            if end >= 0:
                line = bytes(buffer[:end]).rstrip(b"\r")
                del buffer[: end + 1]
                connection.consumed()
                return line
            if len(buffer) > MAX_HEAD_BYTES:
                raise ProtocolViolation(f"the app sent an overlong line for {what}")
            searched = len(buffer)
            if connection.closed:
                raise ConnectionBroken(f"the server closed the connection before {what}")
            await connection.wait_for_data(self._read_timeout)

    async def read_whole(self, limit: int, suffix: bytes = b"") -> bytes | None:
        """The whole ``Content-Length`` body plus ``suffix``, as one ``bytes`` made in one
        copy, or ``None`` (nothing read) when the body is framed otherwise or is longer
        than ``limit`` bytes: the caller then streams it with :meth:`aiter_bytes`.

        For large bodies: chunks and a join would touch the body's size in fresh memory
        twice more (page faults, measured in bench/README.md).

        Raises:
            ReadTimeout, ConnectionBroken: as :meth:`aiter_bytes`.
        """
        connection = self._connection
        if connection is None or self._mode != "length" or self._remaining > limit or self._complete:
            return None
        remaining = self._remaining
        connection.high_water_bytes = max(HIGH_WATER_BYTES, remaining + 1)
        connection.consumed()  # reading again if it had paused
        try:
            while len(connection.buffer) < remaining:
                if connection.closed:
                    raise ConnectionBroken("the server closed the connection before the body was complete")
                await connection.wait_for_data(self._read_timeout)
        finally:
            connection.high_water_bytes = HIGH_WATER_BYTES
        buffer = connection.buffer
        if len(buffer) == remaining:
            buffer += suffix
            body = bytes(buffer)
            buffer.clear()
        else:
            body = bytes(buffer[:remaining]) + suffix
            del buffer[:remaining]
        self._remaining = 0
        self._complete = True
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
        if self._complete and self.keep_alive and connection.usable():
            self._pool.release(connection)
        else:
            self._pool.release(connection, reusable=False)


class Http11Pool:
    """Keep-alive connections to ``http://`` origins, at most ``max_connections`` at once.

    Args:
        max_connections: connections open at the same time (idle or busy), all origins.
        connect_timeout_seconds: bound on opening one connection.
        pool_timeout_seconds: bound on waiting for a free connection when all are busy.
        verify_connection: called with the socket of every NEW connection, right after the
            TCP connect and before any byte is written (the listener check). Whatever it
            raises reaches the caller of :meth:`request` after the socket is closed; such a
            connection is never pooled.
    """

    def __init__(
        self,
        *,
        max_connections: int,
        connect_timeout_seconds: float,
        pool_timeout_seconds: float,
        max_overflow: int = 8,
        verify_connection: Callable[[socket.socket], None] | None = None,
    ) -> None:
        if max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        self._max = max_connections
        self._overflow = max_overflow  # extra connections for bounded=False requests, no more
        self._connect_timeout = connect_timeout_seconds
        self._pool_timeout = pool_timeout_seconds
        self._verify_connection = verify_connection
        self._idle: dict[tuple[str, int], list[_Connection]] = {}
        self._open = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._targets: dict[str, tuple[tuple[str, int], bytes]] = {}
        self._closed = False

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

        Args:
            method: ``GET``, ``POST``, ``DELETE`` …
            url: an absolute ``http://`` URL.
            headers: ``(name, value)`` fields; ``Host`` and ``Content-Length`` are added.
            body: the request body, sent as given (``None``: no body).
            read_timeout_seconds: longest silence while waiting for the response.
            bounded: ``False`` opens a connection even beyond ``max_connections`` rather
                than wait for one (a cancellation must not queue behind what it cancels).

        Raises:
            LocalProtocolError: a field cannot be sent (nothing was sent).
            ConnectFailed, ConnectTimeout, PoolTimeout, ReadTimeout, ConnectionBroken,
            ProtocolViolation: see each class. After any of them the connection is closed.
        """
        if self._closed:
            raise ConnectionBroken("the bridge's connection pool is closed")
        key, head, last = self._encode_head(method, url, headers, body)
        connection = await self._acquire(key, bounded)
        try:
            transport = connection.transport
            assert transport is not None
            if body is not None and len(body) > _JOIN_BODY_BYTES:
                transport.write(head)
                transport.write(body)
            else:
                transport.write(head + body if body else head)
            connection.exchanges += 1
            response = await self._read_head(connection, method, read_timeout_seconds)
            if last:
                response.keep_alive = False  # RFC 9112 §9.6: the request said it is the last
            return response
        except BaseException:
            connection.close()
            self.release(connection, reusable=False)
            raise

    def _encode_head(
        self, method: str, url: str, headers: Iterable[tuple[str, str]], body: bytes | None
    ) -> tuple[tuple[str, int], bytes, bool]:
        """The origin, the request's head, and whether it asks to close the connection."""
        if not _TOKEN.match(method):
            raise LocalProtocolError("the request method is not an HTTP token")
        target = self._targets.get(url)
        if target is None:
            target = self._targets[url] = _parse_url(url)
        key, start = target
        lines = []
        last = False
        for name, value in headers:
            if not _TOKEN.match(name) or _BAD_VALUE.search(value):
                raise LocalProtocolError(f"the request field {name!r} has a name or value that cannot be sent")
            lowered = name.lower()
            if lowered in _OWN_FIELDS:
                raise LocalProtocolError(f"the request field {name!r} is set by the HTTP client itself")
            if lowered == "connection" and "close" in value.lower():
                last = True
            lines.append(f"{name}: {value}\r\n")
        if body is not None:
            lines.append(f"Content-Length: {len(body)}\r\n")
        try:
            fields = "".join(lines).encode("latin-1")
        except UnicodeEncodeError:
            raise LocalProtocolError("a request field value holds characters HTTP/1.1 cannot carry") from None
        return key, method.encode("ascii") + start + fields + b"\r\n", last

    async def _acquire(self, key: tuple[str, int], bounded: bool = True) -> _Connection:
        idle = self._idle.get(key)
        while idle:
            connection = idle.pop()
            if connection.usable() and (
                time.monotonic() - connection.idle_since < QUIET_CHECK_AFTER_SECONDS or connection.quiet()
            ):
                return connection
            connection.close()
            self._open -= 1
        if self._open >= (self._max if bounded else self._max + self._overflow):
            spare = next((connections for connections in self._idle.values() if connections), None)
            if spare is None:
                await self._wait_for_room()
                return await self._acquire(key, bounded)
            spare.pop(0).close()  # idle, to another origin (an app restarted on a new port)
            self._open -= 1
        self._open += 1
        try:
            return await self._connect(key)
        except BaseException:
            self._open -= 1
            self._wake_one()
            raise

    async def _wait_for_room(self) -> None:
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiters.append(waiter)
        timer = loop.call_later(self._pool_timeout, _pool_expire, waiter)
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

    async def _connect(self, key: tuple[str, int]) -> _Connection:
        loop = asyncio.get_running_loop()
        host, port = key
        try:
            # anyio's scope, not asyncio.wait_for: on Python 3.10/3.11, wait_for can swallow a
            # cancellation that arrives as the connection completes (CPython gh-86296).
            with anyio.fail_after(self._connect_timeout):
                _, connection = await loop.create_connection(lambda: _Connection(key), host, port)
        except TimeoutError:  # (before OSError, its base class)
            raise ConnectTimeout(f"{host}:{port} did not accept the connection in time") from None
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise ConnectFailed(f"connection to {host}:{port} failed: {reason}") from None
        if self._verify_connection is not None:
            try:
                assert connection.transport is not None
                self._verify_connection(connection.transport.get_extra_info("socket"))
            except BaseException:
                connection.close()
                raise
        return connection

    async def _read_head(self, connection: _Connection, method: str, read_timeout: float | None) -> Http11Response:
        buffer = connection.buffer
        searched = 0
        while True:
            end = buffer.find(b"\n\r\n", searched)
            bare_end = buffer.find(b"\n\n", searched, len(buffer) if end < 0 else end + 2)
            if end >= 0 or bare_end >= 0:
                cut = bare_end + 2 if bare_end >= 0 else end + 3  # the earlier end of the two
                if cut > MAX_HEAD_BYTES:
                    raise ProtocolViolation(f"the app sent a response head over {MAX_HEAD_BYTES} bytes")
                head = bytes(buffer[:cut])
                del buffer[:cut]
                response = self._parse_head(connection, head, method, read_timeout)
                if response is not None:
                    return response
                searched = 0  # an interim 1xx response: the final one follows
                continue
            if len(buffer) > MAX_HEAD_BYTES:
                raise ProtocolViolation(f"the app sent a response head over {MAX_HEAD_BYTES} bytes")
            searched = max(0, len(buffer) - 2)
            if connection.closed:
                if not buffer and connection.exchanges > 1:
                    raise ConnectionBroken("the server closed the kept-alive connection without responding")
                raise ConnectionBroken("the server closed the connection without a complete response")
            await connection.wait_for_data(read_timeout)

    def _parse_head(
        self, connection: _Connection, head: bytes, method: str, read_timeout: float | None
    ) -> Http11Response | None:
        lines = head.split(b"\n")
        status = _STATUS_LINE.match(lines[0].rstrip(b"\r"))
        if status is None:
            raise ProtocolViolation("the app's reply does not start with an HTTP/1.x status line")
        minor, code = status.group(1), int(status.group(2))
        raw: list[tuple[bytes, bytes]] = []
        for line in lines[1:]:
            line = line.rstrip(b"\r")
            if not line:
                continue
            name, colon, value = line.partition(b":")
            if not colon or not _FIELD_NAME.match(name) or _BAD_RECEIVED_VALUE.search(value):
                raise ProtocolViolation("the app sent a malformed response field")
            raw.append((name, value.strip(b" \t")))
        if code < 100 or code == 101:
            raise ProtocolViolation("the app sent a status this client cannot accept")  # 101: never asked for
        if code < 200:
            return None  # RFC 9110 §15.2: interim
        headers = Headers(raw)
        connection_tokens = (headers.get("connection") or "").lower()
        if minor == b"1":
            keep_alive = "close" not in connection_tokens
        else:
            keep_alive = "keep-alive" in connection_tokens
        mode, remaining = self._body_framing(headers, code, method)
        if mode == "close":
            keep_alive = False
        return Http11Response(
            self, connection, code, f"HTTP/1.{minor.decode()}", headers, mode, remaining, keep_alive, read_timeout
        )

    @staticmethod
    def _body_framing(headers: Headers, code: int, method: str) -> tuple[str, int]:
        """RFC 9112 §6.3: how the body's end is known."""
        if method == "HEAD" or code in (204, 304):
            return "none", 0
        encoding = headers.get("transfer-encoding")
        if encoding is not None:
            if encoding.lower().rsplit(",", 1)[-1].strip() == "chunked":
                return "chunked", 0
            return "close", 0
        length = headers.get("content-length")
        if length is not None:
            values = {value.strip() for value in length.split(",")}
            if len(values) != 1:
                raise ProtocolViolation("the app sent differing Content-Length values")
            value = values.pop()
            if not value.isdigit() or not value.isascii():
                raise ProtocolViolation("the app sent an invalid Content-Length")
            return "length", int(value)
        return "close", 0

    def release(self, connection: _Connection, *, reusable: bool = True) -> None:
        """Return a connection after its exchange (``reusable=False``: it was closed)."""
        if reusable and not self._closed:
            connection.idle_since = time.monotonic()
            self._idle.setdefault(connection.key, []).append(connection)
        else:
            connection.close()
            self._open -= 1
        self._wake_one()

    async def aclose(self) -> None:
        """Close every idle connection; busy ones close when their response is closed."""
        self._closed = True
        for connections in self._idle.values():
            for connection in connections:
                connection.close()
                self._open -= 1
        self._idle.clear()
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_exception(ConnectionBroken("the bridge's connection pool is closed"))


def _pool_expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(PoolTimeout("no free connection to the app within the pool timeout"))


def _parse_url(url: str) -> tuple[tuple[str, int], bytes]:
    """``http://host:port/path?query`` → ((host, port), b" /path?query HTTP/1.1\\r\\nHost: …\\r\\n").

    The method is put in front by the caller.
    """
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise LocalProtocolError("only http:// URLs with a host are served by this client")
    try:
        port = 80 if parts.port is None else parts.port
    except ValueError:
        raise LocalProtocolError("the URL's port is not a number from 0 to 65535") from None
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    host = parts.hostname
    authority = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        authority += f":{parts.port}"
    if not (target + authority).isascii() or any(ch <= " " or ch == "\x7f" for ch in target + authority):
        raise LocalProtocolError("the URL holds spaces, controls or characters that are not ASCII")
    return (host, port), f" {target} HTTP/1.1\r\nHost: {authority}\r\n".encode("ascii")
