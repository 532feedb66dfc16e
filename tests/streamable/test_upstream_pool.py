"""The bridge over its own HTTP/1.1 client (``bridge/transport/pool.py``) against a scripted app.

The respx tests inject an httpx transport, so they never reach the bridge's own client.
Here nothing is injected: the bridge talks to a real TCP server on 127.0.0.1
(``support.scripted.ScriptedServer``, port 0) that parses each request (head and
``Content-Length`` body) and keeps it (method, target, fields, body bytes). The app is
``support.mcp_app.McpApp`` on the wire; where a test chose the bytes of a reply (JSON,
chunked SSE, error statuses, bodies cut off mid-way, or silence), ``app.replies`` writes
them. The bridge runs in-process (``support.helpers.running_bridge``), so every assertion
is about what the AI client sees on stdout and what the app receives.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import anyio
import pytest
from support.helpers import NOTIF_INIT, CountingSource, init, request_line, running_bridge
from support.mcp_app import (
    LAST_CHUNK,
    NEW_TOKEN,
    OLD_TOKEN,
    SSE_HEAD,
    VERSION,
    McpApp,
    WireReply,
    assert_bridge_error,
    chunk,
    compact,
    json_reply,
    progress,
    response,
    send,
    send_then_close,
    send_then_hold,
    sse_event,
)
from support.scripted import WAIT, Peer, Seen, closed_port, serve

from bridge.app.discovery import Endpoint
from bridge.app.tokens import TokenContext
from bridge.core.config import BridgeConfig
from bridge.core.errors import BridgeInternalError
from bridge.core.jsonrpc import Request
from bridge.streamable.upstream import Upstream
from bridge.transport import AuthRouteClient
from bridge.transport.byscheme import ByScheme

pytestmark = pytest.mark.anyio


async def test_initialize_json_reply_and_session_headers_on_every_later_message() -> None:
    """The app's bytes reach stdout as sent (plus a newline), stdin's bytes reach the app as
    written, and once the session exists every message carries its id and version."""
    app = McpApp()
    # Odd spacing and non-ASCII text: the bytes must not be re-encoded on the way.
    call = b'{ "jsonrpc" : "2.0", "id": 1, "method": "tools/list", "params": {"cursor": "Gr\xc3\xbc\xc3\x9fe \xf0\x9f\x8c\x8d"} }\n'
    listing = b'{"jsonrpc": "2.0", "id": 1, "result": {"tools": [], "note": "caf\xc3\xa9"}}'
    app.replies["tools/list"] = send(json_reply(listing))
    async with serve(app.wire) as server:
        async with running_bridge(url=server.url()) as run:
            run.stdin.feed(init(0) + NOTIF_INIT)
            await run.replies(1)
            assert run.stdout.lines[0] == app.init_replies[0] + b"\n"
            await server.wait_for(lambda: len(server.posts("notifications/initialized")) == 1)
            run.stdin.feed(call)
            await run.replies(2)
            assert run.stdout.lines[1] == listing + b"\n"
            await server.wait_for(lambda: len(server.of("GET")) >= 1)
        await server.wait_for(lambda: len(server.of("DELETE")) == 1)

    (initialize,) = server.posts("initialize")
    assert initialize.target == "/mcp"
    assert initialize.body == init(0)[:-1]
    assert initialize.headers["content-type"] == "application/json"
    assert initialize.headers["accept"] == "application/json, text/event-stream"
    assert initialize.headers["content-length"] == str(len(init(0)) - 1)
    assert initialize.headers["host"] == f"127.0.0.1:{server.port}"
    assert "mcp-session-id" not in initialize.headers and "mcp-protocol-version" not in initialize.headers
    assert "authorization" not in initialize.headers

    (initialized,) = server.posts("notifications/initialized")
    (listed,) = server.posts("tools/list")
    assert initialized.body == NOTIF_INIT[:-1]
    assert listed.body == call[:-1]
    for later in (initialized, listed, server.of("GET")[0], server.of("DELETE")[0]):
        assert later.headers["mcp-session-id"] == "sess-1"
        assert later.headers["mcp-protocol-version"] == VERSION
    assert server.of("GET")[0].headers["accept"] == "text/event-stream"
    assert "content-length" not in server.of("GET")[0].headers
    assert len(run.stdout.lines) == 2


async def test_initialize_answered_over_sse_sets_the_session_like_a_json_reply() -> None:
    """The official SDK answers ``initialize`` on an SSE stream: the session id of that
    response's head is used from then on, and the result line is the event's data."""
    app = McpApp()
    init_reply = compact({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": VERSION, "capabilities": {}, "serverInfo": {"name": "sse", "version": "1"}}})
    plain = app.wire

    async def handle(seen: Seen, peer: Peer) -> None:
        if seen.rpc_method == "initialize":
            app.sessions.add("sess-sse")
            head = SSE_HEAD.replace(b"\r\n\r\n", b"\r\nmcp-session-id: sess-sse\r\n\r\n")
            await peer.send(head + chunk(b": priming\n\n") + chunk(sse_event(init_reply, "i-1")) + LAST_CHUNK)
        else:
            await plain(seen, peer)

    async with serve(handle) as server, running_bridge(url=server.url()) as run:
        await run.handshake()
        assert run.stdout.lines[0] == init_reply + b"\n"
        run.stdin.feed(request_line(1, "tools/list"))
        assert (await run.replies(2))[1] == {"jsonrpc": "2.0", "id": 1, "result": {"instance": 1}}
    (listed,) = server.posts("tools/list")
    assert listed.headers["mcp-session-id"] == "sess-sse" and listed.headers["mcp-protocol-version"] == VERSION


async def test_sequential_requests_reuse_kept_alive_connections_and_none_is_left_open_at_exit() -> None:
    """Replies read to their end leave the connection open for the next request (no new
    connection per message), and the bridge closes every connection when it exits."""
    app = McpApp()
    async with serve(app.wire) as server:
        async with running_bridge(url=server.url()) as run:
            await run.handshake()
            for n in range(1, 9):
                run.stdin.feed(request_line(n, "tools/list"))
                assert (await run.replies(n + 1))[n] == {"jsonrpc": "2.0", "id": n, "result": {"instance": 1}}
        assert len(server.posts("tools/list")) == 8
        assert server.connections <= 2  # at most the GET stream's and one request's at a time
        await server.wait_for(lambda: server.open == 0)


LISTING = b'{"jsonrpc":"2.0","id":3,"result":{"tools":[{"name":"echo"}]}}'


@pytest.mark.parametrize(
    ("reply", "then_close"),
    [
        pytest.param(json_reply(LISTING), False, id="content-length"),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json; charset=utf-8\r\nTransfer-Encoding: chunked\r\n\r\n"
            + chunk(LISTING[:9]) + chunk(LISTING[9:]) + b"0\r\nX-Trailer: t\r\n\r\n",
            False,
            id="chunked-with-trailer",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n" + LISTING, True, id="until-close"
        ),
        pytest.param(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + LISTING, True, id="http-1.0"),
        pytest.param(b"HTTP/1.1 100 Continue\r\n\r\n" + json_reply(LISTING), False, id="after-100-continue"),
        pytest.param(json_reply(LISTING).replace(b"\r\n", b"\n"), False, id="bare-lf-head"),
    ],
)
async def test_reply_in_any_http_framing_reaches_stdout_as_sent(reply: bytes, then_close: bool) -> None:
    """However the app frames its body, the client gets exactly its bytes as one line,
    and the next request is served (on a new connection when the old one was closed)."""
    app = McpApp()
    app.replies["tools/list"] = send_then_close(reply) if then_close else send(reply)
    async with serve(app.wire) as server, running_bridge(url=server.url()) as run:
        await run.handshake()
        run.stdin.feed(request_line(3, "tools/list"))
        await run.replies(2)
        run.stdin.feed(request_line(4, "ping"))
        served = (await run.replies(3))[2]
    assert run.stdout.lines[1] == LISTING + b"\n"
    assert served == {"jsonrpc": "2.0", "id": 4, "result": {"instance": 1}}


async def test_idle_connection_closed_by_the_app_is_not_reused() -> None:
    """An app that closes each connection after its reply (no ``Connection: close`` said):
    the next request goes out on a fresh connection and is served."""
    app = McpApp()
    plain = app.wire

    async def one_reply_per_connection(seen: Seen, peer: Peer) -> None:
        await plain(seen, peer)
        peer.close()

    async with serve(one_reply_per_connection) as server, running_bridge(url=server.url()) as run:
        await run.handshake()
        await server.wait_for(lambda: len(server.of("GET")) == 1)  # the handshake's traffic is over
        for n in range(1, 4):
            await server.wait_for(lambda: server.open == 0)  # the app's FIN has been sent
            run.stdin.feed(request_line(n, "tools/list"))
            assert (await run.replies(n + 1))[n] == {"jsonrpc": "2.0", "id": n, "result": {"instance": 1}}
    assert len({r.connection for r in server.requests}) == len(server.requests)


# -- 2. SSE replies, the GET stream, resuming -------------------------------------------------


async def test_sse_reply_relays_progress_then_the_response_in_order() -> None:
    """A chunked SSE reply whose events are split at odd places: the progress notification
    and then the response reach stdout in that order, each as the event's data bytes."""
    app = McpApp()
    note = progress("p-1", 50)
    answer = compact({"jsonrpc": "2.0", "id": 5, "result": {"content": [{"type": "text", "text": "done ✓"}]}})
    first = b": a comment\n\n" + sse_event(note)
    stream = first + sse_event(answer)
    # mid-comment, mid-event, inside the three bytes of "✓"
    cut = [5, len(first) - 3, stream.index("✓".encode()) + 1]

    async def reply(seen: Seen, peer: Peer) -> None:
        await peer.send(SSE_HEAD)
        pieces = [stream[a:b] for a, b in zip([0, *cut], [*cut, len(stream)], strict=True)]
        for piece in pieces:
            await peer.send(chunk(piece))
            await asyncio.sleep(0.005)
        await peer.send(LAST_CHUNK)

    app.replies["tools/call"] = reply
    async with serve(app.wire) as server, running_bridge(url=server.url()) as run:
        await run.handshake()
        run.stdin.feed(request_line(5, "tools/call", {"name": "slow", "_meta": {"progressToken": "p-1"}}))
        await run.replies(3)
        assert run.stdout.lines[1:] == [note + b"\n", answer + b"\n"]
        run.stdin.feed(request_line(6, "ping"))  # the bridge serves on
        assert (await run.replies(4))[3] == {"jsonrpc": "2.0", "id": 6, "result": {"instance": 1}}
    assert len(server.posts("tools/call")) == 1


