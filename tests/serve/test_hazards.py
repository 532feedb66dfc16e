"""HTTP behaviour with respx: known failures of stdio bridges and MCP clients, as assertions.

Each section names the failure it pins. The bridge runs in-process with fake stdin/stdout; the
app is a respx side effect, so every request the bridge sends can be inspected.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
import httpx
import pytest
from support.helpers import (
    NOTIF_INIT,
    TOKEN,
    URL,
    RunBridge,
    echo_ok,
    event,
    init,
    json_response,
    request_line,
    sse,
)
from support.mcp_app import McpApp, OnRequest

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("wire")]




def app(on_request: OnRequest | None = None, *, get_status: int = 405) -> McpApp:
    """The hazards' app: :class:`McpApp` handing out ``sess-A`` and serving any session id;
    notifications get 202; GET answers ``get_status``; requests go to ``on_request``
    (default: result {})."""
    return McpApp(session_id="sess-A", stateless=True, server_name="fake", result={}, get_status=get_status, on_request=on_request)


def reasons(messages: list[dict[str, Any]]) -> list[str]:
    return [m["error"]["data"]["reason"] for m in messages if "error" in m]


# -- what comes in on stdin reaches the app byte for byte --------------------------------------


async def test_b01_large_request_and_large_reply_pass_byte_for_byte(run_bridge: RunBridge) -> None:
    big_request = request_line(1, "tools/call", {"name": "echo", "arguments": {"text": "a" * 300_000}})
    big_reply = json.dumps({"jsonrpc": "2.0", "id": 2, "result": {"tools": [{"name": "t", "description": "d" * (5 * 1024 * 1024)}]}}, separators=(",", ":")).encode()

    def reply(message: dict[str, Any], request: httpx.Request) -> httpx.Response:
        if message["id"] == 2:
            return httpx.Response(200, content=big_reply, headers={"content-type": "application/json"})
        text = message["params"]["arguments"]["text"]
        return json_response({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": text}]}})

    async with run_bridge(app(reply)) as h:
        await h.handshake()
        h.stdin.feed(big_request)
        h.stdin.feed(request_line(2, "tools/list"))
        messages = await h.stdout.wait_for(3)
        assert h.posts()[-2].content == big_request[:-1] or h.posts()[-1].content == big_request[:-1]
        by_id = {m["id"]: m for m in messages}
        assert by_id[1]["result"]["content"][0]["text"] == "a" * 300_000
        assert big_reply + b"\n" in h.stdout.lines  # relayed as received, one line


async def test_b01_line_over_the_cap_gets_minus_32600_with_its_id_and_the_next_line_is_served(run_bridge: RunBridge) -> None:
    async with run_bridge(echo_ok, max_message_bytes=2048) as h:
        h.stdin.feed(request_line(5, "tools/call", {"name": "echo", "arguments": {"t": "x" * 5000}}))
        h.stdin.feed(request_line(6))
        first, second = await h.stdout.wait_for(2)
        assert first["id"] == 5 and first["error"]["code"] == -32600
        assert second == {"jsonrpc": "2.0", "id": 6, "result": {}}
        assert [json.loads(r.content)["id"] for r in h.posts()] == [6]


async def test_b02_message_split_anywhere_is_posted_once_with_its_exact_bytes(run_bridge: RunBridge) -> None:
    line = request_line(3, "tools/call", {"name": "echo", "arguments": {"t": "Grüße 🌍"}})
    emoji = line.index("🌍".encode())
    async with run_bridge(echo_ok) as h:
        for piece in [line[:1], line[1:8], line[8 : emoji + 2], line[emoji + 2 : -1]]:
            h.stdin.feed(piece)
            await anyio.sleep(0.02)
        assert h.posts() == []  # nothing before the newline
        h.stdin.feed(b"\n" + init(0) + NOTIF_INIT)
        messages = await h.stdout.wait_for(2)
        assert h.posts()[0].content == line[:-1]
        assert {"jsonrpc": "2.0", "id": 3, "result": {}} in messages


async def test_b03_crlf_lines_blank_lines_and_a_bad_line_do_not_end_the_session(run_bridge: RunBridge) -> None:
    async with run_bridge(echo_ok) as h:
        h.stdin.feed(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\r\n\r\n')
        h.stdin.feed(b'{"jsonrpc":"2.0","id":2,"method":"ping"}\nnot json\n')
        h.stdin.feed(b'{"jsonrpc":"2.0","id":4,"method":"ping"}\n')
        messages = await h.stdout.wait_for(4)
        assert all(b"\r" not in r.content for r in h.posts())
        assert {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}} in messages
        assert sorted(m["id"] for m in messages if "result" in m) == [1, 2, 4]


async def test_b05_non_ascii_bytes_pass_untouched_and_invalid_utf8_gets_a_parse_error(run_bridge: RunBridge) -> None:
    line = b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"t":"Messger\xc3\xa4t \xd1\x82\xd0\xb5\xd1\x81\xd1\x82 \xe2\x9c\x93 \xf0\x9f\x98\x80"}}}\n'

    def echo_text(message: dict[str, Any], request: httpx.Request) -> httpx.Response:
        if message["method"] != "tools/call":
            return json_response({"jsonrpc": "2.0", "id": message["id"], "result": {}})
        text = message["params"]["arguments"]["t"]
        body = json.dumps({"jsonrpc": "2.0", "id": 5, "result": {"t": text}}, ensure_ascii=False).encode()
        return httpx.Response(200, content=body, headers={"content-type": "application/json"})

    async with run_bridge(app(echo_text)) as h:
        await h.handshake()
        h.stdin.feed(line + b'{"jsonrpc":"2.0","id":6,"method":"x","params":{"t":"\xff"}}\n' + request_line(7))
        await h.stdout.wait_for(4)
        assert h.posts()[2].content == line[:-1]
        assert "Messger\xc3\xa4t \xd1\x82\xd0\xb5\xd1\x81\xd1\x82 \xe2\x9c\x93 \xf0\x9f\x98\x80".encode("latin-1") in b"".join(h.stdout.lines)
        parse_errors = [m for m in h.stdout.messages() if "error" in m]
        assert parse_errors == [{"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}]


# -- headers and the session ------------------------------------------------------------------


async def test_session_id_version_token_and_content_headers_on_every_request_after_initialize(run_bridge: RunBridge) -> None:
    async with run_bridge(app(), token=TOKEN, headers=(("X-App", "1"),)) as h:
        h.stdin.feed(init(0) + NOTIF_INIT + request_line(1, "tools/list"))
        await h.stdout.wait_for(2)
        await anyio.sleep(0.05)
    first, *later = h.requests()
    assert "mcp-session-id" not in first.headers and "mcp-protocol-version" not in first.headers
    for request in [first, *later]:
        assert request.headers["authorization"] == f"Bearer {TOKEN}"
        assert request.headers["x-app"] == "1"
        assert "origin" not in request.headers
    for request in later:
        assert request.headers["mcp-session-id"] == "sess-A"
        assert request.headers["mcp-protocol-version"] == "2025-06-18"
    for request in [r for r in [first, *later] if r.method == "POST"]:
        assert request.headers["content-type"] == "application/json"
        assert request.headers["accept"] == "application/json, text/event-stream"
    methods = [r.method for r in [first, *later]]
    assert methods.count("DELETE") == 1 and methods[-1] == "DELETE"  # on stdin EOF


async def test_initialize_is_a_barrier_for_pipelined_messages(run_bridge: RunBridge) -> None:
    async def slow_init(request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and json.loads(request.content).get("method") == "initialize":
            await anyio.sleep(0.2)
        return await app()(request)

    async with run_bridge(slow_init) as h:
        h.stdin.feed(init(0) + NOTIF_INIT + request_line(1, "tools/list"))
        await h.stdout.wait_for(2)
    assert [("mcp-session-id" in r.headers) for r in h.posts()] == [False, True, True]


# -- HTTP errors become one error line, promptly ---------------------------------------------


@pytest.mark.parametrize(
    ("response", "reason", "status"),
    [
        (httpx.Response(500, text="<html>Internal error</html>", headers={"content-type": "text/html"}), "http_status", 500),
        (httpx.Response(502), "http_status", 502),
        (httpx.Response(200, text="hello", headers={"content-type": "text/plain"}), "bad_upstream_response", None),
        (httpx.Response(202), "bad_upstream_response", None),
        (httpx.Response(200, text="{not json", headers={"content-type": "application/json"}), "bad_upstream_response", None),
        (httpx.Response(403, text="forbidden"), "http_status", 403),
        (  # NaN is not JSON: the error body is not passed through, and nothing fails inside the bridge
            httpx.Response(500, text='{"jsonrpc":"2.0","id":9,"error":{"code":1,"message":"m","data":NaN}}'),
            "http_status",
            500,
        ),
        (httpx.Response(401), "auth_rejected", None),
    ],
)
async def test_b20_status_and_body_failures_map_to_one_error_for_the_id(response: httpx.Response, reason: str, status: int | None, run_bridge: RunBridge) -> None:
    async with run_bridge(app(lambda message, request: response)) as h:
        await h.handshake()
        h.stdin.feed(request_line(9, "tools/call", {"name": "x", "arguments": {}}))
        _, reply = await h.stdout.wait_for(2)
        assert reply["id"] == 9 and reply["error"]["code"] == -32603
        assert reply["error"]["data"]["reason"] == reason
        if status is not None:
            assert reply["error"]["data"]["httpStatus"] == status
        assert "<html>" not in reply["error"]["message"]


async def test_b20_jsonrpc_error_body_with_an_http_error_passes_through_with_the_request_id(run_bridge: RunBridge) -> None:
    error = {"code": -32602, "message": "bad params"}
    body = {"jsonrpc": "2.0", "id": None, "error": error}
    async with run_bridge(app(lambda message, request: json_response(body, status=400))) as h:
        await h.handshake()
        h.stdin.feed(request_line(9, "tools/call", {"name": "x", "arguments": {}}))
        _, reply = await h.stdout.wait_for(2)
        assert reply == {"jsonrpc": "2.0", "id": 9, "error": error}


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        pytest.param(httpx.ConnectError("All connection attempts failed"), "app_unreachable", marks=pytest.mark.httpx_only),
        pytest.param(httpx.ConnectTimeout("timed out"), "timeout", marks=pytest.mark.httpx_only),
        pytest.param(httpx.ReadTimeout("timed out"), "timeout", marks=pytest.mark.httpx_only),
        (httpx.RemoteProtocolError("Server disconnected"), "stream_closed"),
    ],
)
async def test_transport_failures_map_to_their_reason_and_the_bridge_keeps_serving(exc: Exception, reason: str, run_bridge: RunBridge) -> None:
    calls = 0

    def fail_once(message: dict[str, Any], request: httpx.Request) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise exc
        return json_response({"jsonrpc": "2.0", "id": message["id"], "result": {}})

    async with run_bridge(app(fail_once)) as h:
        await h.handshake()
        h.stdin.feed(request_line("a", "tools/call", {"name": "x"}))
        _, failed = await h.stdout.wait_for(2)
        assert failed["id"] == "a" and failed["error"]["data"]["reason"] == reason
        h.stdin.feed(request_line("b"))
        assert (await h.stdout.wait_for(3))[2] == {"jsonrpc": "2.0", "id": "b", "result": {}}
    assert calls == 2  # a tools/call is never re-sent after a failure


# -- SSE replies ------------------------------------------------------------------------------


async def test_b31_sse_notifications_are_relayed_in_order_before_the_result(run_bridge: RunBridge) -> None:
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "p1", "progress": 0.5}}
    log_message = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "hi"}}
    changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    result = {"jsonrpc": "2.0", "id": 18, "result": {"content": []}}
    stream = sse(": keepalive\n\n", event(progress), "event: ping\ndata: {}\n\n", event(log_message), event(changed), "id: 9\ndata:\n\n", event(result), delay_seconds=0.01)
    async with run_bridge(app(lambda message, request: stream)) as h:
        await h.handshake()
        h.stdin.feed(request_line(18, "tools/call", {"name": "long", "arguments": {}, "_meta": {"progressToken": "p1"}}))
        messages = await h.stdout.wait_for(5)
        assert messages[1:] == [progress, log_message, changed, result]


async def test_b31_each_event_is_written_as_soon_as_it_arrives(run_bridge: RunBridge) -> None:
    gate = anyio.Event()
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}}

    async def body() -> Any:
        yield event(progress).encode()
        await gate.wait()
        yield event({"jsonrpc": "2.0", "id": 1, "result": {}}).encode()

    stream = httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())
    async with run_bridge(app(lambda message, request: stream)) as h:
        await h.handshake()
        h.stdin.feed(request_line(1, "tools/call", {"name": "long"}))
        assert (await h.stdout.wait_for(2))[1] == progress  # while the response is still pending
        gate.set()
        assert (await h.stdout.wait_for(3))[2]["id"] == 1


@pytest.mark.parametrize("error", [None, httpx.RemoteProtocolError("peer closed connection")])
async def test_b21_stream_ending_before_the_response_gives_stream_closed_for_the_id(error: Exception | None, run_bridge: RunBridge) -> None:
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}}
    partial = b'event: message\ndata: {"jsonrpc":"2.0","id":10,"res'
    async with run_bridge(app(lambda message, request: sse(event(progress), partial, error=error))) as h:
        await h.handshake()
        h.stdin.feed(request_line(10, "tools/call", {"name": "long", "arguments": {}}))
        messages = await h.stdout.wait_for(3)
        assert messages[1] == progress
        assert messages[2]["id"] == 10 and messages[2]["error"]["data"]["reason"] == "stream_closed"
        assert len(h.stdout.lines) == 3  # the partial data line was never written


async def test_b21_stream_with_event_ids_is_resumed_by_get_with_last_event_id(run_bridge: RunBridge) -> None:
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}}
    gets: list[httpx.Request] = []

    async def handle(request: httpx.Request) -> Any:
        if request.method == "GET" and "last-event-id" in request.headers:
            gets.append(request)
            return sse(event({"jsonrpc": "2.0", "id": 10, "result": {"ok": True}}, "e2"))
        return await app(lambda message, r: sse("retry: 50\n\n", event(progress, "e1")))(request)

    async with run_bridge(handle) as h:
        await h.handshake()
        h.stdin.feed(request_line(10, "tools/call", {"name": "long"}))
        messages = await h.stdout.wait_for(3)
        assert messages[1:] == [progress, {"jsonrpc": "2.0", "id": 10, "result": {"ok": True}}]
        assert gets[0].headers["last-event-id"] == "e1"
        assert gets[0].headers["mcp-session-id"] == "sess-A"


# -- the optional GET stream ------------------------------------------------------------------


@pytest.mark.parametrize("get_status", [405, 404, 500])
async def test_b25_get_stream_refusal_never_reaches_stdout_nor_stops_posts(get_status: int, run_bridge: RunBridge) -> None:
    async with run_bridge(app(get_status=get_status)) as h:
        await h.handshake()
        await anyio.sleep(0.1)
        h.stdin.feed(request_line(13, "tools/list"))
        messages = await h.stdout.wait_for(2)
        assert messages[1] == {"jsonrpc": "2.0", "id": 13, "result": {}}
        await anyio.sleep(0.2)
        assert len(h.stdout.lines) == 2
    gets = h.requests("GET")
    assert 1 <= len(gets) <= 2  # 405: exactly one; others: retried with backoff, not in a loop
    if get_status == 405:
        assert len(gets) == 1
    assert gets[0].headers["accept"] == "text/event-stream"


async def test_get_stream_opens_after_initialized_and_relays_server_messages(run_bridge: RunBridge) -> None:
    message = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "from GET"}}
    order: list[str] = []

    async def handle(request: httpx.Request) -> Any:
        if request.method == "GET":
            order.append("GET")
            return sse(event(message, "g1"))
        body = json.loads(request.content)
        order.append(body.get("method", "response"))
        return await app()(request)

    async with run_bridge(handle) as h:
        await h.handshake()
        messages = await h.stdout.wait_for(2)
        assert messages[1] == message
    assert order[:3] == ["initialize", "notifications/initialized", "GET"]


# -- notifications never get a reply ----------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "outcome",
    [
        httpx.Response(202),
        httpx.Response(200, headers={"content-type": "application/json"}),
        httpx.Response(204),
        json_response({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid Request"}}),
        httpx.Response(500),
        httpx.ConnectError("refused"),
    ],
)
async def test_b28_notifications_get_nothing_on_stdout_whatever_the_app_answers(outcome: Any, run_bridge: RunBridge) -> None:
    async def handle(request: httpx.Request) -> Any:
        message = json.loads(request.content)
        if "id" not in message:
            if isinstance(outcome, Exception):
                raise outcome
            return outcome
        return echo_ok(request)

    async with run_bridge(handle) as h:
        h.stdin.feed(NOTIF_INIT + b'{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}\n')
        await anyio.sleep(0.05)
        h.stdin.feed(request_line(15))
        assert await h.stdout.wait_for(1) == [{"jsonrpc": "2.0", "id": 15, "result": {}}]
        await anyio.sleep(0.05)
        assert len(h.stdout.lines) == 1


async def test_b28_id_zero_and_empty_string_are_requests_and_get_replies(run_bridge: RunBridge) -> None:
    async with run_bridge(echo_ok) as h:
        h.stdin.feed(request_line(0) + request_line(""))
        messages = await h.stdout.wait_for(2)
        assert sorted(messages, key=lambda m: str(m["id"])) == [
            {"jsonrpc": "2.0", "id": "", "result": {}},
            {"jsonrpc": "2.0", "id": 0, "result": {}},
        ]


async def test_client_responses_to_server_requests_are_posted_and_get_no_line(run_bridge: RunBridge) -> None:
    async with run_bridge(echo_ok) as h:
        h.stdin.feed(b'{"jsonrpc":"2.0","id":"srv-1","result":{"roots":[]}}\n' + request_line(1))
        await h.stdout.wait_for(1)
        await anyio.sleep(0.05)
        assert h.stdout.messages() == [{"jsonrpc": "2.0", "id": 1, "result": {}}]
        assert h.posted_bodies()[0] == {"jsonrpc": "2.0", "id": "srv-1", "result": {"roots": []}}


# -- batches ---------------------------------------------------------------------------------


async def test_b30_batch_is_split_into_posts_and_answered_by_one_array_line(run_bridge: RunBridge) -> None:
    async with run_bridge(echo_ok) as h:
        h.stdin.feed(b'[{"jsonrpc":"2.0","id":16,"method":"ping"},{"jsonrpc":"2.0","id":17,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"}]\n')
        (reply,) = await h.stdout.wait_for(1)
        assert sorted(reply, key=lambda m: m["id"]) == [
            {"jsonrpc": "2.0", "id": 16, "result": {}},
            {"jsonrpc": "2.0", "id": 17, "result": {}},
        ]
        assert all(isinstance(body, dict) for body in h.posted_bodies())  # never an array upstream
        assert len(h.posts()) == 3


async def test_b30_empty_batch_gets_minus_32600_and_a_notification_only_batch_gets_nothing(run_bridge: RunBridge) -> None:
    async with run_bridge(echo_ok) as h:
        h.stdin.feed(b"[]\n" + b'[{"jsonrpc":"2.0","method":"notifications/initialized"}]\n' + request_line(1))
        messages = await h.stdout.wait_for(2)
        await anyio.sleep(0.05)
        assert messages[0]["id"] is None and messages[0]["error"]["code"] == -32600
        assert messages[1:] == [{"jsonrpc": "2.0", "id": 1, "result": {}}]
        assert len(h.stdout.lines) == 2


# -- no head-of-line blocking; cancellation is forwarded at once ------------------------------


@pytest.mark.slow
async def test_b32_slow_call_does_not_delay_a_ping(run_bridge: RunBridge) -> None:
    async def slow_or_fast(message: dict[str, Any], request: httpx.Request) -> httpx.Response:
        if message["method"] == "tools/call":
            await anyio.sleep(2)
        return json_response({"jsonrpc": "2.0", "id": message["id"], "result": {}})

    async with run_bridge(app(slow_or_fast)) as h:
        await h.handshake()
        h.stdin.feed(request_line(19, "tools/call", {"name": "slow"}) + request_line(20))
        messages = await h.stdout.wait_for(2, timeout_seconds=0.5)
        assert messages[1]["id"] == 20
        messages = await h.stdout.wait_for(3, timeout_seconds=5)
        assert messages[2]["id"] == 19


async def test_b32_fifty_concurrent_large_calls_all_answered_once_and_whole(run_bridge: RunBridge) -> None:
    async def large(message: dict[str, Any], request: httpx.Request) -> httpx.Response:
        await anyio.sleep(0.01 * (message["id"] % 5))
        return json_response({"jsonrpc": "2.0", "id": message["id"], "result": {"t": "x" * 200_000}})

    async with run_bridge(app(large)) as h:
        await h.handshake()
        h.stdin.feed(b"".join(request_line(i, "tools/call", {"name": "big"}) for i in range(1, 51)))
        messages = await h.stdout.wait_for(51, timeout_seconds=20)
        assert sorted(m["id"] for m in messages[1:]) == list(range(1, 51))
        assert all(len(m["result"]["t"]) == 200_000 for m in messages[1:])


async def test_b33_cancellation_is_posted_while_the_call_runs_and_no_error_is_made_for_it(run_bridge: RunBridge) -> None:
    cancelled = anyio.Event()

    async def handle(request: httpx.Request) -> Any:
        if request.method == "POST":
            message = json.loads(request.content)
            if message.get("method") == "notifications/cancelled":
                assert request.headers["mcp-session-id"] == "sess-A"
                cancelled.set()
                return httpx.Response(202)
            if message.get("method") == "tools/call":
                await cancelled.wait()  # the app stops work on cancel and never answers
                await anyio.sleep(10)
        return await app()(request)

    async with run_bridge(handle, shutdown_grace_seconds=0.2) as h:
        await h.handshake()
        h.stdin.feed(request_line(21, "tools/call", {"name": "slow", "arguments": {}}))
        await anyio.sleep(0.1)
        h.stdin.feed(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":21,"reason":"user cancelled"}}\n')
        with anyio.fail_after(1):
            await cancelled.wait()
        await anyio.sleep(0.1)
        assert len(h.stdout.lines) == 1  # nothing for the notification


# -- shutdown ---------------------------------------------------------------------------------


async def test_eof_lets_the_requests_in_flight_finish_and_deletes_the_session(run_bridge: RunBridge) -> None:
    """A pipeline closes stdin right after its requests: their replies still come (each
    bounded by its own request timeout, not by the short grace), then the run ends."""

    async def late(message: dict[str, Any], request: httpx.Request) -> Any:
        await anyio.sleep(0.6)  # three times the grace
        return json_response({"jsonrpc": "2.0", "id": message["id"], "result": {"content": [{"type": "text", "text": "late"}]}})

    async with run_bridge(app(late), shutdown_grace_seconds=0.2) as h:
        await h.handshake()
        h.stdin.feed(request_line(30, "tools/call", {"name": "slow"}))
        await anyio.sleep(0.1)
        h.stdin.close()
        messages = await h.stdout.wait_for(2)
        assert messages[1]["id"] == 30 and messages[1]["result"]["content"][0]["text"] == "late", messages[1]
        with anyio.fail_after(2):
            while h.exit_status is None:
                await anyio.sleep(0.01)
    assert h.exit_status == 0
    deletes = h.requests("DELETE")
    assert len(deletes) == 1 and deletes[0].headers["mcp-session-id"] == "sess-A"


async def test_a_stop_after_eof_answers_open_requests_with_shutting_down_at_once(run_bridge: RunBridge) -> None:
    """A signal during the wait after EOF (here ``stop``, as the signal handler calls it):
    the open request is answered ``shutting_down`` at once, the session is deleted."""

    async def never(message: dict[str, Any], request: httpx.Request) -> Any:
        await anyio.sleep(30)

    async with run_bridge(app(never), shutdown_grace_seconds=0.2) as h:
        await h.handshake()
        h.stdin.feed(request_line(30, "tools/call", {"name": "slow"}))
        await anyio.sleep(0.1)
        h.stdin.close()
        await anyio.sleep(0.5)
        assert h.exit_status is None and len(h.stdout.lines) == 1  # waiting for request 30
        started = anyio.current_time()
        h.bridge.stop("SIGINT")
        messages = await h.stdout.wait_for(2)
        assert messages[1]["id"] == 30 and messages[1]["error"]["data"]["reason"] == "shutting_down"
        with anyio.fail_after(2):
            while h.exit_status is None:
                await anyio.sleep(0.01)
        assert anyio.current_time() - started < 2
    assert h.exit_status == 0
    deletes = h.requests("DELETE")
    assert len(deletes) == 1 and deletes[0].headers["mcp-session-id"] == "sess-A"


async def test_after_eof_a_call_that_never_completes_is_answered_and_cancelled_after_the_drain_timeout(
    run_bridge: RunBridge,
) -> None:
    """Issue 41, point 11: the end of input has its own bound (``--drain-timeout``), not
    ``--request-timeout`` plus ``--launch-timeout``. A call that never completes is then
    answered ``shutting_down``, naming the bound, and the app gets ``notifications/cancelled``
    for it; the call that finished in time got the app's own reply."""
    stuck = anyio.Event()

    async def answer(message: dict[str, Any], request: httpx.Request) -> Any:
        if message["params"]["name"] == "never":
            stuck.set()
            await anyio.sleep(600)
        return json_response({"jsonrpc": "2.0", "id": message["id"], "result": {"content": []}})

    async with run_bridge(app(answer), drain_timeout_seconds=0.5) as h:
        await h.handshake()
        h.stdin.feed(request_line(30, "tools/call", {"name": "never"}) + request_line(31, "tools/call", {"name": "quick"}))
        await stuck.wait()
        h.stdin.close()
        with anyio.fail_after(20):  # (a hang: the old bound was 330 s)
            while h.exit_status is None:
                await anyio.sleep(0.01)
    replies = {m["id"]: m for m in h.stdout.messages() if "id" in m}
    assert replies[31]["result"] == {"content": []}
    assert replies[30]["error"]["data"]["reason"] == "shutting_down", replies[30]
    assert "--drain-timeout of 0.5 s passed" in replies[30]["error"]["message"], replies[30]
    cancels = [json.loads(r.content) for r in h.requests("POST") if b"notifications/cancelled" in r.content]
    assert [c["params"]["requestId"] for c in cancels] == [30], cancels
    assert h.exit_status == 0


