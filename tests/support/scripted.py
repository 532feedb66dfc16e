"""A scripted HTTP/1.1 server on 127.0.0.1 for the transport that ships for ``http://``.

``ScriptedServer(handler)`` runs a real TCP server (``asyncio.start_server``, port 0). It
reads every request off the wire (head and ``Content-Length`` body), keeps it as a
:class:`Seen`, and lets ``handler(seen, peer)`` answer with bytes of the test's choosing
(:class:`Peer`: write, write one byte at a time, close, reset, hold). ``replies=[...]``
instead answers requests in order with bytes or scripts and, once they run out, holds each
connection (reading and keeping its bytes) until the client closes it.

``wire_app(handler)`` serves a respx-style handler (an ``httpx.Request`` in, an
``httpx.Response`` out) on the wire: ``helpers.running_bridge(handler, wire="pool")`` runs
the in-process bridge against it over the bridge's own pool, so the hazard tests of
``serve/`` run against the transport that ships as well as through respx. The ``wire``
fixture parametrizes them over ``httpx`` and ``pool``; a test marked ``httpx_only`` plays a
failure on the client's side that no server can cause (``httpx.ConnectError`` from a live
server, say), and is skipped over the pool, where ``streamable/test_upstream_pool.py``
covers the same failure for real.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import socket
import struct
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx

from bridge.core.unixurl import unix_url

#: Turns of the event loop ``stop`` gives handlers to see EOF and end before cancelling them.
STOP_TURNS = 5
WAIT = 10.0
"""Upper bound, in seconds, on every wait (never a speed assertion)."""


@dataclass
class Seen:
    """One request as the server read it off the wire."""

    method: str
    target: str
    headers: dict[str, str]
    """Field names lower-cased (a repeated field: the last value)."""
    body: bytes
    connection: int
    raw: bytes = b""
    """The request's bytes, head and body, as received."""
    fields: list[tuple[str, str]] = field(default_factory=list)
    """The fields in order, names as sent."""

    def message(self) -> Any:
        return json.loads(self.body)

    def as_request(self, base_url: str) -> httpx.Request:
        """This request as respx would show it, its target on ``base_url``."""
        return httpx.Request(self.method, base_url + self.target, headers=self.fields, content=self.body)

    @property
    def rpc_method(self) -> str | None:
        if self.method != "POST":
            return None
        message = self.message()
        return message.get("method") if isinstance(message, dict) else None


class Peer:
    """The server's side of one accepted connection, for a handler to answer on."""

    def __init__(self, server: ScriptedServer, index: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.server = server
        self.index = index
        self.reader = reader
        self.writer = writer
        self.closed = False

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def send_bytewise(self, data: bytes, pause_seconds: float = 0.001) -> None:
        """Write ``data`` one byte per TCP segment (``TCP_NODELAY``), pausing after each."""
        for i in range(len(data)):
            self.writer.write(data[i : i + 1])
            await self.writer.drain()
            await asyncio.sleep(pause_seconds)

    async def send_pieces(self, pieces: list[bytes]) -> None:
        for piece in pieces:
            self.writer.write(piece)
            await self.writer.drain()
            await asyncio.sleep(0.002)

    def close(self) -> None:
        """Close cleanly (FIN) once the written bytes are sent."""
        self.closed = True
        self.writer.close()

    def reset(self) -> None:
        """Abort with a TCP RST (``SO_LINGER`` 0), as a crashed server would."""
        self.closed = True
        sock = self.writer.get_extra_info("socket")
        with contextlib.suppress(OSError):
            sock.setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("HH" if sys.platform == "win32" else "ii", 1, 0)
            )
        self.writer.transport.abort()

    async def wait_for_client_close(self) -> None:
        """Read (and keep) whatever comes until the client closes the connection."""
        with contextlib.suppress(OSError):
            while data := await self.reader.read(65536):
                self.server.received[self.index] += data
        self.server.client_closed[self.index].set()
        self.closed = True

    async def hold(self) -> bool:
        """Answer nothing more; wait (at most ``WAIT``) until the client closes the
        connection. Returns whether it did."""
        self.closed = True
        try:
            with anyio.fail_after(WAIT):
                await self.wait_for_client_close()
        except TimeoutError:
            return False
        return True


