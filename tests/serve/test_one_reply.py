"""Exactly one reply per request, and only valid JSON-RPC on stdout, whatever path the app's
lines take (bridge/core/ledger.py through a real Bridge, its own HTTP/1.1 client and a scripted
app on 127.0.0.1): JSON batches, SSE streams carrying another request's response, the GET
stream, cancellation."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest
from support.helpers import request_line, running_bridge
from support.mcp_app import LAST_CHUNK, SSE_HEAD, McpApp, chunk, compact, json_reply, send_then_hold, sse_event
from support.scripted import WAIT, Peer, Seen, serve

pytestmark = pytest.mark.anyio




def ids_on(lines: list[bytes]) -> list[Any]:
    import json

    out = []
    for line in lines:
        value = json.loads(line)
        for item in value if isinstance(value, list) else [value]:
            if "method" not in item:
                out.append(item["id"])
    return out


def result(request_id: Any, **fields: Any) -> bytes:
    return compact({"jsonrpc": "2.0", "id": request_id, "result": fields})


async def test_a_json_batch_with_two_responses_for_the_request_gives_one_line() -> None:
    app = McpApp()

    async def twice(seen: Seen, peer: Peer) -> None:
        await peer.send(json_reply(b"[" + result(5, n=1) + b"," + result(5, n=2) + b"]"))

    app.replies["tools/call"] = twice
    async with serve(app.wire) as server, running_bridge(url=server.url()) as run:
        await run.handshake()
        run.stdin.feed(request_line(5, "tools/call", {"name": "x"}) + request_line(6, "ping"))
        await run.replies(3)
        await asyncio.sleep(0.1)
        assert sorted(ids_on(run.stdout.lines[1:])) == [5, 6]


async def test_a_json_batch_answering_another_open_request_answers_it_once() -> None:
    """A's JSON batch holds A's response and B's; B's own exchange (never answered by the
    app) is then closed, and nothing more is written for B."""
    app = McpApp()
    b_closed = anyio.Event()

    async def call(seen: Seen, peer: Peer) -> None:
        if seen.message()["id"] == "B":
            await peer.hold()  # B's own response never comes; returns once the bridge closes it
            b_closed.set()
            return
        await peer.send(json_reply(b"[" + result("A") + b"," + result("B", via="A") + b"]"))

    app.replies["tools/call"] = call
    async with serve(app.wire) as server, running_bridge(url=server.url(), request_timeout_seconds=3600) as run:
        await run.handshake()
        run.stdin.feed(request_line("B", "tools/call", {"name": "b"}))
        await server.wait_for(lambda: len(server.posts("tools/call")) == 1)
        run.stdin.feed(request_line("A", "tools/call", {"name": "a"}))
        await run.replies(3)
        with anyio.fail_after(WAIT):
            await b_closed.wait()  # B's slot and connection were freed at once
        run.stdin.feed(request_line(7, "ping"))
        await run.replies(4)
        assert sorted(map(str, ids_on(run.stdout.lines[1:]))) == ["7", "A", "B"]
        assert run.stdout.messages()[1:3] in ([{"jsonrpc": "2.0", "id": "B", "result": {"via": "A"}}, {"jsonrpc": "2.0", "id": "A", "result": {}}],)


async def test_the_sse_stream_of_one_request_carrying_another_ones_response_answers_that_once() -> None:
    """B's response arrives on A's stream: it answers B (the first valid answer wins); B's
    own stream's response, sent later, is dropped."""
    app = McpApp()
    release_b = anyio.Event()

    async def call(seen: Seen, peer: Peer) -> None:
        if seen.message()["id"] == "B":
            await peer.send(SSE_HEAD)
            with anyio.move_on_after(WAIT):
                await release_b.wait()
            try:
                await peer.send(chunk(sse_event(result("B", via="B"))) + LAST_CHUNK)
            except OSError:
                pass  # the bridge already closed B's exchange
            return
        await peer.send(SSE_HEAD + chunk(sse_event(result("B", via="A"))))
        await asyncio.sleep(0.05)
        release_b.set()
        await asyncio.sleep(0.05)
        await peer.send(chunk(sse_event(result("A"))) + LAST_CHUNK)

    app.replies["tools/call"] = call
    async with serve(app.wire) as server, running_bridge(url=server.url()) as run:
        await run.handshake()
        run.stdin.feed(request_line("B", "tools/call", {"name": "b"}))
        await server.wait_for(lambda: len(server.posts("tools/call")) == 1)
        run.stdin.feed(request_line("A", "tools/call", {"name": "a"}))
        await run.replies(3)
        run.stdin.feed(request_line(9, "ping"))
        await run.replies(4)
        await asyncio.sleep(0.1)
        messages = run.stdout.messages()
        assert sorted(map(str, ids_on(run.stdout.lines[1:]))) == ["9", "A", "B"]
        assert {"jsonrpc": "2.0", "id": "B", "result": {"via": "A"}} in messages


@pytest.mark.parametrize(
    "invalid",
    [
        b'{"jsonrpc":"2.0","id":5,"result":{},"error":{"code":1,"message":"both"}}',
        b'{"jsonrpc":"2.0","hello":1}',
        b'{"jsonrpc":"2.0","result":{}}',
        b'{"jsonrpc":"2.0","id":5,"error":{"code":"x","message":"bad code"}}',
        b'{"jsonrpc":"2.0","method":7}',
    ],
)
async def test_invalid_objects_on_an_sse_stream_never_reach_stdout(invalid: bytes) -> None:
    app = McpApp()

    async def call(seen: Seen, peer: Peer) -> None:
        await peer.send(SSE_HEAD + chunk(sse_event(invalid)) + chunk(sse_event(result(5))) + LAST_CHUNK)

    app.replies["tools/call"] = call
    async with serve(app.wire) as server, running_bridge(url=server.url()) as run:
        await run.handshake()
        run.stdin.feed(request_line(5, "tools/call", {"name": "x"}))
        await run.replies(2)
        await asyncio.sleep(0.05)
        assert run.stdout.lines[1:] == [result(5) + b"\n"]