@pytest.mark.httpx_only  # (the app sees its exchange closed: the in-process transport's cancellation)
async def test_after_eof_a_2026_call_that_never_completes_is_cancelled_by_closing_its_exchange(run_bridge: RunBridge) -> None:
    """The same for a 2026-07-28 call: no ``notifications/cancelled`` (its revision cancels
    by closing the exchange), the exchange is closed, the reply is ``shutting_down``."""
    stuck = anyio.Event()
    closed = anyio.Event()

    async def answer(message: dict[str, Any], request: httpx.Request) -> Any:
        stuck.set()
        try:
            await anyio.sleep(600)
        finally:
            closed.set()

    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"}}
    async with run_bridge(app(answer), drain_timeout_seconds=0.5) as h:
        h.stdin.feed(request_line(40, "tools/call", {"name": "never", "_meta": meta}))
        await stuck.wait()
        h.stdin.close()
        with anyio.fail_after(20):  # (a hang: the old bound was 330 s)
            await closed.wait()
            while h.exit_status is None:
                await anyio.sleep(0.01)
    (reply,) = [m for m in h.stdout.messages() if m.get("id") == 40]
    assert reply["error"]["data"]["reason"] == "shutting_down", reply
    assert not [r for r in h.requests("POST") if b"notifications/cancelled" in r.content]


