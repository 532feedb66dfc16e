"""``--merge-list-pages`` (docs/behaviour.md, "Quirks smoothed"): for a client that reads
only a list's first page (openai/codex#28858, anthropics/claude-code#66537,
github/copilot-cli#4006), the bridge asks the app for the next pages itself and answers
with one list, through a running bridge."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import httpx
import pytest
from support.helpers import URL, RunBridge, json_response, request_line

from bridge.app.servedcatalog import ServedCatalog
from bridge.core.config import DEFAULT_APP_NAME
from bridge.core.quirks import MAX_LIST_PAGES

pytestmark = pytest.mark.anyio
over_both_wires = pytest.mark.usefixtures("wire")

MEMBER = {"tools/list": "tools", "prompts/list": "prompts", "resources/list": "resources", "resources/templates/list": "resourceTemplates"}


def item(method: str, name: str, *, size: int = 0) -> dict[str, Any]:
    if method == "tools/list":
        return {"name": name, "description": "x" * size, "inputSchema": {"type": "object"}}
    if method == "resources/list":
        return {"name": name, "uri": f"file:///{name}"}
    if method == "resources/templates/list":
        return {"name": name, "uriTemplate": f"file:///{name}/{{x}}"}
    return {"name": name}


class PagedApp:
    """An app that serves a list in ``pages`` pages of ``per_page`` items named ``p<page>-<n>``;
    page ``k``'s cursor is ``c<k>``. ``cursor_of(k)`` may say otherwise (a repeated cursor),
    ``page_reply(k)`` may answer page ``k`` itself (a failure), ``delay_seconds`` holds
    every page that long, and page ``hold_page`` waits until ``hang`` is set."""

    def __init__(self, pages: int, *, method: str = "tools/list", per_page: int = 2, size: int = 0) -> None:
        self.pages, self.method, self.per_page, self.size = pages, method, per_page, size
        self.requests: list[dict[str, Any]] = []
        self.bodies: list[bytes] = []
        self.delay_seconds = 0.0
        self.cursor_of = lambda k: f"c{k}"
        self.page_reply: Any = lambda k, message: None
        self.hang = asyncio.Event()
        self.hold_page: int | None = None

    def names(self, *pages: int) -> list[str]:
        return [f"p{k}-{n}" for k in pages for n in range(self.per_page)]

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(request.content)
        message = json.loads(request.content)
        if "id" not in message:
            return httpx.Response(202)
        self.requests.append(message)
        if message["method"] != self.method:
            return json_response({"jsonrpc": "2.0", "id": message["id"], "result": {}})
        cursor = (message.get("params") or {}).get("cursor")
        k = 0 if cursor is None else int(cursor.removeprefix("c"))
        if self.delay_seconds:
            await asyncio.sleep(self.delay_seconds)
        if k == self.hold_page:
            await self.hang.wait()
        special = self.page_reply(k, message)
        if special is not None:
            return special  # type: ignore[no-any-return]
        result: dict[str, Any] = {MEMBER[self.method]: [item(self.method, name, size=self.size) for name in self.names(k)]}
        if k + 1 < self.pages:
            result["nextCursor"] = self.cursor_of(k + 1)
        return json_response({"jsonrpc": "2.0", "id": message["id"], "result": result})

    def list_requests(self) -> list[dict[str, Any]]:
        return [message for message in self.requests if message["method"] == self.method]


def names_in(reply: dict[str, Any], method: str = "tools/list") -> list[str]:
    return [entry["name"] for entry in reply["result"][MEMBER[method]]]


@over_both_wires
@pytest.mark.parametrize("method", list(MEMBER))
async def test_three_pages_become_one_reply_without_a_next_cursor(run_bridge: RunBridge, method: str) -> None:
    """openai/codex#28858 and others: a client that never sends the cursor sees only page
    one. Merged, it gets every item, and no nextCursor to ignore."""
    app = PagedApp(3, method=method)
    async with run_bridge(app, merge_list_pages=True) as h:
        h.stdin.feed(request_line("list-1", method, {"_meta": {"progressToken": 9}}))
        (reply,) = await h.stdout.wait_for(1)
    assert reply["id"] == "list-1" and "nextCursor" not in reply["result"]
    assert names_in(reply, method) == app.names(0, 1, 2)
    first, *others = app.list_requests()
    assert first["id"] == "list-1" and first["params"] == {"_meta": {"progressToken": 9}}
    assert [message["params"] for message in others] == [{"cursor": "c1", "_meta": {}}, {"cursor": "c2", "_meta": {}}]
    assert all(str(message["id"]).startswith("mcp-app-bridge-page-") for message in others)


@over_both_wires
async def test_without_the_option_each_page_passes_through_as_the_app_sent_it(run_bridge: RunBridge) -> None:
    app = PagedApp(3)
    async with run_bridge(app, merge_list_pages=False) as h:
        h.stdin.feed(request_line(1, "tools/list"))
        (reply,) = await h.stdout.wait_for(1)
        h.stdin.feed(request_line(2, "tools/list", {"cursor": reply["result"]["nextCursor"]}))
        (_, second) = await h.stdout.wait_for(2)
    assert names_in(reply) == app.names(0) and reply["result"]["nextCursor"] == "c1"
    assert names_in(second) == app.names(1) and second["result"]["nextCursor"] == "c2"
    assert [message["id"] for message in app.requests] == [1, 2]


@over_both_wires
async def test_a_list_in_one_page_is_asked_for_once(run_bridge: RunBridge) -> None:
    app = PagedApp(1)
    async with run_bridge(app, merge_list_pages=True) as h:
        h.stdin.feed(request_line(1, "tools/list"))
        (reply,) = await h.stdout.wait_for(1)
    assert names_in(reply) == app.names(0) and "nextCursor" not in reply["result"]
    assert len(app.requests) == 1


@over_both_wires
async def test_a_client_that_follows_cursors_itself_gets_the_rest_from_its_cursor(run_bridge: RunBridge) -> None:
    """A request with a cursor is merged from there on: the client asked for the rest."""
    app = PagedApp(3)
    async with run_bridge(app, merge_list_pages=True) as h:
        h.stdin.feed(request_line(1, "tools/list", {"cursor": "c1"}))
        (reply,) = await h.stdout.wait_for(1)
    assert names_in(reply) == app.names(1, 2) and "nextCursor" not in reply["result"]


async def test_a_repeated_cursor_stops_the_merge_and_keeps_the_next_cursor(run_bridge: RunBridge, caplog: pytest.LogCaptureFixture) -> None:
    app = PagedApp(10)
    app.cursor_of = lambda k: "c1"  # every page says "next: c1": the app goes round
    caplog.set_level(logging.WARNING, logger="bridge")
    async with run_bridge(app, merge_list_pages=True) as h:
        h.stdin.feed(request_line(1, "tools/list"))
        (reply,) = await h.stdout.wait_for(1)
    assert names_in(reply) == app.names(0, 1) and reply["result"]["nextCursor"] == "c1"
    assert len(app.list_requests()) == 2
    (warning,) = [record for record in caplog.records if record.levelno == logging.WARNING]
    assert "cursor the app had returned before" in warning.getMessage()


async def test_the_merge_stops_after_max_list_pages(run_bridge: RunBridge) -> None:
    app = PagedApp(MAX_LIST_PAGES + 10, per_page=1)
    async with run_bridge(app, merge_list_pages=True) as h:
        h.stdin.feed(request_line(1, "tools/list"))
        (reply,) = await h.stdout.wait_for(1)
    assert names_in(reply) == app.names(*range(MAX_LIST_PAGES))
    assert reply["result"]["nextCursor"] == f"c{MAX_LIST_PAGES}" and len(app.list_requests()) == MAX_LIST_PAGES


async def test_the_merged_reply_stays_within_max_message_bytes(run_bridge: RunBridge) -> None:
    app = PagedApp(20, size=1000)  # about 2 KB a page
    async with run_bridge(app, merge_list_pages=True, max_message_bytes=8192) as h:
        h.stdin.feed(request_line(1, "tools/list"))
        (reply,) = await h.stdout.wait_for(1)
    line = h.stdout.lines[0]
    assert len(line) <= 8192 < len(line) + 2 * 1000
    merged = len(names_in(reply)) // 2
    assert 1 < merged < 20 and names_in(reply) == app.names(*range(merged))
    assert reply["result"]["nextCursor"] == f"c{merged}"


@over_both_wires
@pytest.mark.parametrize("failure", ["error", "http500", "not_json"])
async def test_a_failing_second_page_leaves_the_first_and_its_next_cursor(
    run_bridge: RunBridge, caplog: pytest.LogCaptureFixture, failure: str
) -> None:
    """Never an error when the first page succeeded: the client gets that page and the
    cursor to resume from, and one warning says why."""
    app = PagedApp(3)

    def page_reply(k: int, message: dict[str, Any]) -> httpx.Response | None:
        if k != 1:
            return None
        if failure == "error":
            return json_response({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32603, "message": "page store offline"}})
        if failure == "http500":
            return httpx.Response(500, text="boom")
        return httpx.Response(200, headers={"content-type": "application/json"}, text="{not json")

    app.page_reply = page_reply
    caplog.set_level(logging.WARNING, logger="bridge")
    async with run_bridge(app, merge_list_pages=True, token="sk-secret-token-1234") as h:
        h.stdin.feed(request_line(7, "tools/list"))
        (reply,) = await h.stdout.wait_for(1)
    assert reply["id"] == 7 and names_in(reply) == app.names(0) and reply["result"]["nextCursor"] == "c1"
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    (warning,) = [text for text in warnings if "merged 1 page(s)" in text]
    assert "page 2" in warning and "sk-secret-token-1234" not in caplog.text


async def test_a_failing_first_page_is_answered_as_without_the_option(run_bridge: RunBridge) -> None:
    app = PagedApp(3)
    app.page_reply = lambda k, message: httpx.Response(500, text="boom") if k == 0 else None
    async with run_bridge(app, merge_list_pages=True) as h:
        h.stdin.feed(request_line(1, "tools/list"))
        (reply,) = await h.stdout.wait_for(1)
    assert reply["error"]["data"]["httpStatus"] == 500 and len(app.list_requests()) == 1


@pytest.mark.slow
async def test_all_pages_share_the_one_request_timeout(run_bridge: RunBridge) -> None:
    """Each page alone fits the timeout; together they do not. The merge ends at the
    request's own deadline, not ``MAX_LIST_PAGES`` times it, with what it has."""
    app = PagedApp(40)
    app.delay_seconds = 0.3
    async with run_bridge(app, merge_list_pages=True, request_timeout_seconds=1.0) as h:
        h.stdin.feed(request_line(1, "tools/list"))
        (reply,) = await h.stdout.wait_for(1, timeout_seconds=20)
    merged = len(names_in(reply)) // 2
    assert 1 <= merged < 40 and names_in(reply) == app.names(*range(merged))
    assert reply["result"]["nextCursor"] == f"c{merged}"