async def test_invalid_objects_and_stray_responses_on_the_get_stream_never_reach_stdout() -> None:
    app = McpApp()
    notice = compact({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    app.on_get = send_then_hold(
        SSE_HEAD
        + chunk(sse_event(b'{"jsonrpc":"2.0","hello":1}'))
        + chunk(sse_event(result(99)))  # a response for an id nobody asked for
        + chunk(sse_event(notice))
    )
    async with serve(app.wire) as server, running_bridge(url=server.url()) as run:
        await run.handshake()
        await run.replies(2)
        await asyncio.sleep(0.1)
        assert run.stdout.lines[1:] == [notice + b"\n"]


async def test_a_json_reply_with_a_malformed_error_is_refused_not_relayed() -> None:
    app = McpApp()

    async def call(seen: Seen, peer: Peer) -> None:
        await peer.send(json_reply(b'{"jsonrpc":"2.0","id":5,"error":"not an object"}'))

    app.replies["tools/call"] = call
    async with serve(app.wire) as server, running_bridge(url=server.url()) as run:
        await run.handshake()
        run.stdin.feed(request_line(5, "tools/call", {"name": "x"}))
        (_, answer) = await run.replies(2)
        assert answer["id"] == 5 and answer["error"]["data"]["reason"] == "bad_upstream_response"


# -- cancellation ------------------------------------------------------------------------------


async def test_cancelled_calls_free_their_slots_and_connections_at_once() -> None:
    """--max-concurrent-requests 2, two long calls the app never answers, both cancelled by
    the client: a tools/list sent next is answered (the request timeout is an hour, so it
    could only be answered if the cancelled calls let go of their slots), the app got both
    cancellations, their connections were closed, and nothing is written for them."""
    app = McpApp()
    closed: list[Any] = []

    async def never(seen: Seen, peer: Peer) -> None:
        await peer.send(SSE_HEAD + chunk(b": working\n\n"))
        await peer.hold()
        closed.append(seen.message()["id"])

    app.replies["tools/call"] = never
    async with serve(app.wire) as server, running_bridge(
        url=server.url(), max_concurrent_requests=2, request_timeout_seconds=3600
    ) as run:
        await run.handshake()
        run.stdin.feed(request_line(1, "tools/call", {"name": "long"}) + request_line(2, "tools/call", {"name": "long"}))
        await server.wait_for(lambda: len(server.posts("tools/call")) == 2)
        for request_id in (1, 2):
            run.stdin.feed(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d}}\n' % request_id)
        run.stdin.feed(request_line(3, "tools/list"))
        (_, listed) = await run.replies(2)
        assert listed == {"jsonrpc": "2.0", "id": 3, "result": {"instance": 1}}
        await server.wait_for(lambda: sorted(closed) == [1, 2])
        cancels = [r.message()["params"]["requestId"] for r in server.posts("notifications/cancelled")]
        assert sorted(cancels) == [1, 2]
        await asyncio.sleep(0.05)
        assert len(run.stdout.lines) == 2


async def test_a_late_response_to_a_cancelled_request_is_dropped() -> None:
    """The app answers right after it hears of the cancellation (the race the spec warns of):
    the client, which gave up on the id, gets nothing for it."""
    app = McpApp()
    heard = anyio.Event()

    async def late(seen: Seen, peer: Peer) -> None:
        await peer.send(SSE_HEAD)
        with anyio.move_on_after(WAIT):
            await heard.wait()
        try:
            await peer.send(chunk(sse_event(result(1, late=True))) + LAST_CHUNK)
        except OSError:
            pass

    app.replies["tools/call"] = late
    plain = app.wire

    async def handle(seen: Seen, peer: Peer) -> None:
        await plain(seen, peer)
        if seen.rpc_method == "notifications/cancelled":
            heard.set()

    async with serve(handle) as server, running_bridge(url=server.url()) as run:
        await run.handshake()
        run.stdin.feed(request_line(1, "tools/call", {"name": "x"}))
        await server.wait_for(lambda: len(server.posts("tools/call")) == 1)
        run.stdin.feed(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}\n')
        with anyio.fail_after(WAIT):
            await heard.wait()
        await asyncio.sleep(0.2)
        run.stdin.feed(request_line(2, "ping"))
        await run.replies(2)
        await asyncio.sleep(0.05)
        assert ids_on(run.stdout.lines) == [0, 2]


async def test_a_cancelled_request_still_waiting_for_a_slot_is_never_sent() -> None:
    app = McpApp()

    async def never(seen: Seen, peer: Peer) -> None:
        await peer.hold()

    app.replies["tools/call"] = never
    async with serve(app.wire) as server, running_bridge(url=server.url(), max_concurrent_requests=1) as run:
        await run.handshake()
        run.stdin.feed(request_line(1, "tools/call", {"name": "long"}) + request_line(2, "tools/call", {"name": "queued"}))
        await server.wait_for(lambda: len(server.posts("tools/call")) == 1)
        run.stdin.feed(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}\n')
        run.stdin.feed(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}\n')
        run.stdin.feed(request_line(3, "tools/list"))
        await run.replies(2)
        assert [r.message()["id"] for r in server.posts("tools/call")] == [1]
        assert ids_on(run.stdout.lines) == [0, 3]