async def test_closed_stdout_ends_the_run_quietly(run_bridge: RunBridge) -> None:
    async def slow(message: dict[str, Any], request: httpx.Request) -> Any:
        await anyio.sleep(0.3)
        return json_response({"jsonrpc": "2.0", "id": message["id"], "result": {}})

    async with run_bridge(app(slow)) as h:
        await h.handshake()
        h.stdin.feed(request_line(1, "tools/call", {"name": "slow"}))
        h.stdout.closed = True
        with anyio.fail_after(2):
            while h.exit_status is None:
                await anyio.sleep(0.01)
        assert h.exit_status == 0


# -- cancellation, timeouts, resumption, version and session details --------------------------


async def test_b33_cancelled_request_whose_stream_then_closes_gets_no_error_line(run_bridge: RunBridge) -> None:
    cancelled = anyio.Event()

    async def handle(request: httpx.Request) -> Any:
        if request.method == "POST":
            message = json.loads(request.content)
            if message.get("method") == "notifications/cancelled":
                cancelled.set()
                return httpx.Response(202)
            if message.get("method") == "tools/call":

                async def body() -> Any:
                    await cancelled.wait()
                    yield b": the app stops and closes the stream without a response\n\n"

                return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())
        return await app()(request)

    async with run_bridge(handle) as h:
        await h.handshake()
        h.stdin.feed(request_line(21, "tools/call", {"name": "slow"}))
        await anyio.sleep(0.05)
        h.stdin.feed(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":21}}\n')
        await anyio.sleep(0.2)
        h.stdin.feed(request_line(22))
        messages = await h.stdout.wait_for(2)
        await anyio.sleep(0.05)
        assert [m["id"] for m in h.stdout.messages()] == [0, 22]
        assert messages[1] == {"jsonrpc": "2.0", "id": 22, "result": {}}


@pytest.mark.httpx_only
async def test_bridge_timeout_answers_the_client_and_cancels_the_request_at_the_app(run_bridge: RunBridge) -> None:
    def time_out(message: dict[str, Any], request: httpx.Request) -> Any:
        raise httpx.ReadTimeout("timed out")

    async with run_bridge(app(time_out)) as h:
        await h.handshake()
        h.stdin.feed(request_line(40, "tools/call", {"name": "slow"}))
        _, reply = await h.stdout.wait_for(2)
        assert reply["error"]["data"]["reason"] == "timeout"
        await anyio.sleep(0.05)
    cancels = [b for b in h.posted_bodies() if b.get("method") == "notifications/cancelled"]
    assert cancels == [{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 40, "reason": "The bridge timed out waiting for the response."}}]


