"""The bridge's own HTTP/1.1 pool (``bridge/transport/pool.py``) against a scripted server.

Every test runs a real TCP server on 127.0.0.1 (``asyncio.start_server``, port 0) that
reads each request and answers with byte strings the test chose, so the wire is under the
test's control byte by byte: responses are also fed one byte at a time, or cut at random
points (hypothesis). The server counts connections and keeps every byte it received, so
a test can tell whether a connection was reused, closed, or never sent anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import scripted as scripted_server
from support.scripted import Peer, Reply, ScriptedServer, closed_port

from bridge.transport.base import (
    ConnectFailed,
    ConnectionBroken,
    ConnectTimeout,
    LocalProtocolError,
    PoolTimeout,
    ProtocolViolation,
    ReadTimeout,
)
from bridge.transport.connection import Connection
from bridge.transport.pool import HIGH_WATER_BYTES, MAX_HEAD_BYTES, Http11Pool, Http11Response

pytestmark = pytest.mark.anyio

SECRET = "sk-live-9f8e7d6c5b4a39281706f5e4d3c2b1a0"
"""A header value that looks like a credential: it must never appear in an error message."""

WAIT = 5.0
"""Upper bound, in seconds, on waiting for the server to observe something (never a speed assertion)."""




# -- the scripted server (tests/support/scripted.py) -------------------------------------------


def serve(*replies: Reply) -> contextlib.AbstractAsyncContextManager[ScriptedServer]:
    """A scripted server answering requests with ``replies`` in order, then holding each
    connection open (and read) until the client closes it."""
    return scripted_server.serve(replies=list(replies))


@contextlib.asynccontextmanager
async def open_pool(
    *, max_connections: int = 4, connect_timeout: float = WAIT, pool_timeout: float = WAIT
) -> AsyncIterator[Http11Pool]:
    pool = Http11Pool(
        max_connections=max_connections,
        connect_timeout_seconds=connect_timeout,
        pool_timeout_seconds=pool_timeout,
    )
    try:
        yield pool
    finally:
        await pool.aclose()


async def until(condition: Callable[[], bool]) -> None:
    """Wait (at most `WAIT` seconds) for ``condition`` to hold."""
    deadline = asyncio.get_running_loop().time() + WAIT
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "the condition did not hold in time"
        await asyncio.sleep(0.005)


def then_close(data: bytes) -> Callable[[Peer], Awaitable[None]]:
    """Reply: write ``data``, then close the connection."""

    async def script(peer: Peer) -> None:
        await peer.send(data)
        peer.close()

    return script


def bytewise(data: bytes) -> Callable[[Peer], Awaitable[None]]:
    """Reply: write ``data`` one byte at a time."""

    async def script(peer: Peer) -> None:
        await peer.send_bytewise(data)

    return script


async def never_answer(peer: Peer) -> None:
    """Reply: none; hold the connection until the client closes it."""
    await peer.wait_for_client_close()


def ok(body: bytes = b"ok", *fields: bytes) -> bytes:
    """A ``200`` with a ``Content-Length`` body and any extra ``Name: value`` fields."""
    head = b"HTTP/1.1 200 OK\r\n" + b"".join(f + b"\r\n" for f in fields)
    return head + b"Content-Length: %d\r\n\r\n" % len(body) + body


def chunked(*chunks: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks if c) + b"0\r\n\r\n"


async def fetch(
    pool: Http11Pool,
    url: str,
    method: str = "GET",
    headers: list[tuple[str, str]] | None = None,
    body: bytes | None = None,
    read_timeout: float | None = WAIT,
) -> tuple[Http11Response, bytes]:
    """One whole exchange: request, read the body, close the response."""
    response = await pool.request(method, url, headers or [], body, read_timeout_seconds=read_timeout)
    try:
        return response, await response.aread()
    finally:
        await response.aclose()


# -- response bodies -------------------------------------------------------------------------


async def test_content_length_body_status_version_and_fields() -> None:
    """A Content-Length reply gives its status, version, fields (any case, repeats joined) and exact body."""
    reply = (
        b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
        b"X-Multi: a\r\nx-multi: b\r\nContent-Length: 11\r\n\r\n"
    )
    async with serve(reply + b'{"ok":true}') as server, open_pool() as pool:
        response, body = await fetch(pool, server.url())
    assert response.status_code == 201
    assert response.http_version == "HTTP/1.1"
    assert response.headers.get("CONTENT-TYPE") == "application/json"
    assert response.headers.get("x-multi") == "a, b"
    assert "content-length" in response.headers
    assert "missing" not in response.headers
    assert response.headers.get("missing", "dflt") == "dflt"
    assert response.headers.raw[1] == (b"X-Multi", b"a")
    assert body == b'{"ok":true}'


async def test_chunked_body_with_extensions_and_trailers() -> None:
    """A chunked reply is de-chunked: extensions and trailer fields are skipped, the data kept whole."""
    reply = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5;name=value\r\nhello\r\n"
        b"1 ; ext\r\n,\r\n"
        b"A\r\n world!!!!\r\n"
        b"0;last\r\nX-Trailer: t\r\nX-Other: u\r\n\r\n"
    )
    async with serve(reply, ok(b"next")) as server, open_pool() as pool:
        _, body = await fetch(pool, server.url())
        _, second = await fetch(pool, server.url())
    assert body == b"hello, world!!!!"
    assert second == b"next"
    assert server.connections == 1  # the trailer was consumed: the connection was clean for reuse


async def test_chunked_wins_over_content_length() -> None:
    """Transfer-Encoding ending in chunked decides the length even when Content-Length is present."""
    reply = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(b"abcdef")
    async with serve(reply) as server, open_pool() as pool:
        _, body = await fetch(pool, server.url())
    assert body == b"abcdef"


async def test_close_delimited_body_is_read_until_close_and_not_reused() -> None:
    """Without Content-Length or chunked, the body runs until the server closes; the next request reconnects."""
    async with serve(then_close(b"HTTP/1.1 200 OK\r\n\r\nall of\r\nthis"), ok(b"again")) as server, open_pool() as pool:
        _, body = await fetch(pool, server.url())
        _, second = await fetch(pool, server.url())
    assert body == b"all of\r\nthis"
    assert second == b"again"
    assert server.connections == 2


async def test_unknown_transfer_encoding_is_read_until_close() -> None:
    """A Transfer-Encoding not ending in chunked (here gzip) is delimited by the close, bytes passed through."""
    async with serve(then_close(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n\x1f\x8b\x00")) as server:
        async with open_pool() as pool:
            _, body = await fetch(pool, server.url())
    assert body == b"\x1f\x8b\x00"


@pytest.mark.parametrize("status", [204, 304])
async def test_204_and_304_have_no_body_even_with_content_length(status: int) -> None:
    """204 and 304 end at their head: the Content-Length is not waited for and the connection is reused."""
    reply = b"HTTP/1.1 %d Whatever\r\nContent-Length: 7\r\n\r\n" % status
    async with serve(reply, ok(b"second")) as server, open_pool() as pool:
        response, body = await fetch(pool, server.url())
        _, second = await fetch(pool, server.url())
    assert (response.status_code, body) == (status, b"")
    assert second == b"second"
    assert server.connections == 1


async def test_head_response_has_no_body() -> None:
    """A HEAD reply's Content-Length describes a body that is not sent: none is read, the connection is reused."""
    async with serve(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", ok(b"after head")) as server:
        async with open_pool() as pool:
            response, body = await fetch(pool, server.url(), method="HEAD")
            _, second = await fetch(pool, server.url())
    assert (response.status_code, response.headers.get("content-length"), body) == (200, "1000", b"")
    assert second == b"after head"
    assert server.connections == 1
    assert server.raw_requests[0].startswith(b"HEAD /mcp HTTP/1.1\r\n")


async def test_interim_100_and_103_responses_are_skipped() -> None:
    """1xx replies (100 Continue, 103 Early Hints with fields) are skipped; the final reply is returned."""
    reply = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n" + ok(
        b"final", b"X-Final: yes"
    )
    async with serve(reply) as server, open_pool() as pool:
        response, body = await fetch(pool, server.url())
    assert response.status_code == 200
    assert response.headers.get("x-final") == "yes"
    assert "link" not in response.headers
    assert body == b"final"