async def test_get_stream_relays_server_messages_to_stdout() -> None:
    """Once ``notifications/initialized`` is accepted the GET stream opens (session headers,
    ``Accept: text/event-stream``) and its messages reach stdout while it stays open."""
    app = McpApp()
    notice = compact({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    app.on_get = send_then_hold(SSE_HEAD + chunk(b": ready\n\n") + chunk(sse_event(notice, event_id="g-1")))
    async with serve(app.wire) as server:
        async with running_bridge(url=server.url()) as run:
            await run.handshake()
            await run.replies(2)
            assert run.stdout.lines[1] == notice + b"\n"
            run.stdin.feed(request_line(2, "tools/list"))  # requests go on beside the open stream
            assert (await run.replies(3))[2] == {"jsonrpc": "2.0", "id": 2, "result": {"instance": 1}}
            (get,) = server.of("GET")
            assert get.headers["accept"] == "text/event-stream"
            assert get.headers["mcp-session-id"] == "sess-1" and "last-event-id" not in get.headers
            assert server.open >= 1  # the stream is still open while the bridge runs
        await server.wait_for(lambda: server.open == 0)  # closed when the bridge exits


async def test_sse_reply_cut_after_an_event_id_is_resumed_with_last_event_id() -> None:
    """The connection breaks inside the SSE reply after an event with an id: the bridge asks
    for the rest by GET with ``Last-Event-ID`` and the response arrives; the POST is not
    sent again and no event is relayed twice."""
    app = McpApp()
    note = progress("p-2", 1)
    answer = compact({"jsonrpc": "2.0", "id": 9, "result": {"resumed": True}})
    # retry: 10 ms, so the resume does not wait the default second.
    app.replies["tools/call"] = send_then_close(SSE_HEAD + chunk(sse_event(note, "ev-1", retry_ms=10)) + b"40\r\npartial")

    async def on_get(seen: Seen, peer: Peer) -> None:
        if seen.headers.get("last-event-id") == "ev-1":
            await peer.send(SSE_HEAD + chunk(sse_event(answer, "ev-2")) + LAST_CHUNK)
        else:
            await peer.send(response(405))

    app.on_get = on_get
    async with serve(app.wire) as server, running_bridge(url=server.url()) as run:
        await run.handshake()
        run.stdin.feed(request_line(9, "tools/call", {"name": "long", "_meta": {"progressToken": "p-2"}}))
        await run.replies(3)
        assert run.stdout.lines[1:] == [note + b"\n", answer + b"\n"]
    (resume,) = [r for r in server.of("GET") if "last-event-id" in r.headers]
    assert resume.headers["last-event-id"] == "ev-1"
    assert resume.headers["accept"] == "text/event-stream"
    assert resume.headers["mcp-session-id"] == "sess-1" and resume.headers["mcp-protocol-version"] == VERSION
    assert len(server.posts("tools/call")) == 1


async def test_resume_refused_because_the_app_died_never_posts_the_request_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The app dies inside an SSE reply (after an event with an id) and is started again by
    the launcher: the resume GET is refused, and the request — which reached the app — must
    not be POSTed a second time (policy.py: "a reset mid-exchange is final")."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # the launch lock lives there
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    app = McpApp()
    note = progress("p-5", 1)

    async def dies_mid_stream(seen: Seen, peer: Peer) -> None:
        if len(server.posts("tools/call")) == 1:
            await peer.send(SSE_HEAD + chunk(sse_event(note, "ev-1", retry_ms=10)))
            server.die()
            peer.closed = True
        else:
            await peer.send(json_reply(compact({"jsonrpc": "2.0", "id": 9, "result": {"ran": "twice"}})))

    starts = 0

    async def start_app() -> None:
        nonlocal starts
        starts += 1
        await server.listen_again()

    app.replies["tools/call"] = dies_mid_stream
    async with serve(app.wire) as server, running_bridge(url=server.url(), ensure_running=start_app) as run:
        await run.handshake()
        run.stdin.feed(request_line(9, "tools/call", {"name": "once-only", "_meta": {"progressToken": "p-5"}}))
        messages = await run.replies(3)
    assert run.stdout.lines[1] == note + b"\n"
    assert len(server.posts("tools/call")) == 1
    assert_bridge_error(messages[2], 9, "stream_closed")


async def test_cancellation_is_not_stuck_behind_slow_calls_when_every_connection_is_busy() -> None:
    """session.py: notifications never wait, "so a notifications/cancelled is never stuck
    behind the slow call it cancels". With one request slot, an open GET stream, a slow
    call and a slow ping hold every pooled connection; the client's cancellation of the
    call must still reach the app while the call is in flight."""
    order: list[str] = []
    app = McpApp()

    async def slow(seen: Seen, peer: Peer) -> None:
        await peer.hold()
        order.append(f"{seen.rpc_method} abandoned")

    app.replies["tools/call"] = slow
    app.replies["ping"] = slow
    app.on_get = send_then_hold(SSE_HEAD + chunk(b": open\n\n"))
    plain = app.wire

    async def handle(seen: Seen, peer: Peer) -> None:
        if seen.rpc_method == "notifications/cancelled":
            order.append(f"cancel {seen.message()['params']['requestId']}")
        await plain(seen, peer)

    async with serve(handle) as server, running_bridge(url=server.url(), max_concurrent_requests=1, request_timeout_seconds=1) as run:
        await run.handshake()
        await server.wait_for(lambda: len(server.of("GET")) == 1)
        run.stdin.feed(request_line(5, "tools/call", {"name": "slow"}) + request_line(6, "ping"))
        await server.wait_for(lambda: len(server.posts("tools/call")) == 1 and len(server.posts("ping")) == 1)
        run.stdin.feed(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}\n')
        await server.wait_for(lambda: "cancel 5" in order and "tools/call abandoned" in order)
    assert order.index("cancel 5") < order.index("tools/call abandoned")


MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"}}


async def test_modern_cancellation_closes_the_connection_and_posts_nothing() -> None:
    """2026-07-28: the client's ``notifications/cancelled`` closes the request's HTTP
    connection (that is the cancellation); it is never POSTed and nothing reaches stdout."""
    app = McpApp(stateless=True)
    closed: list[bool] = []

    async def working(seen: Seen, peer: Peer) -> None:
        await peer.send(SSE_HEAD + chunk(b": working\n\n"))
        closed.append(await peer.hold())

    app.replies["tools/call"] = working
    async with serve(app.wire) as server, running_bridge(url=server.url()) as run:
        run.stdin.feed(request_line(7, "tools/call", {"name": "slow", "arguments": {}, "_meta": MODERN_META}))
        await server.wait_for(lambda: len(server.posts("tools/call")) == 1)
        run.stdin.feed(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}\n')
        await server.wait_for(lambda: bool(closed))
        await anyio.sleep(0.05)
        assert run.stdout.lines == []
    assert closed == [True]  # the bridge closed it (not the server's bounded wait running out)
    (call,) = server.posts()
    assert call.headers["mcp-method"] == "tools/call" and call.headers["mcp-protocol-version"] == "2026-07-28"
    assert "mcp-session-id" not in call.headers


@pytest.mark.slow
async def test_modern_subscription_stream_has_no_read_timeout() -> None:
    """``subscriptions/listen`` stays open for as long as the client listens: a pause longer
    than ``--request-timeout`` does not end it; the app closing it gives ``stream_closed``."""
    ack = compact({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": {}})
    changed = compact({"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {}})
    app = McpApp(stateless=True)

    async def listening(seen: Seen, peer: Peer) -> None:
        await peer.send(SSE_HEAD + chunk(sse_event(ack, "1")))
        await asyncio.sleep(1.0)  # twice the request timeout
        await peer.send(chunk(sse_event(changed, "2")) + LAST_CHUNK)
        peer.close()

    app.replies["subscriptions/listen"] = listening
    async with serve(app.wire) as server, running_bridge(url=server.url(), request_timeout_seconds=0.5) as run:
        run.stdin.feed(request_line("l-1", "subscriptions/listen", {"notifications": {"toolsListChanged": True}, "_meta": MODERN_META}))
        messages = await run.replies(3)
    assert run.stdout.lines[:2] == [ack + b"\n", changed + b"\n"]
    assert_bridge_error(messages[2], "l-1", "stream_closed")
    assert server.of("GET") == []  # the era has no resumption


# -- 3. 401: one refresh, the retry carries the new token -------------------------------------


async def test_401_refreshes_the_token_once_and_the_retry_carries_the_new_one(caplog: pytest.LogCaptureFixture) -> None:
    """The first token is rejected: one refresh, the same initialize again with the new
    token, and every later message carries it; no token shows in a log line."""
    caplog.set_level(logging.DEBUG)
    app = McpApp(token=NEW_TOKEN)
    source = CountingSource(OLD_TOKEN, NEW_TOKEN)
    async with serve(app.wire) as server, running_bridge(url=server.url(), token_source=source) as run:
        await run.handshake()
        run.stdin.feed(request_line(1, "tools/list"))
        assert (await run.replies(2))[1] == {"jsonrpc": "2.0", "id": 1, "result": {"instance": 1}}
    assert source.fetches == 2
    first, retry = server.posts("initialize")
    assert first.headers["authorization"] == f"Bearer {OLD_TOKEN}"
    assert retry.headers["authorization"] == f"Bearer {NEW_TOKEN}"
    assert retry.body == first.body == init(0)[:-1]
    assert [r.headers["authorization"] for r in server.requests[2:]] == [f"Bearer {NEW_TOKEN}"] * (len(server.requests) - 2)
    assert "MCP session" in caplog.text  # the logs were captured
    for token in (OLD_TOKEN, NEW_TOKEN):
        assert token not in caplog.text
        assert not any(token.encode() in line for line in run.stdout.lines)


async def test_second_401_is_auth_rejected_without_the_token_in_message_or_logs(caplog: pytest.LogCaptureFixture) -> None:
    """A token the app never accepts: exactly one refresh, two POSTs, then ``auth_rejected``."""
    caplog.set_level(logging.DEBUG)
    source = CountingSource(OLD_TOKEN, NEW_TOKEN)
    async with serve(McpApp(token="tok-never-issued").wire) as server, running_bridge(url=server.url(), token_source=source) as run:
        run.stdin.feed(request_line(3, "tools/list"))
        (reply,) = await run.replies(1)
        run.stdin.feed(request_line(4, "ping"))
        await run.replies(2)
    assert_bridge_error(reply, 3, "auth_rejected")
    assert "401" in reply["error"]["message"]
    assert [r.headers["authorization"] for r in server.posts("tools/list")] == [f"Bearer {OLD_TOKEN}", f"Bearer {NEW_TOKEN}"]
    assert source.fetches == 3  # the refresh for request 3, then one for request 4
    assert "tools/list" in caplog.text  # the failure was logged
    for token in (OLD_TOKEN, NEW_TOKEN):
        assert token not in caplog.text
        assert not any(token.encode() in line for line in run.stdout.lines)


# -- 4. 404 on a known session: rebuild, retry once -------------------------------------------


async def test_404_with_a_session_id_rebuilds_the_session_and_retries_once() -> None:
    """The app was restarted and forgot ``sess-1``: the bridge replays ``initialize`` (never
    shown on stdout), sends ``notifications/initialized``, then the same request once more."""
    app = McpApp()
    async with serve(app.wire) as server, running_bridge(url=server.url()) as run:
        await run.handshake()
        await server.wait_for(lambda: len(server.posts("notifications/initialized")) == 1)
        app.restart()
        before = len(server.posts())
        run.stdin.feed(request_line(12, "tools/list"))
        assert (await run.replies(2))[1] == {"jsonrpc": "2.0", "id": 12, "result": {"instance": 2}}
        await anyio.sleep(0.05)
        assert len(run.stdout.lines) == 2
        assert run.bridge.driver.rebuilds == 1
    after = server.posts()[before:]
    assert [(r.rpc_method, r.headers.get("mcp-session-id")) for r in after] == [
        ("tools/list", "sess-1"),
        ("initialize", None),
        ("notifications/initialized", "sess-2"),
        ("tools/list", "sess-2"),
    ]
    assert after[3].body == after[0].body == request_line(12, "tools/list")[:-1]
    replay = after[1].message()
    assert replay["id"] != 0 and replay["params"] == json.loads(init(0))["params"]


# -- 5. nothing listening ------------------------------------------------------------------------


async def test_closed_port_without_a_launcher_is_app_unreachable_and_the_bridge_serves_on() -> None:
    """Connection refused and nothing configured to start the app: each request gets
    ``app_unreachable`` with its own id, saying the app is not running."""
    async with running_bridge(url=f"http://127.0.0.1:{closed_port()}/mcp") as run:
        run.stdin.feed(request_line("a-1", "tools/list"))
        (first,) = await run.replies(1)
        run.stdin.feed(request_line(2, "ping"))
        second = (await run.replies(2))[1]
    assert_bridge_error(first, "a-1", "app_unreachable")
    assert_bridge_error(second, 2, "app_unreachable")
    assert "not running" in first["error"]["message"]


# -- 6. the connection breaks mid-reply --------------------------------------------------------


@pytest.mark.parametrize(
    "cut",
    [
        pytest.param(b"", id="before-the-head"),
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Le", id="inside-the-head"),
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n" + b'{"jsonrpc":"2.0","id":5,', id="content-length-body"),
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(b'{"jsonrpc":"2.0",') + b"20\r\n\"id\"", id="chunked-body"),
    ],
)
async def test_connection_closed_mid_reply_is_stream_closed_and_the_next_request_is_served(cut: bytes) -> None:
    """The app closes the connection before the reply is complete: ``stream_closed`` for
    that request (never sent twice), and the next request gets its result."""
    app = McpApp()
    app.replies["tools/call"] = send_then_close(cut)
    async with serve(app.wire) as server, running_bridge(url=server.url()) as run:
        await run.handshake()
        run.stdin.feed(request_line(5, "tools/call", {"name": "x"}))
        failed = (await run.replies(2))[1]
        run.stdin.feed(request_line(6, "tools/list"))
        served = (await run.replies(3))[2]
    assert_bridge_error(failed, 5, "stream_closed")
    assert served == {"jsonrpc": "2.0", "id": 6, "result": {"instance": 1}}
    assert len(server.posts("tools/call")) == 1


async def test_sse_reply_closed_without_event_ids_is_stream_closed_after_relaying_what_came() -> None:
    """No event ids: the stream cannot be resumed. Events already relayed stay relayed, the
    request gets ``stream_closed``, and no GET asks for the rest."""
    app = McpApp()
    note = progress("p-3", 10)
    app.replies["tools/call"] = send_then_close(SSE_HEAD + chunk(sse_event(note)))
    async with serve(app.wire) as server, running_bridge(url=server.url()) as run:
        await run.handshake()
        run.stdin.feed(request_line(7, "tools/call", {"name": "x", "_meta": {"progressToken": "p-3"}}))
        messages = await run.replies(3)
        run.stdin.feed(request_line(8, "ping"))
        served = (await run.replies(4))[3]
    assert run.stdout.lines[1] == note + b"\n"
    assert_bridge_error(messages[2], 7, "stream_closed")
    assert served == {"jsonrpc": "2.0", "id": 8, "result": {"instance": 1}}
    assert not [r for r in server.of("GET") if "last-event-id" in r.headers]


# -- 7. a reply slower than --request-timeout --------------------------------------------------


@pytest.mark.parametrize(
    "before_silence",
    [
        pytest.param(b"", id="no-head"),
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\"", id="inside-the-body"),
        pytest.param(SSE_HEAD + chunk(sse_event(progress("p-4", 1))), id="inside-an-sse-stream"),
    ],
)
async def test_silence_longer_than_the_request_timeout_is_timeout_and_the_next_request_is_served(before_silence: bytes) -> None:
    """The app goes silent: ``timeout`` for that request, a ``notifications/cancelled`` for
    it goes to the app, and the next request is served."""
    app = McpApp()
    app.replies["tools/call"] = send_then_hold(before_silence)
    async with serve(app.wire) as server, running_bridge(url=server.url(), request_timeout_seconds=0.5) as run:
        await run.handshake()
        run.stdin.feed(request_line(5, "tools/call", {"name": "slow", "_meta": {"progressToken": "p-4"}}))
        with anyio.fail_after(WAIT):
            while not any(m.get("id") == 5 for m in run.stdout.messages()[1:]):
                await run.stdout.wait_for(len(run.stdout.lines) + 1, timeout_seconds=WAIT)
        (failed,) = [m for m in run.stdout.messages() if m.get("id") == 5]
        await server.wait_for(lambda: len(server.posts("notifications/cancelled")) == 1)
        run.stdin.feed(request_line(6, "tools/list"))
        await run.stdout.wait_for(len(run.stdout.lines) + 1, timeout_seconds=WAIT)
        served = run.stdout.messages()[-1]
    assert_bridge_error(failed, 5, "timeout")
    assert served == {"jsonrpc": "2.0", "id": 6, "result": {"instance": 1}}
    (cancelled,) = server.posts("notifications/cancelled")
    assert cancelled.message()["params"]["requestId"] == 5
    assert cancelled.headers["mcp-session-id"] == "sess-1"
    assert len(server.posts("tools/call")) == 1


# -- 7b. a reply dripped a byte at a time (issue 13: a total bound on every response) --------

DRIP_SECONDS = 0.1
"""Pause between dripped bytes: the whole reply takes seconds, many times the 1 s bound."""
CALL_RESULT = b'{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"late"}]}}'


def drip(data: bytes, *, first: bytes = b"") -> WireReply:
    """A reply: write ``first`` at once, then ``data`` one byte per ``DRIP_SECONDS``."""

    async def script(seen: Seen, peer: Peer) -> None:
        await peer.send(first) if first else None
        await peer.send_bytewise(data, DRIP_SECONDS)

    return script


def drip_chunks(data: bytes, *, head: bytes) -> WireReply:
    """A reply: ``head`` at once, then ``data`` as one-byte chunks, one per ``DRIP_SECONDS``."""

    async def script(seen: Seen, peer: Peer) -> None:
        await peer.send(head)
        for i in range(len(data)):
            await peer.send(chunk(data[i : i + 1]))
            await asyncio.sleep(DRIP_SECONDS)
        await peer.send(LAST_CHUNK)

    return script


JSON_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(CALL_RESULT)
CHUNKED_JSON_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"


@pytest.mark.slow
@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(drip(JSON_HEAD + CALL_RESULT), id="head-dripped"),
        pytest.param(drip(CALL_RESULT, first=JSON_HEAD), id="length-body-dripped"),
        pytest.param(drip_chunks(CALL_RESULT, head=CHUNKED_JSON_HEAD), id="chunked-json-body-dripped"),
    ],
)
async def test_a_reply_dripped_a_byte_at_a_time_is_timeout_not_an_endless_wait(reply: WireReply) -> None:
    """Every byte arrives well within ``--request-timeout`` of the last, but the head (or
    the JSON body) is not complete within it: ``timeout``, as for silence, and the bridge
    serves on. (Before: every byte reset the timer, so the reply came after seconds.)"""
    app = McpApp()
    app.replies["tools/call"] = reply
    async with serve(app.wire) as server, running_bridge(url=server.url(), request_timeout_seconds=1.0) as run:
        await run.handshake()
        run.stdin.feed(request_line(5, "tools/call", {"name": "slow"}))
        (_, failed) = await run.replies(2)
        run.stdin.feed(request_line(6, "tools/list"))
        (*_, served) = await run.replies(3)
    assert_bridge_error(failed, 5, "timeout")
    assert served == {"jsonrpc": "2.0", "id": 6, "result": {"instance": 1}}


@pytest.mark.slow
async def test_an_sse_call_streaming_keep_alives_past_the_request_timeout_is_never_cut_off() -> None:
    """A long tool call: progress and keep-alive comments for four times ``--request-timeout``,
    then the result. Each complete event resets the bound, so the call is answered."""
    app = McpApp()

    async def long_call(seen: Seen, peer: Peer) -> None:
        await peer.send(SSE_HEAD)
        for step in range(8):
            await asyncio.sleep(0.25)
            await peer.send(chunk(b": keep-alive\n\n" if step % 2 else sse_event(progress("p-9", step))))
        await peer.send(chunk(sse_event(CALL_RESULT.replace(b'"id":5', b'"id":9'))) + LAST_CHUNK)

    app.replies["tools/call"] = long_call
    async with serve(app.wire) as server, running_bridge(url=server.url(), request_timeout_seconds=0.5) as run:
        await run.handshake()
        run.stdin.feed(request_line(9, "tools/call", {"name": "long", "_meta": {"progressToken": "p-9"}}))
        messages = await run.replies(6)
    assert [m.get("method") for m in messages[1:5]] == ["notifications/progress"] * 4
    assert messages[5] == json.loads(CALL_RESULT.replace(b'"id":5', b'"id":9'))
    assert server.posts("notifications/cancelled") == []


# -- 8. unusable replies, and the app's own JSON-RPC errors -----------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(json_reply(b'{"jsonrpc":"2.0","id":4,"result":'), id="invalid-json"),
        pytest.param(json_reply(b'{"id":4,"result":{}}'), id="not-json-rpc-2.0"),
        pytest.param(json_reply(b'{"jsonrpc":"2.0","id":4,"result":{}}\xff'), id="not-utf-8"),
        pytest.param(response(200, b"<html>hi</html>", "Content-Type: text/html"), id="html"),
        pytest.param(response(202), id="202-to-a-request"),
        pytest.param(SSE_HEAD + chunk(sse_event(b"{not json")) + LAST_CHUNK, id="invalid-json-in-an-sse-event"),
    ],
)
async def test_unusable_reply_is_bad_upstream_response_and_the_next_request_is_served(reply: bytes) -> None:
    """A reply the bridge cannot turn into a JSON-RPC response: the request gets
    ``bad_upstream_response`` (nothing of the reply on stdout) and the bridge serves on."""
    app = McpApp()
    app.replies["tools/call"] = send(reply)
    async with serve(app.wire) as server, running_bridge(url=server.url()) as run:
        await run.handshake()
        run.stdin.feed(request_line(4, "tools/call", {"name": "x"}))
        failed = (await run.replies(2))[1]
        run.stdin.feed(request_line(5, "tools/list"))
        served = (await run.replies(3))[2]
    assert_bridge_error(failed, 4, "bad_upstream_response")
    assert served == {"jsonrpc": "2.0", "id": 5, "result": {"instance": 1}}


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
async def test_reply_over_max_message_bytes_is_message_too_large_and_the_next_request_is_served(framing: str) -> None:
    """Nothing of an oversized reply reaches stdout; the connection it came on is dropped."""
    big = compact({"jsonrpc": "2.0", "id": 4, "result": {"text": "x" * 5000}})
    app = McpApp()
    if framing == "chunked":
        reply = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        app.replies["tools/call"] = send(reply + chunk(big[:1000]) + chunk(big[1000:]) + LAST_CHUNK)
    else:
        app.replies["tools/call"] = send(json_reply(big))
    async with serve(app.wire) as server, running_bridge(url=server.url(), max_message_bytes=2048) as run:
        await run.handshake()
        run.stdin.feed(request_line(4, "tools/call", {"name": "x"}))
        failed = (await run.replies(2))[1]
        run.stdin.feed(request_line(5, "tools/list"))
        served = (await run.replies(3))[2]
    assert_bridge_error(failed, 4, "message_too_large")
    assert served == {"jsonrpc": "2.0", "id": 5, "result": {"instance": 1}}
    assert not any(b"xxxx" in line for line in run.stdout.lines)


