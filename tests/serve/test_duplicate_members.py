"""A message from the app that names a top-level member twice never reaches stdout as it came
(RFC 8259 §4: names "SHOULD be unique"; parsers then differ). Python's json keeps the last
member, and the bridge judges by it; a client whose parser keeps the first one (or refuses
duplicates, as serde does) would read another id, or drop the line. So such a message is
re-encoded from the value the bridge judged, through the whole bridge, JSON and SSE."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.helpers import request_line, running_bridge
from support.mcp_app import LAST_CHUNK, SSE_HEAD, McpApp, chunk, json_reply, sse_event
from support.scripted import Peer, Seen, serve

pytestmark = pytest.mark.anyio


def first_member_reading(line: bytes) -> Any:
    """What a client whose parser keeps the first of two members reads."""

    def first(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            out.setdefault(key, value)
        return out

    return json.loads(line, object_pairs_hook=first)


def refusing_reading(line: bytes) -> Any:
    """What a client whose parser refuses duplicate names (serde) reads."""

    def refuse(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        if len({key for key, _ in pairs}) != len(pairs):
            raise ValueError("duplicate member")
        return dict(pairs)

    return json.loads(line, object_pairs_hook=refuse)


# The app's reply to request 5, as bytes: each names a top-level member twice.
REPLIES = {
    "id": b'{"id":987654,"jsonrpc":"2.0","result":{"id":1,"t":"a"},"id":5}',
    "escaped": b'{"\\u0069d":987654,"jsonrpc":"2.0","result":{"t":"a"},"id":5}',
    "jsonrpc": b'{"jsonrpc":"1.0","id":5,"result":{"t":"a"},"jsonrpc":"2.0"}',
    "result": b'{"jsonrpc":"2.0","id":5,"result":{"t":"evil"},"result":{"t":"a"}}',
}


@pytest.mark.parametrize("over", ["json", "sse"])
@pytest.mark.parametrize("name", sorted(REPLIES))
async def test_a_reply_naming_a_member_twice_reaches_stdout_re_encoded(name: str, over: str) -> None:
    app = McpApp()
    raw = REPLIES[name]

    async def call(seen: Seen, peer: Peer) -> None:
        if over == "json":
            await peer.send(json_reply(raw))
        else:
            await peer.send(SSE_HEAD + chunk(sse_event(raw)) + LAST_CHUNK)

    app.replies["tools/call"] = call
    async with serve(app.wire) as server, running_bridge(url=server.url()) as run:
        await run.handshake()
        run.stdin.feed(request_line(5, "tools/call", {"name": "x"}))
        await run.replies(2)
        line = run.stdout.lines[1]
    assert raw not in line
    expected = {"jsonrpc": "2.0", "id": 5, "result": {"id": 1, "t": "a"} if name == "id" else {"t": "a"}}
    assert first_member_reading(line) == expected == refusing_reading(line) == json.loads(line)


async def test_a_message_from_the_app_naming_a_member_twice_is_re_encoded_too() -> None:
    """A request from the app on the reply's SSE stream (a server→client request)."""
    app = McpApp()
    ask = b'{"jsonrpc":"2.0","id":"s1","method":"roots/list","id":"s2"}'

    async def call(seen: Seen, peer: Peer) -> None:
        reply = b'{"jsonrpc":"2.0","id":5,"result":{}}'
        await peer.send(SSE_HEAD + chunk(sse_event(ask)) + chunk(sse_event(reply)) + LAST_CHUNK)

    app.replies["tools/call"] = call
    async with serve(app.wire) as server, running_bridge(url=server.url()) as run:
        await run.handshake()
        run.stdin.feed(request_line(5, "tools/call", {"name": "x"}))
        await run.replies(3)
        lines = run.stdout.lines[1:3]
    assert ask + b"\n" not in lines
    asked = next(line for line in lines if b"roots/list" in line)
    assert first_member_reading(asked) == {"jsonrpc": "2.0", "id": "s2", "method": "roots/list"} == refusing_reading(asked)
