"""MCP 2026-07-28 through the bridge: headers, x-mcp-header, cancellation by closing the
stream, subscriptions/listen, and the era's error codes (MCP 2026-07-28, basic/transports)."""

from __future__ import annotations

import base64
import json
from typing import Any

import anyio
import httpx
import pytest
from support.helpers import RunBridge, event, json_response, request_line, sse
from support.mcp_app import McpApp

from bridge.core.era import encode_header_value, filter_tools, invalid_header_annotation, request_headers

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("wire")]
VERSION = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": VERSION, "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"}}




def modern(request_id: Any, method: str, params: dict[str, Any] | None = None) -> bytes:
    return request_line(request_id, method, {**(params or {}), "_meta": dict(META)})


def tool(name: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "inputSchema": {"type": "object", "properties": properties}}


GOOD = tool("weather", {
    "region": {"type": "string", "x-mcp-header": "Region"},
    "days": {"type": "integer", "x-mcp-header": "Days"},
    "metric": {"type": "boolean", "x-mcp-header": "Metric"},
    "where": {"type": "object", "properties": {"city": {"type": "string", "x-mcp-header": "City"}}},
    "note": {"type": "string"},
})
BAD = [
    tool("on-a-number", {"x": {"type": "number", "x-mcp-header": "X"}}),
    tool("not-a-token", {"x": {"type": "string", "x-mcp-header": "Bad Name"}}),
    tool("twice", {"a": {"type": "string", "x-mcp-header": "Dup"}, "b": {"type": "string", "x-mcp-header": "dup"}}),
    tool("under-items", {"list": {"type": "array", "items": {"type": "string", "x-mcp-header": "Item"}}}),
    {"name": "at-the-root", "inputSchema": {"type": "string", "x-mcp-header": "Root"}},
]


def modern_app() -> McpApp:
    """A 2026-07-28 app: :class:`McpApp`, which checks the era's headers like a strict server
    would, listing ``GOOD`` and every ``BAD`` tool and answering calls with an empty result."""
    return McpApp(tools=[GOOD, *BAD], result={"content": [], "resultType": "complete"})


# -- pure rules -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "wrapped"),
    [("us-west1", False), ("weather 世界", True), (" lead", True), ("trail ", True), ("tab\there", True), ("=?base64?eA==?=", True), ("", False)],
)
def test_header_values_are_base64_wrapped_unless_plain_ascii(value: str, wrapped: bool) -> None:
    encoded = encode_header_value(value)
    if not wrapped:
        assert encoded == value
    else:
        assert encoded.startswith("=?base64?") and encoded.endswith("?=")
        assert base64.b64decode(encoded[9:-2]).decode("utf-8") == value


def test_valid_annotations_pass_and_each_kind_of_invalid_one_is_named() -> None:
    assert invalid_header_annotation(GOOD["inputSchema"]) is None
    for bad in BAD:
        assert invalid_header_annotation(bad["inputSchema"]) is not None, bad["name"]
    assert invalid_header_annotation(None) is None


def test_an_annotation_ending_in_a_line_end_is_no_header_name() -> None:
    """A name that ends in LF would put a bare line end into the request head."""
    schema = {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "X-Region\n"}}}
    assert invalid_header_annotation(schema) == "the x-mcp-header of 'region' is not an HTTP header name"


def test_headers_for_each_json_type_and_none_for_null_missing_or_fractional_values() -> None:
    cache: dict[str, Any] = {}
    filter_tools({"tools": [GOOD]}, cache)
    params = {"name": "weather", "arguments": {"region": "us-west1", "days": 3, "metric": False, "where": {"city": "Zürich"}, "note": "x"}}
    headers = request_headers("tools/call", params, VERSION, cache)
    assert headers == {
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "weather",
        "Mcp-Param-Region": "us-west1",
        "Mcp-Param-Days": "3",
        "Mcp-Param-Metric": "false",
        "Mcp-Param-City": encode_header_value("Zürich"),
    }
    sparse = request_headers("tools/call", {"name": "weather", "arguments": {"region": None, "days": 2.5, "metric": True}}, VERSION, cache)
    assert "Mcp-Param-Region" not in sparse and "Mcp-Param-Days" not in sparse and sparse["Mcp-Param-Metric"] == "true"
    assert request_headers("resources/read", {"uri": "file:///a b"}, VERSION, cache)["Mcp-Name"] == encode_header_value("file:///a b")
    assert request_headers("prompts/get", {"name": "p"}, VERSION, cache)["Mcp-Name"] == "p"
    assert "Mcp-Name" not in request_headers("tools/list", {}, VERSION, cache)


