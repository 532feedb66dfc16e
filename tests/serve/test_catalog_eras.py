"""Lazy launch across protocol eras (docs/behaviour.md, "Lazy launch" and "Protocol eras"):
what a catalog answers while the app is down when the client and the app are of different
eras, and which protocol versions it answers ``initialize`` for."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest
from support.helpers import NOTIF_INIT, URL, RunBridge, init, request_line
from support.mcp_app import McpApp, Starter

from bridge.app.servedcatalog import ServedCatalog
from bridge.core.config import DEFAULT_APP_NAME

pytestmark = pytest.mark.anyio

MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"}}
SERVER_INFO = {"name": "modern-app", "version": "2.0"}
DONE = {"resultType": "complete", "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO}}
DISCOVER = {**DONE, "supportedVersions": [MODERN], "capabilities": {"tools": {"listChanged": True}}, "instructions": "modern only"}
CACHED_TOOLS = {**DONE, "tools": [{"name": "cached", "inputSchema": {"type": "object"}}], "ttlMs": 0, "cacheScope": "private"}
INITIALIZE = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "scripted", "version": "1"}}
TOOLS = {"tools": [{"name": "cached", "inputSchema": {"type": "object"}}]}



class ModernOnlyApp:
    """A stateless app of 2026-07-28 alone, down until started: ``initialize`` (any request
    without the era's ``_meta``) gets 400 with -32022; ``tools/list`` lists ``tools``."""

    def __init__(self) -> None:
        self.up = False
        self.methods: list[str] = []
        self.tools = [{"name": "echo", "inputSchema": {"type": "object"}}]

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        if not self.up:
            raise httpx.ConnectError("All connection attempts failed")
        if request.method != "POST":
            return httpx.Response(405)
        message = json.loads(request.content)
        self.methods.append(str(message.get("method")))
        if "id" not in message:
            return httpx.Response(202)
        meta = (message.get("params") or {}).get("_meta") or {}
        if meta.get("io.modelcontextprotocol/protocolVersion") != MODERN:
            error = {"code": -32022, "message": "Unsupported protocol version", "data": {"supported": [MODERN]}}
            return httpx.Response(400, json={"jsonrpc": "2.0", "id": message["id"], "error": error})
        method = message["method"]
        if method == "server/discover":
            result: dict[str, Any] = DISCOVER
        elif method == "tools/list":
            result = {**DONE, "tools": self.tools, "ttlMs": 0, "cacheScope": "private"}
        elif method == "tools/call":
            result = {**DONE, "content": [{"type": "text", "text": "called"}]}
        else:
            return httpx.Response(404, json={"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "Method not found"}})
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": message["id"], "result": result})


def cache(**parts: Any) -> None:
    entry = {"format": 1, "app": DEFAULT_APP_NAME, "endpoint": URL, "savedAtSeconds": 1.0, "initialize": None, "discover": None, "lists": {}}
    ServedCatalog(DEFAULT_APP_NAME, URL).replace({**entry, **parts})


def cached() -> dict[str, Any]:
    entry = ServedCatalog(DEFAULT_APP_NAME, URL).entry()
    assert entry is not None
    return entry


def modern(request_id: Any, method: str, params: dict[str, Any] | None = None) -> bytes:
    return request_line(request_id, method, {**(params or {}), "_meta": dict(META)})


def initialize(request_id: Any, version: str) -> bytes:
    return request_line(request_id, "initialize", {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}})


# -- a 2025-era client with a 2026-07-28-only app ------------------------------------------


@pytest.mark.slow
async def test_a_2025_client_of_a_2026_only_app_is_answered_from_the_catalog_and_the_first_call_starts_it(run_bridge: RunBridge) -> None:
    """The catalog records that the app refuses ``initialize``: the client's ``initialize``
    is answered from the cached ``server/discover`` (translated), its probes too, and the app
    starts on the first call, after which the lists that changed are announced. Before, the
    ``initialize`` started the app at once (the catalog held no ``initialize`` result)."""
    cache(discover=DISCOVER, lists={"tools/list": CACHED_TOOLS}, refusesInitialize=True)
    app = ModernOnlyApp()
    starter = Starter(app)
    async with run_bridge(app, ensure_running=starter, app_probe=starter.probe) as h:
        h.stdin.feed(init(0))
        (reply,) = await h.stdout.wait_for(1)
        h.stdin.feed(NOTIF_INIT + request_line(1, "tools/list") + request_line(2, "ping"))
        probes = {m["id"]: m for m in (await h.stdout.wait_for(3))[1:]}
        assert starter.calls == 0 and app.methods == []
        h.stdin.feed(request_line(3, "tools/call", {"name": "echo", "arguments": {}}))
        after = (await h.stdout.wait_for(5))[3:]
    assert reply["result"] == {
        "protocolVersion": "2025-06-18",
        "capabilities": {"tools": {"listChanged": True}},
        "serverInfo": SERVER_INFO,
        "instructions": "modern only",
    }
    assert probes[1]["result"]["tools"] == CACHED_TOOLS["tools"] and probes[2]["result"] == {}
    assert starter.calls == 1
    # The live app lists "echo", not "cached": the client is told, before the call's reply.
    assert after[0] == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    assert after[1]["id"] == 3 and after[1]["result"]["content"][0]["text"] == "called"
    assert "initialize" not in app.methods
    assert cached()["lists"]["tools/list"]["tools"] == app.tools


async def test_the_catalog_learns_that_the_app_refuses_initialize(run_bridge: RunBridge) -> None:
    app = ModernOnlyApp()
    app.up = True
    starter = Starter(app)
    async with run_bridge(app, ensure_running=starter, app_probe=starter.probe) as h:
        h.stdin.feed(init(0))
        (reply,) = await h.stdout.wait_for(1)
    assert reply["result"]["serverInfo"] == SERVER_INFO
    entry = cached()
    assert entry["refusesInitialize"] is True and entry["discover"]["supportedVersions"] == [MODERN]


async def test_without_the_mark_a_2025_client_of_a_2026_only_app_starts_it(run_bridge: RunBridge) -> None:
    cache(discover=DISCOVER, lists={"tools/list": CACHED_TOOLS})
    app = ModernOnlyApp()
    starter = Starter(app)
    async with run_bridge(app, ensure_running=starter, app_probe=starter.probe) as h:
        h.stdin.feed(init(0))
        (reply,) = await h.stdout.wait_for(1)
    assert reply["result"]["serverInfo"] == SERVER_INFO and starter.calls == 1


async def test_after_an_update_to_2026_only_a_session_answered_from_the_catalog_is_translated(run_bridge: RunBridge) -> None:
    """Issue 41, 4: the catalog holds the 2025-era app's ``initialize``; the app, updated,
    serves 2026-07-28 only. The replayed ``initialize`` is refused: before, that call and
    every later one of the session got ``session_lost``. Now the bridge probes
    ``server/discover``, translates from that call on, and marks the catalog."""
    cache(initialize={**INITIALIZE, "protocolVersion": "2025-06-18"}, lists={"tools/list": TOOLS})
    app = ModernOnlyApp()
    starter = Starter(app)
    async with run_bridge(app, ensure_running=starter, app_probe=starter.probe) as h:
        h.stdin.feed(init(0))
        (reply,) = await h.stdout.wait_for(1)
        assert reply["result"]["serverInfo"] == INITIALIZE["serverInfo"] and starter.calls == 0  # from the catalog
        h.stdin.feed(NOTIF_INIT + request_line(1, "tools/call", {"name": "echo", "arguments": {}}))
        (changed, first) = (await h.stdout.wait_for(3))[1:]
        h.stdin.feed(request_line(2, "tools/call", {"name": "echo", "arguments": {}}) + request_line(3, "tools/list"))
        later = {m["id"]: m for m in (await h.stdout.wait_for(5))[3:]}
    # The live app lists "echo", not "cached": the client is told, before the call's reply.
    assert changed == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    assert first["id"] == 1 and first["result"]["content"][0]["text"] == "called", first
    assert later[2]["result"]["content"][0]["text"] == "called", later
    assert [tool["name"] for tool in later[3]["result"]["tools"]] == ["echo"]
    assert starter.calls == 1 and app.methods.count("initialize") == 2  # the replay, and the translation's own try
    entry = cached()
    assert entry["refusesInitialize"] is True and entry["discover"]["supportedVersions"] == [MODERN]


class BrokenApp:
    """Down until started; then refuses ``initialize`` with -32603 and knows no
    ``server/discover``: no 2026-07-28 app either."""

    def __init__(self) -> None:
        self.up = False
        self.methods: list[str] = []

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        if not self.up:
            raise httpx.ConnectError("All connection attempts failed")
        message = json.loads(request.content)
        self.methods.append(str(message.get("method")))
        if "id" not in message:
            return httpx.Response(202)
        error = {"code": -32603, "message": "broken"} if message["method"] == "initialize" else {"code": -32601, "message": "Method not found"}
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": message["id"], "error": error})


async def test_an_app_that_refuses_the_replay_and_is_no_2026_app_gets_session_lost_each_time(run_bridge: RunBridge) -> None:
    cache(initialize={**INITIALIZE, "protocolVersion": "2025-06-18"}, lists={"tools/list": TOOLS})
    app = BrokenApp()
    starter = Starter(app)
    async with run_bridge(app, ensure_running=starter, app_probe=starter.probe) as h:
        h.stdin.feed(init(0))
        await h.stdout.wait_for(1)
        h.stdin.feed(request_line(1, "tools/call", {"name": "echo", "arguments": {}}))
        (first,) = (await h.stdout.wait_for(2))[1:]
        h.stdin.feed(request_line(2, "tools/call", {"name": "echo", "arguments": {}}))
        (second,) = (await h.stdout.wait_for(3))[2:]
    assert first["error"]["data"]["reason"] == second["error"]["data"]["reason"] == "session_lost", (first, second)
    assert app.methods.count("initialize") == 4 and "tools/call" not in app.methods  # each call: the replay, the translation's try
    assert "refusesInitialize" not in cached()


# -- a 2026-07-28 client with a legacy-only app --------------------------------------------


async def test_a_2026_probe_of_a_legacy_only_app_is_refused_from_the_catalog_and_the_fallback_answered(run_bridge: RunBridge) -> None:
    """With the app down, the catalog answers a ``server/discover`` probe as the app would
    (a refusal: the client falls back to ``initialize``), and that ``initialize`` too."""
    cache(initialize=INITIALIZE, lists={"tools/list": TOOLS}, refusesDiscover={"code": -32601, "message": "Method not found"})
    app = McpApp()
    app.up = False
    starter = Starter(app)
    async with run_bridge(app, ensure_running=starter, app_probe=starter.probe) as h:
        h.stdin.feed(modern(1, "server/discover"))
        (probe,) = await h.stdout.wait_for(1)
        h.stdin.feed(initialize(2, "2025-11-25"))
        (_, init_reply) = await h.stdout.wait_for(2)
    assert probe["id"] == 1 and probe["error"]["code"] == -32601, probe
    assert init_reply["result"] == INITIALIZE
    assert starter.calls == 0 and app.requests == []


async def test_the_catalog_learns_that_the_app_refuses_server_discover(run_bridge: RunBridge) -> None:
    def refuse(message: dict[str, Any], request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "Method not found"}})

    app = McpApp(stateless=True, on_request=refuse)
    async with run_bridge(app, ensure_running=lambda: None, app_probe=lambda url: True) as h:
        h.stdin.feed(modern(1, "server/discover"))
        (probe,) = await h.stdout.wait_for(1)
        h.stdin.feed(initialize(2, "2025-06-18"))
        await h.stdout.wait_for(2)
    assert probe["error"]["code"] == -32601
    entry = cached()
    assert entry["refusesDiscover"] == {"code": -32601, "message": "Method not found"} and entry["initialize"] is not None


