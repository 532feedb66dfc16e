"""The error table of docs/behaviour.md ("Errors"), in one place, complete."""

from __future__ import annotations

import bridge
from bridge.core import errors
from bridge.core.errors import (
    INTERNAL_ERROR,
    REASONS,
    BridgeError,
    BridgeInternalError,
    HTTPStatusError,
    NotConfiguredError,
    ParseError,
    ShuttingDownError,
    ToolFilteredError,
    UpstreamError,
    error_response,
)

DOCUMENTED_REASONS = {
    "app_unreachable",
    "app_launch_failed",
    "tls_failed",
    "auth_rejected",
    "timeout",
    "http_status",
    "bad_upstream_response",
    "stream_closed",
    "session_lost",
    "message_too_large",
    "shutting_down",
    "not_configured",
    "listener_unverified",
    "protocol_era",
    "tool_filtered",
    "bridge_error",
}

#: Every class that answers a request with -32603 and a ``data.reason``.
REASON_CLASSES: list[type[BridgeError]] = [*UpstreamError.__subclasses__(), ShuttingDownError, NotConfiguredError, BridgeInternalError]


def test_every_documented_reason_has_exactly_one_error_class() -> None:
    classes: list[type[BridgeError]] = [*REASON_CLASSES, ToolFilteredError]
    assert sorted(cls.reason or "" for cls in classes) == sorted(DOCUMENTED_REASONS)
    assert set(REASONS) == DOCUMENTED_REASONS


def test_every_upstream_error_is_minus_32603_with_bridge_source_and_its_reason() -> None:
    for cls in REASON_CLASSES:
        exc = HTTPStatusError("m", 502) if cls is HTTPStatusError else cls("m")
        reply = error_response(7, exc)
        assert reply["id"] == 7
        assert reply["error"]["code"] == INTERNAL_ERROR
        assert reply["error"]["data"]["source"] == "bridge"
        assert reply["error"]["data"]["reason"] == cls.reason


def test_http_status_error_carries_the_status() -> None:
    assert error_response("a", HTTPStatusError("m", 500))["error"]["data"] == {
        "source": "bridge",
        "reason": "http_status",
        "httpStatus": 500,
    }


def test_parse_error_has_code_minus_32700_null_id_and_no_data() -> None:
    assert error_response(None, ParseError("Parse error")) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error"},
    }


def test_public_names_are_exported() -> None:
    for name in bridge.__all__:
        assert getattr(bridge, name) is not None
    for name in errors.__all__:
        assert hasattr(errors, name)


def test_a_failure_inside_the_bridge_and_shutting_down_are_not_blamed_on_the_app() -> None:
    assert not issubclass(BridgeInternalError, UpstreamError)
    assert not issubclass(ShuttingDownError, UpstreamError)
    assert error_response(1, BridgeInternalError("m"))["error"] == {
        "code": INTERNAL_ERROR,
        "message": "m",
        "data": {"source": "bridge", "reason": "bridge_error"},
    }


def test_a_filtered_tool_call_is_minus_32602_naming_the_option() -> None:
    """MCP's code for an unknown tool (server/tools, "Error Handling"): the client was never shown it."""
    reply = error_response(3, ToolFilteredError("The tool 'x' is hidden by --deny-tool.", "--deny-tool"))
    assert reply["error"] == {
        "code": -32602,
        "message": "The tool 'x' is hidden by --deny-tool.",
        "data": {"source": "bridge", "reason": "tool_filtered", "option": "--deny-tool"},
    }