async def test_bare_lf_line_ends_are_accepted() -> None:
    """Lines ended by a bare LF (head, chunk sizes, trailers) are read like CRLF ones."""
    reply = b"HTTP/1.1 200 OK\nX-A: 1\nTransfer-Encoding: chunked\n\n3\nabc\n2;x\nde\n0\nX-T: 1\n\n"
    async with serve(reply, b"HTTP/1.1 200 OK\nContent-Length: 3\n\nxyz") as server, open_pool() as pool:
        response, body = await fetch(pool, server.url())
        _, second = await fetch(pool, server.url())
    assert response.headers.get("x-a") == "1"
    assert body == b"abcde"
    assert second == b"xyz"
    assert server.connections == 1


async def test_content_length_zero_is_complete_without_reading() -> None:
    """A Content-Length: 0 reply is complete at once: closing it unread still keeps the connection."""
    async with serve(ok(b""), ok(b"second")) as server, open_pool() as pool:
        response = await pool.request("POST", server.url(), [], b"{}", read_timeout_seconds=WAIT)
        await response.aclose()
        _, second = await fetch(pool, server.url())
    assert second == b"second"
    assert server.connections == 1


async def test_aiter_bytes_after_the_body_was_read_yields_nothing() -> None:
    """Reading a finished body again yields nothing (no hang, no error)."""
    async with serve(ok(b"once")) as server, open_pool() as pool:
        response = await pool.request("GET", server.url(), [], read_timeout_seconds=WAIT)
        assert await response.aread() == b"once"
        assert await response.aread() == b""
        await response.aclose()
        await response.aclose()  # a second close is harmless
        assert await response.aread() == b""


# -- byte-at-a-time and random splits ----------------------------------------------------------


@pytest.mark.parametrize(
    "reply, expected",
    [
        pytest.param(ok(b"byte by byte", b"X-A: 1"), b"byte by byte", id="content-length"),
        pytest.param(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"4;e=1\r\nbyte\r\n8\r\n by byte\r\n0\r\nX-T: v\r\n\r\n",
            b"byte by byte",
            id="interim-then-chunked",
        ),
        pytest.param(b"HTTP/1.1 200 OK\nContent-Length: 4\n\nbare", b"bare", id="bare-lf"),
    ],
)
async def test_response_fed_one_byte_at_a_time(reply: bytes, expected: bytes) -> None:
    """A reply arriving one byte per segment is read exactly as one arriving at once, and the connection kept."""
    async with serve(bytewise(reply), bytewise(ok(b"again"))) as server, open_pool() as pool:
        response, body = await fetch(pool, server.url())
        _, second = await fetch(pool, server.url())
    assert response.status_code == 200
    assert body == expected
    assert second == b"again"
    assert server.connections == 1


def _framings(body: bytes) -> list[bytes]:
    cl = b"HTTP/1.1 200 OK\r\nContent-Type: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    pieces = [body[i : i + 7] for i in range(0, len(body), 7)]
    ch = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"".join(
        b"%X;ext=%d\r\n%s\r\n" % (len(p), i, p) for i, p in enumerate(pieces)
    )
    ch += b"0\r\nX-Trailer: done\r\n\r\n"
    interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: <x>\r\n\r\n" + cl
    bare = b"HTTP/1.1 200 OK\nContent-Length: %d\n\n" % len(body) + body
    return [cl, ch, interim, bare]


@st.composite
def split_replies(draw: st.DrawFn) -> tuple[bytes, list[bytes]]:
    """A body, and a valid reply carrying it (one of `_framings`) cut at random points."""
    framing = draw(st.integers(0, 3))
    payload = draw(st.binary(max_size=300))
    reply = _framings(payload)[framing]
    cuts = sorted(set(draw(st.lists(st.integers(1, len(reply) - 1), max_size=12))))
    return payload, [reply[a:b] for a, b in zip([0, *cuts], [*cuts, len(reply)], strict=True)]


@pytest.mark.slow
# All drawing happens in the strategy: a draw inside an anyio test that hypothesis stops
# (StopTest) would escape the event loop's runner.
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=split_replies())
async def test_any_split_of_a_response_gives_the_same_body(case: tuple[bytes, list[bytes]]) -> None:
    """However a valid reply is cut into segments, the body comes out identical and the connection is reused."""
    body, pieces = case

    async def script(peer: Peer) -> None:
        await peer.send_pieces(pieces)

    async with serve(script, ok(b"next")) as server, open_pool() as pool:
        response, got = await fetch(pool, server.url())
        _, second = await fetch(pool, server.url())
    assert response.status_code == 200
    assert got == body
    assert second == b"next"
    assert server.connections == 1


# -- persistence -------------------------------------------------------------------------------


