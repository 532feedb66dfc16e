"""The composition root: parts built from a configuration, and a driver that takes its parts."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from support.helpers import TOKEN, URL, init, json_response

from bridge.app.tokens import FixedTokenSource, token_source_for
from bridge.core.config import BridgeConfig
from bridge.core.jsonrpc import Request, classify
from bridge.serve.driver import Driver
from bridge.serve.parts import build_parts, build_stack

pytestmark = pytest.mark.anyio




class RecordingApp:
    """Answers initialize with a session id and anything else with {}; records what came."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        message = json.loads(request.content)
        if message.get("method") == "initialize":
            result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {"listChanged": True}}}
            return json_response({"jsonrpc": "2.0", "id": message["id"], "result": result}, headers={"mcp-session-id": "s1"})
        if "id" not in message:
            return httpx.Response(202)
        return json_response({"jsonrpc": "2.0", "id": message["id"], "result": {}})


async def ignore(line: bytes, message: Any = None) -> None:
    return None


def request(line: bytes) -> Request:
    message = classify(line.rstrip(b"\n"))
    assert isinstance(message, Request)
    return message


async def test_a_driver_given_its_parts_forwards_through_them() -> None:
    app = RecordingApp()
    transport = httpx.MockTransport(app)
    parts = build_parts(BridgeConfig(url=URL, token=TOKEN), http_transport=transport)
    driver = Driver(parts.upstream, parts.launcher, app_name="Desk")
    try:
        reply = json.loads((await driver.forward(request(init(1)), ignore)).line)
        assert reply["id"] == 1 and reply["result"]["protocolVersion"] == "2025-06-18"
        await driver.forward(request(b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}'), ignore)
        assert app.requests[-1].headers["mcp-session-id"] == "s1"  # the upstream part holds the session
        assert app.requests[-1].headers["authorization"] == f"Bearer {TOKEN}"  # through the token part
        assert driver.list_changed_notifications() == [b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n']
    finally:
        await driver.aclose()
        await transport.aclose()


async def test_the_stack_calls_down_through_its_layers_and_check_reads_the_parts() -> None:
    app = RecordingApp()
    transport = httpx.MockTransport(app)
    stack = build_stack(BridgeConfig(url=URL, token=TOKEN, app_name="Desk"), http_transport=transport)
    try:
        reply = json.loads(await stack.top.request(request(init(1)), ignore))
        assert reply["id"] == 1 and reply["result"]["protocolVersion"] == "2025-06-18"
        await stack.top.request(request(b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}'), ignore)
        assert app.requests[-1].headers["mcp-session-id"] == "s1"
        assert (await stack.parts.tokens.current(stack.parts.upstream.token_context()))[0] == TOKEN
        assert stack.parts.tokens.source_description == "configured token"
        assert not stack.parts.launcher.configured and stack.lazy.catalog is None
        assert stack.top.list_changed_notifications() == [b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n']
    finally:
        await stack.top.aclose()
        await transport.aclose()


async def test_the_token_source_is_picked_in_order_object_callable_fixed_discovery_none() -> None:
    parts = build_parts(BridgeConfig(url=URL))
    assert token_source_for(BridgeConfig(url=URL, token="t"), parts.endpoint).__class__ is FixedTokenSource
    assert token_source_for(BridgeConfig(url=URL), parts.endpoint) is None
    source = FixedTokenSource("x")
    assert token_source_for(BridgeConfig(url=URL, token="t", token_source=source), parts.endpoint) is source
    assert token_source_for(BridgeConfig(url=URL, token_source=lambda base_url: "y"), parts.endpoint) is not None
    with pytest.raises(TypeError):
        token_source_for(BridgeConfig(url=URL, token_source=42), parts.endpoint)
