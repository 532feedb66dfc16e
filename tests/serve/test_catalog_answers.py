"""Lazy launch in-process (docs/behaviour.md, "Lazy launch"): what a catalog answers while
the app is down, and when the app is started instead."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest
from support.helpers import URL, RunBridge, request_line
from support.mcp_app import McpApp, Starter

from bridge.app.servedcatalog import ServedCatalog
from bridge.core.config import DEFAULT_APP_NAME

pytestmark = pytest.mark.anyio

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"}}
TOOLS = {"tools": [{"name": "cached", "inputSchema": {"type": "object"}}]}
DISCOVER = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}, "serverInfo": {"name": "app", "version": "1"}}
INITIALIZE = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "app", "version": "1"}}



def cache(**parts: Any) -> None:
    entry = {"format": 1, "app": DEFAULT_APP_NAME, "endpoint": URL, "savedAtSeconds": 1.0, "initialize": None, "discover": None, "lists": {}}
    ServedCatalog(DEFAULT_APP_NAME, URL).replace({**entry, **parts})


def modern(request_id: Any, method: str, params: dict[str, Any] | None = None) -> bytes:
    return request_line(request_id, method, {**(params or {}), "_meta": dict(META)})


async def test_a_2026_client_s_discover_and_list_come_from_the_catalog_and_a_call_starts_the_app(run_bridge: RunBridge) -> None:
    cache(discover=DISCOVER, lists={"tools/list": TOOLS})
    app = McpApp(stateless=True, result={"content": [], "resultType": "complete"})
    app.up = False
    starter = Starter(app)
    async with run_bridge(app, ensure_running=starter, app_probe=starter.probe) as h:
        h.stdin.feed(modern(1, "server/discover") + modern(2, "tools/list") + request_line(3, "ping"))
        replies = {reply["id"]: reply for reply in await h.stdout.wait_for(3)}
        assert starter.calls == 0 and not app.up
        h.stdin.feed(modern(4, "tools/call", {"name": "cached", "arguments": {}}))
        (*_, call) = await h.stdout.wait_for(4)
    # A list cached from a 2025-era session gets what the 2026-07-28 schema requires.
    assert replies[1]["result"] == DISCOVER and replies[2]["result"] == {**TOOLS, "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}
    assert replies[3]["result"] == {}
    assert call["id"] == 4 and "result" in call, call
    assert starter.calls == 1


async def test_without_a_catalog_the_first_request_starts_the_app(run_bridge: RunBridge, caplog: pytest.LogCaptureFixture) -> None:
    app = McpApp(stateless=True)
    app.up = False
    starter = Starter(app)
    caplog.set_level("INFO", logger="bridge")
    async with run_bridge(app, ensure_running=starter, app_probe=starter.probe) as h:
        h.stdin.feed(modern(1, "tools/list"))
        await h.stdout.wait_for(1)
    assert starter.calls == 1
    assert any("tools/list (id 1) needs it: starting it" in record.getMessage() for record in caplog.records), caplog.text


async def initialize_and_list_with_the_app_down(run_bridge: RunBridge) -> tuple[list[Any], Starter]:
    """A 2025-06-18 client's ``initialize`` then ``tools/list``, the app down until started:
    the two replies, and the starter (how often it started the app)."""
    app = McpApp()
    app.up = False
    starter = Starter(app)
    async with run_bridge(app, ensure_running=starter, app_probe=starter.probe) as h:
        h.stdin.feed(request_line(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}))
        await h.stdout.wait_for(1)
        h.stdin.feed(request_line(1, "tools/list"))
        return list(await h.stdout.wait_for(2)), starter


async def test_a_catalog_for_another_protocol_version_does_not_answer_initialize(run_bridge: RunBridge) -> None:
    cache(initialize={**INITIALIZE, "protocolVersion": "2024-11-05"})
    (reply, _), starter = await initialize_and_list_with_the_app_down(run_bridge)
    assert "result" in reply and starter.calls == 1


@pytest.mark.parametrize("policy", ["on-start", "never"])
async def test_other_policies(run_bridge: RunBridge, policy: str) -> None:
    """``on-start`` starts the app for the first request, catalog or not; ``never`` answers
    from the catalog and never starts it: a call gets ``app_unreachable``."""
    cache(initialize=INITIALIZE, lists={"tools/list": TOOLS})
    app = McpApp()
    app.up = False
    starter = Starter(app)
    async with run_bridge(app, ensure_running=starter, app_probe=starter.probe, launch_policy=policy) as h:
        h.stdin.feed(request_line(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}))
        (init,) = await h.stdout.wait_for(1)
        h.stdin.feed(request_line(1, "tools/call", {"name": "cached", "arguments": {}}))
        (_, call) = await h.stdout.wait_for(2)
    if policy == "on-start":
        assert starter.calls == 1 and init["result"]["serverInfo"]["name"] != "app"
    else:
        assert starter.calls == 0 and init["result"] == INITIALIZE
        assert call["error"]["data"]["reason"] == "app_unreachable", call


ACKNOWLEDGED = "notifications/subscriptions/acknowledged"


def listen_stream(message: dict[str, Any], request: httpx.Request) -> httpx.Response:
    """The app's ``subscriptions/listen`` stream: its own acknowledgment, one event, its end."""
    listen_id = message["id"]
    meta = {"io.modelcontextprotocol/subscriptionId": listen_id}
    events = [
        {"jsonrpc": "2.0", "method": ACKNOWLEDGED, "params": {"notifications": {"toolsListChanged": True}, "_meta": meta}},
        {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {"_meta": meta}},
        {"jsonrpc": "2.0", "id": listen_id, "result": {"resultType": "complete"}},
    ]
    body = b"".join(b"event: message\r\ndata: " + json.dumps(event).encode() + b"\r\n\r\n" for event in events)
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)


