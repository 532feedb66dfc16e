"""The pure rules of a 2025-era client with a 2026-07-28-only app (``bridge/core/modernmap.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.core.modernmap import (
    ClientContext,
    discover_params,
    initialize_result,
    input_requests,
    legacy_notification,
    listen_filter,
    modern_params,
    retry_params,
    speaks_modern,
    untranslated,
)

MODERN = "2026-07-28"
INFO = {"name": "old-client", "version": "1"}
INIT_PARAMS = {"protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}}, "clientInfo": INFO}


def test_every_request_carries_the_clients_initialize_in_its_meta() -> None:
    client = ClientContext.from_initialize(INIT_PARAMS)
    assert discover_params(client) == {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
            "io.modelcontextprotocol/clientInfo": INFO,
        }
    }
    leveled = client._replace(log_level="debug")
    params = modern_params({"name": "t", "arguments": {}, "_meta": {"progressToken": 7}}, leveled)
    assert params["name"] == "t" and params["_meta"]["progressToken"] == 7
    assert params["_meta"]["io.modelcontextprotocol/logLevel"] == "debug"
    assert modern_params(None, ClientContext.from_initialize(None)) == {
        "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
    }


def test_initialize_is_answered_from_discover() -> None:
    discover = {
        "supportedVersions": [MODERN],
        "capabilities": {"tools": {"listChanged": True}},
        "instructions": "hi",
        "resultType": "complete",
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "app", "version": "2"}},
    }
    assert speaks_modern({"result": discover}) is discover
    assert speaks_modern({"result": {"supportedVersions": ["2025-11-25"]}}) is None
    assert speaks_modern({"error": {"code": -32601}}) is None
    assert initialize_result(discover, "2025-06-18", "demo") == {
        "protocolVersion": "2025-06-18",
        "capabilities": {"tools": {"listChanged": True}},
        "serverInfo": {"name": "app", "version": "2"},
        "instructions": "hi",
    }
    fallback = initialize_result({"capabilities": {}}, "2031-01-01", "demo")
    assert fallback["protocolVersion"] == "2025-11-25"  # a version the client cannot have meant: the newest legacy one
    assert fallback["serverInfo"] == {"name": "demo", "version": "unknown"}  # required by the legacy schema


@pytest.mark.parametrize(
    ("info", "expected"),
    [
        ({"name": "app"}, {"name": "app", "version": "unknown"}),
        ({"name": "app", "version": 3, "title": "App"}, {"name": "app", "version": "unknown", "title": "App"}),
        ({"version": "2"}, {"name": "demo", "version": "2"}),
        ("app", {"name": "demo", "version": "unknown"}),
    ],
)
def test_a_discover_result_without_a_server_version_still_gives_a_valid_initialize_result(info: Any, expected: dict[str, Any]) -> None:
    """Issue 41, 7: a serverInfo without ``version`` went to the 2025-era client as it was,
    which the 2025-11-25 schema (``Implementation``) refuses."""
    from mcp.types import InitializeResult

    discover = {"supportedVersions": ["2026-07-28"], "capabilities": {}, "_meta": {"io.modelcontextprotocol/serverInfo": info}}
    result = initialize_result(discover, "2025-11-25", "demo")
    assert result["serverInfo"] == expected
    InitializeResult.model_validate(result)


def test_input_required_rounds() -> None:
    asked = {"k": {"method": "elicitation/create", "params": {"message": "name?"}}}
    reply = {"result": {"resultType": "input_required", "inputRequests": asked, "requestState": "s1"}}
    found = input_requests(reply)
    assert found is not None and found.requests == asked and found.state == "s1"
    assert input_requests({"result": {"resultType": "complete", "content": []}}) is None
    assert input_requests({"result": {"content": []}}) is None
    retried = retry_params({"name": "t", "inputResponses": {"old": {}}}, {"k": {"action": "accept"}}, "s1")
    assert retried == {"name": "t", "inputResponses": {"k": {"action": "accept"}}, "requestState": "s1"}
    assert retry_params({"name": "t"}, None, None) == {"name": "t"}


def test_listen_filter_and_its_notifications() -> None:
    capabilities = {"tools": {"listChanged": True}, "prompts": {}, "resources": {"listChanged": True, "subscribe": True}}
    assert listen_filter(capabilities, []) == {"toolsListChanged": True, "resourcesListChanged": True}
    assert listen_filter({}, ["file:///a"]) == {"resourceSubscriptions": ["file:///a"]}
    assert listen_filter({}, []) == {}
    tagged = {"io.modelcontextprotocol/subscriptionId": 4}
    assert legacy_notification({"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {"_meta": tagged}}) == {
        "jsonrpc": "2.0",
        "method": "notifications/tools/list_changed",
    }
    updated = {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "file:///a", "_meta": tagged}}
    assert legacy_notification(updated) == {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "file:///a"}}
    assert legacy_notification({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": {}}) is None


def test_what_has_no_equivalent_is_named() -> None:
    assert untranslated("tools/call", {"name": "t"}) is None
    error = untranslated("tasks/get", {"taskId": "1"})
    assert error is not None and error["data"]["missing"] == "tasks" and "2026-07-28" in error["message"]
    error = untranslated("tools/call", {"name": "t", "task": {"ttl": 1}})
    assert error is not None and error["data"]["missing"] == "task-augmented requests"
