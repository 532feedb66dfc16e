"""The lazy-launch rules (bridge/core/lazylaunch.py): what a catalog answers, what it keeps."""

from __future__ import annotations

from typing import Any

from bridge.core.lazylaunch import answers_from_catalog, app_version, catalog_result, changed_list_notifications, record

INIT = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {"listChanged": True}, "resources": {}}, "serverInfo": {"name": "a", "version": "1"}}
TOOLS = {"tools": [{"name": "t"}]}


def keep(entry: dict[str, Any] | None, method: str, result: Any, params: Any = None) -> dict[str, Any] | None:
    return record(entry, method, params, result, app="A", endpoint="http://127.0.0.1:1/mcp", now_seconds=5.0)


def test_initialize_is_answered_only_for_the_version_the_catalog_holds() -> None:
    entry = keep(None, "initialize", INIT)
    assert catalog_result("initialize", {"protocolVersion": "2025-06-18"}, entry) == INIT
    assert catalog_result("initialize", {"protocolVersion": "2025-03-26"}, entry) is None
    assert catalog_result("ping", None, entry) == {} and catalog_result("ping", None, None) is None
    assert catalog_result("tools/call", {}, entry) is None
    assert app_version(entry) == "1"


def test_lists_are_kept_only_whole_and_answered_only_without_a_cursor() -> None:
    entry = keep(keep(None, "initialize", INIT), "tools/list", TOOLS)
    assert entry is not None and catalog_result("tools/list", {}, entry) == TOOLS
    assert catalog_result("tools/list", {"cursor": "2"}, entry) is None
    assert keep(entry, "tools/list", {"tools": [], "nextCursor": "2"}) is None
    assert keep(entry, "tools/list", TOOLS, {"cursor": "1"}) is None
    assert keep(entry, "tools/list", TOOLS) is None  # unchanged: nothing to write


def test_another_app_version_starts_a_new_catalog() -> None:
    entry = keep(keep(None, "initialize", INIT), "tools/list", TOOLS)
    newer = keep(entry, "initialize", {**INIT, "serverInfo": {"name": "a", "version": "2"}})
    assert newer is not None and newer["lists"] == {} and app_version(newer) == "2"


def test_changed_lists_are_announced_once_each_for_declared_capabilities() -> None:
    entry = keep(keep(keep(None, "initialize", INIT), "tools/list", TOOLS), "prompts/list", {"prompts": []})
    assert entry is not None
    served = {"tools/list": {"tools": []}, "prompts/list": {"prompts": [{"name": "p"}]}}
    # prompts is not a declared capability: the client was never told of prompts
    assert changed_list_notifications(entry, served) == ["notifications/tools/list_changed"]
    assert changed_list_notifications(entry, {"tools/list": TOOLS}) == []


def test_the_policies() -> None:
    assert answers_from_catalog("on-call", "tools/list") and answers_from_catalog("never", "initialize")
    assert not answers_from_catalog("on-start", "tools/list") and not answers_from_catalog("on-call", "tools/call")


def test_a_2026_discover_result_names_its_app_in_meta_and_shares_the_catalog_with_initialize() -> None:
    """A 2026-07-28 ``server/discover`` result names the server in ``_meta`` (not in a
    ``serverInfo`` member): the same app's ``initialize`` and ``server/discover`` (Codex
    starts with one, Claude Code with the other) are kept side by side; another version of
    either starts the catalog anew."""
    discover = {"supportedVersions": ["2026-07-28"], "capabilities": {}, "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "a", "version": "1"}}}
    both = keep(keep(keep(None, "initialize", INIT), "tools/list", TOOLS), "server/discover", discover)
    assert both is not None and both["initialize"] == INIT and both["discover"] == discover and both["lists"]
    again = keep(both, "initialize", INIT)
    assert again is None  # unchanged: nothing to write
    newer = {**discover, "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "a", "version": "2"}}}
    fresh = keep(both, "server/discover", newer)
    assert fresh is not None and fresh["initialize"] is None and fresh["lists"] == {} and app_version(fresh) == "2"
    assert app_version(keep(None, "server/discover", discover)) == "1"


def test_the_same_list_in_another_era_s_envelope_is_no_change() -> None:
    """Claude Code (2026-07-28) and Codex (legacy) list the same tools; a 2026-07-28 result
    carries ``resultType`` and ``cacheScope`` beside them. That is not a changed list."""
    entry = keep(keep(None, "initialize", INIT), "tools/list", {**TOOLS, "resultType": "complete", "cacheScope": "private"})
    assert entry is not None
    assert changed_list_notifications(entry, {"tools/list": TOOLS}) == []
    assert changed_list_notifications(entry, {"tools/list": {"tools": []}}) == ["notifications/tools/list_changed"]