async def test_http_500_with_a_json_rpc_error_body_passes_the_error_through_with_the_request_id() -> None:
    """The app's own error object reaches the client unchanged, under the request's id
    (the app answered with id null)."""
    error = {"code": -32001, "message": "database is locked", "data": {"retryAfter": 2, "note": "naïve"}}
    app = McpApp()
    app.replies["tools/call"] = send(json_reply(compact({"jsonrpc": "2.0", "id": None, "error": error}), status=500))
    async with serve(app.wire) as server, running_bridge(url=server.url()) as run:
        await run.handshake()
        run.stdin.feed(request_line("call-7", "tools/call", {"name": "x"}))
        passed = (await run.replies(2))[1]
        run.stdin.feed(request_line(8, "tools/list"))
        served = (await run.replies(3))[2]
    assert passed == {"jsonrpc": "2.0", "id": "call-7", "error": error}
    assert served == {"jsonrpc": "2.0", "id": 8, "result": {"instance": 1}}


async def test_http_500_without_a_json_rpc_error_is_http_status_500() -> None:
    """An error status with no JSON-RPC error in its body: ``http_status`` with the status."""
    app = McpApp()
    app.replies["tools/call"] = send(response(500, b"Internal Server Error", "Content-Type: text/plain"))
    async with serve(app.wire) as server, running_bridge(url=server.url()) as run:
        await run.handshake()
        run.stdin.feed(request_line(4, "tools/call", {"name": "x"}))
        failed = (await run.replies(2))[1]
    assert failed["id"] == 4 and failed["error"]["code"] == -32603
    assert failed["error"]["data"] == {"source": "bridge", "reason": "http_status", "httpStatus": 500}
    assert len(server.posts("tools/call")) == 1


