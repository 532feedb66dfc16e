"""Lazy launch with real processes (docs/behaviour.md, "Lazy launch").

The example app as a desktop app (``tests/support/lifecycle.py``): a first bridge launches it
and caches what it served; the app is then stopped. Later bridges answer a client's
start-up (``initialize``, ``tools/list``, ``ping``) from that catalog without starting the
app, and the first ``tools/call`` starts it, once.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from support import processes
from support.apps import process_alive, stop_pids
from support.lifecycle import LAUNCH_REPLY_TIMEOUT, LAUNCH_TIMEOUT, Desk
from support.processes import INITIALIZED, initialize, result_text, tool_call, wait_until

pytestmark = pytest.mark.process


def _args(desk: Desk, *extra: str) -> list[str]:
    return [
        "--discovery-file", str(desk.discovery),
        "--launch", desk.launch_command(),
        "--launch-timeout", str(LAUNCH_TIMEOUT),
        "--log-level", "info",
        *extra,
    ]


def _catalog_files(desk: Desk) -> list[Path]:
    return sorted((Path(desk.env["XDG_STATE_HOME"]) / "mcp-app-bridge" / "catalogs").glob("*.json"))


def _list(bridge: processes.BridgeProcess, request_id: int, method: str = "tools/list") -> dict[str, Any]:
    bridge.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": {}})
    reply = bridge.read_reply(request_id, LAUNCH_REPLY_TIMEOUT)
    assert "result" in reply, f"{reply}\n{bridge.stderr_tail()}"
    return dict(reply["result"])


def _warm_catalog_then_stop_the_app(desk: Desk) -> list[str]:
    """A first bridge launches the app and lists its tools (the catalog is written); the
    app is then stopped. Returns the tool names."""
    with desk.bridge(*_args(desk)) as bridge:
        bridge.send(initialize(0))
        assert "result" in bridge.read_reply(0, LAUNCH_REPLY_TIMEOUT), bridge.stderr_tail()
        bridge.send(INITIALIZED)
        names = [tool["name"] for tool in _list(bridge, 1)["tools"]]
        token = desk.note_token()
        bridge.finish()
    (pid,) = desk.launches()
    stop_pids([pid])
    assert wait_until(lambda: not process_alive(pid), 10)
    (catalog,) = _catalog_files(desk)
    assert os.stat(catalog).st_mode & 0o777 == 0o600
    text = catalog.read_text(encoding="utf-8")
    assert token not in text and desk.secret not in text  # never a secret
    return names


def test_two_bridges_answer_the_start_up_from_the_catalog_and_the_first_call_launches_once(desk: Desk) -> None:
    names = _warm_catalog_then_stop_the_app(desk)
    first_pid = desk.launches()
    bridges = [desk.bridge(*_args(desk)) for _ in range(2)]
    try:
        for bridge in bridges:  # a client's start: initialize, tools/list, ping
            bridge.send(initialize(0))
            reply = bridge.read_reply(0, LAUNCH_REPLY_TIMEOUT)
            assert reply["result"]["serverInfo"]["name"] == "example-app", bridge.stderr_tail()
            assert reply["result"]["protocolVersion"] == initialize(0)["params"]["protocolVersion"]
            bridge.send(INITIALIZED)
            assert [tool["name"] for tool in _list(bridge, 1)["tools"]] == names
            assert _list(bridge, 2, "ping") == {}
        time.sleep(1.0)  # a launch would show in the started file by now
        assert desk.launches() == first_pid, "a start-up probe launched the app"
        bridges[0].send(tool_call(3, "echo", {"text": "lazy ✓"}))
        reply = bridges[0].read_reply(3, LAUNCH_REPLY_TIMEOUT)
        assert result_text(reply) == "lazy ✓", f"{reply}\n{bridges[0].stderr_tail()}"
        bridges[1].send(tool_call(3, "echo", {"text": "second ✓"}))
        reply = bridges[1].read_reply(3, LAUNCH_REPLY_TIMEOUT)
        assert result_text(reply) == "second ✓", f"{reply}\n{bridges[1].stderr_tail()}"
        assert len(desk.launches()) == 2, "the first call launches the app once, across bridges"
        desk.note_token()
        # nothing differs from the catalog: no list_changed
        assert not [m for b in bridges for m in b.messages if str(m.get("method", "")).endswith("list_changed")]
        for bridge in bridges:
            bridge.finish()
    finally:
        for bridge in bridges:
            bridge.__exit__(RuntimeError, None, None)


def test_a_changed_tool_list_is_announced_once_the_app_is_up(desk: Desk) -> None:
    """The app was updated since the catalog was written (here: the catalog lacks a tool):
    the client got the catalog's list, and hears ``notifications/tools/list_changed``."""
    names = _warm_catalog_then_stop_the_app(desk)
    (catalog,) = _catalog_files(desk)
    entry = json.loads(catalog.read_text(encoding="utf-8"))
    entry["lists"]["tools/list"]["tools"] = entry["lists"]["tools/list"]["tools"][1:]
    catalog.write_text(json.dumps(entry), encoding="utf-8")
    with desk.bridge(*_args(desk)) as bridge:
        bridge.send(initialize(0))
        assert "result" in bridge.read_reply(0, LAUNCH_REPLY_TIMEOUT), bridge.stderr_tail()
        bridge.send(INITIALIZED)
        assert [tool["name"] for tool in _list(bridge, 1)["tools"]] == names[1:]
        assert len(desk.launches()) == 1
        bridge.send(tool_call(2, "echo", {"text": "up"}))
        assert result_text(bridge.read_reply(2, LAUNCH_REPLY_TIMEOUT)) == "up", bridge.stderr_tail()
        changed = [m for m in bridge.messages if m.get("method") == "notifications/tools/list_changed"]
        assert len(changed) == 1, bridge.messages
        assert [tool["name"] for tool in _list(bridge, 3)["tools"]] == names  # the app's own, now
        desk.note_token()
        bridge.finish()
    assert len(desk.launches()) == 2
    updated = json.loads(catalog.read_text(encoding="utf-8"))
    assert [tool["name"] for tool in updated["lists"]["tools/list"]["tools"]] == names