async def test_keep_alive_connection_serves_several_requests() -> None:
    """Consecutive requests to one origin share one connection."""
    async with serve(ok(b"one"), ok(b"two"), ok(b"three")) as server, open_pool() as pool:
        bodies = [(await fetch(pool, server.url(f"/{i}")))[1] for i in range(3)]
    assert bodies == [b"one", b"two", b"three"]
    assert server.connections == 1
    assert [r.split(b"\r\n", 1)[0] for r in server.raw_requests] == [b"GET /%d HTTP/1.1" % i for i in range(3)]


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(ok(b"bye", b"Connection: close"), id="connection-close"),
        pytest.param(ok(b"bye", b"Connection: keep-alive, Close"), id="close-among-tokens"),
        pytest.param(b"HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nbye", id="http-1.0"),
    ],
)
async def test_connection_the_server_will_close_is_not_reused(reply: bytes) -> None:
    """After Connection: close, or an HTTP/1.0 reply without keep-alive, the next request opens a new connection."""
    async with serve(reply, ok(b"fresh")) as server, open_pool() as pool:
        response, body = await fetch(pool, server.url())
        _, second = await fetch(pool, server.url())
    assert body == b"bye"
    assert second == b"fresh"
    assert server.connections == 2
    assert response.http_version in ("HTTP/1.0", "HTTP/1.1")


async def test_http_1_0_with_keep_alive_is_reused() -> None:
    """An HTTP/1.0 reply with Connection: keep-alive and a length keeps the connection."""
    reply = b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nhi"
    async with serve(reply, ok(b"again")) as server, open_pool() as pool:
        response, body = await fetch(pool, server.url())
        _, second = await fetch(pool, server.url())
    assert (response.http_version, body, second) == ("HTTP/1.0", b"hi", b"again")
    assert server.connections == 1


async def test_request_with_connection_close_is_not_reused() -> None:
    """A request that said Connection: close is the connection's last (RFC 9112 §9.6)."""
    async with serve(ok(b"one"), ok(b"two")) as server, open_pool() as pool:
        await fetch(pool, server.url(), headers=[("Connection", "close")])
        await fetch(pool, server.url())
    assert server.connections == 2


async def test_body_not_read_to_the_end_closes_the_connection() -> None:
    """Closing a response before its body ended closes the connection (the server sees it); the next reconnects."""
    async with serve(ok(b"x" * 5000), ok(b"fresh")) as server, open_pool() as pool:
        response = await pool.request("GET", server.url(), [], read_timeout_seconds=WAIT)
        await response.aclose()
        _, second = await fetch(pool, server.url())
        await asyncio.wait_for(server.client_closed[0].wait(), WAIT)
    assert second == b"fresh"
    assert server.connections == 2


