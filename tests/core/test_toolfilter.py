"""The tool filter's rules (bridge/core/toolfilter.py; docs/usage.md, "Which tools a client sees")."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.core.toolfilter import Hidden, ToolFilter, filter_tools_result, hidden_on_purpose, is_read_only


def tool(name: Any, read_only: Any = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "inputSchema": {"type": "object"}}
    if read_only is not None:
        entry["annotations"] = {"readOnlyHint": read_only}
    return entry


def test_no_option_is_no_filter() -> None:
    rules = ToolFilter()
    result = {"tools": [tool("a")]}
    assert not rules.active and rules.hides(tool("a")) is None
    assert filter_tools_result(result, rules) == (result, [])


@pytest.mark.parametrize(
    ("rules", "name", "option"),
    [
        (ToolFilter(deny=("delete_*",)), "delete_doc", "--deny-tool"),
        (ToolFilter(deny=("delete_*",)), "Delete_doc", None),  # case-sensitive
        (ToolFilter(allow=("get_*", "list_?")), "list_x", None),
        (ToolFilter(allow=("get_*", "list_?")), "list_xy", "--allow-tool"),
        (ToolFilter(allow=("*",), deny=("send_*",)), "send_payment", "--deny-tool"),  # deny wins
        (ToolFilter(allow=("[gs]et_*",)), "set_x", None),
        (ToolFilter(allow=("[!g]et_*",)), "get_x", "--allow-tool"),
    ],
)
def test_the_globs(rules: ToolFilter, name: str, option: str | None) -> None:
    assert rules.hides_name(name) == option
    assert rules.hides(tool(name)) == option


def test_read_only_takes_exactly_true() -> None:
    rules = ToolFilter(read_only=True)
    assert rules.hides(tool("a", True)) is None
    for hint in (False, "true", 1, None):
        assert rules.hides(tool("a", hint)) == "--read-only", hint
    assert rules.hides({"name": "a", "annotations": "readOnlyHint"}) == "--read-only"
    assert is_read_only(tool("a", True)) and not is_read_only("a")


def test_a_tool_without_a_name_is_hidden_by_any_active_filter() -> None:
    assert ToolFilter(deny=("x",)).hides(tool(7)) == "--deny-tool"
    assert ToolFilter(read_only=True).hides("not an object") == "--read-only"


def test_the_result_keeps_its_other_members_and_a_public_list_becomes_private() -> None:
    result = {"tools": [tool("a"), tool("b")], "nextCursor": "c2", "ttlMs": 5, "cacheScope": "public", "resultType": "complete"}
    filtered, hidden = filter_tools_result(result, ToolFilter(deny=("b",)))
    assert filtered == {**result, "tools": [tool("a")], "cacheScope": "private"}
    assert hidden == [Hidden("b", "--deny-tool")]
    assert result["tools"] == [tool("a"), tool("b")]  # the app's result is not changed


def test_a_result_without_a_tools_array_is_left_alone() -> None:
    results: list[Any] = [{"tools": "no"}, {}, None, []]
    for result in results:
        assert filter_tools_result(result, ToolFilter(deny=("*",))) == (result, [])


def test_a_list_emptied_by_deny_alone_was_asked_for() -> None:
    assert hidden_on_purpose([Hidden("a", "--deny-tool")])
    assert not hidden_on_purpose([Hidden("a", "--deny-tool"), Hidden("b", "--allow-tool")])
    assert ToolFilter(allow=("a",), deny=("b",), read_only=True).options == ("--deny-tool", "--allow-tool", "--read-only")
