"""SSE replies through the bridge's own HTTP/1.1 client, against a scripted app on 127.0.0.1.

What a user would notice: a drip that never completes an event gets a ``timeout`` error
after ``--request-timeout``, while keep-alive comments and progress events keep a long call
open; an event larger than ``--max-message-bytes`` gets ``message_too_large`` while it
arrives (the bridge stops reading it; its memory stays near the cap); and an ``http://``
SSE reply never imports httpx. The app is ``support.mcp_app.McpApp`` on a
``support.scripted.ScriptedServer``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.helpers import NOTIF_INIT, init, request_line, running_bridge
from support.mcp_app import SSE_HEAD, McpApp, chunk, compact, progress
from support.processes import status_kib
from support.scripted import WAIT, Peer, Seen, serve

pytestmark = pytest.mark.anyio

MiB = 1024 * 1024
ROOT = Path(__file__).resolve().parents[2]




# -- the app: McpApp, every result over SSE, tools/call scripted ------------------------------------

Script = Callable[[dict[str, Any], Peer], Awaitable[None]]
"""The answer to ``tools/call``: the message in, raw bytes out on ``peer``."""


@dataclass
class CallLog:
    """What the scripted ``tools/call`` reply did."""

    sent_bytes: int = 0
    """Bytes of the body the script managed to write (set by the scripts below)."""
    ended: anyio.Event = field(default_factory=anyio.Event)
    """Set when the script returned or its connection failed."""


def sse_app(on_call: Script | None = None, log: CallLog | None = None) -> McpApp:
    """:class:`McpApp` answering ``initialize`` with JSON and every other request with an
    empty result over SSE; ``tools/call`` goes to ``on_call`` (its end is set on ``log``)."""
    app = McpApp(server_name="sse", stateless=True, sse=True, result={})
    if on_call is not None:
        script, ended = on_call, (log or CallLog()).ended

        async def reply(seen: Seen, peer: Peer) -> None:
            try:
                await script(seen.message(), peer)
            finally:
                ended.set()

        app.replies["tools/call"] = reply
    return app


def call(request_id: int) -> bytes:
    return request_line(request_id, "tools/call", {"name": "slow", "arguments": {}, "_meta": {"progressToken": "p"}})


def reason_of(message: dict[str, Any]) -> str:
    assert message["error"]["code"] == -32603
    return str(message["error"]["data"]["reason"])


# -- the idle timer: complete events and comments only ---------------------------------------------


def drip(data: bytes, seconds_per_byte: float) -> Script:
    """Send the SSE head, then ``data`` one byte at a time, then hold the stream open."""

    async def script(message: dict[str, Any], peer: Peer) -> None:
        await peer.send(SSE_HEAD)
        with contextlib.suppress(ConnectionError):
            for i in range(len(data)):
                await peer.send(chunk(data[i : i + 1]))
                await asyncio.sleep(seconds_per_byte)
            await asyncio.sleep(WAIT * 3)

    return script


@pytest.mark.slow
async def test_a_drip_that_never_completes_an_event_gets_a_timeout_after_the_bound() -> None:
    """One byte every 0.1 s for 60 s, never an event: before, every byte reset the timer."""
    log = CallLog()
    app = sse_app(drip(b"data: " + b"x" * 600, 0.1), log)
    async with serve(app.wire) as server, running_bridge(url=server.url(), request_timeout_seconds=1.0) as run:
        await run.handshake()
        run.stdin.feed(call(1))
        (_, reply) = await run.stdout.wait_for(2, timeout_seconds=WAIT)
        assert reply["id"] == 1 and reason_of(reply) == "timeout"
        with anyio.fail_after(WAIT):
            await log.ended.wait()  # the bridge closed the stream (the drip failed)
            while not any(p.get("method") == "notifications/cancelled" for p in app.bodies):
                await anyio.sleep(0.01)
        (cancelled,) = [p for p in app.bodies if p.get("method") == "notifications/cancelled"]
        assert cancelled["params"]["requestId"] == 1


@pytest.mark.slow
async def test_a_drip_of_lines_and_blank_lines_without_a_field_is_no_sign_of_life() -> None:
    app = sse_app(drip(b"\n" * 100 + b"foo: bar\n" * 20, 0.05))
    async with serve(app.wire) as server, running_bridge(url=server.url(), request_timeout_seconds=1.0) as run:
        await run.handshake()
        run.stdin.feed(call(1))
        (_, reply) = await run.stdout.wait_for(2, timeout_seconds=WAIT)
        assert reason_of(reply) == "timeout"


def beats(kind: str, count: int, seconds_between: float) -> Script:
    """``count`` keep-alive comments or progress events, then the response."""

    async def script(message: dict[str, Any], peer: Peer) -> None:
        await peer.send(SSE_HEAD)
        for i in range(count):
            await asyncio.sleep(seconds_between)
            beat = b": keep-alive\r\n\r\n" if kind == "comments" else b"data: " + progress("p", i) + b"\r\n\r\n"
            await peer.send(chunk(beat))
        result = compact({"jsonrpc": "2.0", "id": message["id"], "result": {"content": [], "beats": count}})
        await peer.send(chunk(b"event: message\r\ndata: " + result + b"\r\n\r\n") + b"0\r\n\r\n")

    return script


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["comments", "progress"])
async def test_a_long_call_that_sends_keep_alives_or_progress_is_never_cut_off(kind: str) -> None:
    """3 s of beats every 0.15 s against a 1.5 s bound: the call outlives the bound twice."""
    app = sse_app(beats(kind, 20, 0.15))
    async with serve(app.wire) as server, running_bridge(url=server.url(), request_timeout_seconds=1.5) as run:
        await run.handshake()
        run.stdin.feed(call(1))
        expected = 2 + (20 if kind == "progress" else 0)
        replies = await run.stdout.wait_for(expected, timeout_seconds=WAIT)
        assert replies[-1] == {"jsonrpc": "2.0", "id": 1, "result": {"content": [], "beats": 20}}
        if kind == "progress":
            assert [r["params"]["progress"] for r in replies[1:-1]] == list(range(20))


# -- the stream's end after the response ------------------------------------------------------------


async def test_a_stream_that_ends_right_after_the_response_leaves_its_connection_for_the_next_call() -> None:
    app = sse_app()
    async with serve(app.wire) as server, running_bridge(url=server.url()) as run:
        await run.handshake()
        for i in range(1, 21):
            run.stdin.feed(request_line(i, "tools/list"))
            await run.stdout.wait_for(1 + i, timeout_seconds=WAIT)
    # initialize, its notification and the GET stream may have opened up to three; a new
    # connection per SSE reply would make that 20 more.
    assert server.connections <= 3


def respond_and_hold(message: dict[str, Any], peer: Peer) -> Awaitable[None]:
    result = compact({"jsonrpc": "2.0", "id": message["id"], "result": {"held": True}})
    late = compact({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "late"}})

    async def script() -> None:
        await peer.send(SSE_HEAD + chunk(b"data: " + result + b"\n\n"))
        with contextlib.suppress(ConnectionError):
            await asyncio.sleep(0.05)
            await peer.send(chunk(b"data: " + late + b"\n\n"))
            await asyncio.sleep(WAIT * 3)

    return script()


async def test_streams_kept_open_after_the_response_still_answer_every_call_once() -> None:
    app = sse_app(respond_and_hold)
    async with serve(app.wire) as server, running_bridge(url=server.url(), request_timeout_seconds=WAIT * 2) as run:
        await run.handshake()
        for i in range(1, 6):
            run.stdin.feed(call(i))
            replies = await run.stdout.wait_for(1 + i, timeout_seconds=WAIT)
            assert replies[-1] == {"jsonrpc": "2.0", "id": i, "result": {"held": True}}
        run.stdin.feed(request_line(9, "tools/list"))
        replies = await run.stdout.wait_for(7, timeout_seconds=WAIT)
        assert replies[-1]["id"] == 9 and len(replies) == 7  # nothing after a response is relayed


def respond_then(after: bytes, abort: bool) -> Script:
    async def script(message: dict[str, Any], peer: Peer) -> None:
        result = compact({"jsonrpc": "2.0", "id": message["id"], "result": {"ok": True}})
        await peer.send(SSE_HEAD + chunk(b"data: " + result + b"\n\n") + after)
        if abort:
            peer.writer.transport.abort()  # a reset, not a clean end

    return script


@pytest.mark.parametrize(
    ("after", "abort"),
    [(chunk(b"data: not json\n\n") + b"0\r\n\r\n", False), (chunk(b"data: " + b"x" * 5000 + b"\n\n"), False),
     (b"zz\r\n", False), (b"", True)],
    ids=["bad-json", "too-large", "bad-chunking", "reset"],
)
async def test_whatever_follows_the_response_on_its_stream_the_response_is_the_answer(after: bytes, abort: bool) -> None:
    app = sse_app(respond_then(after, abort))
    async with serve(app.wire) as server, running_bridge(url=server.url(), max_message_bytes=4096) as run:
        await run.handshake()
        run.stdin.feed(call(1))
        (_, reply) = await run.stdout.wait_for(2, timeout_seconds=WAIT)
        assert reply == {"jsonrpc": "2.0", "id": 1, "result": {"ok": True}}


# -- the cap while an event arrives ---------------------------------------------------------------


def huge_event(log: CallLog, size_bytes: int, piece_bytes: int = MiB) -> Script:
    """One event whose data is ``size_bytes`` of JSON string, sent in pieces as fast as the
    bridge reads; ``log.sent_bytes`` says how far it got."""

    async def script(message: dict[str, Any], peer: Peer) -> None:
        await peer.send(SSE_HEAD + chunk(b'event: message\r\ndata: {"jsonrpc":"2.0","id":%d,"result":"' % message["id"]))
        piece = chunk(b"x" * piece_bytes)
        with contextlib.suppress(ConnectionError):
            while log.sent_bytes < size_bytes:
                await peer.send(piece)
                log.sent_bytes += piece_bytes
            await peer.send(chunk(b'"}\r\n\r\n') + b"0\r\n\r\n")

    return script


async def test_an_event_over_the_cap_is_refused_while_it_arrives_and_the_next_call_works() -> None:
    log = CallLog()
    app = sse_app(huge_event(log, 40 * MiB), log)
    async with serve(app.wire) as server, running_bridge(url=server.url(), max_message_bytes=2 * MiB) as run:
        await run.handshake()
        run.stdin.feed(call(1))
        (_, reply) = await run.stdout.wait_for(2, timeout_seconds=WAIT)
        assert reply["id"] == 1 and reason_of(reply) == "message_too_large"
        with anyio.fail_after(WAIT):
            await log.ended.wait()
        # The bridge stopped reading: the app could not write the 40 MiB (the cap, the
        # bridge's 4 MiB read buffer and the sockets' buffers are far below that).
        assert log.sent_bytes < 30 * MiB
        run.stdin.feed(request_line(2, "tools/list"))
        (*_, listed) = await run.stdout.wait_for(3, timeout_seconds=WAIT)
        assert listed == {"jsonrpc": "2.0", "id": 2, "result": {}}


# -- the real process: memory, and no httpx ---------------------------------------------------------


@contextlib.asynccontextmanager
async def bridge_process(url: str, *args: str) -> AsyncIterator[tuple[asyncio.subprocess.Process, Callable[[int], Awaitable[list[Any]]]]]:
    """``python -X importtime -m bridge --url URL ARGS`` with pipes, handshake done; yields
    the process and ``read(n)`` (the next n stdout messages). stdin is closed on exit."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-X", "importtime", "-m", "bridge", "--url", url, *args,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None

    async def read(count: int) -> list[Any]:
        assert proc.stdout is not None
        return [json.loads(await asyncio.wait_for(proc.stdout.readline(), WAIT)) for _ in range(count)]

    try:
        proc.stdin.write(init(0) + NOTIF_INIT)
        (reply,) = await read(1)
        assert reply["result"]["serverInfo"]["name"] == "sse"
        yield proc, read
    finally:
        if proc.returncode is None:
            proc.stdin.close()
            try:
                await asyncio.wait_for(proc.wait(), WAIT)
            except TimeoutError:
                proc.kill()
                await proc.wait()


