"""A scripted MCP app on the wire (raw HTTP/1.1 replies) and a bridge run against it over the own pool."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio

from bridge.core.config import BridgeConfig
from bridge.serve.loop import Bridge
from support.helpers import NOTIF_INIT, FakeStdin, FakeStdout, init
from support.scripted import WAIT, Peer, Seen

VERSION = "2025-06-18"

OLD_TOKEN = "tok-old-7c1d2e3f4a5b6c7d"
NEW_TOKEN = "tok-new-9a8b7c6d5e4f3a2b"




# The scripted server: tests/support/scripted.py (ScriptedServer, Peer, Seen, serve).


# -- response bytes ----------------------------------------------------------------------------

_STATUS_TEXT = {200: "OK", 202: "Accepted", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed", 500: "Internal Server Error"}


def response(status: int, body: bytes = b"", *fields: str) -> bytes:
    """A whole response with a ``Content-Length`` body and any extra ``Name: value`` fields."""
    head = f"HTTP/1.1 {status} {_STATUS_TEXT.get(status, 'Status')}\r\n" + "".join(f"{f}\r\n" for f in fields)
    return head.encode("latin-1") + b"Content-Length: %d\r\n\r\n" % len(body) + body


def json_reply(body: bytes, *fields: str, status: int = 200) -> bytes:
    return response(status, body, "Content-Type: application/json", *fields)


def compact(message: Any) -> bytes:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()


SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n"
LAST_CHUNK = b"0\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def sse_event(data: bytes, event_id: str | None = None, retry_ms: int | None = None) -> bytes:
    head = (f"id: {event_id}\n" if event_id else "") + (f"retry: {retry_ms}\n" if retry_ms is not None else "")
    return head.encode() + b"event: message\ndata: " + data + b"\n\n"


def progress(token: str, value: int) -> bytes:
    return compact({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": value}})


# -- a scripted MCP app ------------------------------------------------------------------------

Reply = Callable[[Seen, Peer], Awaitable[None]]


class App:
    """A stateful MCP app on raw HTTP/1.1: ``initialize`` gets a JSON reply with
    ``Mcp-Session-Id: sess-<n>``; notifications and client responses 202; GET 405 (unless
    ``on_get``); DELETE 200; a request whose session id it does not know 404; any other
    request ``replies[method]`` if set, else ``{"result": {"instance": <n>}}`` as JSON."""

    def __init__(self, *, token: str | None = None, stateless: bool = False) -> None:
        self.token = token
        self.stateless = stateless
        self.instance = 1
        self.sessions: set[str] = set()
        self.issued = 0
        self.replies: dict[str, Reply] = {}
        self.on_get: Reply | None = None
        self.init_replies: list[bytes] = []

    def restart(self) -> None:
        """Forget every session, as an app that was restarted."""
        self.instance += 1
        self.sessions.clear()

    async def __call__(self, seen: Seen, peer: Peer) -> None:
        if self.token is not None and seen.headers.get("authorization") != f"Bearer {self.token}":
            await peer.send(
                json_reply(b'{"error":"invalid_token"}', 'WWW-Authenticate: Bearer error="invalid_token"', status=401)
            )
            return
        if seen.method == "GET":
            if self.on_get is not None:
                await self.on_get(seen, peer)
            else:
                await peer.send(response(405))
            return
        if seen.method == "DELETE":
            await peer.send(response(200))
            return
        message = seen.message()
        if message.get("method") == "initialize":
            self.issued += 1
            session = f"sess-{self.issued}"
            self.sessions.add(session)
            body = compact(
                {
                    "jsonrpc": "2.0",
                    "id": message["id"],
                    "result": {"protocolVersion": VERSION, "capabilities": {}, "serverInfo": {"name": "scripted", "version": str(self.instance)}},
                }
            )
            self.init_replies.append(body)
            await peer.send(json_reply(body, f"Mcp-Session-Id: {session}"))
            return
        if not self.stateless and seen.headers.get("mcp-session-id") not in self.sessions:
            await peer.send(json_reply(b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Session not found"}}', status=404))
            return
        if "id" not in message or "method" not in message:
            await peer.send(response(202))
            return
        reply = self.replies.get(message["method"])
        if reply is not None:
            await reply(seen, peer)
            return
        await peer.send(json_reply(compact({"jsonrpc": "2.0", "id": message["id"], "result": {"instance": self.instance}})))


def send(data: bytes) -> Reply:
    """A reply: write ``data`` and keep the connection."""

    async def script(seen: Seen, peer: Peer) -> None:
        await peer.send(data)

    return script


def send_then_close(data: bytes) -> Reply:
    """A reply: write ``data``, then close the connection."""

    async def script(seen: Seen, peer: Peer) -> None:
        await peer.send(data)
        peer.close()

    return script


def send_then_hold(data: bytes) -> Reply:
    """A reply: write ``data`` (maybe nothing), then go silent until the client gives up."""

    async def script(seen: Seen, peer: Peer) -> None:
        if data:
            await peer.send(data)
        await peer.hold()

    return script


# -- the bridge, with nothing injected --------------------------------------------------------


@dataclass
class Run:
    stdin: FakeStdin
    stdout: FakeStdout
    bridge: Bridge
    exit_status: int | None = None

    async def handshake(self) -> None:
        """``initialize`` (id 0) and ``notifications/initialized``; waits for the reply."""
        self.stdin.feed(init(0) + NOTIF_INIT)
        (reply,) = await self.stdout.wait_for(1, timeout_seconds=WAIT)
        assert reply["result"]["protocolVersion"] == VERSION

    async def replies(self, count: int) -> list[Any]:
        return await self.stdout.wait_for(count, timeout_seconds=WAIT)


@contextlib.asynccontextmanager
async def bridge_to(url: str, **config: Any) -> AsyncIterator[Run]:
    """Run a bridge for ``url`` with fake stdin/stdout and no injected transport or probe:
    ``http://`` goes through the bridge's own HTTP/1.1 client. On exit stdin is closed and
    the bridge must finish within ``WAIT`` seconds."""
    stdin, stdout = FakeStdin(), FakeStdout()
    bridge = Bridge(BridgeConfig(url=url, **config), stdin=stdin, stdout=stdout)
    run = Run(stdin, stdout, bridge)
    async with anyio.create_task_group() as tg:

        async def serve_bridge() -> None:
            run.exit_status = await bridge.run()

        tg.start_soon(serve_bridge)
        try:
            yield run
        finally:
            stdin.close()
            with anyio.fail_after(WAIT):
                while run.exit_status is None:
                    await anyio.sleep(0.01)


def assert_bridge_error(message: dict[str, Any], request_id: Any, expected_reason: str) -> None:
    assert message["id"] == request_id and type(message["id"]) is type(request_id)
    assert message["error"]["code"] == -32603
    assert message["error"]["data"] == {"source": "bridge", "reason": expected_reason}


# -- 1. initialize over JSON, session id and version on what follows ---------------------------
