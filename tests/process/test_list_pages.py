"""``--merge-list-pages`` through the real bridge process, with a server on the official
SDK that lists its tools in three pages (``tests/support/sdk_paged_app.py``). The client
here asks once, as a client that drops pages does (openai/codex#28858): with the option it
gets every tool, and can call one from the last page; without it, the first page and its
``nextCursor`` (docs/behaviour.md, "Quirks smoothed")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.apps import AppServer
from support.processes import count_in_log, handshake, request, result_text, start_bridge, tool_call
from support.sdk_paged_app import PAGE_SIZE, TOOL_COUNT, launch_sdk_paged_app, tool_names

pytestmark = pytest.mark.process


@pytest.fixture
def paged_app(tmp_path: Path) -> Iterator[AppServer]:
    with launch_sdk_paged_app(tmp_path / "app.log") as app:
        yield app


def test_the_pages_reach_a_client_that_asks_once_as_one_list(paged_app: AppServer) -> None:
    with start_bridge(paged_app.url, "--merge-list-pages") as bridge:
        handshake(bridge)
        bridge.send(request(1, "tools/list"))
        reply = bridge.read_reply(1)
        last = tool_names()[-1]
        bridge.send(tool_call(2, last, {}))
        called = bridge.read_reply(2)
    assert [tool["name"] for tool in reply["result"]["tools"]] == tool_names()
    assert "nextCursor" not in reply["result"]
    assert result_text(called) == last
    assert count_in_log(paged_app, "tools/list cursor=") == -(-TOOL_COUNT // PAGE_SIZE) == 3


def test_without_the_option_the_client_gets_the_first_page_and_its_cursor(paged_app: AppServer) -> None:
    with start_bridge(paged_app.url) as bridge:
        handshake(bridge)
        bridge.send(request(1, "tools/list"))
        reply = bridge.read_reply(1)
    assert [tool["name"] for tool in reply["result"]["tools"]] == tool_names()[:PAGE_SIZE]
    assert reply["result"]["nextCursor"] == str(PAGE_SIZE)
    assert count_in_log(paged_app, "tools/list cursor=") == 1