async def test_partly_read_body_closes_the_connection() -> None:
    """Stopping after the first chunk of a body closes the connection; the next request reconnects."""

    first_read = asyncio.Event()

    async def two_parts(peer: Peer) -> None:
        await peer.send(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nfirst")
        await first_read.wait()
        await peer.send(b"-rest")  # too late for the closed connection; a reused one would see it

    async with serve(two_parts, ok(b"fresh")) as server, open_pool() as pool:
        response = await pool.request("GET", server.url(), [], read_timeout_seconds=WAIT)
        async for chunk in response.aiter_bytes():
            assert chunk == b"first"
            break
        await response.aclose()
        first_read.set()
        _, second = await fetch(pool, server.url())
    assert second == b"fresh"
    assert server.connections == 2


async def test_extra_bytes_after_a_response_prevent_reuse() -> None:
    """Bytes after a complete reply (nothing asked for them) make the connection unusable: the next reconnects."""
    async with serve(ok(b"one") + b"HTTP/1.1 200 OK\r\n", ok(b"two")) as server, open_pool() as pool:
        _, first = await fetch(pool, server.url())
        _, second = await fetch(pool, server.url())
    assert (first, second) == (b"one", b"two")
    assert server.connections == 2


async def test_idle_connection_closed_by_the_server_is_not_reused() -> None:
    """When the server closes a pooled connection while it is idle, the next request opens a new one and succeeds."""
    async with serve(then_close(ok(b"one")), ok(b"two")) as server, open_pool() as pool:
        _, first = await fetch(pool, server.url())
        await server.handled[0].wait()
        await asyncio.sleep(0.1)  # let the client's loop see the FIN
        _, second = await fetch(pool, server.url())
    assert (first, second) == (b"one", b"two")
    assert server.connections == 2


async def test_idle_connection_whose_close_the_loop_has_not_seen_yet_is_not_reused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A FIN already in the socket but not yet processed by the event loop is caught before reuse (one select)."""
    import threading
    import time

    import bridge.transport.pool

    monkeypatch.setattr(bridge.transport.pool, "QUIET_CHECK_AFTER_SECONDS", 0.0)
    listener = socket.create_server(("127.0.0.1", 0))
    first_read = threading.Event()
    connections: list[int] = []

    def serve_in_a_thread() -> None:
        for number, body in enumerate((b"one", b"two")):
            conn, _ = listener.accept()
            connections.append(number)
            with conn:
                conn.recv(65536)
                conn.sendall(ok(body))
                if number == 0:
                    first_read.wait(WAIT)  # close only once the client holds it idle in the pool

    thread = threading.Thread(target=serve_in_a_thread, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"
    try:
        async with open_pool() as pool:
            _, first = await fetch(pool, url)
            first_read.set()
            time.sleep(0.3)  # blocks the loop: the FIN arrives, and eof_received has not run
            _, second = await fetch(pool, url)
    finally:
        thread.join(WAIT)
        listener.close()
    assert (first, second) == (b"one", b"two")
    assert connections == [0, 1]


# -- broken connections and protocol violations ----------------------------------------------


async def test_server_closing_without_a_response_is_connection_broken() -> None:
    """A server that reads the request and closes without answering gives ConnectionBroken."""
    async with serve(then_close(b"")) as server, open_pool() as pool:
        with pytest.raises(ConnectionBroken):
            await pool.request("GET", server.url(), [], read_timeout_seconds=WAIT)


async def test_server_closing_inside_the_head_is_connection_broken() -> None:
    """A head cut off by the close gives ConnectionBroken."""
    async with serve(then_close(b"HTTP/1.1 200 OK\r\nContent-Le")) as server, open_pool() as pool:
        with pytest.raises(ConnectionBroken):
            await pool.request("GET", server.url(), [], read_timeout_seconds=WAIT)


async def test_kept_alive_connection_closed_on_the_next_request_is_connection_broken() -> None:
    """A kept-alive connection the server closes on receiving the next request gives ConnectionBroken."""
    async with serve(ok(b"one"), then_close(b"")) as server, open_pool() as pool:
        await fetch(pool, server.url())
        with pytest.raises(ConnectionBroken):
            await pool.request("GET", server.url(), [], read_timeout_seconds=WAIT)
    assert server.connections == 1


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello", id="content-length"),
        pytest.param(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", id="inside-chunk"),
        pytest.param(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n", id="before-size"),
        pytest.param(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: 1\r\n", id="inside-trailer"),
    ],
)
async def test_truncated_body_is_connection_broken(reply: bytes) -> None:
    """A body cut off by the close (short of its Content-Length or its last chunk) gives ConnectionBroken."""
    async with serve(then_close(reply)) as server, open_pool() as pool:
        response = await pool.request("GET", server.url(), [], read_timeout_seconds=WAIT)
        try:
            with pytest.raises(ConnectionBroken):
                await response.aread()
        finally:
            await response.aclose()


async def test_reset_inside_a_close_delimited_body_is_connection_broken() -> None:
    """A close-delimited body cut off by a connection reset (not a clean close) gives ConnectionBroken."""
    go_on = asyncio.Event()

    async def reset_midway(peer: Peer) -> None:
        await peer.send(b"HTTP/1.1 200 OK\r\n\r\npart")
        await go_on.wait()
        peer.reset()

    async with serve(reset_midway) as server, open_pool() as pool:
        response = await pool.request("GET", server.url(), [], read_timeout_seconds=WAIT)
        try:
            chunks = response.aiter_bytes()
            assert await anext(chunks) == b"part"
            go_on.set()
            with pytest.raises(ConnectionBroken):
                async for _ in chunks:
                    pass
        finally:
            await response.aclose()


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(b"HTTP/2 200 OK\r\nContent-Length: 0\r\n\r\n", id="http-2"),
        pytest.param(b"ICY 200 OK\r\nContent-Length: 0\r\n\r\n", id="not-http"),
        pytest.param(b"HTTP/1.1 20 OK\r\nContent-Length: 0\r\n\r\n", id="two-digit-status"),
        pytest.param(b"HTTP/1.1  200 OK\r\nContent-Length: 0\r\n\r\n", id="double-space"),
        pytest.param(b"\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", id="empty-first-line"),
        pytest.param(b"HTTP/1.1 200 OK\r\nNo colon here\r\nContent-Length: 0\r\n\r\n", id="field-without-colon"),
        pytest.param(b"HTTP/1.1 200 OK\r\nX-A : 1\r\nContent-Length: 0\r\n\r\n", id="space-before-colon"),
        pytest.param(b"HTTP/1.1 200 OK\r\n: empty name\r\nContent-Length: 0\r\n\r\n", id="empty-name"),
        pytest.param(b"HTTP/1.1 200 OK\r\nX-A: 1\r\n folded\r\nContent-Length: 0\r\n\r\n", id="obs-fold"),
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", id="differing-cl"),
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\nhello!", id="differing-cl-list"),
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", id="negative-cl"),
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length: 0x10\r\n\r\n", id="hex-cl"),
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n", id="empty-cl"),
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length: \xb2\r\n\r\n", id="non-ascii-digit-cl"),
        pytest.param(b"HTTP/1.1 200 OK\r\nContent Length: 2\r\n\r\nhi", id="space-in-name"),
        pytest.param(b"HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 0\r\n\r\n", id="nul-in-value"),
        pytest.param(b"HTTP/1.1 200 OK\r\nX-A: a\rb\r\nContent-Length: 0\r\n\r\n", id="bare-cr-in-value"),
        pytest.param(b"HTTP/1.1 099 Odd\r\nContent-Length: 0\r\n\r\n", id="status-below-100"),
        pytest.param(b"HTTP/1.1 101 Switching\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", id="101"),
    ],
)
async def test_malformed_head_is_protocol_violation(reply: bytes) -> None:
    """A malformed status line or field, or differing/invalid Content-Length, gives ProtocolViolation."""
    async with serve(reply) as server, open_pool() as pool:
        with pytest.raises(ProtocolViolation):
            await pool.request("GET", server.url(), [], read_timeout_seconds=WAIT)


async def test_same_content_length_repeated_is_accepted() -> None:
    """Repeated identical Content-Length values (as a list or as fields) are one length."""
    reply = b"HTTP/1.1 200 OK\r\nContent-Length: 3, 3\r\nContent-Length: 3\r\n\r\nabc"
    async with serve(reply) as server, open_pool() as pool:
        _, body = await fetch(pool, server.url())
    assert body == b"abc"


@pytest.mark.parametrize(
    "chunks",
    [
        pytest.param(b"zz\r\nhello\r\n0\r\n\r\n", id="not-hex"),
        pytest.param(b"-5\r\nhello\r\n0\r\n\r\n", id="negative"),
        pytest.param(b"\r\nhello\r\n0\r\n\r\n", id="empty"),
        pytest.param(b" 5\r\nhello\r\n0\r\n\r\n", id="leading-space"),
        pytest.param(b"0x5\r\nhello\r\n0\r\n\r\n", id="0x-prefix"),
        pytest.param(b"3\r\nhello\r\n0\r\n\r\n", id="data-longer-than-size"),
    ],
)
async def test_bad_chunk_framing_is_protocol_violation(chunks: bytes) -> None:
    """A malformed chunk size line, or chunk data longer than its size, gives ProtocolViolation while reading."""
    reply = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks
    async with serve(reply) as server, open_pool() as pool:
        response = await pool.request("GET", server.url(), [], read_timeout_seconds=WAIT)
        try:
            with pytest.raises(ProtocolViolation):
                await response.aread()
        finally:
            await response.aclose()


async def test_head_growing_past_max_head_bytes_is_protocol_violation() -> None:
    """A head that keeps coming past MAX_HEAD_BYTES without ending gives ProtocolViolation (not a hang)."""
    filler = b"".join(b"X-Filler-%05d: %s\r\n" % (i, b"v" * 100) for i in range(MAX_HEAD_BYTES // 100 + 10))
    assert len(filler) > MAX_HEAD_BYTES

    async def endless_head(peer: Peer) -> None:
        await peer.send_pieces([b"HTTP/1.1 200 OK\r\n", filler[: len(filler) // 2], filler[len(filler) // 2 :]])
        await peer.wait_for_client_close()

    async with serve(endless_head) as server, open_pool() as pool:
        with pytest.raises(ProtocolViolation):
            await pool.request("GET", server.url(), [], read_timeout_seconds=WAIT)


async def test_complete_head_over_max_head_bytes_is_protocol_violation() -> None:
    """A head over MAX_HEAD_BYTES is refused even when it arrives complete in one segment."""
    start, end = b"HTTP/1.1 200 OK\r\nX-Filler: ", b"\r\nContent-Length: 0\r\n\r\n"
    reply = start + b"v" * (MAX_HEAD_BYTES + 50 - len(start) - len(end)) + end
    assert len(reply) == MAX_HEAD_BYTES + 50  # just over: only the read bringing the end crosses the limit
    async with serve(reply) as server, open_pool() as pool:
        with pytest.raises(ProtocolViolation):
            await fetch(pool, server.url())


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(b"HTTP/1.1 200 OK\nContent-Length: 5\n\na\n\r\nb", id="bare-lf-head"),
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\n\r\n", id="crlf-lines-bare-lf-end"),
    ],
)
async def test_bare_lf_head_followed_by_crlf_in_the_body(reply: bytes) -> None:
    """A head ended by a bare LF blank line ends there, even when the body holds LF CR LF."""
    async with serve(reply) as server, open_pool() as pool:
        response, body = await fetch(pool, server.url(), read_timeout=1.0)
    assert response.status_code == 200
    assert body == reply.split(b"\n\n", 1)[1]


# -- timeouts and connecting ------------------------------------------------------------------


async def test_silent_server_is_read_timeout() -> None:
    """A server that never answers gives ReadTimeout after the read timeout; the connection is not reused."""
    async with serve(never_answer, ok(b"after")) as server, open_pool() as pool:
        with pytest.raises(ReadTimeout):
            await pool.request("GET", server.url(), [], read_timeout_seconds=0.2)
        await asyncio.wait_for(server.client_closed[0].wait(), WAIT)
        _, body = await fetch(pool, server.url())
    assert body == b"after"
    assert server.connections == 2


async def test_server_silent_inside_the_body_is_read_timeout() -> None:
    """A body that stops arriving gives ReadTimeout while reading; the connection is not reused."""

    async def stall(peer: Peer) -> None:
        await peer.send(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf")
        await peer.wait_for_client_close()

    async with serve(stall, ok(b"after")) as server, open_pool() as pool:
        response = await pool.request("GET", server.url(), [], read_timeout_seconds=0.2)
        try:
            with pytest.raises(ReadTimeout):
                await response.aread()
        finally:
            await response.aclose()
        _, body = await fetch(pool, server.url())
    assert body == b"after"
    assert server.connections == 2


async def answered_wait(bound_seconds: float) -> Connection:
    """A connection whose first wait for data, bounded ``bound_seconds`` from now, was
    answered: its read timer is armed for that bound, and no wait is in progress."""
    connection = Connection(("127.0.0.1", 0))
    loop = asyncio.get_running_loop()
    first = loop.create_task(connection.wait_for_data(loop.time() + bound_seconds, "first"))
    await asyncio.sleep(0)
    connection.wakeup.set()
    await first
    return connection


async def test_a_later_read_bound_is_kept_in_full_after_an_earlier_one() -> None:
    """The read timeout's timer outlives a wait (one per connection, not one per wait):
    when it fires at an earlier wait's bound, the wait in progress still gets all of its own."""
    connection = await answered_wait(0.05)
    loop = asyncio.get_running_loop()
    bound = loop.time() + 0.3
    with pytest.raises(ReadTimeout, match="second"):
        await asyncio.wait_for(connection.wait_for_data(bound, "second"), WAIT)
    assert loop.time() >= bound
    connection.close()


async def test_an_earlier_read_bound_than_the_last_is_kept() -> None:
    connection = await answered_wait(3600)
    loop = asyncio.get_running_loop()
    with pytest.raises(ReadTimeout, match="second"):
        await asyncio.wait_for(connection.wait_for_data(loop.time() + 0.05, "second"), WAIT)
    connection.close()


async def test_closed_port_is_connect_failed() -> None:
    """Connecting where nothing listens gives ConnectFailed, and frees the pool's slot."""
    url = f"http://127.0.0.1:{closed_port()}/mcp"
    async with open_pool(max_connections=1, pool_timeout=0.5) as pool:
        for _ in range(2):
            with pytest.raises(ConnectFailed):
                await pool.request("GET", url, [], read_timeout_seconds=WAIT)


@pytest.mark.linux_only("Linux drops SYNs beyond a full accept queue")
async def test_unaccepted_connection_is_connect_timeout() -> None:
    """A listener whose accept queue is full leaves the connect pending: ConnectTimeout."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    fillers: list[socket.socket] = []
    try:
        for _ in range(4):  # fill the accept queue; later SYNs are dropped
            filler = socket.socket()
            filler.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                filler.connect(listener.getsockname())
            fillers.append(filler)
        await asyncio.sleep(0.05)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"
        async with open_pool(connect_timeout=0.3) as pool:
            with pytest.raises(ConnectTimeout):
                await pool.request("GET", url, [], read_timeout_seconds=WAIT)
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


# -- the pool's limit -------------------------------------------------------------------------


async def test_busy_pool_gives_pool_timeout() -> None:
    """With max_connections=1 and its connection busy, a second request waits and then gets PoolTimeout."""
    async with serve(ok(b"held"), ok(b"after")) as server, open_pool(max_connections=1, pool_timeout=0.2) as pool:
        held = await pool.request("GET", server.url(), [], read_timeout_seconds=WAIT)
        with pytest.raises(PoolTimeout):
            await pool.request("GET", server.url(), [], read_timeout_seconds=WAIT)
        assert await held.aread() == b"held"
        await held.aclose()
        _, body = await fetch(pool, server.url())  # the failed wait left the pool usable
    assert body == b"after"
    assert server.connections == 1
    assert len(server.raw_requests) == 2


async def test_unbounded_requests_may_exceed_the_limit_by_the_overflow_only() -> None:
    """bounded=False (notifications) opens connections beyond max_connections, but at most max_overflow more."""
    replies = [ok(b"a"), ok(b"b"), ok(b"c"), ok(b"d")]
    async with serve(*replies) as server:
        pool = Http11Pool(max_connections=1, connect_timeout_seconds=WAIT, pool_timeout_seconds=0.2, max_overflow=1)
        try:
            held = [await pool.request("GET", server.url(), [], read_timeout_seconds=WAIT, bounded=False) for _ in "ab"]
            with pytest.raises(PoolTimeout):
                await pool.request("GET", server.url(), [], read_timeout_seconds=WAIT, bounded=False)
            for response in held:
                await response.aread()
                await response.aclose()
            _, body = await fetch(pool, server.url())
        finally:
            await pool.aclose()
    assert body == b"c"
    assert server.connections == 2


async def test_waiting_request_proceeds_once_the_busy_response_is_closed() -> None:
    """A request waiting for the only connection gets it (the same connection) when the first response is closed."""
    async with serve(ok(b"first"), ok(b"second")) as server, open_pool(max_connections=1) as pool:
        held = await pool.request("GET", server.url(), [], read_timeout_seconds=WAIT)
        waiting = asyncio.create_task(fetch(pool, server.url()))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        assert len(server.raw_requests) == 1
        assert await held.aread() == b"first"
        await held.aclose()
        _, body = await asyncio.wait_for(waiting, WAIT)
    assert body == b"second"
    assert server.connections == 1


async def test_waiting_request_gets_a_new_connection_when_the_busy_one_closes() -> None:
    """A waiting request proceeds on a new connection when the busy one is closed instead of returned."""
    async with serve(ok(b"x" * 100), ok(b"second")) as server, open_pool(max_connections=1) as pool:
        held = await pool.request("GET", server.url(), [], read_timeout_seconds=WAIT)
        waiting = asyncio.create_task(fetch(pool, server.url()))
        await asyncio.sleep(0.05)
        await held.aclose()  # body unread: the connection is closed, its slot freed
        _, body = await asyncio.wait_for(waiting, WAIT)
    assert body == b"second"
    assert server.connections == 2


async def test_cancelled_waiter_passes_its_turn_on() -> None:
    """When a woken waiter is cancelled before it runs, the next waiter still gets the free connection."""
    async with serve(ok(b"first"), ok(b"third")) as server, open_pool(max_connections=1, pool_timeout=0.5) as pool:
        held = await pool.request("GET", server.url(), [], read_timeout_seconds=WAIT)
        second = asyncio.create_task(fetch(pool, server.url()))
        await asyncio.sleep(0.02)
        third = asyncio.create_task(fetch(pool, server.url()))
        await asyncio.sleep(0.02)
        assert await held.aread() == b"first"
        await held.aclose()  # wakes `second`...
        second.cancel()  # ...which is cancelled before it runs
        with pytest.raises(asyncio.CancelledError):
            await second
        _, body = await third
    assert body == b"third"


async def test_idle_connection_to_another_origin_does_not_block_the_pool() -> None:
    """An app restarted on a new port is reachable though the pool is full of idle connections to the old one."""
    async with (
        serve(ok(b"old")) as old,
        serve(ok(b"new")) as new,
        open_pool(max_connections=1, pool_timeout=0.5) as pool,
    ):
        await fetch(pool, old.url())
        _, body = await fetch(pool, new.url())
    assert body == b"new"


# -- what is sent -----------------------------------------------------------------------------


async def test_request_bytes_on_the_wire() -> None:
    """The request is the request line, Host with port, the caller's fields, Content-Length and the body as given."""
    async with serve(ok(), ok(), ok(), ok()) as server, open_pool() as pool:
        headers = [("Accept", "application/json, text/event-stream"), ("mcp-session-id", "s-1"), ("X-Tab", "a\tb")]
        await fetch(pool, server.url("/mcp?x=1&y=%20"), method="POST", headers=headers, body=b'{"id":1}')
        await fetch(pool, server.url(), method="GET", headers=[("Accept", "text/event-stream")])
        await fetch(pool, server.url(), method="POST", body=b"")
        await fetch(pool, f"http://127.0.0.1:{server.port}", method="DELETE", headers=[("X-Latin", "café")])
    host = b"Host: 127.0.0.1:%d\r\n" % server.port
    assert server.raw_requests == [
        b"POST /mcp?x=1&y=%20 HTTP/1.1\r\n" + host + b"Accept: application/json, text/event-stream\r\n"
        b'mcp-session-id: s-1\r\nX-Tab: a\tb\r\nContent-Length: 8\r\n\r\n{"id":1}',
        b"GET /mcp HTTP/1.1\r\n" + host + b"Accept: text/event-stream\r\n\r\n",
        b"POST /mcp HTTP/1.1\r\n" + host + b"Content-Length: 0\r\n\r\n",
        b"DELETE / HTTP/1.1\r\n" + host + b"X-Latin: caf\xe9\r\n\r\n",
    ]
    assert bytes(server.received[0]) == b"".join(server.raw_requests)


async def test_large_request_body_is_sent_exactly() -> None:
    """A body over 64 KiB (sent apart from the head) arrives byte for byte after an exact Content-Length."""
    body = bytes(range(256)) * 1200 + b"tail"
    assert len(body) > 64 * 1024
    async with serve(ok(b"got it"), ok(b"small")) as server, open_pool() as pool:
        _, reply = await fetch(pool, server.url(), method="POST", headers=[("Content-Type", "x")], body=body)
        await fetch(pool, server.url(), method="POST", body=b"s" * 10)
    assert reply == b"got it"
    head = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: x\r\nContent-Length: %d\r\n\r\n"
    assert server.raw_requests[0] == head % (server.port, len(body)) + body
    assert server.raw_requests[1].endswith(b"Content-Length: 10\r\n\r\n" + b"s" * 10)
    assert server.connections == 1


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(f"Bearer {SECRET}\r\nX-Injected: 1", id="crlf"),
        pytest.param(f"Bearer {SECRET}\n", id="lf"),
        pytest.param(f"Bearer {SECRET}\r", id="cr"),
        pytest.param(f"Bearer {SECRET}\x00", id="nul"),
        pytest.param(f"Bearer {SECRET}\x7f", id="del"),
        pytest.param(f"Bearer {SECRET}\x1b", id="escape"),
        pytest.param(f"Bearer {SECRET}\u20ac", id="not-latin-1"),
        pytest.param(f"Bearer {SECRET}\U0001f511", id="astral"),
    ],
)
async def test_unsendable_header_value_is_refused_without_quoting_it(value: str) -> None:
    """A field value with CR, LF, NUL, controls or non-latin-1 characters is refused, unquoted, and nothing is sent."""
    async with serve(ok(b"one"), ok(b"two")) as server, open_pool() as pool:
        await fetch(pool, server.url())  # an idle connection is ready: nothing may reach it
        with pytest.raises(LocalProtocolError) as caught:
            await pool.request(
                "POST", server.url(), [("Accept", "x"), ("Authorization", value)], b"{}", read_timeout_seconds=WAIT
            )
        assert SECRET not in str(caught.value)
        assert SECRET not in repr(caught.value)
        assert caught.value.__cause__ is None or SECRET not in str(caught.value.__cause__)
        _, body = await fetch(pool, server.url())
    assert body == b"two"
    assert server.connections == 1
    assert len(server.raw_requests) == 2
    assert SECRET.encode() not in bytes(server.received[0])