async def test_b21_stream_broken_mid_event_is_resumed_when_it_carried_event_ids(run_bridge: RunBridge) -> None:
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}}

    async def handle(request: httpx.Request) -> Any:
        if request.method == "GET" and request.headers.get("last-event-id") == "e1":
            return sse(event({"jsonrpc": "2.0", "id": 11, "result": {}}, "e2"))
        return await app(lambda m, r: sse("retry: 10\n\n", event(progress, "e1"), "data: {\"jso", error=httpx.ReadError("reset")))(request)

    async with run_bridge(handle) as h:
        await h.handshake()
        h.stdin.feed(request_line(11, "tools/call", {"name": "long"}))
        messages = await h.stdout.wait_for(3)
        assert messages[1:] == [progress, {"jsonrpc": "2.0", "id": 11, "result": {}}]


async def test_negotiated_protocol_version_is_the_one_the_server_chose(run_bridge: RunBridge) -> None:
    async def older(request: httpx.Request) -> Any:
        if request.method == "POST" and json.loads(request.content).get("method") == "initialize":
            return json_response(
                {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": "2025-03-26", "capabilities": {}, "serverInfo": {"name": "old", "version": "0"}}},
                headers={"Mcp-Session-Id": "sess-B"},
            )
        return await app()(request)

    async with run_bridge(older) as h:
        await h.handshake(version="2025-03-26")
        h.stdin.feed(request_line(1))
        messages = await h.stdout.wait_for(2)
        assert messages[0]["result"]["protocolVersion"] == "2025-03-26"  # relayed unchanged
    later = h.posts()[1:]
    assert {r.headers["mcp-protocol-version"] for r in later} == {"2025-03-26"}
    assert {r.headers["mcp-session-id"] for r in later} == {"sess-B"}


async def test_session_id_that_is_not_visible_ascii_is_never_sent_back(run_bridge: RunBridge) -> None:
    async def bad_session(request: httpx.Request) -> Any:
        response = await app()(request)
        if request.method == "POST" and json.loads(request.content).get("method") == "initialize":
            response.headers["mcp-session-id"] = "abc def"
        return response

    async with run_bridge(bad_session) as h:
        await h.handshake()
        h.stdin.feed(request_line(1))
        await h.stdout.wait_for(2)
    assert all("mcp-session-id" not in r.headers for r in h.posts())


async def test_modern_discover_probe_refused_by_a_legacy_app_comes_back_with_the_probe_id(run_bridge: RunBridge) -> None:
    """2026-07-28's era probe (``server/discover``): the app's 400 (id null) reaches the client as the error
    for its probe, so a dual-era client falls back to initialize at once."""
    refusal = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Bad Request: Missing session ID"}}

    async def legacy(request: httpx.Request) -> Any:
        if request.method == "POST" and json.loads(request.content).get("method") == "server/discover":
            return json_response(refusal, status=400, headers={"mcp-session-id": "throw-away"})
        return await app()(request)

    async with run_bridge(legacy) as h:
        h.stdin.feed(request_line(1, "server/discover", {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}))
        (reply,) = await h.stdout.wait_for(1)
        assert reply == {"jsonrpc": "2.0", "id": 1, "error": refusal["error"]}
        h.stdin.feed(init(2) + NOTIF_INIT + request_line(3))
        await h.stdout.wait_for(3)
    assert "mcp-session-id" not in h.posts()[1].headers  # the probe's session was not kept
    assert h.posts()[-1].headers["mcp-session-id"] == "sess-A"


async def test_redirects_are_never_followed_so_the_token_cannot_travel(run_bridge: RunBridge) -> None:
    """No redirects (an ``Authorization`` header must not travel): a 307 to another host is an error, and nothing goes there."""
    visited: list[str] = []

    async def redirect(request: httpx.Request) -> httpx.Response:
        visited.append(str(request.url))
        return httpx.Response(307, headers={"location": "http://203.0.113.9/steal"})

    async with run_bridge(redirect, token=TOKEN) as h:
        h.stdin.feed(request_line(1))
        (reply,) = await h.stdout.wait_for(1)
    assert reply["error"]["data"] == {"source": "bridge", "reason": "http_status", "httpStatus": 307}
    assert visited == [URL]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b'{"jsonrpc":"2.0","id":1,"result":{"x":NaN}}', "bad_upstream_response"),
        (b'{"id":1,"result":{}}', "bad_upstream_response"),
        (b'\xef\xbb\xbf{"jsonrpc":"2.0","id":1,"result":{}}', None),
    ],
)
async def test_only_json_rpc_2_0_from_the_app_reaches_stdout(body: bytes, reason: str | None, run_bridge: RunBridge) -> None:
    async with run_bridge(lambda request: httpx.Response(200, content=body, headers={"content-type": "application/json"})) as h:
        h.stdin.feed(request_line(1))
        (reply,) = await h.stdout.wait_for(1)
    assert b"NaN" not in h.stdout.lines[0] and not h.stdout.lines[0].startswith(b"\xef\xbb\xbf")
    if reason is None:
        assert reply == {"jsonrpc": "2.0", "id": 1, "result": {}}
    else:
        assert reply["error"]["data"]["reason"] == reason


