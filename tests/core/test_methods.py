"""The one table of MCP method facts (bridge/core/methods.py) and the views the modules read."""

from __future__ import annotations

from bridge.core.jsonrpc import PrivateIds
from bridge.core.methods import (
    CACHEABLE_METHODS,
    CATALOG_METHODS,
    INPUT_CAPABLE_METHODS,
    LIST_CAPABILITY,
    LIST_CHANGED,
    LIST_ITEMS,
    LISTS_THAT_CHANGE,
    METHODS,
    list_member,
)


def test_the_four_lists_have_their_member_capability_and_change_notification() -> None:
    assert LIST_ITEMS == {
        "tools/list": "tools",
        "prompts/list": "prompts",
        "resources/list": "resources",
        "resources/templates/list": "resourceTemplates",
    }
    assert LIST_CAPABILITY["resources/templates/list"] == "resources"
    assert LIST_CHANGED["resources/templates/list"] == "notifications/resources/list_changed"
    assert LISTS_THAT_CHANGE == ("tools", "prompts", "resources")
    assert list_member("tools/call") is None and list_member("prompts/list") == "prompts"


def test_what_the_catalog_answers_what_carries_caching_advice_and_what_may_ask_for_input() -> None:
    assert CATALOG_METHODS == {"initialize", "server/discover", "ping", *LIST_ITEMS}
    assert CACHEABLE_METHODS == {*LIST_ITEMS, "resources/read", "server/discover"}
    assert INPUT_CAPABLE_METHODS == {"tools/call", "prompts/get", "resources/read"}
    assert METHODS["server/discover"].era == "2026-07-28" and METHODS["initialize"].era == "2025"


def test_the_bridges_own_requests_share_one_id_space() -> None:
    ids = PrivateIds()
    page = ids.request("page", "tools/list", {"cursor": "c"})
    probe = ids.request("era-probe", "server/discover")
    assert (page.id, probe.id) == ("mcp-app-bridge-page-1", "mcp-app-bridge-era-probe-2")
    assert page.body == b'{"jsonrpc":"2.0","id":"mcp-app-bridge-page-1","method":"tools/list","params":{"cursor":"c"}}'
    assert b"params" not in probe.body and ids.next_id("input") == "mcp-app-bridge-input-3"