@pytest.mark.parametrize("name", ["Bad Name", "X-A:", "", "Ünicode", "X\r\nY", "X-Region\n"])
async def test_unsendable_header_name_is_refused(name: str) -> None:
    """A field name that is not a token is refused before anything is sent."""
    async with serve(ok()) as server, open_pool() as pool:
        with pytest.raises(LocalProtocolError):
            await pool.request("GET", server.url(), [(name, "v")], read_timeout_seconds=WAIT)
    assert server.connections == 0


@pytest.mark.parametrize("name", ["Host", "content-length", "Transfer-Encoding"])
async def test_fields_the_client_writes_itself_are_refused(name: str) -> None:
    """Host, Content-Length and Transfer-Encoding come from the client only: a second copy is refused, unsent."""
    async with serve(ok()) as server, open_pool() as pool:
        with pytest.raises(LocalProtocolError):
            await pool.request("POST", server.url(), [(name, "5")], b"{}", read_timeout_seconds=WAIT)
    assert server.connections == 0


@pytest.mark.parametrize("method", ["GET /evil HTTP/1.1\r\nX:", "PO ST", "", "POST\n"])
async def test_method_that_is_not_a_token_is_refused(method: str) -> None:
    """A method with spaces or line breaks never reaches the wire."""
    async with serve(ok()) as server, open_pool() as pool:
        with pytest.raises(LocalProtocolError):
            await pool.request(method, server.url(), [], read_timeout_seconds=WAIT)
    assert server.connections == 0