_PADDING = "p" * (3 * 1024 * 1024)  # past the size at which replies are parsed by msgspec (jsonparse.py)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b'{"jsonrpc":"2.0","id":1,"result":{"x":NaN,"pad":"%s"}}', "bad_upstream_response"),
        (b'{"jsonrpc":"2.0","id":1,"result":{"x":"\xff","pad":"%s"}}', "bad_upstream_response"),
        (b'\xef\xbb\xbf {"jsonrpc":"2.0","id":1,"result":{"pad":"%s"}}', None),
        (b'{"jsonrpc":"2.0","id":1,"result":{"x":"\\ud800","pad":"%s"}}', None),
    ],
)
async def test_a_large_reply_gets_the_verdict_a_small_one_gets(body: bytes, reason: str | None, run_bridge: RunBridge) -> None:
    """Large replies are parsed by a faster parser; what it refuses, JSON's own rules decide:
    a lone surrogate escape still passes (escaped on stdout), NaN and bad UTF-8 never do."""
    body = body % _PADDING.encode()
    async with run_bridge(lambda request: httpx.Response(200, content=body, headers={"content-type": "application/json"})) as h:
        h.stdin.feed(request_line(1))
        (reply,) = await h.stdout.wait_for(1)
    line = h.stdout.lines[0]
    line.decode("utf-8")  # stdout is UTF-8, whatever came in
    assert b"NaN" not in line and not line.startswith(b"\xef\xbb\xbf")
    if reason is None:
        assert reply["id"] == 1 and reply["result"]["pad"] == _PADDING
        assert reply["result"].get("x", "\ud800") == "\ud800"
    else:
        assert reply["error"]["data"]["reason"] == reason


