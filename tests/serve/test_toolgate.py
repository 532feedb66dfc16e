"""The tool filter through a running bridge (docs/usage.md, "Which tools a client sees"):
``--allow-tool``, ``--deny-tool`` and ``--read-only`` hold for every reply path (the app's
live reply, the lazy-launch catalog's, merged pages, a translated one, in both eras), a
filtered ``tools/call`` never reaches the app, and ``notifications/tools/list_changed``
still reaches the client."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest
from support.helpers import NOTIF_INIT, URL, RunBridge, event, init, json_response, request_line, sse
from support.legacy_app import META, LegacyOnlyApp
from support.mcp_app import MODERN, McpApp, Starter

from bridge.app.servedcatalog import ServedCatalog
from bridge.core.config import DEFAULT_APP_NAME

pytestmark = pytest.mark.anyio


def tool(name: str, *, read_only: bool | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "inputSchema": {"type": "object"}}
    if read_only is not None:
        entry["annotations"] = {"readOnlyHint": read_only}
    return entry


#: An app's tools: two that read, two that write.
TOOLS = [tool("get_doc", read_only=True), tool("delete_doc", read_only=False), tool("list_docs", read_only=True), tool("send_payment")]
NAMES = [t["name"] for t in TOOLS]


def names(reply: dict[str, Any]) -> list[str]:
    return [t["name"] for t in reply["result"]["tools"]]


async def take(h: Any, count: int) -> list[Any]:
    """The next ``count`` stdout messages after those taken before (the handshake's included)."""
    taken = getattr(h, "taken", 0)
    messages: list[Any] = (await h.replies(taken + count))[taken : taken + count]
    h.taken = taken + count
    return messages


async def handshake(h: Any) -> None:
    await h.handshake()
    h.taken = 1


def calls(app: McpApp) -> list[str]:
    """The tools the app was asked to run (counted by the app)."""
    return [body["params"]["name"] for body in app.bodies if body.get("method") == "tools/call"]


def modern(request_id: Any, method: str, params: dict[str, Any] | None = None) -> bytes:
    return request_line(request_id, method, {**(params or {}), "_meta": dict(META)})


def call(request_id: Any, name: str) -> bytes:
    return request_line(request_id, "tools/call", {"name": name, "arguments": {}})


# -- live, 2025 era -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "shown"),
    [
        ({"deny_tools": ("delete_*", "send_*")}, ["get_doc", "list_docs"]),
        ({"allow_tools": ("*_doc",)}, ["get_doc", "delete_doc"]),
        ({"allow_tools": ("*_doc",), "deny_tools": ("delete_*",)}, ["get_doc"]),  # deny wins
        ({"read_only": True}, ["get_doc", "list_docs"]),
        ({"allow_tools": ("GET_DOC",)}, []),  # case-sensitive
    ],
)
async def test_tools_list_gives_only_what_passes(run_bridge: RunBridge, options: dict[str, Any], shown: list[str]) -> None:
    app = McpApp(tools=TOOLS)
    async with run_bridge(app, **options) as h:
        await handshake(h)
        h.stdin.feed(request_line(1, "tools/list"))
        (reply,) = await take(h, 1)
    assert names(reply) == shown


async def test_without_a_filter_the_reply_is_the_apps_bytes(run_bridge: RunBridge) -> None:
    app = McpApp(tools=TOOLS)
    async with run_bridge(app) as h:
        await handshake(h)
        h.stdin.feed(request_line(1, "tools/list"))
        (reply,) = await take(h, 1)
    assert names(reply) == NAMES


@pytest.mark.parametrize(
    ("options", "name", "option"),
    [
        ({"deny_tools": ("delete_*",)}, "delete_doc", "--deny-tool"),
        ({"allow_tools": ("get_*",)}, "send_payment", "--allow-tool"),
        ({"read_only": True}, "delete_doc", "--read-only"),
        ({"read_only": True}, "never_listed", "--read-only"),  # annotations unknown: fail closed
    ],
)
async def test_a_filtered_call_never_reaches_the_app(run_bridge: RunBridge, options: dict[str, Any], name: str, option: str) -> None:
    app = McpApp(tools=TOOLS)
    async with run_bridge(app, **options) as h:
        await handshake(h)
        h.stdin.feed(request_line(1, "tools/list"))
        await take(h, 1)
        h.stdin.feed(call(2, name) + call(3, "get_doc"))
        replies = {m["id"]: m for m in await take(h, 2)}
    assert replies[2]["error"]["code"] == -32602
    assert replies[2]["error"]["data"] == {"source": "bridge", "reason": "tool_filtered", "option": option}
    assert option in replies[2]["error"]["message"] and name in replies[2]["error"]["message"]
    assert "result" in replies[3]
    assert calls(app) == ["get_doc"]  # the app ran the allowed call alone


