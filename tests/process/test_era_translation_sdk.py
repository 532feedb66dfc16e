"""The official SDK v2 client pinned to MCP 2026-07-28, through the bridge (a process, with
``--protocol-era legacy``), to an official SDK server that speaks only the legacy era
(``tests/support/sdk_legacy_app.py``): what outlives one request (docs/behaviour.md,
"Protocol eras"). The client's own driver of ``input_required`` and of
``subscriptions/listen`` checks every shape the bridge makes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.subscriptions import ToolsListChanged
from mcp.types import ElicitRequestParams, ElicitResult, ErrorData, ListRootsResult, Root, TextContent
from pydantic import FileUrl
from support.apps import REPO_ROOT, AppServer
from support.processes import REPLY_TIMEOUT, bridge_command, count_in_log
from support.sdk_legacy_app import launch_sdk_legacy_app

pytestmark = [pytest.mark.process, pytest.mark.anyio]


@pytest.fixture
def legacy_sdk_app(tmp_path: Path) -> Iterator[AppServer]:
    with launch_sdk_legacy_app(tmp_path / "app.log") as app:
        yield app


def _client(url: str) -> Client:
    async def elicit(context: object, params: ElicitRequestParams) -> ElicitResult | ErrorData:
        return ElicitResult(action="accept", content={"name": "Ada"})

    async def roots(context: object) -> ListRootsResult | ErrorData:
        return ListRootsResult(roots=[Root(uri=FileUrl("file:///work/project"))])

    command = bridge_command()
    params = StdioServerParameters(command=command[0], args=[*command[1:], "--url", url, "--protocol-era", "legacy"], cwd=REPO_ROOT)
    return Client(params, mode="2026-07-28", read_timeout_seconds=REPLY_TIMEOUT, elicitation_callback=elicit, list_roots_callback=roots)


def _text(result: object) -> str:
    return "".join(block.text for block in getattr(result, "content", []) if isinstance(block, TextContent))


async def test_an_elicitation_and_a_roots_request_round_trip_as_input_required(legacy_sdk_app: AppServer) -> None:
    """``ask`` elicits on its call's stream; ``roots`` asks on the GET stream: both reach the
    client as ``input_required``, and its retry's answers reach the app."""
    with anyio.fail_after(60):
        async with _client(legacy_sdk_app.url) as client:
            asked = await client.call_tool("ask", {})
            rooted = await client.call_tool("roots", {})
    assert not asked.is_error and _text(asked) == "hello Ada"
    assert not rooted.is_error and _text(rooted) == "file:///work/project"
    assert count_in_log(legacy_sdk_app, '"GET /mcp HTTP/1.1" 200') >= 1


async def test_a_listen_gets_the_apps_tool_list_change(legacy_sdk_app: AppServer) -> None:
    with anyio.fail_after(60):
        async with _client(legacy_sdk_app.url) as client:
            async with client.listen(tools_list_changed=True) as subscription:
                assert subscription.honored.tools_list_changed is True
                assert _text(await client.call_tool("grow", {})) == "grown"
                event = await anext(subscription)
    assert event == ToolsListChanged()
