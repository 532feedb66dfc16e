"""What a client sees of an app's tools (bridge/cli/toolreport.py): every page, a cursor that
repeats, the filter's report and the limits' (docs/clients.md, "What each client sees")."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.cli.toolreport import filter_report, follow_pages, limits_report
from bridge.core.config import BridgeConfig

pytestmark = pytest.mark.anyio


def tool(name: str) -> dict[str, Any]:
    return {"name": name, "inputSchema": {"type": "object"}}


async def test_every_page_is_followed_and_a_repeated_cursor_stops_it() -> None:
    pages = {"a": {"tools": [tool("two")], "nextCursor": "b"}, "b": {"tools": [tool("three")], "nextCursor": "a"}}
    asked: list[Any] = []

    async def ask(method: str, params: Any) -> dict[str, Any]:
        asked.append(params["cursor"])
        return pages[params["cursor"]]

    tools, repeated = await follow_pages(ask, {"tools": [tool("one")], "nextCursor": "a"})
    assert [t["name"] for t in tools] == ["one", "two", "three"] and repeated == "a" and asked == ["a", "b"]
    tools, repeated = await follow_pages(ask, {"tools": [tool("one")]})
    assert len(tools) == 1 and repeated is None


def test_a_repeated_cursor_is_a_loss_for_every_client() -> None:
    lines, lost, _ = limits_report("codex", "x", [tool("a")], "c1")
    assert lost and "gives the cursor 'c1' twice" in lines[0]
    assert limits_report("codex", "x", [tool("a")], None) == ([], False, None)


def test_the_filter_report_names_each_option() -> None:
    config = BridgeConfig(url="http://127.0.0.1:9/mcp", deny_tools=("b",), allow_tools=("a", "b", "c*"))
    lines, shown, problem = filter_report(config, [tool("a"), tool("b"), tool("d")])
    assert lines == ["the tool filter hides 2 of 3: by --deny-tool: b; by --allow-tool: d", "a client is shown 1: a"]
    assert [t["name"] for t in shown] == ["a"] and problem is None
    _, _, problem = filter_report(BridgeConfig(url="http://127.0.0.1:9/mcp", read_only=True), [tool("a")])
    assert problem is not None and "leaves no tool" in problem
    assert filter_report(BridgeConfig(url="http://127.0.0.1:9/mcp"), [tool("a")]) == ([], [tool("a")], None)
