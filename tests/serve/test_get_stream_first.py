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
from support.helpers import NOTIF_INIT, RunBridge, init, request_line
from support.mcp_app import McpApp

pytestmark = pytest.mark.anyio


class SlowGetStream(McpApp):
    """:class:`McpApp` (result ``{}``, any session id) whose GET stream opens after
    ``get_delay_seconds``, or is then refused with ``get_status``; ``order`` lists what
    arrived: ``GET`` or the JSON-RPC method (``response`` for a client's response)."""

    def __init__(self, get_delay_seconds: float = 0.05, get_status: int = 200) -> None:
        super().__init__(stateless=True, result={}, get_status=get_status)
        self.get_delay_seconds = get_delay_seconds

    @property
    def order(self) -> list[str]:
        return [r.method if r.method != "POST" else json.loads(r.content).get("method", "response") for r in self.requests if r.method != "DELETE"]

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method != "GET":
            return await super().__call__(request)
        self.requests.append(request)
        await anyio.sleep(self.get_delay_seconds)
        if self.get_status != 200:
            return httpx.Response(self.get_status)

        async def body() -> Any:
            yield b": open\n\n"
            await anyio.sleep(30)

        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())


@pytest.mark.parametrize("get_status", [200, 405])
async def test_a_request_after_notifications_initialized_goes_out_after_the_get_stream_opened(get_status: int, run_bridge: RunBridge) -> None:
    app = SlowGetStream(get_status=get_status)
    async with run_bridge(app) as h:
        h.stdin.feed(init(0) + NOTIF_INIT + request_line(1, "tools/list"))
        messages = await h.stdout.wait_for(2)
    assert messages[1] == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert app.order.index("GET") < app.order.index("tools/list"), app.order


@pytest.mark.slow
async def test_a_get_stream_slow_to_open_holds_the_next_request_for_a_bounded_time_only(run_bridge: RunBridge) -> None:
    app = SlowGetStream(get_delay_seconds=20)
    async with run_bridge(app) as h:
        h.stdin.feed(init(0) + NOTIF_INIT + request_line(1, "tools/list"))
        messages = await h.stdout.wait_for(2, timeout_seconds=10)  # the bound is 1 s, not the GET's 20 s
    assert messages[1] == {"jsonrpc": "2.0", "id": 1, "result": {}}