Handler = Callable[[Seen, Peer], Awaitable[None]]
Reply = bytes | Callable[[Peer], Awaitable[None]]
"""For ``replies=``: write these bytes, or run this script."""


class ScriptedServer:
    """Reads requests on every connection and lets ``handler`` (or ``replies``) answer."""

    def __init__(self, handler: Handler | None = None, *, replies: list[Reply] | None = None, unix_path: Path | None = None) -> None:
        assert (handler is None) != (replies is None)
        self.handler = handler
        self.replies = replies
        self.unix_path = unix_path
        """Where it listens instead of 127.0.0.1, as an app on a Unix socket (``http+unix://``)."""
        self.port = 0
        self.connections = 0
        self.open = 0
        """Connections accepted and not yet closed."""
        self.requests: list[Seen] = []
        """Every request read, in arrival order, all connections."""
        self.received: list[bytearray] = []
        """All bytes received, per connection."""
        self.client_closed: list[asyncio.Event] = []
        """Per connection: set when the client closed it."""
        self.handled: list[asyncio.Event] = []
        """Per connection: set when the server is done with it (and has closed it)."""
        self.errors: list[BaseException] = []
        """Failures inside the server (a malformed request, a handler bug): checked at the end."""
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: list[asyncio.StreamWriter] = []

    def url(self, target: str = "/mcp") -> str:
        if self.unix_path is not None:
            return unix_url(self.unix_path, target)
        return f"http://127.0.0.1:{self.port}{target}"

    @property
    def raw_requests(self) -> list[bytes]:
        """Every request's bytes (head and body), in arrival order."""
        return [seen.raw for seen in self.requests]

    def posts(self, rpc_method: str | None = None) -> list[Seen]:
        return [r for r in self.requests if r.method == "POST" and (rpc_method is None or r.rpc_method == rpc_method)]

    def of(self, method: str) -> list[Seen]:
        return [r for r in self.requests if r.method == method]

    async def start(self) -> None:
        if self.unix_path is not None:
            self._server = await asyncio.start_unix_server(self._handle, str(self.unix_path))  # type: ignore[attr-defined,unused-ignore]  # POSIX only
            return
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    def die(self) -> None:
        """As an app that crashed: refuse new connections and reset every open one."""
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.transport.abort()

    async def listen_again(self) -> None:
        """Accept connections again, on the same port (as an app started again)."""
        await self.start()

    async def stop(self) -> None:
        """Close the server and every connection; handlers still running are cancelled.

        A handler that sees EOF ends within a few turns of the loop; one asleep in a script
        never sees it, so it is cancelled then rather than waited for (no timer runs out)."""
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.transport.abort()  # each handler reading then sees EOF and ends
        for _ in range(STOP_TURNS):
            if not self._tasks:
                break
            await asyncio.sleep(0)
        pending = list(self._tasks)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        await self._server.wait_closed()

    async def wait_for(self, condition: Callable[[], bool]) -> None:
        with anyio.fail_after(WAIT):
            while not condition():
                await anyio.sleep(0.005)

    async def wait_for_requests(self, count: int) -> None:
        await self.wait_for(lambda: len(self.requests) >= count)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.append(writer)
        index = self.connections
        self.connections += 1
        self.open += 1
        self.received.append(bytearray())
        self.client_closed.append(asyncio.Event())
        self.handled.append(asyncio.Event())
        if self.unix_path is None:
            writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = Peer(self, index, reader, writer)
        try:
            while not peer.closed:
                if self.replies is not None and not self.replies:
                    await peer.wait_for_client_close()
                    break
                seen = await self._read_request(reader, index)
                if seen is None:
                    self.client_closed[index].set()
                    break
                self.requests.append(seen)
                if self.replies is not None:
                    reply = self.replies.pop(0)
                    await (peer.send(reply) if isinstance(reply, bytes) else reply(peer))
                else:
                    assert self.handler is not None
                    await self.handler(seen, peer)
        except OSError:
            pass
        except Exception as exc:
            self.errors.append(exc)
        finally:
            writer.close()
            self.open -= 1
            self.handled[index].set()
            self._tasks.discard(task)

    async def _read_request(self, reader: asyncio.StreamReader, index: int) -> Seen | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            self.received[index] += exc.partial
            return None
        except (asyncio.LimitOverrunError, OSError):
            return None
        self.received[index] += head
        request_line, *lines = head[:-4].decode("latin-1").split("\r\n")
        method, target, version = request_line.split(" ")
        assert version == "HTTP/1.1"
        fields = []
        for line in lines:
            name, colon, value = line.partition(":")
            assert colon, f"malformed field {name!r}"
            fields.append((name, value.strip()))
        headers = {name.lower(): value for name, value in fields}
        try:
            body = await reader.readexactly(int(headers.get("content-length", "0")))
        except (asyncio.IncompleteReadError, OSError):
            return None
        self.received[index] += body
        return Seen(method, target, headers, body, index, head + body, fields)