# -- 9. header injection through the token ----------------------------------------------------

INJECTED = "tok-inj-3e4f5a6b\r\nX-Injected: yes"


async def test_token_with_crlf_is_refused_and_nothing_reaches_the_app(caplog: pytest.LogCaptureFixture) -> None:
    """A token source returning a value with CR LF: the request gets an error, no byte goes
    to the app for it, and neither the token nor the smuggled field shows anywhere."""
    caplog.set_level(logging.DEBUG)
    source = CountingSource(INJECTED)
    async with serve(McpApp().wire) as server, running_bridge(url=server.url(), token_source=source) as run:
        run.stdin.feed(request_line(1, "tools/list"))
        (reply,) = await run.replies(1)
        await anyio.sleep(0.05)
    assert_bridge_error(reply, 1, "auth_rejected")
    assert server.connections == 0 and server.requests == []
    for piece in ("tok-inj-3e4f5a6b", "X-Injected"):
        assert piece not in reply["error"]["message"]
        assert piece not in caplog.text
    assert "token" in reply["error"]["message"]


class _FixedStore:
    """A token store handing out one token as is: stands in for a store that lets a bad
    token through, to show that the HTTP client refuses it on its own."""

    generation = 1
    has_source = True
    source_description = "test token source"

    def __init__(self, token: str) -> None:
        self._token = token

    async def current(self, context: TokenContext) -> tuple[str | None, int]:
        return self._token, self.generation