@pytest.mark.parametrize(
    "url",
    ["https://127.0.0.1:1/mcp", "http:///mcp", "http://127.0.0.1:99999/mcp", "http://127.0.0.1:1/a b", "ftp://x/"],
)
async def test_unusable_url_is_local_protocol_error(url: str) -> None:
    """A URL that is not plain http:// with a host, a valid port and an ASCII target is refused."""
    async with open_pool() as pool:
        with pytest.raises(LocalProtocolError):
            await pool.request("GET", url, [], read_timeout_seconds=WAIT)


# -- flow control -----------------------------------------------------------------------------


async def test_large_content_length_body_streams_intact() -> None:
    """A 20 MiB body read slowly (so the socket is paused and resumed) arrives intact, then the connection is reused."""
    size = 20 * 1024 * 1024
    assert size > 4 * HIGH_WATER_BYTES
    block = hashlib.sha256(b"seed").digest() * (1024 * 1024 // 32)
    payload = b"".join(bytes([i]) + block[1:] for i in range(size // len(block)))

    async def big(peer: Peer) -> None:
        peer.writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size)
        for start in range(0, size, 1024 * 1024):
            peer.writer.write(payload[start : start + 1024 * 1024])
            await peer.writer.drain()

    async with serve(big, ok(b"after")) as server, open_pool() as pool:
        response = await pool.request("GET", server.url(), [], read_timeout_seconds=WAIT)
        await asyncio.sleep(0.3)  # let the buffer pass the high-water mark before reading
        digest, total = hashlib.sha256(), 0
        async for chunk in response.aiter_bytes():
            digest.update(chunk)
            total += len(chunk)
            await asyncio.sleep(0)
        await response.aclose()
        _, second = await fetch(pool, server.url())
    assert total == size
    assert digest.hexdigest() == hashlib.sha256(payload).hexdigest()
    assert second == b"after"
    assert server.connections == 1


async def test_large_chunked_body_streams_intact() -> None:
    """A 12 MiB chunked body of uneven chunks, read after a pause, arrives intact."""
    pieces = [hashlib.sha256(b"%d" % i).digest() * (1000 + 37 * (i % 50)) for i in range(350)]
    payload = b"".join(pieces)
    assert len(payload) > 2 * HIGH_WATER_BYTES
    encoded = chunked(*pieces)

    async def big(peer: Peer) -> None:
        peer.writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for start in range(0, len(encoded), 700_001):
            peer.writer.write(encoded[start : start + 700_001])
            await peer.writer.drain()

    async with serve(big, ok(b"after")) as server, open_pool() as pool:
        response = await pool.request("GET", server.url(), [], read_timeout_seconds=WAIT)
        await asyncio.sleep(0.3)
        body = await response.aread()
        await response.aclose()
        _, second = await fetch(pool, server.url())
    assert hashlib.sha256(body).hexdigest() == hashlib.sha256(payload).hexdigest()
    assert second == b"after"
    assert server.connections == 1


# -- cancellation and closing the pool ------------------------------------------------------------


async def test_cancelled_request_closes_its_connection_and_frees_the_pool() -> None:
    """Cancelling a task waiting for a response closes that connection; the pool still serves a new request."""
    async with serve(never_answer, ok(b"after")) as server, open_pool(max_connections=1, pool_timeout=1.0) as pool:
        task = asyncio.create_task(pool.request("GET", server.url(), [], read_timeout_seconds=None))
        await server.wait_for_requests(1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(server.client_closed[0].wait(), WAIT)
        _, body = await fetch(pool, server.url())
    assert body == b"after"
    assert server.connections == 2


async def test_cancelled_body_read_closes_the_connection() -> None:
    """Cancelling a task reading a body, then closing the response, closes that connection."""
    async with serve(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial", ok(b"after")) as server:
        async with open_pool(max_connections=1) as pool:
            response = await pool.request("GET", server.url(), [], read_timeout_seconds=None)
            task = asyncio.create_task(response.aread())
            await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await response.aclose()
            await asyncio.wait_for(server.client_closed[0].wait(), WAIT)
            _, body = await fetch(pool, server.url())
    assert body == b"after"
    assert server.connections == 2


async def test_pool_aclose_closes_idle_connections_and_refuses_new_requests() -> None:
    """Closing the pool closes its idle connections (the server sees them close); later requests fail."""
    async with serve(ok(b"a"), ok(b"b")) as server:
        pool = Http11Pool(max_connections=4, connect_timeout_seconds=WAIT, pool_timeout_seconds=WAIT)
        first = await pool.request("GET", server.url(), [], read_timeout_seconds=WAIT)
        second = await pool.request("GET", server.url(), [], read_timeout_seconds=WAIT)
        for response in (first, second):
            await response.aread()
            await response.aclose()
        assert server.connections == 2
        await pool.aclose()
        await asyncio.wait_for(server.client_closed[0].wait(), WAIT)
        await asyncio.wait_for(server.client_closed[1].wait(), WAIT)
        with pytest.raises(ConnectionBroken):
            await pool.request("GET", server.url(), [], read_timeout_seconds=WAIT)
    assert server.connections == 2


async def test_pool_aclose_closes_a_busy_connection_when_its_response_closes() -> None:
    """A response still open when the pool closes has its connection closed on aclose, not pooled."""
    async with serve(ok(b"busy")) as server:
        pool = Http11Pool(max_connections=2, connect_timeout_seconds=WAIT, pool_timeout_seconds=WAIT)
        response = await pool.request("GET", server.url(), [], read_timeout_seconds=WAIT)
        await pool.aclose()
        assert await response.aread() == b"busy"
        await response.aclose()
        await asyncio.wait_for(server.client_closed[0].wait(), WAIT)


async def test_pool_aclose_fails_waiting_requests() -> None:
    """A request waiting for a connection when the pool closes gets ConnectionBroken."""
    async with serve(ok(b"held")) as server:
        pool = Http11Pool(max_connections=1, connect_timeout_seconds=WAIT, pool_timeout_seconds=WAIT)
        held = await pool.request("GET", server.url(), [], read_timeout_seconds=WAIT)
        waiting = asyncio.create_task(pool.request("GET", server.url(), [], read_timeout_seconds=WAIT))
        await asyncio.sleep(0.05)
        await pool.aclose()
        with pytest.raises(ConnectionBroken):
            await asyncio.wait_for(waiting, WAIT)
        await held.aclose()


def test_max_connections_below_one_is_refused() -> None:
    """A pool without room for one connection is a configuration error."""
    with pytest.raises(ValueError):
        Http11Pool(max_connections=0, connect_timeout_seconds=1, pool_timeout_seconds=1)


# -- accounting, the connection hook, a head that never completes ----------------------------------


async def test_every_slot_comes_back_after_failures_of_every_kind() -> None:
    """The pool counts open connections in one place; after refusals, resets, protocol
    violations, timeouts and good exchanges, nothing is left counted, and aclose agrees."""

    async def reset(peer: Peer) -> None:
        peer.reset()

    async with serve(ok(), reset, b"garbage\r\n\r\n", ok(), never_answer) as server, open_pool() as pool:
        await fetch(pool, server.url())
        for expected in (ConnectionBroken, ProtocolViolation):
            with pytest.raises(expected):
                await fetch(pool, server.url())
        await fetch(pool, server.url())
        with pytest.raises(ReadTimeout):
            await fetch(pool, server.url(), read_timeout=0.2)
        with pytest.raises(ConnectFailed):
            await fetch(pool, f"http://127.0.0.1:{closed_port()}/")
        assert pool.open_connections <= 1  # at most the one kept alive
    assert pool.open_connections == 0


async def test_verify_connection_runs_once_per_new_connection_before_any_byte_is_sent() -> None:
    seen: list[int] = []

    def verify(sock: socket.socket) -> None:
        seen.append(sock.fileno())

    async with serve(ok(), ok()) as server:
        pool = Http11Pool(max_connections=2, connect_timeout_seconds=WAIT, pool_timeout_seconds=WAIT, verify_connection=verify)
        try:
            await fetch(pool, server.url())
            await fetch(pool, server.url())  # the kept-alive connection: not verified again
        finally:
            await pool.aclose()
    assert len(seen) == 1 and server.connections == 1


async def test_a_connection_that_fails_verification_is_closed_never_pooled_and_nothing_is_sent() -> None:
    class NotTheApp(Exception):
        pass

    def verify(sock: socket.socket) -> None:
        raise NotTheApp("the listener is not the app")

    async with serve(ok()) as server:
        pool = Http11Pool(max_connections=1, connect_timeout_seconds=WAIT, pool_timeout_seconds=WAIT, verify_connection=verify)
        try:
            for _ in range(2):  # a second request is not stuck behind a leaked slot
                with pytest.raises(NotTheApp):
                    await pool.request("GET", server.url(), [("Authorization", f"Bearer {SECRET}")], read_timeout_seconds=WAIT)
            assert pool.open_connections == 0
        finally:
            await pool.aclose()
        await until(lambda: all(event.is_set() for event in server.client_closed))
    assert server.connections == 2 and all(not received for received in server.received)


async def test_a_head_dripped_a_byte_at_a_time_ends_with_read_timeout() -> None:
    """Each byte comes well within the read timeout, the head as a whole does not."""

    async def drip(peer: Peer) -> None:
        await peer.send_bytewise(ok(), pause_seconds=0.05)

    async with serve(drip) as server, open_pool() as pool:
        with pytest.raises(ReadTimeout):
            await fetch(pool, server.url(), read_timeout=0.5)


async def test_a_large_body_the_app_never_reads_ends_with_the_heads_bound() -> None:
    """No separate write timeout: a request the app never reads ends when its head is due."""
    writers: list[asyncio.StreamWriter] = []
    done = asyncio.Event()

    async def accept_and_never_read(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        await done.wait()

    server = await asyncio.start_server(accept_and_never_read, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with open_pool() as pool:
            with pytest.raises(ReadTimeout):
                await fetch(pool, f"http://127.0.0.1:{port}/", "POST", body=b"x" * (32 * 1024 * 1024), read_timeout=0.5)
            assert pool.open_connections == 0
    finally:
        done.set()
        for writer in writers:
            writer.transport.abort()
        server.close()
        await server.wait_closed()


# -- a body read whole ------------------------------------------------------------------------


def _in_pieces(head: bytes, body: bytes, piece_bytes: int, then_close: bool = False) -> Callable[[Peer], Awaitable[None]]:
    """Reply: ``head``, then ``body`` in pieces of ``piece_bytes``, each after a short pause
    (so each arrives on its own); then the connection serves the next request (or closes)."""

    async def script(peer: Peer) -> None:
        await peer.send(head)
        for start in range(0, len(body), piece_bytes):
            await asyncio.sleep(0.002)
            await peer.send(body[start : start + piece_bytes])
        if then_close:
            peer.close()

    return script


async def test_a_body_read_whole_wakes_its_reader_once_it_is_all_there(monkeypatch: pytest.MonkeyPatch) -> None:
    """A large Content-Length body arriving in 40 pieces is handed over whole, and the
    reader waits for it once, not once per piece (each wake is a trip through the event
    loop: a 16 MiB reply took 256 of them); the connection then serves the next request."""
    body = bytes(range(256)) * (40 * 4096 // 256)
    waits = 0
    original = Connection.wait_for_data

    async def counted(self: Connection, timeout_at: float | None, late: str) -> None:
        nonlocal waits
        waits += 1
        await original(self, timeout_at, late)

    monkeypatch.setattr(Connection, "wait_for_data", counted)
    head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body)
    async with serve(_in_pieces(head, body, 4096), ok(b"next")) as server, open_pool() as pool:
        response = await pool.request("GET", server.url(), [], read_timeout_seconds=WAIT)
        try:
            waits = 0
            whole = await response.read_whole(len(body), b"\n")
        finally:
            await response.aclose()
        assert whole == body + b"\n"
        assert waits <= 2, f"the reader was woken {waits} times for one body"
        _, after = await fetch(pool, server.url())
    assert after == b"next"
    assert server.connections == 1


async def test_a_body_read_whole_that_stalls_or_breaks_off_still_ends_in_time() -> None:
    """Waiting for the whole body still ends at the read timeout, or at once when the
    server closes: arriving bytes alone no longer wake the reader, the end and the timer do."""
    body = b"x" * 200_000
    head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (len(body) + 1)
    async with serve(_in_pieces(head, body, 50_000), _in_pieces(head, body, 50_000, then_close=True)) as server, \
            open_pool() as pool:
        response = await pool.request("GET", server.url(), [], read_timeout_seconds=0.5)
        try:
            with pytest.raises(ReadTimeout):
                await response.read_whole(len(body) + 1)
        finally:
            await response.aclose()
        response = await pool.request("GET", server.url(), [], read_timeout_seconds=WAIT)
        try:
            with pytest.raises(ConnectionBroken):
                await asyncio.wait_for(response.read_whole(len(body) + 1), WAIT)
        finally:
            await response.aclose()
