"""The lazy-launch rules (bridge/core/lazylaunch.py): what a catalog answers, what it keeps."""

from __future__ import annotations

from typing import Any

from bridge.core.lazylaunch import (
    answers_from_catalog,
    app_version,
    catalog_answer,
    catalog_result,
    changed_list_notifications,
    discover_refusal,
    list_refusal,
    mark,
    record,
    record_refusal,
    refuses,
    why_not_answered,
)

INIT = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {"listChanged": True}, "resources": {}}, "serverInfo": {"name": "a", "version": "1"}}
TOOLS = {"tools": [{"name": "t"}]}


def keep(entry: dict[str, Any] | None, method: str, result: Any, params: Any = None) -> dict[str, Any] | None:
    return record(entry, method, params, result, app="A", endpoint="http://127.0.0.1:1/mcp", now_seconds=5.0)


def test_initialize_is_answered_for_the_version_the_catalog_holds_and_negotiated_for_older_ones() -> None:
    entry = keep(None, "initialize", INIT, {"protocolVersion": "2025-06-18"})
    assert catalog_result("initialize", {"protocolVersion": "2025-06-18"}, entry) == INIT
    # An older 2025-era version: the app's answer with that version (its capabilities exist there).
    assert catalog_result("initialize", {"protocolVersion": "2025-03-26"}, entry) == {**INIT, "protocolVersion": "2025-03-26"}
    # A newer one: whether the app speaks it is not known, so the app is needed.
    assert catalog_result("initialize", {"protocolVersion": "2025-11-25"}, entry) is None
    assert "2025-11-25" in why_not_answered("initialize", {"protocolVersion": "2025-11-25"}, entry)
    assert catalog_result("initialize", {"protocolVersion": "1999-01-01"}, entry) is None
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


def test_claude_desktop_and_codex_are_both_answered_once_each_was_seen() -> None:
    """Claude Desktop asks for 2025-11-25, Codex for 2025-06-18: each version's answer is kept."""
    newest = {**INIT, "protocolVersion": "2025-11-25"}
    entry = keep(keep(None, "initialize", newest, {"protocolVersion": "2025-11-25"}), "initialize", INIT, {"protocolVersion": "2025-06-18"})
    assert entry is not None
    assert catalog_result("initialize", {"protocolVersion": "2025-11-25"}, entry) == newest
    assert catalog_result("initialize", {"protocolVersion": "2025-06-18"}, entry) == INIT


def test_an_app_that_answered_an_older_version_gets_that_answer_for_newer_ones() -> None:
    entry = keep(None, "initialize", INIT, {"protocolVersion": "2025-11-25"})  # the app's latest is 2025-06-18
    assert catalog_result("initialize", {"protocolVersion": "2025-11-25"}, entry) == INIT
    assert catalog_result("initialize", {"protocolVersion": "2026-01-01"}, entry) == INIT


def test_capabilities_an_older_version_lacks_keep_the_catalog_from_answering_it() -> None:
    newest = {**INIT, "protocolVersion": "2025-11-25", "capabilities": {"tools": {}, "completions": {}}}
    entry = keep(None, "initialize", newest, {"protocolVersion": "2025-11-25"})
    assert catalog_result("initialize", {"protocolVersion": "2025-03-26"}, entry) == {**newest, "protocolVersion": "2025-03-26"}
    assert catalog_result("initialize", {"protocolVersion": "2024-11-05"}, entry) is None
    assert "completions" in why_not_answered("initialize", {"protocolVersion": "2024-11-05"}, entry)


