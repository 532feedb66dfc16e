"""The era object, purely: decided once from a request's ``_meta``, answering each layer's question."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.core.era import LEGACY, PROTOCOL_VERSION_META_KEY, Era, era_of, is_header_mismatch
from bridge.core.jsonrpc import Request, classify, encode_message

MODERN = "2026-07-28"


def meta(version: Any) -> dict[str, Any]:
    return {"_meta": {PROTOCOL_VERSION_META_KEY: version}}


@pytest.mark.parametrize(
    "params",
    [None, [], [1, 2], {}, {"_meta": None}, {"_meta": {}}, meta(""), meta(20260728), meta(None), {"_meta": [MODERN]}],
)
def test_a_request_that_names_no_version_is_legacy(params: Any) -> None:
    assert era_of(params) is LEGACY


def test_a_request_that_names_a_version_is_of_that_era() -> None:
    assert era_of(meta(MODERN)) == Era(MODERN) and era_of({**meta(MODERN), "name": "x"}).version == MODERN


def test_the_legacy_era_keeps_the_session_rules() -> None:
    assert not LEGACY.stateless and LEGACY.may_rebuild and LEGACY.resumable
    assert not LEGACY.cancel_by_closing and LEGACY.sends_timeout_cancellation
    assert not LEGACY.relists_on_mismatch("tools/call") and not LEGACY.filters_tool_list("tools/list")
    assert not LEGACY.endless("subscriptions/listen")
    assert LEGACY.headers("tools/call", {"name": "x"}, {}) is None  # the MCP session's headers go instead


def test_the_stateless_era_has_no_session_and_cancels_by_closing() -> None:
    era = Era(MODERN)
    assert era.stateless and not era.may_rebuild and not era.resumable
    assert era.cancel_by_closing and not era.sends_timeout_cancellation
    assert era.relists_on_mismatch("tools/call") and not era.relists_on_mismatch("tools/list")
    assert era.filters_tool_list("tools/list") and not era.filters_tool_list("tools/call")
    assert era.endless("subscriptions/listen") and not era.endless("tools/call")


def test_the_stateless_era_builds_the_request_headers() -> None:
    headers = Era(MODERN).headers("tools/call", {"name": "weather", "arguments": {"region": "eu"}}, {"weather": {("region",): "Region"}})
    assert headers == {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "weather", "Mcp-Param-Region": "eu"}


def test_the_era_is_decided_when_the_request_is_classified_and_built() -> None:
    line = encode_message({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x", **meta(MODERN)}})[:-1]
    request = classify(line)
    assert isinstance(request, Request) and request.era == Era(MODERN)
    legacy = classify(b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x"}}')
    assert isinstance(legacy, Request) and legacy.era is LEGACY
    built = Request("relist-1", "tools/list", meta(MODERN), b"{}")  # the bridge's own requests too
    assert built.era == Era(MODERN) and Request(3, "ping", None, b"{}").era is LEGACY


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (b'{"jsonrpc":"2.0","id":1,"error":{"code":-32020,"message":"Header mismatch"}}\n', True),
        (b'{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"-32020"}}\n', False),
        (b'{"jsonrpc":"2.0","id":1,"result":{"text":"-32020"}}\n', False),
        (b'{"jsonrpc":"2.0","id":1,"error":{"code":-32020.0,"message":"x"}}\n', False),
        (b'{"jsonrpc":"2.0","id":1,"result":{}}\n', False),
    ],
)
def test_a_header_mismatch_is_error_code_minus_32020_only(line: bytes, expected: bool) -> None:
    assert is_header_mismatch(line) is expected