# -- which protocol versions the catalog answers -------------------------------------------


async def test_a_client_of_another_2025_version_is_answered_from_the_catalog(run_bridge: RunBridge) -> None:
    """Claude Desktop asks for 2025-11-25 and Codex for 2025-06-18: a catalog cached by one
    answers the other (negotiated as the app does), so neither starts the app. Before, only
    the exact version cached was answered."""
    cache(initialize=INITIALIZE, lists={"tools/list": TOOLS})
    app = McpApp(tools=TOOLS["tools"])
    app.up = False
    starter = Starter(app)
    async with run_bridge(app, ensure_running=starter, app_probe=starter.probe) as h:
        h.stdin.feed(initialize(0, "2025-06-18"))
        (reply,) = await h.stdout.wait_for(1)
        assert starter.calls == 0
        h.stdin.feed(NOTIF_INIT + request_line(1, "tools/call", {"name": "cached", "arguments": {}}))
        (_, call) = await h.stdout.wait_for(2)
    assert reply["result"] == {**INITIALIZE, "protocolVersion": "2025-06-18"}
    assert "result" in call and starter.calls == 1


async def test_why_the_catalog_did_not_answer_is_logged(run_bridge: RunBridge, caplog: pytest.LogCaptureFixture) -> None:
    cache(initialize={**INITIALIZE, "protocolVersion": "2025-03-26"})
    app = McpApp()
    app.up = False
    starter = Starter(app)
    with caplog.at_level(logging.INFO, logger="bridge"):
        async with run_bridge(app, ensure_running=starter, app_probe=starter.probe) as h:
            h.stdin.feed(initialize(0, "2025-11-25"))
            await h.stdout.wait_for(1)
    assert starter.calls == 1
    assert any("catalog does not answer initialize" in r.getMessage() and "2025-11-25" in r.getMessage() for r in caplog.records), caplog.text