def test_lists_are_given_in_the_era_of_the_request() -> None:
    modern = {"tools": [{"name": "t"}], "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}
    entry = keep(keep(None, "initialize", INIT), "tools/list", modern)
    assert catalog_result("tools/list", {}, entry, modern=False) == TOOLS
    assert catalog_result("tools/list", {}, entry, modern=True) == modern
    legacy = keep(keep(None, "initialize", INIT), "tools/list", TOOLS)
    assert catalog_result("tools/list", {}, legacy, modern=True) == modern


def test_refusal_marks() -> None:
    discover = {"supportedVersions": ["2026-07-28"], "capabilities": {}, "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "a", "version": "2"}}}
    modern_only = mark(keep(None, "server/discover", discover), "refusesInitialize", True, app="A", endpoint="http://127.0.0.1:1/mcp", now_seconds=6.0)
    assert modern_only is not None and refuses(modern_only, "initialize") and not refuses(modern_only, "server/discover")
    # The app answered initialize after all (an update): the mark goes.
    updated = keep(modern_only, "initialize", {**INIT, "serverInfo": {"name": "a", "version": "2"}})
    assert updated is not None and not refuses(updated, "initialize")
    refusal = {"code": -32601, "message": "Method not found"}
    legacy_only = mark(keep(None, "initialize", INIT), "refusesDiscover", refusal, app="A", endpoint="http://127.0.0.1:1/mcp", now_seconds=6.0)
    assert legacy_only is not None and discover_refusal(legacy_only) == refusal
    assert discover_refusal(keep(None, "initialize", INIT)) is None
    # Claude Code probes before its initialize: the mark outlives the initialize recorded next.
    first = mark(None, "refusesDiscover", True, app="A", endpoint="http://127.0.0.1:1/mcp", now_seconds=6.0)
    assert refuses(keep(first, "initialize", INIT), "server/discover")


def refuse(entry: dict[str, Any] | None, method: str, error: Any) -> dict[str, Any] | None:
    return record_refusal(entry, method, error, app="A", endpoint="http://127.0.0.1:1/mcp", now_seconds=6.0)


def test_a_list_whose_capability_the_app_does_not_declare_is_refused_as_the_app_refused_it() -> None:
    tools_only = {**INIT, "capabilities": {"tools": {}}}
    entry = keep(None, "initialize", tools_only)
    # No error of the app's kept yet: the app is asked (it may serve a list it does not declare).
    assert catalog_answer("resources/list", None, entry) is None
    # The app's own error, code and message only, cut to length.
    message = "method not found: resources/list" + "x" * 5000
    own = {"code": -32601, "message": message, "data": {"big": "x"}}
    kept = refuse(entry, "resources/list", own)
    assert kept is not None and list_refusal(kept, "resources/list") == {"code": -32601, "message": message[:1000]}
    assert refuse(kept, "resources/list", own) is None  # unchanged: nothing to write
    assert catalog_answer("resources/list", {"cursor": "1"}, kept) == {"error": list_refusal(kept, "resources/list")}
    # A declared capability, or no handshake cached: the app is needed (nothing kept either).
    assert list_refusal(kept, "tools/list") is None and catalog_answer("tools/list", None, kept) is None
    assert list_refusal(keep(None, "tools/list", TOOLS), "resources/list") is None
    assert refuse(keep(None, "initialize", INIT), "resources/list", own) is None  # INIT declares resources
    assert refuse(entry, "resources/list", {"code": "x", "message": "m"}) is None
    assert refuse(entry, "tools/call", own) is None
    # The app serves the list after all: its refusal goes.
    served = keep(kept, "resources/list", {"resources": []})
    assert served is not None and "refusedLists" not in served
    assert catalog_answer("resources/list", None, served) == {"result": {"resources": []}}


def test_refused_lists_of_any_type_are_read_as_none_kept() -> None:
    tools_only = {**INIT, "capabilities": {"tools": {}}}
    entry = keep(None, "initialize", tools_only)
    assert entry is not None
    junks: list[Any] = [1, "x", [], {"resources/list": 7}, {"resources/list": {"code": True, "message": "m"}}]
    for junk in junks:
        assert list_refusal({**entry, "refusedLists": junk}, "resources/list") is None
        kept = refuse({**entry, "refusedLists": junk}, "resources/list", {"code": -32601, "message": "no"})
        assert kept is not None and list_refusal(kept, "resources/list") == {"code": -32601, "message": "no"}