@pytest.mark.process
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/PID/status")
async def test_a_40_mib_event_with_an_8_mib_cap_keeps_the_bridge_near_the_cap_in_memory() -> None:
    """Peak RSS (VmHWM) grows by at most 1.25 × the cap plus the transport's fixed read
    buffers (its 4 MiB high-water mark, and one chunk taken out of it). Buffering the event
    whole, as before, grew it by several times the event (40 MiB)."""
    log = CallLog()
    app = sse_app(huge_event(log, 40 * MiB), log)
    cap = 8 * MiB
    async with serve(app.wire) as server, bridge_process(server.url(), "--max-message-bytes", str(cap)) as (proc, read):
        assert proc.stdin is not None
        proc.stdin.write(request_line(1, "tools/list"))  # warm: the SSE path has run once
        await read(1)
        idle_kib = status_kib(proc.pid, "VmHWM")
        proc.stdin.write(call(2))
        (reply,) = await read(1)
        assert reply["id"] == 2 and reason_of(reply) == "message_too_large"
        peak_kib = status_kib(proc.pid, "VmHWM")
    print(f"idle peak {idle_kib / 1024:.1f} MiB, peak {peak_kib / 1024:.1f} MiB, growth {(peak_kib - idle_kib) / 1024:.1f} MiB")
    assert (peak_kib - idle_kib) * 1024 < 1.25 * cap + 2 * 4 * MiB


@pytest.mark.process
async def test_an_http_sse_reply_does_not_import_httpx() -> None:
    app = sse_app()
    async with serve(app.wire) as server, bridge_process(server.url()) as (proc, read):
        assert proc.stdin is not None and proc.stderr is not None
        proc.stdin.write(request_line(1, "tools/list"))
        (reply,) = await read(1)
        assert reply == {"jsonrpc": "2.0", "id": 1, "result": {}}
        proc.stdin.close()
        imports = (await asyncio.wait_for(proc.stderr.read(), WAIT)).decode()
        await asyncio.wait_for(proc.wait(), WAIT)
    imported = {line.rpartition("|")[2].strip() for line in imports.splitlines() if line.startswith("import time:")}
    assert "bridge.core.sse" in imported and "bridge.transport.pool" in imported  # -X importtime worked
    assert not {name for name in imported if name.split(".")[0] in ("httpx", "httpcore", "httpx_sse")}