# -- lists given in the client's era --------------------------------------------------------


async def test_a_list_cached_from_a_2026_session_reaches_a_2025_client_without_the_2026_members(run_bridge: RunBridge) -> None:
    cache(initialize=INITIALIZE, lists={"tools/list": {**TOOLS, "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}})
    app = McpApp()
    app.up = False
    starter = Starter(app)
    async with run_bridge(app, ensure_running=starter, app_probe=starter.probe) as h:
        h.stdin.feed(initialize(0, "2025-11-25") + request_line(1, "tools/list"))
        (_, listing) = await h.stdout.wait_for(2)
    assert listing["result"] == TOOLS and starter.calls == 0


async def test_a_list_from_the_catalog_does_not_make_a_legacy_only_app_look_2026(run_bridge: RunBridge) -> None:
    """A 2026-07-28 client that never probes (the official SDK pinned to 2026-07-28): its
    ``tools/list`` answered from the catalog proves nothing about the app's era, so its
    first call, refused by the legacy-only app for want of a session once it started, is
    translated. Before, the catalog's answer counted as the app's, and the call got the
    app's "Missing session ID"."""

    def legacy_only(message: dict[str, Any], request: httpx.Request) -> httpx.Response:
        meta = (message.get("params") or {}).get("_meta") or {}
        if meta.get("io.modelcontextprotocol/protocolVersion") == MODERN and "mcp-session-id" not in request.headers:
            return httpx.Response(400, json={"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Bad Request: Missing session ID"}})
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": message["id"], "result": {"content": [{"type": "text", "text": "legacy"}]}})

    cache(initialize=INITIALIZE, lists={"tools/list": TOOLS}, refusesDiscover=True)
    app = McpApp(on_request=legacy_only)
    app.up = False
    starter = Starter(app)
    async with run_bridge(app, ensure_running=starter, app_probe=starter.probe) as h:
        h.stdin.feed(modern(1, "tools/list"))
        (listing,) = await h.stdout.wait_for(1)
        assert starter.calls == 0
        h.stdin.feed(modern(2, "tools/call", {"name": "cached", "arguments": {}}))
        (_, call) = await h.stdout.wait_for(2)
    assert listing["result"] == {**TOOLS, "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}
    assert call["result"]["content"][0]["text"] == "legacy" and call["result"]["resultType"] == "complete", call
    assert starter.calls == 1


async def test_an_app_that_answers_initialize_again_is_not_translated_for_a_stale_mark(run_bridge: RunBridge) -> None:
    """The catalog says the app refuses ``initialize``, but the running app (updated since)
    serves the 2025 era only: the client's ``initialize`` goes to it after all, and the
    mark goes."""

    def refuse_discover(message: dict[str, Any], request: httpx.Request) -> httpx.Response:
        return httpx.Response(405, text="Method Not Allowed")  # no JSON-RPC: an HTTP refusal

    cache(discover=DISCOVER, refusesInitialize=True)
    app = McpApp(on_request=refuse_discover)
    async with run_bridge(app, ensure_running=lambda: None, app_probe=lambda url: True) as h:
        h.stdin.feed(init(0))
        (reply,) = await h.stdout.wait_for(1)
    assert reply["result"]["serverInfo"]["name"] == "scripted", reply
    assert "refusesInitialize" not in cached()


async def test_under_protocol_era_legacy_a_2026_probe_is_answered_translated_from_the_cached_initialize(run_bridge: RunBridge) -> None:
    """``--protocol-era legacy`` translates every 2026-07-28 client: with the app down, its
    ``server/discover`` is answered from the ``initialize`` result the catalog gives for
    2025-11-25 (the version the bridge asks for), and its lists in its era."""
    cache(initialize=INITIALIZE, lists={"tools/list": TOOLS}, refusesDiscover=True)
    app = McpApp(tools=TOOLS["tools"])
    app.up = False
    starter = Starter(app)
    async with run_bridge(app, ensure_running=starter, app_probe=starter.probe, protocol_era="legacy") as h:
        h.stdin.feed(modern(1, "server/discover"))
        (probe,) = await h.stdout.wait_for(1)
        h.stdin.feed(modern(2, "tools/list"))
        (_, listing) = await h.stdout.wait_for(2)
    assert probe["result"]["capabilities"] == INITIALIZE["capabilities"]
    assert probe["result"]["_meta"]["io.modelcontextprotocol/serverInfo"] == INITIALIZE["serverInfo"]
    assert listing["result"]["tools"] == TOOLS["tools"] and listing["result"]["resultType"] == "complete"
    assert starter.calls == 0