async def test_a_bad_line_with_a_lone_surrogate_is_answered_and_the_bridge_serves_on(run_bridge: RunBridge) -> None:
    async with run_bridge(echo_ok) as h:
        h.stdin.feed(b'{"jsonrpc":"1.0","id":"\\ud800","method":"ping"}\n' + request_line(2))
        first, second = await h.stdout.wait_for(2)
    assert first["error"]["code"] == -32600 and second == {"jsonrpc": "2.0", "id": 2, "result": {}}


async def test_eof_during_a_slow_initialize_is_seen_at_once(run_bridge: RunBridge, caplog: pytest.LogCaptureFixture) -> None:
    """The initialize barrier holds later messages back, not the reading of stdin."""

    async def slow_initialize(request: httpx.Request) -> Any:
        await anyio.sleep(30)

    caplog.set_level(logging.INFO, logger="bridge")
    async with run_bridge(slow_initialize, shutdown_grace_seconds=0.2) as h:
        h.stdin.feed(init(0) + request_line(1, "tools/list"))
        await anyio.sleep(0.1)
        h.stdin.close()
        with anyio.fail_after(1):
            while "stdin closed; waiting for 2 request(s) in flight" not in caplog.text:
                await anyio.sleep(0.01)
        started = anyio.current_time()
        h.bridge.stop("SIGTERM", hurry=True)
        messages = await h.stdout.wait_for(2, timeout_seconds=2)
        with anyio.fail_after(2):
            while h.exit_status is None:
                await anyio.sleep(0.01)
        assert anyio.current_time() - started < 1.5
    assert sorted(m["id"] for m in messages) == [0, 1]
    assert {m["error"]["data"]["reason"] for m in messages} == {"shutting_down"}


