"""A 2026-07-28 client with a legacy-only app (issue: "every client with every app"): the
bridge answers ``server/discover`` from the app's ``initialize`` and keeps the session
behind it (docs/behaviour.md, "Protocol eras")."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from support.helpers import RunBridge, json_response, request_line
from support.legacy_app import CLIENT_INFO, META, MODERN, LegacyOnlyApp
from support.mcp_app import McpApp

from bridge.core.legacymap import (
    discover_result,
    initialize_params,
    is_legacy_refusal,
    legacy_params,
    modern_result,
)

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("wire")]


def modern(request_id: Any, method: str, params: dict[str, Any] | None = None) -> bytes:
    return request_line(request_id, method, {**(params or {}), "_meta": dict(META)})


@pytest.mark.parametrize("refusal", ["-32601", "400", "405"])
async def test_discover_is_answered_from_initialize_and_requests_go_within_the_session(run_bridge: RunBridge, refusal: str) -> None:
    app = LegacyOnlyApp(refusal, tools=[{"name": "echo", "inputSchema": {"type": "object"}}])
    async with run_bridge(app, protocol_era="legacy") as h:
        h.stdin.feed(modern(1, "server/discover"))
        (discovered,) = await h.stdout.wait_for(1)
        h.stdin.feed(modern(2, "tools/list") + modern(3, "tools/call", {"name": "echo", "arguments": {}}))
        replies = {m["id"]: m for m in await h.stdout.wait_for(3)}
    assert discovered["id"] == 1
    assert discovered["result"]["supportedVersions"] == [MODERN]
    assert discovered["result"]["capabilities"] == {"tools": {"listChanged": True}}
    assert discovered["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "legacy-app"
    assert replies[2]["result"] == {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}],
                                    "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}
    assert replies[3]["result"]["resultType"] == "complete"
    init = [body for body in app.bodies if body.get("method") == "initialize"]
    assert len(init) == 1 and init[0]["params"]["clientInfo"] == CLIENT_INFO
    assert init[0]["params"]["capabilities"] == {"elicitation": {}}
    sessions = {r.headers.get("mcp-session-id") for r in app.posts if json.loads(r.content).get("method") in ("tools/list", "tools/call")}
    assert sessions == {"sess-1"}


async def test_a_client_that_pinned_its_version_is_probed_for_by_the_bridge(run_bridge: RunBridge) -> None:
    """A client that adopts 2026-07-28 without a probe (the official SDK's ``mode="2026-07-28"``)
    sends tools/list first: the bridge probes on its behalf, then translates."""
    app = LegacyOnlyApp(tools=[{"name": "echo", "inputSchema": {"type": "object"}}])
    async with run_bridge(app, protocol_era="auto") as h:
        h.stdin.feed(modern(1, "tools/list"))
        (reply,) = await h.stdout.wait_for(1)
    assert reply["id"] == 1 and reply["result"]["tools"][0]["name"] == "echo"
    methods = [json.loads(r.content).get("method") for r in app.posts]
    # (auto: the request went as it was first; refused for want of a session, it is translated)
    assert methods == ["tools/list", "server/discover", "initialize", "notifications/initialized", "tools/list"]


async def test_a_second_discover_is_answered_without_another_initialize(run_bridge: RunBridge) -> None:
    app = LegacyOnlyApp()
    async with run_bridge(app, protocol_era="legacy") as h:
        h.stdin.feed(modern(1, "server/discover"))
        await h.stdout.wait_for(1)
        h.stdin.feed(modern(2, "server/discover"))
        again = (await h.stdout.wait_for(2))[-1]
    assert again["id"] == 2 and again["result"]["supportedVersions"] == [MODERN]
    assert sum(body.get("method") == "initialize" for body in app.bodies) == 1


async def test_a_lost_session_is_rebuilt_for_the_translated_client(run_bridge: RunBridge) -> None:
    app = LegacyOnlyApp()
    async with run_bridge(app, protocol_era="legacy") as h:
        h.stdin.feed(modern(1, "server/discover"))
        await h.stdout.wait_for(1)
        app.restart()
        h.stdin.feed(modern(2, "tools/list"))
        messages = await h.stdout.wait_for(2)
    (reply,) = [m for m in messages if m.get("id") == 2]
    assert reply["result"]["instance"] == 2
    # 2026-07-28 has change notifications only on a listen stream (whose client hears of the
    # lost session by the listen's error): no bare list_changed, as a legacy client gets.
    assert not any("method" in m for m in messages)
    assert sum(body.get("method") == "initialize" for body in app.bodies) == 2


async def test_a_modern_app_is_not_translated(run_bridge: RunBridge) -> None:
    app = McpApp(result={"supportedVersions": [MODERN], "capabilities": {}})
    async with run_bridge(app, protocol_era="auto") as h:
        h.stdin.feed(modern(1, "server/discover"))
        (reply,) = await h.stdout.wait_for(1)
        h.stdin.feed(modern(2, "tools/list"))
        await h.stdout.wait_for(2)
    assert reply["result"]["supportedVersions"] == [MODERN]
    assert not any(body.get("method") == "initialize" for body in app.bodies)
    assert all("mcp-session-id" not in r.headers for r in app.posts)


async def test_an_app_that_refuses_initialize_too_leaves_the_probe_refused(run_bridge: RunBridge) -> None:
    def refuses_everything(request: httpx.Request) -> httpx.Response:
        message = json.loads(request.content)
        return json_response({"jsonrpc": "2.0", "id": message.get("id"), "error": {"code": -32601, "message": "Method not found"}})

    async with run_bridge(refuses_everything, protocol_era="auto") as h:
        h.stdin.feed(modern(1, "server/discover"))
        (reply,) = await h.stdout.wait_for(1)
    assert reply == {"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "Method not found"}}


async def test_legacy_with_an_app_that_refuses_initialize_names_the_option(run_bridge: RunBridge) -> None:
    """``--protocol-era legacy`` with an app that refuses ``initialize`` (a 2026-07-28-only
    app): the probe gets a -32603 with ``data.reason`` ``protocol_era`` and the fix."""

    def refuses_everything(request: httpx.Request) -> httpx.Response:
        message = json.loads(request.content)
        error = {"code": -32022, "message": "Unsupported protocol version"}
        return json_response({"jsonrpc": "2.0", "id": message.get("id"), "error": error}, 400)

    async with run_bridge(refuses_everything, protocol_era="legacy") as h:
        h.stdin.feed(modern(1, "server/discover"))
        (reply,) = await h.stdout.wait_for(1)
    assert reply["id"] == 1 and reply["error"]["code"] == -32603
    assert reply["error"]["data"] == {"source": "bridge", "reason": "protocol_era"}
    assert "--protocol-era auto" in reply["error"]["message"]


async def test_legacy_with_a_2026_only_app_refuses_every_request_alike_and_asks_once(
    run_bridge: RunBridge, caplog: pytest.LogCaptureFixture
) -> None:
    """``--protocol-era legacy`` with a 2026-07-28-only app: not only the probe but every
    later request gets the same ``protocol_era`` error, none is sent to the app untranslated
    (a newcomer saw ``server/discover`` fail and ``tools/call`` then succeed, with a warning
    quoting the app's raw reply at each request), and ``initialize`` is tried once."""
    sent: list[dict[str, Any]] = []

    def modern_only(request: httpx.Request) -> httpx.Response:
        message = json.loads(request.content)
        sent.append(message)
        if message.get("method") == "initialize":
            error = {"code": -32022, "message": "Unsupported protocol version", "data": {"supported": [MODERN]}}
            return json_response({"jsonrpc": "2.0", "id": message["id"], "error": error}, 400)
        return json_response({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": [], "resultType": "complete"}})

    async with run_bridge(modern_only, protocol_era="legacy") as h:
        h.stdin.feed(modern(1, "server/discover"))
        await h.stdout.wait_for(1)
        h.stdin.feed(modern(2, "tools/list") + modern(3, "tools/call", {"name": "echo", "arguments": {}}))
        replies = {m["id"]: m for m in await h.stdout.wait_for(3)}
    for request_id in (1, 2, 3):
        assert replies[request_id]["error"]["data"] == {"source": "bridge", "reason": "protocol_era"}, replies[request_id]
        assert "--protocol-era auto" in replies[request_id]["error"]["message"]
    assert [m.get("method") for m in sent] == ["initialize"]
    warnings = [r.getMessage() for r in caplog.records if r.getMessage().startswith("the app refused the bridge's initialize")]
    assert warnings == ["the app refused the bridge's initialize for a 2026-07-28 client: JSON-RPC error -32022: Unsupported protocol version"]


async def test_legacy_with_an_app_failing_initialize_keeps_the_failures_own_reason(run_bridge: RunBridge) -> None:
    """``--protocol-era legacy``: an ``initialize`` that fails for another cause than a refusal
    (here HTTP 503 with no ``Retry-After``) gets that cause's reason, not ``protocol_era``."""

    def unavailable(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, text="busy")

    async with run_bridge(unavailable, protocol_era="legacy") as h:
        h.stdin.feed(modern(1, "server/discover"))
        (reply,) = await h.stdout.wait_for(1)
    assert reply["id"] == 1 and reply["error"]["data"]["reason"] == "http_status", reply


async def test_without_the_option_the_refusal_reaches_the_client(run_bridge: RunBridge) -> None:
    """``--protocol-era auto`` (the default): a client's own probe gets the app's refusal, so
    a dual-era client falls back to ``initialize``, keeping what the translation does not
    map yet."""
    app = LegacyOnlyApp()
    async with run_bridge(app) as h:
        h.stdin.feed(modern(1, "server/discover"))
        (reply,) = await h.stdout.wait_for(1)
    assert reply["error"]["code"] == -32601
    assert not any(body.get("method") == "initialize" for body in app.bodies)


# -- the pure rules ------------------------------------------------------------------------------------------


def test_which_discover_refusals_mean_legacy() -> None:
    assert is_legacy_refusal({"error": {"code": -32601, "message": "Method not found"}})
    assert is_legacy_refusal({"error": {"code": -32600, "message": "Bad Request: Missing session ID"}})
    assert not is_legacy_refusal({"error": {"code": -32022, "message": "Unsupported", "data": {"supported": [MODERN]}}})
    assert not is_legacy_refusal({"result": {"supportedVersions": [MODERN]}})


def test_the_mapping_both_ways() -> None:
    params = initialize_params({"_meta": META}, "0.1.0")
    assert params == {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}, "clientInfo": CLIENT_INFO}
    assert initialize_params(None, "0.1.0")["clientInfo"] == {"name": "mcp-app-bridge", "version": "0.1.0"}
    init = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "a", "version": "1"}, "instructions": "hi"}
    assert discover_result(init, MODERN) == {
        "supportedVersions": [MODERN], "capabilities": {"tools": {}}, "instructions": "hi",
        "resultType": "complete", "ttlMs": 0, "cacheScope": "private",
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "a", "version": "1"}},
    }
    assert legacy_params({"name": "t", "_meta": {**META, "progressToken": 3}}) == {"name": "t", "_meta": {"progressToken": 3}}
    assert legacy_params({"name": "t", "_meta": dict(META)}) == {"name": "t"}


def test_legacy_results_get_the_fields_2026_requires() -> None:
    """The official SDK's 2026-07-28 client refuses a list result without ``resultType``,
    ``ttlMs`` and ``cacheScope`` (found by the process test with the real client)."""
    assert modern_result("tools/list", {"tools": []}) == {"tools": [], "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}
    assert modern_result("tools/call", {"content": []}) == {"content": [], "resultType": "complete"}
    assert modern_result("resources/read", {"contents": [], "ttlMs": 5})["ttlMs"] == 5  # the app's own kept