# -- through the bridge -----------------------------------------------------------------------


async def test_modern_requests_carry_the_eras_headers_and_no_session(run_bridge: RunBridge) -> None:
    app = modern_app()
    async with run_bridge(app) as h:
        h.stdin.feed(modern(1, "server/discover"))
        h.stdin.feed(modern(2, "tools/call", {"name": "weather 世界", "arguments": {}}))
        await h.stdout.wait_for(2)
        await anyio.sleep(0.05)
    call = app.posts[1]
    assert base64.b64decode(call.headers["mcp-name"][9:-2]).decode() == "weather 世界"
    assert app.other == []  # no GET stream, no DELETE: the era has no sessions


async def test_tools_with_invalid_annotations_are_hidden_and_calls_carry_param_headers(run_bridge: RunBridge) -> None:
    app = modern_app()
    async with run_bridge(app) as h:
        h.stdin.feed(modern(1, "tools/list"))
        (listing,) = await h.stdout.wait_for(1)
        assert [t["name"] for t in listing["result"]["tools"]] == ["weather"]
        h.stdin.feed(modern(2, "tools/call", {"name": "weather", "arguments": {"region": "us-west1", "days": 3}}))
        await h.stdout.wait_for(2)
    call = app.posts[-1]
    assert call.headers["mcp-param-region"] == "us-west1" and call.headers["mcp-param-days"] == "3"


async def test_header_mismatch_relists_privately_and_retries_once(run_bridge: RunBridge) -> None:
    app = modern_app()
    app.header_mismatches_left = 1
    async with run_bridge(app) as h:
        h.stdin.feed(modern(1, "tools/call", {"name": "weather", "arguments": {"region": "eu"}}))
        (reply,) = await h.stdout.wait_for(1)
        await anyio.sleep(0.05)
        assert len(h.stdout.lines) == 1  # the private re-list never reaches stdout
    assert "result" in reply and reply["id"] == 1
    methods = [json.loads(p.content)["method"] for p in app.posts]
    assert methods == ["tools/call", "tools/list", "tools/call"]
    assert app.posts[-1].headers["mcp-param-region"] == "eu"  # learnt from the re-list


async def test_a_second_header_mismatch_is_relayed_without_another_retry(run_bridge: RunBridge) -> None:
    app = modern_app()
    app.header_mismatches_left = 5
    async with run_bridge(app) as h:
        h.stdin.feed(modern(1, "tools/call", {"name": "weather", "arguments": {}}))
        (reply,) = await h.stdout.wait_for(1)
    assert reply == {"jsonrpc": "2.0", "id": 1, "error": {"code": -32020, "message": "Header mismatch"}}
    assert [json.loads(p.content)["method"] for p in app.posts] == ["tools/call", "tools/list", "tools/call"]


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (400, {"code": -32022, "message": "Unsupported protocol version", "data": {"supported": ["2026-07-28"], "requested": "2027-01-01"}}),
        (400, {"code": -32021, "message": "Missing required client capability"}),
        (400, {"code": -32602, "message": "Missing _meta"}),
        (404, {"code": -32601, "message": "Method not found"}),
    ],
)
async def test_the_eras_error_codes_are_relayed_exactly_with_the_request_id(status: int, error: dict[str, Any], run_bridge: RunBridge) -> None:
    async def refuse(request: httpx.Request) -> httpx.Response:
        return json_response({"jsonrpc": "2.0", "id": None, "error": error}, status=status)

    async with run_bridge(refuse) as h:
        h.stdin.feed(modern("r", "resources/read", {"uri": "x"}))
        (reply,) = await h.stdout.wait_for(1)
    assert reply == {"jsonrpc": "2.0", "id": "r", "error": error}
    assert h.bridge.driver.rebuilds == 0  # a 404 in this era is never a lost session