async def test_a_page_cut_off_by_the_deadline_is_cancelled_at_the_app(run_bridge: RunBridge) -> None:
    """MCP basic/utilities/cancellation: the app is told to stop working on the private
    page the bridge gave up on, by that page's id."""
    app = PagedApp(3)
    app.hold_page = 1
    async with run_bridge(app, merge_list_pages=True, request_timeout_seconds=0.5) as h:
        h.stdin.feed(request_line(1, "tools/list"))
        (reply,) = await h.stdout.wait_for(1)
        assert names_in(reply) == app.names(0) and reply["result"]["nextCursor"] == "c1"
        private = app.list_requests()[1]["id"]
        for _ in range(200):
            cancels = [json.loads(body) for body in app.bodies if b"notifications/cancelled" in body]
            if cancels:
                break
            await asyncio.sleep(0.02)
        app.hang.set()
    assert [notice["params"]["requestId"] for notice in cancels] == [private]


@over_both_wires
async def test_notifications_and_other_requests_are_untouched(run_bridge: RunBridge) -> None:
    app = PagedApp(3)
    notification = b'{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}\n'
    async with run_bridge(app, merge_list_pages=True) as h:
        h.stdin.feed(request_line(1, "tools/list") + notification + request_line(2, "ping"))
        replies = {reply["id"]: reply for reply in await h.stdout.wait_for(2)}
    assert set(replies) == {1, 2} and len(h.stdout.lines) == 2
    assert names_in(replies[1]) == app.names(0, 1, 2) and replies[2]["result"] == {}
    assert notification[:-1] in app.bodies