def test_on_start_launches_at_initialize_even_with_a_catalog(desk: Desk) -> None:
    _warm_catalog_then_stop_the_app(desk)
    with desk.bridge(*_args(desk, "--launch-policy", "on-start")) as bridge:
        bridge.send(initialize(0))
        assert "result" in bridge.read_reply(0, LAUNCH_REPLY_TIMEOUT), bridge.stderr_tail()
        assert len(desk.launches()) == 2
        desk.note_token()
        bridge.finish()


MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "desktop-probe", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def test_a_server_discover_probe_from_another_process_is_answered_without_a_launch(desk: Desk) -> None:
    """Claude Desktop's era probe: a throwaway process sends ``server/discover`` (2026-07-28)
    and lists the tools. With the app down and a catalog from a 2026-07-28 client's start,
    it gets both without the app being started; its first call starts it."""
    discover = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": MODERN_META}}
    tools = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": MODERN_META}}
    with desk.bridge(*_args(desk)) as bridge:  # a 2026-07-28 client's start while the app runs
        bridge.send(discover)
        served = bridge.read_reply(1, LAUNCH_REPLY_TIMEOUT)
        assert "result" in served, f"{served}\n{bridge.stderr_tail()}"
        bridge.send(tools)
        names = [tool["name"] for tool in bridge.read_reply(2, LAUNCH_REPLY_TIMEOUT)["result"]["tools"]]
        desk.note_token()
        bridge.finish()
    (pid,) = desk.launches()
    stop_pids([pid])
    assert wait_until(lambda: not process_alive(pid), 10)
    for _ in range(2):  # the probe, then the real start
        with desk.bridge(*_args(desk)) as bridge:
            bridge.send(discover)
            assert bridge.read_reply(1, LAUNCH_REPLY_TIMEOUT)["result"] == served["result"], bridge.stderr_tail()
            bridge.send(tools)
            assert [tool["name"] for tool in bridge.read_reply(2, LAUNCH_REPLY_TIMEOUT)["result"]["tools"]] == names
            bridge.finish()
    assert desk.launches() == [pid]
    with desk.bridge(*_args(desk)) as bridge:
        bridge.send({**tool_call(3, "echo", {"text": "modern ✓"}, meta=MODERN_META)})
        reply = bridge.read_reply(3, LAUNCH_REPLY_TIMEOUT)
        assert result_text(reply) == "modern ✓", f"{reply}\n{bridge.stderr_tail()}"
        desk.note_token()
        bridge.finish()
    assert len(desk.launches()) == 2