async def test_a_ping_is_never_queued_behind_slow_calls_that_fill_every_slot(run_bridge: RunBridge) -> None:
    async def slow_calls(message: dict[str, Any], request: httpx.Request) -> httpx.Response:
        if message["method"] == "tools/call":
            await anyio.sleep(3)
        return json_response({"jsonrpc": "2.0", "id": message["id"], "result": {}})

    async with run_bridge(app(slow_calls), max_concurrent_requests=2) as h:
        await h.handshake()
        h.stdin.feed(request_line(1, "tools/call", {"name": "slow"}) + request_line(2, "tools/call", {"name": "slow"}))
        await anyio.sleep(0.1)
        h.stdin.feed(request_line(3))
        messages = await h.stdout.wait_for(2, timeout_seconds=1)
        assert messages[1] == {"jsonrpc": "2.0", "id": 3, "result": {}}


async def test_a_huge_retry_hint_from_the_app_is_bounded_by_the_request_timeout(run_bridge: RunBridge) -> None:
    """An hour-long `retry:` must not park a request past its bound (docs/behaviour.md, "Time bounds")."""
    resumed = anyio.Event()

    async def handle(request: httpx.Request) -> Any:
        if request.method == "GET" and "last-event-id" in request.headers:
            resumed.set()
            return sse(event({"jsonrpc": "2.0", "id": 10, "result": {}}, "e2"))
        return await app(lambda m, r: sse("retry: 3600000\n\n", event({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}}, "e1")))(request)

    async with run_bridge(handle, request_timeout_seconds=0.3) as h:
        await h.handshake()
        h.stdin.feed(request_line(10, "tools/call", {"name": "long"}))
        with anyio.fail_after(3):
            await resumed.wait()
        assert (await h.stdout.wait_for(3))[2] == {"jsonrpc": "2.0", "id": 10, "result": {}}