async def test_a_2026_client_s_listen_stream_is_acknowledged_from_the_catalog_waits_for_the_first_call_and_starts_nothing(
    run_bridge: RunBridge,
) -> None:
    """Claude Code (2.1.328) opens ``subscriptions/listen`` at every start, ``claude mcp list``
    included, and goes on only once it is acknowledged (unacknowledged, the real ``claude mcp
    list`` took 27 s with the app down). With the app down and a catalog, the stream is
    acknowledged at once with what the cached ``server/discover`` declares, held (the app is
    not started for it), and goes out once the first call started the app; the app's own
    acknowledgment is not passed on a second time, its events are."""
    cache(discover=DISCOVER, lists={"tools/list": TOOLS})

    def answer(message: dict[str, Any], request: httpx.Request) -> httpx.Response:
        if message["method"] == "subscriptions/listen":
            return listen_stream(message, request)
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": message["id"], "result": {"content": [], "resultType": "complete"}})

    app = McpApp(stateless=True, on_request=answer)
    app.up = False
    starter = Starter(app)
    async with run_bridge(app, ensure_running=starter, app_probe=starter.probe) as h:
        listen = modern("listen:0", "subscriptions/listen", {"notifications": {"toolsListChanged": True, "promptsListChanged": True}})
        h.stdin.feed(listen + modern(1, "server/discover") + modern(2, "tools/list"))
        first = await h.stdout.wait_for(3)
        assert starter.calls == 0 and not app.up
        h.stdin.feed(modern(3, "tools/call", {"name": "cached", "arguments": {}}))
        later = (await h.stdout.wait_for(6))[3:]
    (acknowledgment,) = [message for message in first if message.get("method") == ACKNOWLEDGED]
    # What the catalog's server/discover declares (tools), of what was asked (tools, prompts).
    assert acknowledgment["params"] == {"notifications": {"toolsListChanged": True}, "_meta": {"io.modelcontextprotocol/subscriptionId": "listen:0"}}
    assert {message.get("id") for message in first} == {None, 1, 2}
    assert [message.get("method") for message in later if "method" in message] == ["notifications/tools/list_changed"], later
    assert {message["id"] for message in later if "id" in message} == {3, "listen:0"}
    assert starter.calls == 1


