"""``mcp-app-bridge demo-app``: the tiny app someone connecting a client can try against. A
real bridge process finds it by ``--app-name`` (its discovery file and token) and gets
``initialize``, ``tools/list`` and both tools through; ``check`` passes; stopping it removes
its discovery file; a second one for the same name is refused. Run as shipped too: the
frozen file when ``MCP_APP_BRIDGE_EXE`` names it (marked ``process``)."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.apps import isolated_env
from support.processes import BridgeProcess, bridge_command, handshake, request, result_text, tool_call

pytestmark = pytest.mark.process

APP_NAME = "DemoAppTest"
START_TIMEOUT_SECONDS = 30.0


class DemoApp:
    def __init__(self, env: dict[str, str], *args: str) -> None:
        self.proc = subprocess.Popen(
            [*bridge_command(), "demo-app", "--app-name", APP_NAME, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env=env,
            text=True,
            creationflags=getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0),  # Windows: CTRL_BREAK_EVENT stops it
        )
        lines: queue.Queue[str | None] = queue.Queue()

        def read() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=read, daemon=True).start()
        self.output: list[str] = []
        while True:
            line = lines.get(timeout=START_TIMEOUT_SECONDS)
            assert line is not None, "demo-app exited: " + "".join(self.output) + (self.proc.stderr.read() if self.proc.stderr else "")
            self.output.append(line)
            if line.startswith("discovery file: "):
                self.discovery_file = Path(line.split(": ", 1)[1].strip())
            if line.startswith("Ctrl-C stops it"):
                break
        self.url = self.output[0].rsplit(" ", 1)[1].strip()

    def stop(self) -> int:
        if self.proc.poll() is None:
            stop_signal = signal.SIGTERM if sys.platform != "win32" else signal.CTRL_BREAK_EVENT  # type: ignore[attr-defined,unused-ignore]
            self.proc.send_signal(stop_signal)
        try:
            return self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return isolated_env(tmp_path)


@pytest.fixture
def demo(env: dict[str, str]) -> Iterator[DemoApp]:
    app = DemoApp(env)
    yield app
    app.stop()


def test_a_real_bridge_reaches_the_demo_app_by_its_name(demo: DemoApp, env: dict[str, str]) -> None:
    assert demo.discovery_file.exists()
    assert f"mcp-app-bridge check --app-name {APP_NAME}" in "".join(demo.output)
    with BridgeProcess("--app-name", APP_NAME, env=env) as bridge:
        result = handshake(bridge)
        assert result["serverInfo"]["name"] == APP_NAME
        bridge.send(request(1, "tools/list"))
        assert {tool["name"] for tool in bridge.read_reply(1)["result"]["tools"]} == {"echo", "add"}
        bridge.send(tool_call(2, "echo", {"text": "héllo 👋"}))
        assert result_text(bridge.read_reply(2)) == "héllo 👋"
        bridge.send(tool_call(3, "add", {"a": 2, "b": 40}))
        assert result_text(bridge.read_reply(3)) == "42"
        bridge.send(request(4, "resources/list"))
        assert bridge.read_reply(4)["error"]["code"] == -32601


def test_check_passes_against_it(demo: DemoApp, env: dict[str, str]) -> None:
    done = subprocess.run(
        [*bridge_command(), "check", "--app-name", APP_NAME], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 tools: echo, add" in done.stdout


def test_it_wants_its_token_and_a_loopback_host(demo: DemoApp) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
    token = json.loads(demo.discovery_file.read_text())["token"]
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def post(headers: dict[str, str]) -> int:
        req = urllib.request.Request(demo.url, data=body, headers={"Content-Type": "application/json", **headers})
        try:
            with opener.open(req, timeout=30) as reply:
                return int(reply.status)
        except urllib.error.HTTPError as exc:
            return exc.code

    assert post({}) == 401
    assert post({"Authorization": "Bearer wrong"}) == 401
    assert post({"Authorization": f"Bearer {token}", "Host": "evil.example"}) == 403
    assert post({"Authorization": f"Bearer {token}", "Origin": "http://evil.example"}) == 403
    assert post({"Authorization": f"Bearer {token}"}) == 200


def test_stopping_it_removes_its_discovery_file_and_one_name_runs_once(demo: DemoApp, env: dict[str, str]) -> None:
    second = subprocess.run(
        [*bridge_command(), "demo-app", "--app-name", APP_NAME], env=env, capture_output=True, text=True, timeout=60
    )
    assert second.returncode == 1 and "already publishes" in second.stderr, second.stderr
    assert demo.discovery_file.exists()
    assert demo.stop() == 0
    assert not demo.discovery_file.exists()


def test_the_lazy_launch_recipe_of_the_docs_starts_the_demo_app_once_and_a_start_after_it_stops_launches_nothing(
    env: dict[str, str],
) -> None:
    """Issue 41, point 14: ``--app-name DemoApp --launch "mcp-app-bridge demo-app"`` (docs/clients.md,
    "A test app") needs no clone: the first call starts it; once it is stopped, a client's
    start (``initialize``, ``resources/list``, ``tools/list``) is answered from the catalog
    and starts nothing."""
    from support.apps import process_alive, stop_pids
    from support.processes import initialize, wait_until

    from bridge.app.discovery import read_discovery_file

    program = Path(sys.executable).parent / "mcp-app-bridge"
    if not program.exists():
        pytest.skip("no mcp-app-bridge console script beside this Python")
    env = {**env, "PATH": f"{program.parent}{os.pathsep}{env.get('PATH', '')}"}
    recipe = ("--app-name", "DemoApp", "--launch", "mcp-app-bridge demo-app")
    docs = (Path(__file__).resolve().parents[2] / "docs" / "clients.md").read_text(encoding="utf-8")
    assert '--app-name DemoApp --launch "mcp-app-bridge demo-app"' in docs
    discovery = Path(env["XDG_STATE_HOME"]) / "DemoApp" / "mcp-endpoint.json"
    pids: list[int] = []
    try:
        with BridgeProcess(*recipe, env=env) as bridge:
            handshake(bridge)
            bridge.send(request(1, "resources/list"))
            assert bridge.read_reply(1)["error"]["code"] == -32601
            bridge.send(request(2, "tools/list"))
            assert {tool["name"] for tool in bridge.read_reply(2)["result"]["tools"]} == {"echo", "add"}
        pid = read_discovery_file(discovery).pid
        assert pid is not None
        pids.append(pid)
        stop_pids([pid])
        assert wait_until(lambda: not process_alive(pid) and not discovery.exists(), 30)
        with BridgeProcess(*recipe, env=env) as bridge:
            bridge.send(initialize(0))
            assert bridge.read_reply(0)["result"]["serverInfo"]["name"] == "DemoApp"
            bridge.send(request(1, "resources/list"))
            assert bridge.read_reply(1)["error"]["code"] == -32601
            bridge.send(request(2, "tools/list"))
            assert {tool["name"] for tool in bridge.read_reply(2)["result"]["tools"]} == {"echo", "add"}
        assert not discovery.exists(), "a client's start launched the demo app"
    finally:
        if discovery.exists():
            pids.append(read_discovery_file(discovery).pid or 0)
        stop_pids([pid for pid in pids if pid])
