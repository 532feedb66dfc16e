"""Lazy launch when the client and the app are of different protocol eras, with real
processes (docs/behaviour.md, "Lazy launch" and "Protocol eras").

The example app as a desktop app (``tests/support/lifecycle.py``), serving one era only
(``--modern-only``: MCP 2026-07-28 alone; ``--legacy-only``: the 2025 era alone). A first
bridge launches it, translates for a client of the other era and caches what it served,
with the era the app refused; the app is then stopped. Later bridges answer the client's
start-up from that catalog without starting the app, and the first ``tools/call`` starts it,
once.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from support import processes
from support.apps import process_alive, stop_pids
from support.lifecycle import LAUNCH_REPLY_TIMEOUT, LAUNCH_TIMEOUT, Desk
from support.processes import INITIALIZED, initialize, result_text, tool_call, wait_until

pytestmark = pytest.mark.process

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "modern-client", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _args(desk: Desk, era_flag: str) -> list[str]:
    return [
        "--discovery-file", str(desk.discovery),
        "--launch", desk.launch_command(era_flag),
        "--launch-timeout", str(LAUNCH_TIMEOUT),
        "--log-level", "info",
    ]


def _reply(bridge: processes.BridgeProcess, message: dict[str, Any]) -> dict[str, Any]:
    bridge.send(message)
    return bridge.read_reply(message["id"], LAUNCH_REPLY_TIMEOUT)


def _result(bridge: processes.BridgeProcess, message: dict[str, Any]) -> dict[str, Any]:
    reply = _reply(bridge, message)
    assert "result" in reply, f"{reply}\n{bridge.stderr_tail()}"
    return dict(reply["result"])


def _modern(request_id: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**(params or {}), "_meta": MODERN_META}}


def _stop_the_app(desk: Desk) -> int:
    (pid,) = desk.launches()
    stop_pids([pid])
    assert wait_until(lambda: not process_alive(pid), 10)
    return pid


def test_a_2025_client_of_the_2026_only_app_starts_it_on_the_first_call_only(desk: Desk) -> None:
    args = _args(desk, "--modern-only")
    with desk.bridge(*args) as bridge:  # the app runs: the catalog learns it refuses initialize
        served = _result(bridge, initialize(0))
        bridge.send(INITIALIZED)
        names = [tool["name"] for tool in _result(bridge, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})["tools"]]
        desk.note_token()
        bridge.finish()
    first = _stop_the_app(desk)
    bridges = [desk.bridge(*args) for _ in range(2)]
    try:
        for bridge in bridges:  # a 2025-era client's start: initialize, tools/list, ping
            assert _result(bridge, initialize(0)) == served, bridge.stderr_tail()
            bridge.send(INITIALIZED)
            assert [tool["name"] for tool in _result(bridge, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})["tools"]] == names
            assert _result(bridge, {"jsonrpc": "2.0", "id": 2, "method": "ping"}) == {}
        time.sleep(1.0)  # a launch would show in the started file by now
        assert desk.launches() == [first], "a start-up probe launched the 2026-only app"
        assert result_text(_reply(bridges[0], tool_call(3, "echo", {"text": "lazy ✓"}))) == "lazy ✓", bridges[0].stderr_tail()
        assert result_text(_reply(bridges[1], tool_call(3, "echo", {"text": "second ✓"}))) == "second ✓", bridges[1].stderr_tail()
        assert len(desk.launches()) == 2, "the first call launches the app once, across bridges"
        desk.note_token()
        for bridge in bridges:
            bridge.finish()
    finally:
        for bridge in bridges:
            bridge.__exit__(RuntimeError, None, None)


def test_a_2026_client_of_the_legacy_only_app_starts_it_on_the_first_call_only(desk: Desk) -> None:
    args = _args(desk, "--legacy-only")
    with desk.bridge(*args) as bridge:  # the app runs: a probing client is refused and falls back
        assert "error" in _reply(bridge, _modern(0, "server/discover")), bridge.stderr_tail()
        _result(bridge, initialize(1))
        bridge.send(INITIALIZED)
        names = [tool["name"] for tool in _result(bridge, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})["tools"]]
        desk.note_token()
        bridge.finish()
    first = _stop_the_app(desk)
    with desk.bridge(*args) as prober:  # a client that probes, then falls back: all from the catalog
        refusal = _reply(prober, _modern(0, "server/discover"))
        assert "error" in refusal and refusal["id"] == 0, f"{refusal}\n{prober.stderr_tail()}"
        assert _result(prober, initialize(1))["serverInfo"]["name"] == "example-app"
        prober.send(INITIALIZED)
        assert [tool["name"] for tool in _result(prober, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})["tools"]] == names
        prober.finish()
    with desk.bridge(*args) as pinned:  # a client pinned to 2026-07-28: its list from the catalog, in its era
        listing = _result(pinned, _modern(1, "tools/list"))
        assert [tool["name"] for tool in listing["tools"]] == names and listing["resultType"] == "complete"
        time.sleep(1.0)  # a launch would show in the started file by now
        assert desk.launches() == [first], "a start-up probe launched the legacy-only app"
        reply = _reply(pinned, tool_call(2, "echo", {"text": "translated ✓"}, meta=MODERN_META))
        assert "result" in reply, f"{reply}\n{pinned.stderr_tail()}"
        assert result_text(reply) == "translated ✓", f"{reply}\n{pinned.stderr_tail()}"
        desk.note_token()
        pinned.finish()
    assert len(desk.launches()) == 2