async def test_the_catalog_keeps_the_merged_list(run_bridge: RunBridge) -> None:
    """Lazy launch serves a list only when it is whole: a merged one is."""

    async def up(url: str) -> bool:
        return True

    app = PagedApp(3)
    async with run_bridge(app, merge_list_pages=True, ensure_running=lambda: None, app_probe=up) as h:
        h.stdin.feed(request_line(1, "tools/list"))
        await h.stdout.wait_for(1)
    entry = ServedCatalog(DEFAULT_APP_NAME, URL).entry()
    assert entry is not None
    assert [tool["name"] for tool in entry["lists"]["tools/list"]["tools"]] == app.names(0, 1, 2)
    assert "nextCursor" not in entry["lists"]["tools/list"]


async def test_a_2026_client_s_pages_go_in_its_era(run_bridge: RunBridge) -> None:
    """A 2026-07-28 request (its era in ``_meta``) is merged the same way; each page keeps
    the era's ``_meta``, so the app reads every page in the client's era."""
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"}}
    app = PagedApp(3)
    async with run_bridge(app, merge_list_pages=True) as h:
        h.stdin.feed(request_line(1, "tools/list", {"_meta": meta}))
        (reply,) = await h.stdout.wait_for(1)
    assert names_in(reply) == app.names(0, 1, 2) and "nextCursor" not in reply["result"]
    assert [message["params"]["_meta"] for message in app.list_requests()] == [meta] * 3
    assert not [body for body in app.bodies if b"notifications/cancelled" in body]