async def test_cancellation_closes_the_exchange_and_is_never_posted(run_bridge: RunBridge) -> None:
    closed = anyio.Event()
    posted: list[str] = []

    async def handle(request: httpx.Request) -> httpx.Response:
        posted.append(json.loads(request.content)["method"])

        async def body() -> Any:
            try:
                yield b": working\n\n"
                await anyio.sleep(30)
                yield event({"jsonrpc": "2.0", "id": 7, "result": {}}).encode()
            finally:
                closed.set()

        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())

    async with run_bridge(handle) as h:
        h.stdin.feed(modern(7, "tools/call", {"name": "slow", "arguments": {}}))
        await anyio.sleep(0.1)
        h.stdin.feed(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}\n')
        with anyio.fail_after(2):
            await closed.wait()
        await anyio.sleep(0.05)
        assert h.stdout.lines == []  # nothing for the cancelled id, nothing for the notification
    assert posted == ["tools/call"]


@pytest.mark.httpx_only
async def test_listen_stream_has_no_read_timeout_relays_events_and_a_drop_ends_it_with_an_error(run_bridge: RunBridge) -> None:
    ack = {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": {}}
    changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": "s1"}}}
    timeouts: list[Any] = []

    async def handle(request: httpx.Request) -> httpx.Response:
        timeouts.append(request.extensions["timeout"])
        return sse(event(ack, "1"), event(changed, "2"), delay_seconds=0.02, error=httpx.RemoteProtocolError("peer closed"))

    async with run_bridge(handle, request_timeout_seconds=0.5) as h:
        h.stdin.feed(modern("listen-1", "subscriptions/listen", {"notifications": {"toolsListChanged": True}}))
        messages = await h.stdout.wait_for(3)
    assert messages[:2] == [ack, changed]
    assert messages[2]["id"] == "listen-1" and messages[2]["error"]["data"]["reason"] == "stream_closed"
    assert timeouts[0]["read"] is None  # open for as long as the client listens
    assert len(timeouts) == 1  # the era has no resumption: no GET with Last-Event-ID


async def test_legacy_requests_after_initialize_are_untouched_by_the_era_rules(run_bridge: RunBridge) -> None:
    seen: list[httpx.Request] = []

    async def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        message = json.loads(request.content) if request.content else {}
        if message.get("method") == "initialize":
            return json_response({"jsonrpc": "2.0", "id": message["id"], "result": {"protocolVersion": "2025-11-25", "capabilities": {}}}, headers={"mcp-session-id": "s"})
        if "id" in message:
            return json_response({"jsonrpc": "2.0", "id": message["id"], "result": {}})
        return httpx.Response(202 if request.method == "POST" else 405)

    async with run_bridge(handle) as h:
        h.stdin.feed(request_line(0, "initialize", {"protocolVersion": "2025-11-25"}) + request_line(1, "tools/call", {"name": "t"}))
        await h.stdout.wait_for(2)
    call = seen[1]
    assert "mcp-method" not in call.headers and call.headers["mcp-session-id"] == "s"


async def test_a_cancel_in_the_same_chunk_as_its_request_stops_it_before_it_is_sent(run_bridge: RunBridge) -> None:
    posted: list[str] = []

    async def handle(request: httpx.Request) -> httpx.Response:
        posted.append(json.loads(request.content)["method"])
        return json_response({"jsonrpc": "2.0", "id": 7, "result": {}})

    async with run_bridge(handle) as h:
        h.stdin.feed(modern(7, "tools/call", {"name": "slow", "arguments": {}})
                     + b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}\n')
        await anyio.sleep(0.2)
        assert h.stdout.lines == []
    assert posted == []
