"""Messages after ``notifications/initialized`` wait until the GET stream is open, as the
official SDK clients do: a server may send a server-to-client request (elicitation,
sampling, roots) on that stream at once, and drops it while none is open (found by the
conformance suite's ``elicitation-sep1034-client-defaults`` scenario through the bridge)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest
from support.helpers import NOTIF_INIT, RunBridge, init, json_response, request_line

pytestmark = pytest.mark.anyio




class App:
    """Records the order of requests; its GET stream opens after ``get_delay_seconds``."""

    def __init__(self, get_delay_seconds: float = 0.05, get_status: int = 200) -> None:
        self.order: list[str] = []
        self.get_delay_seconds = get_delay_seconds
        self.get_status = get_status

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            self.order.append("GET")
            await anyio.sleep(self.get_delay_seconds)
            if self.get_status != 200:
                return httpx.Response(self.get_status)

            async def body() -> Any:
                yield b": open\n\n"
                await anyio.sleep(30)

            return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())
        if request.method == "DELETE":
            return httpx.Response(200)
        message = json.loads(request.content)
        self.order.append(message.get("method", "response"))
        if message.get("method") == "initialize":
            result = {"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "t", "version": "1"}}
            return json_response({"jsonrpc": "2.0", "id": message["id"], "result": result}, headers={"mcp-session-id": "s1"})
        if "id" not in message:
            return httpx.Response(202)
        return json_response({"jsonrpc": "2.0", "id": message["id"], "result": {}})


@pytest.mark.parametrize("get_status", [200, 405])
async def test_a_request_after_notifications_initialized_goes_out_after_the_get_stream_opened(get_status: int, run_bridge: RunBridge) -> None:
    app = App(get_status=get_status)
    async with run_bridge(app) as h:
        h.stdin.feed(init(0) + NOTIF_INIT + request_line(1, "tools/list"))
        messages = await h.stdout.wait_for(2)
    assert messages[1] == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert app.order.index("GET") < app.order.index("tools/list"), app.order


async def test_a_get_stream_slow_to_open_holds_the_next_request_for_a_bounded_time_only(run_bridge: RunBridge) -> None:
    app = App(get_delay_seconds=20)
    async with run_bridge(app) as h:
        h.stdin.feed(init(0) + NOTIF_INIT + request_line(1, "tools/list"))
        messages = await h.stdout.wait_for(2, timeout_seconds=10)  # the bound is 1 s, not the GET's 20 s
    assert messages[1] == {"jsonrpc": "2.0", "id": 1, "result": {}}