async def test_the_read_only_verdict_follows_the_last_list(run_bridge: RunBridge) -> None:
    """A tool the app marks read-only after a change passes once the client listed again."""
    app = McpApp(tools=[tool("flip", read_only=False)])
    async with run_bridge(app, read_only=True) as h:
        await handshake(h)
        h.stdin.feed(request_line(1, "tools/list"))
        (first,) = await take(h, 1)
        h.stdin.feed(call(2, "flip"))
        (refused,) = await take(h, 1)
        app.tools = [tool("flip", read_only=True)]
        h.stdin.feed(request_line(3, "tools/list"))
        (second,) = await take(h, 1)
        h.stdin.feed(call(4, "flip"))
        (allowed,) = await take(h, 1)
        app.tools = [tool("other", read_only=True)]  # the app no longer serves it
        h.stdin.feed(request_line(5, "tools/list"))
        await take(h, 1)
        h.stdin.feed(call(6, "flip"))
        (gone,) = await take(h, 1)
    assert names(first) == [] and refused["error"]["data"]["reason"] == "tool_filtered"
    assert names(second) == ["flip"] and "result" in allowed and calls(app) == ["flip"]
    assert gone["error"]["data"]["option"] == "--read-only" and "in no tools/list" in gone["error"]["message"]


async def test_list_changed_still_reaches_the_client(run_bridge: RunBridge) -> None:
    def on_request(message: dict[str, Any], request: httpx.Request) -> httpx.Response:
        if message["method"] == "tools/call":
            done = {"jsonrpc": "2.0", "id": message["id"], "result": {"content": []}}
            return sse(event({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}), event(done))
        return json_response({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": TOOLS}})

    app = McpApp(on_request=on_request)
    async with run_bridge(app, deny_tools=("delete_*",)) as h:
        await handshake(h)
        h.stdin.feed(call(1, "get_doc"))
        notice, reply = await take(h, 2)
    assert notice == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    assert reply["id"] == 1 and "result" in reply


async def test_a_filter_that_leaves_no_tool_fails_closed_with_a_warning(run_bridge: RunBridge, caplog: pytest.LogCaptureFixture) -> None:
    app = McpApp(tools=TOOLS)
    with caplog.at_level(logging.INFO, logger="bridge"):
        async with run_bridge(app, allow_tools=("nothing_*",)) as h:
            await handshake(h)
            h.stdin.feed(request_line(1, "tools/list") + request_line(2, "tools/list"))
            replies = await take(h, 2)
    assert [names(reply) for reply in replies] == [[], []]
    lines = [r for r in caplog.records if "hides all 4" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno == logging.WARNING and "--allow-tool" in lines[0].getMessage()


async def test_denying_every_tool_is_logged_as_asked_for(run_bridge: RunBridge, caplog: pytest.LogCaptureFixture) -> None:
    app = McpApp(tools=TOOLS)
    with caplog.at_level(logging.INFO, logger="bridge"):
        async with run_bridge(app, deny_tools=("*",)) as h:
            await handshake(h)
            h.stdin.feed(request_line(1, "tools/list"))
            (reply,) = await take(h, 1)
    assert names(reply) == []
    (line,) = [r for r in caplog.records if "hides all 4" in r.getMessage()]
    assert line.levelno == logging.INFO


# -- 2026-07-28 ----------------------------------------------------------------------------


async def test_a_2026_client_of_a_2026_app_gets_the_filtered_list_marked_private(run_bridge: RunBridge) -> None:
    """The app's ``cacheScope: "public"`` would let a shared cache serve this bridge's view to
    others: a filtered list is marked ``"private"``."""

    def on_request(message: dict[str, Any], request: httpx.Request) -> httpx.Response:
        if message["method"] == "tools/list":
            result = {"resultType": "complete", "tools": TOOLS, "ttlMs": 60000, "cacheScope": "public"}
        else:
            result = {"resultType": "complete", "content": []}
        return json_response({"jsonrpc": "2.0", "id": message["id"], "result": result})

    app = McpApp(stateless=True, on_request=on_request)
    async with run_bridge(app, deny_tools=("delete_*", "send_*")) as h:
        h.stdin.feed(modern(1, "tools/list") + modern(2, "tools/call", {"name": "send_payment", "arguments": {}}))
        replies = {m["id"]: m for m in await take(h, 2)}
    assert names(replies[1]) == ["get_doc", "list_docs"]
    assert replies[1]["result"]["cacheScope"] == "private" and replies[1]["result"]["ttlMs"] == 60000
    assert replies[2]["error"]["data"]["reason"] == "tool_filtered"
    assert calls(app) == []


async def test_a_2026_client_translated_for_a_legacy_app_gets_the_filtered_list(run_bridge: RunBridge) -> None:
    app = LegacyOnlyApp(tools=TOOLS)
    async with run_bridge(app, protocol_era="legacy", read_only=True) as h:
        h.stdin.feed(modern(1, "server/discover"))
        await take(h, 1)
        h.stdin.feed(modern(2, "tools/list"))
        (listing,) = await take(h, 1)
        h.stdin.feed(modern(3, "tools/call", {"name": "delete_doc", "arguments": {}}))
        (refused,) = await take(h, 1)
    assert names(listing) == ["get_doc", "list_docs"] and listing["result"]["resultType"] == "complete"
    assert refused["error"]["data"]["option"] == "--read-only"
    assert calls(app) == []


async def test_a_2025_client_translated_for_a_2026_only_app_gets_the_filtered_list(run_bridge: RunBridge) -> None:
    def modern_only(message: dict[str, Any], request: httpx.Request) -> httpx.Response:
        done = {"resultType": "complete"}
        if message["method"] == "server/discover":
            result: dict[str, Any] = {**done, "supportedVersions": [MODERN], "capabilities": {"tools": {}}}
        elif message["method"] == "tools/list":
            result = {**done, "tools": TOOLS, "ttlMs": 0, "cacheScope": "private"}
        else:
            result = {**done, "content": []}
        return json_response({"jsonrpc": "2.0", "id": message["id"], "result": result})

    app = McpApp(stateless=True, on_request=modern_only)
    async with run_bridge(app, protocol_era="modern", allow_tools=("list_*",)) as h:
        h.stdin.feed(init(0))
        await take(h, 1)
        h.stdin.feed(NOTIF_INIT + request_line(1, "tools/list") + call(2, "get_doc"))
        replies = {m["id"]: m for m in await take(h, 2)}
    assert names(replies[1]) == ["list_docs"]
    assert replies[2]["error"]["data"]["option"] == "--allow-tool"
    assert calls(app) == []


# -- the catalog (lazy launch) and merged pages ----------------------------------------------


INITIALIZE = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "scripted", "version": "1"}}


async def test_a_list_from_the_catalog_is_filtered_and_the_catalog_keeps_the_whole_list(run_bridge: RunBridge) -> None:
    catalog = ServedCatalog(DEFAULT_APP_NAME, URL)
    entry = {"format": 1, "app": DEFAULT_APP_NAME, "endpoint": URL, "savedAtSeconds": 1.0, "initialize": INITIALIZE,
             "discover": None, "lists": {"tools/list": {"tools": TOOLS}}}
    catalog.replace(entry)
    app = McpApp(tools=TOOLS)
    app.up = False
    starter = Starter(app)
    async with run_bridge(app, ensure_running=starter, app_probe=starter.probe, deny_tools=("send_*",)) as h:
        h.stdin.feed(init(0))
        await take(h, 1)
        h.stdin.feed(NOTIF_INIT + request_line(1, "tools/list"))
        (cached,) = await take(h, 1)
        assert starter.calls == 0  # answered from the catalog
        h.stdin.feed(call(2, "send_payment"))
        (refused,) = await take(h, 1)
        assert starter.calls == 0  # a refused call starts nothing
        h.stdin.feed(request_line(3, "tools/call", {"name": "get_doc", "arguments": {}}))
        await take(h, 1)
        h.stdin.feed(request_line(4, "tools/list"))
        (live,) = await take(h, 1)
    assert names(cached) == names(live) == ["get_doc", "delete_doc", "list_docs"]
    assert refused["error"]["data"]["option"] == "--deny-tool" and calls(app) == ["get_doc"]
    assert refused["error"]["message"] == (
        "The tool 'send_payment' is not available to this client: the bridge's --deny-tool option hides it "
        "(its name matches a glob given there)."
    )  # the option named once
    kept = ServedCatalog(DEFAULT_APP_NAME, URL).entry()
    assert kept is not None and [t["name"] for t in kept["lists"]["tools/list"]["tools"]] == NAMES


async def test_a_2026_clients_list_from_the_catalog_is_filtered(run_bridge: RunBridge) -> None:
    """The cached copy a 2026-07-28 client is served while the app is down passes the filter
    as the app's own reply does; a refused call starts nothing."""
    entry = {"format": 1, "app": DEFAULT_APP_NAME, "endpoint": URL, "savedAtSeconds": 1.0, "initialize": None,
             "discover": {"supportedVersions": [MODERN], "capabilities": {"tools": {}}}, "lists": {"tools/list": {"tools": TOOLS}}}
    ServedCatalog(DEFAULT_APP_NAME, URL).replace(entry)
    app = McpApp(stateless=True, tools=TOOLS)
    app.up = False
    starter = Starter(app)
    async with run_bridge(app, ensure_running=starter, app_probe=starter.probe, read_only=True) as h:
        h.stdin.feed(modern(1, "server/discover") + modern(2, "tools/list"))
        replies = {m["id"]: m for m in await take(h, 2)}
        h.stdin.feed(modern(3, "tools/call", {"name": "send_payment", "arguments": {}}))
        (refused,) = await take(h, 1)
    assert names(replies[2]) == ["get_doc", "list_docs"] and replies[2]["result"]["resultType"] == "complete"
    assert refused["error"]["data"]["option"] == "--read-only"
    assert starter.calls == 0 and calls(app) == []


async def test_merged_pages_are_filtered_as_one_list(run_bridge: RunBridge) -> None:
    pages = [TOOLS[:2], TOOLS[2:]]

    def paged(message: dict[str, Any], request: httpx.Request) -> httpx.Response:
        if message["method"] != "tools/list":
            return json_response({"jsonrpc": "2.0", "id": message["id"], "result": {}})
        k = int((message.get("params") or {}).get("cursor") or 0)
        result: dict[str, Any] = {"tools": pages[k]}
        if k + 1 < len(pages):
            result["nextCursor"] = str(k + 1)
        return json_response({"jsonrpc": "2.0", "id": message["id"], "result": result})

    app = McpApp(on_request=paged)
    async with run_bridge(app, merge_list_pages=True, read_only=True) as h:
        await handshake(h)
        h.stdin.feed(request_line(1, "tools/list"))
        (merged,) = await take(h, 1)
    assert names(merged) == ["get_doc", "list_docs"] and "nextCursor" not in merged["result"]


async def test_a_page_left_empty_keeps_its_cursor(run_bridge: RunBridge) -> None:
    def paged(message: dict[str, Any], request: httpx.Request) -> httpx.Response:
        cursor = (message.get("params") or {}).get("cursor")
        result: dict[str, Any] = {"tools": [tool("send_payment")], "nextCursor": "2"} if cursor is None else {"tools": [tool("get_doc")]}
        return json_response({"jsonrpc": "2.0", "id": message["id"], "result": result})

    app = McpApp(on_request=paged)
    async with run_bridge(app, deny_tools=("send_*",)) as h:
        await handshake(h)
        h.stdin.feed(request_line(1, "tools/list"))
        (first,) = await take(h, 1)
        h.stdin.feed(request_line(2, "tools/list", {"cursor": "2"}))
        (second,) = await take(h, 1)
    assert first["result"] == {"tools": [], "nextCursor": "2"} and names(second) == ["get_doc"]


async def test_a_list_answered_on_another_stream_is_filtered_too(run_bridge: RunBridge) -> None:
    """The app answers the ``tools/list`` on the stream of a ``tools/call`` (B's response on
    A's stream): that answer passes the filter as well (``Dispatcher.relay``)."""
    held: list[Any] = []

    async def on_request(message: dict[str, Any], request: httpx.Request) -> httpx.Response:
        if message["method"] == "tools/list":
            held.append(message["id"])
            import anyio

            await anyio.sleep(30)  # never answered here: its answer comes on the call's stream
        listing = {"jsonrpc": "2.0", "id": held[0], "result": {"tools": TOOLS}}
        return sse(event(listing), event({"jsonrpc": "2.0", "id": message["id"], "result": {"content": []}}))

    app = McpApp(on_request=on_request)
    async with run_bridge(app, deny_tools=("delete_*",)) as h:
        await handshake(h)
        h.stdin.feed(request_line(1, "tools/list"))
        import anyio

        with anyio.fail_after(5):
            while not held:
                await anyio.sleep(0.01)
        h.stdin.feed(call(2, "get_doc"))
        replies = {m["id"]: m for m in await take(h, 2)}
    assert names(replies[1]) == ["get_doc", "list_docs", "send_payment"]
    assert json.dumps(replies[1]).count("delete_doc") == 0