async def test_a_listen_that_asks_for_resource_subscriptions_waits_for_the_apps_acknowledgment(run_bridge: RunBridge) -> None:
    """Only the app can accept a resource subscription: such a listen is held unacknowledged."""
    cache(discover=DISCOVER, lists={"tools/list": TOOLS})
    app = McpApp(stateless=True, result={"content": [], "resultType": "complete"})
    app.up = False
    starter = Starter(app)
    async with run_bridge(app, ensure_running=starter, app_probe=starter.probe) as h:
        listen = modern("listen:0", "subscriptions/listen", {"notifications": {"resourceSubscriptions": ["file:///a"]}})
        h.stdin.feed(listen + modern(1, "server/discover"))
        replies = await h.stdout.wait_for(1)
        await anyio.sleep(0.1)
        assert [reply.get("id") for reply in h.stdout.messages()] == [1], replies
    assert starter.calls == 0


@pytest.mark.parametrize(
    "odd",
    [
        {"initializeByVersion": 5},
        {"initializeByVersion": "2025-06-18"},
        {"initializeByVersion": {"2025-06-18": 5}},
        {"lists": {"tools/list": "x"}},
        {"initialize": ["x"]},
        {"refusesInitialize": "yes"},
        {"savedAtSeconds": "1"},
    ],
)
async def test_a_catalog_this_version_cannot_read_is_ignored_whatever_its_types(run_bridge: RunBridge, odd: dict[str, Any]) -> None:
    """Issue 41, 5: an initializeByVersion that was an int or a string gave bridge_error
    with a traceback. Such a catalog is none: the app is started, as without one."""
    cache(**{"initialize": INITIALIZE, "lists": {"tools/list": TOOLS}, **odd})
    (reply, listed), starter = await initialize_and_list_with_the_app_down(run_bridge)
    assert "result" in reply and "result" in listed, (reply, listed)
    assert starter.calls == 1


LEGACY_INIT = request_line(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "codex", "version": "0"}})