@contextlib.asynccontextmanager
async def serve(
    handler: Handler | None = None, *, replies: list[Reply] | None = None, unix_path: Path | None = None
) -> AsyncIterator[ScriptedServer]:
    server = ScriptedServer(handler, replies=replies, unix_path=unix_path)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
    assert server.errors == [], server.errors


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- respx-style handlers served on the wire ------------------------------------------------------

_STATUS_TEXT = {
    200: "OK", 202: "Accepted", 204: "No Content", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
    405: "Method Not Allowed", 500: "Internal Server Error",
}


def wire_app(handler: Callable[[httpx.Request], Any], *, base_url: str) -> Handler:
    """Serve ``handler`` (``httpx.Request`` → ``httpx.Response``, sync or async) on the wire.

    The handler sees the request as respx would (its URL on ``base_url``, so assertions on
    it hold in both modes); :func:`send_response` writes its answer. An exception the
    handler raises resets the connection (the client sees it break; under respx it would
    reach the bridge itself)."""

    async def handle(seen: Seen, peer: Peer) -> None:
        try:
            outcome = handler(seen.as_request(base_url))
            if inspect.isawaitable(outcome):
                outcome = await outcome
        except Exception:  # httpx's failures, or the handler's own (raised into the bridge under respx)
            peer.reset()
            return
        await send_response(outcome, peer)

    return handle


async def send_response(response: httpx.Response, peer: Peer) -> None:
    """Write ``response`` on ``peer``: a whole body with ``Content-Length``, or a streamed
    body chunked, each piece as it comes. An exception inside a streamed body resets the
    connection, and so does the client closing it mid-body."""
    fields = [(n, v) for n, v in response.headers.multi_items() if n.lower() not in ("content-length", "transfer-encoding")]
    streamed = not isinstance(response.stream, httpx.ByteStream)
    body = b"" if streamed else await response.aread()
    fields.append(("Transfer-Encoding", "chunked") if streamed else ("Content-Length", str(len(body))))
    head = f"HTTP/1.1 {response.status_code} {_STATUS_TEXT.get(response.status_code, 'Status')}\r\n"
    head += "".join(f"{n}: {v}\r\n" for n, v in fields) + "\r\n"
    if not streamed:
        await peer.send(head.encode("latin-1") + body)
        return
    await peer.send(head.encode("latin-1"))
    failed = False
    async with anyio.create_task_group() as group:

        async def watch_for_client_close() -> None:
            await peer.reader.read(1)  # EOF: the client closed mid-body (it sends nothing else now)
            group.cancel_scope.cancel()

        group.start_soon(watch_for_client_close)
        try:
            async for piece in response.aiter_raw():
                if piece:
                    await peer.send(b"%x\r\n%s\r\n" % (len(piece), piece))
        except Exception:
            failed = True
        finally:
            group.cancel_scope.cancel()
            await response.aclose()  # the body generator's finally runs, as under respx
    if failed or group.cancel_scope.cancelled_caught and peer.reader.at_eof():
        peer.reset()
        return
    await peer.send(b"0\r\n\r\n")