async def test_http_client_refuses_a_crlf_header_value_even_past_the_token_store() -> None:
    """Defence in depth: ``Upstream`` over the bridge's own client, handed a CR LF token,
    raises ``bridge_error`` (the bridge's own request, not the app's fault) before anything
    is sent, without quoting the value."""
    async with serve(McpApp().wire) as server:
        config = BridgeConfig(url=server.url())
        transport = ByScheme(
            config.url, max_connections=4, connect_timeout_seconds=5, pool_timeout_seconds=5, write_timeout_seconds=5
        )
        upstream = Upstream(
            config,
            endpoint=Endpoint(url=server.url()),
            tokens=_FixedStore(INJECTED),  # type: ignore[arg-type]
            transport=transport,
            listener_check=None,
            auth_client=AuthRouteClient(timeout_seconds=1),
        )
        request = Request(1, "ping", None, request_line(1, "ping")[:-1])
        emitted: list[bytes] = []

        async def emit(line: bytes, message: object) -> None:
            emitted.append(line)

        try:
            with pytest.raises(BridgeInternalError) as caught:
                with anyio.fail_after(WAIT):
                    await upstream.send_request(request, emit)
        finally:
            await upstream.aclose()
        await anyio.sleep(0.05)
    assert caught.value.reason == "bridge_error"
    assert "tok-inj-3e4f5a6b" not in caught.value.message and "X-Injected" not in caught.value.message
    assert "Authorization" in caught.value.message
    assert server.connections == 0 and server.requests == [] and emitted == []