async def test_a_list_a_tools_only_app_does_not_declare_is_refused_from_the_catalog_as_the_app_did(
    run_bridge: RunBridge, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 41, point 10: Codex asks ``resources/list`` and ``resources/templates/list`` at
    every start. The app's ``initialize`` declares ``tools`` only: the catalog answers them
    with the app's own error as it last gave it (``refusedLists``), and the app is not
    started; the first call starts it, and the log line names that call."""
    refused = {"code": -32601, "message": "method not found: resources/list"}
    templates = {"code": -32601, "message": "Method not found"}
    cache(
        initialize=INITIALIZE,
        lists={"tools/list": TOOLS},
        refusedLists={"resources/list": refused, "resources/templates/list": templates, "prompts/list": templates},
    )
    app = McpApp(tools=TOOLS["tools"])
    app.up = False
    starter = Starter(app)
    caplog.set_level("INFO", logger="bridge")
    async with run_bridge(app, ensure_running=starter, app_probe=starter.probe) as h:
        h.stdin.feed(
            LEGACY_INIT
            + request_line(1, "resources/list")
            + request_line(2, "resources/templates/list")
            + request_line(3, "prompts/list")
            + request_line(4, "tools/list")
        )
        replies = {reply["id"]: reply for reply in await h.stdout.wait_for(5)}
        assert starter.calls == 0 and not app.up
        h.stdin.feed(request_line(5, "tools/call", {"name": "cached", "arguments": {}}))
        (*_, call) = await h.stdout.wait_for(6)
    assert replies[0]["result"] == INITIALIZE
    assert replies[1]["error"] == refused
    assert replies[2]["error"] == templates and replies[3]["error"] == templates
    assert replies[4]["result"] == TOOLS
    assert call["id"] == 5 and "result" in call and starter.calls == 1, call
    assert any("tools/call (id 5)" in record.getMessage() and "starting it" in record.getMessage() for record in caplog.records), caplog.text


async def test_the_apps_own_refusal_of_an_undeclared_list_is_kept_in_the_catalog(run_bridge: RunBridge) -> None:
    """The first day: the app is up, answers ``resources/list`` with its error; the catalog
    keeps it (code and message only) because the app declares no ``resources`` capability."""
    refused = {"code": -32601, "message": "method not found: resources/list", "data": {"x": 1}}

    def on_request(message: dict[str, Any], request: Any) -> Any:
        from support.helpers import json_response

        if message["method"] == "resources/list":
            return json_response({"jsonrpc": "2.0", "id": message["id"], "error": refused})
        return json_response({"jsonrpc": "2.0", "id": message["id"], "result": TOOLS})

    app = McpApp(capabilities={"tools": {}}, on_request=on_request)
    starter = Starter(app)
    async with run_bridge(app, ensure_running=starter, app_probe=starter.probe) as h:
        h.stdin.feed(LEGACY_INIT + request_line(1, "resources/list"))
        (_, reply) = await h.stdout.wait_for(2)
    assert reply["error"] == refused
    entry = ServedCatalog(DEFAULT_APP_NAME, URL).entry()
    assert entry is not None and entry["refusedLists"] == {"resources/list": {"code": -32601, "message": "method not found: resources/list"}}


async def test_the_trace_says_per_message_direction_method_id_size_time_and_who_answered(
    run_bridge: RunBridge, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 41, point 12: at ``--log-level debug`` one ``bridge.trace`` line per message:
    direction, method, id, size, time, and who answered (the app, the catalog or the bridge);
    never params or results."""
    cache(initialize=INITIALIZE, lists={"tools/list": TOOLS})
    secret_param, secret_result = "param-s3cr3t", "result-s3cr3t"

    def on_request(message: dict[str, Any], request: Any) -> Any:
        from support.helpers import json_response

        return json_response({"jsonrpc": "2.0", "id": message["id"], "result": {"content": [{"type": "text", "text": secret_result}]}})

    app = McpApp(capabilities={"tools": {}}, on_request=on_request)
    app.up = False
    starter = Starter(app)
    caplog.set_level("DEBUG", logger="bridge.trace")
    async with run_bridge(app, ensure_running=starter, app_probe=starter.probe) as h:
        h.stdin.feed(LEGACY_INIT + request_line(1, "tools/list") + b'{"jsonrpc":"2.0","id":2}\n')
        await h.stdout.wait_for(3)
        h.stdin.feed(request_line("c", "tools/call", {"name": "echo", "arguments": {"text": secret_param}}))
        await h.stdout.wait_for(4)
    lines = [record.getMessage() for record in caplog.records if record.name == "bridge.trace"]
    text = "\n".join(lines)
    assert secret_param not in text and secret_result not in text, text
    assert any(line.startswith("client→app request initialize id 0 (") for line in lines), text
    assert any(line.startswith("bridge→client reply to initialize id 0 (") and line.endswith("answered by the catalog") for line in lines), text
    assert any(line.startswith("bridge→client reply to tools/list id 1 (") and "answered by the catalog" in line for line in lines), text
    assert "client→app invalid message (24 bytes)" in lines, text
    assert any(line.startswith("bridge→client reply id 2 (") and line.endswith("answered by the bridge") for line in lines), text
    call = [line for line in lines if line.startswith('bridge→client reply to tools/call id "c" (')]
    assert len(call) == 1 and " ms, answered by the app" in call[0] and " bytes) after " in call[0], text
