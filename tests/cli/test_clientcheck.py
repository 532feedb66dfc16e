"""``mcp-app-bridge check --client codex``: Codex's own report of its servers, through a fake
``codex`` on PATH that speaks the app-server protocol as Codex 0.169.0 does (no ``jsonrpc``
member, notifications before the reply; ``mcpServerStatus/list`` entries with ``tools`` keyed by
name and ``toolsError``). The pinned real Codex is in tests/realclients/test_realclients.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bridge.cli.clientcheck import CodexCheckError, codex_server_statuses

pytestmark = pytest.mark.posix_only("the fake `codex` is a POSIX script on PATH")

FAKE = r'''
import json, os, sys, time
behaviour = os.environ["FAKE_CODEX"]
log = os.environ.get("FAKE_CODEX_LOG")
if sys.argv[1:] != ["app-server"]:
    sys.exit("fake codex: expected app-server, got %r" % sys.argv[1:])
pages = json.loads(os.environ.get("FAKE_CODEX_PAGES", "[[]]"))
sys.stderr.write("codex log line that must not be printed\n" * 2000)
sys.stderr.flush()
for line in sys.stdin:
    message = json.loads(line)
    if log:
        open(log, "a").write(json.dumps(message) + "\n")
    method = message.get("method")
    if behaviour == "exit":
        sys.exit(3)
    if method == "initialize":
        print(json.dumps({"id": message["id"], "result": {"userAgent": "fake/0.169.0"}}), flush=True)
        print(json.dumps({"method": "configWarning", "params": {"summary": "no bubblewrap"}}), flush=True)
    elif method == "mcpServerStatus/list":
        if behaviour == "hang":
            time.sleep(600)
        if behaviour == "refuse":
            print(json.dumps({"id": message["id"], "error": {"code": -32601, "message": "unknown method"}}), flush=True)
            continue
        index = int(message["params"].get("cursor") or 0)
        result = {"data": pages[index], "nextCursor": str(index + 1) if index + 1 < len(pages) else None}
        print(json.dumps({"id": message["id"], "result": result}), flush=True)
'''

CONNECTED = {
    "name": "myapp",
    "serverInfo": {"name": "demo-app", "version": "1.0.0"},
    "tools": {"echo": {"name": "echo"}, "app_info": {"name": "app_info"}},
    "toolsError": None,
}
REASON = (
    "JSON-RPC error: -32603: The app is not running. Start it and try again (nothing accepts connections at "
    'http://127.0.0.1:9/mcp).({"source":"bridge","reason":"app_unreachable"})'
)
FAILED: dict[str, Any] = {
    "name": "down",
    "serverInfo": None,
    "tools": {},
    "toolsError": f"MCP startup failed: handshaking with MCP server failed: {REASON}: {REASON}",
}


@pytest.fixture
def fake_codex(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `codex` on PATH (first) running FAKE; returns the folder it is in."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "fake_codex.py").write_text(FAKE, encoding="utf-8")
    script = folder / "codex"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{folder / "fake_codex.py"}" "$@"\n', encoding="utf-8")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FAKE_CODEX", "normal")
    return folder


def _check(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bridge", "check", "--client", "codex", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def test_each_server_is_printed_with_its_status_and_tools(fake_codex: Path) -> None:
    done = _check(env={"FAKE_CODEX_PAGES": json.dumps([[CONNECTED, FAILED]])})
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "✓ myapp: connected, 2 tools (app_info, echo)" in lines, done.stdout
    down = next(line for line in lines if line.startswith("✗ down:"))
    assert "The app is not running" in down and down.count("The app is not running") == 1, down
    assert "must not be printed" not in done.stdout + done.stderr


def test_all_connected_exits_0_and_name_filters(fake_codex: Path) -> None:
    pages = json.dumps([[CONNECTED, FAILED]])
    done = _check("--name", "myapp", env={"FAKE_CODEX_PAGES": pages})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "myapp: connected" in done.stdout and "down" not in done.stdout


def test_a_name_codex_does_not_have_says_how_to_add_it(fake_codex: Path) -> None:
    done = _check("--name", "other", env={"FAKE_CODEX_PAGES": json.dumps([[CONNECTED]])})
    assert done.returncode == 1
    assert "✗ other: Codex has no server of that name" in done.stdout
    assert "config install --client codex --name other" in done.stdout


def test_pages_are_followed_and_the_protocol_is_codexs(fake_codex: Path, tmp_path: Path) -> None:
    log = tmp_path / "sent.jsonl"
    statuses = codex_server_statuses(
        env={**os.environ, "FAKE_CODEX_PAGES": json.dumps([[CONNECTED], [FAILED]]), "FAKE_CODEX_LOG": str(log)}
    )
    assert [(s.name, s.connected) for s in statuses] == [("myapp", True), ("down", False)]
    sent = [json.loads(line) for line in log.read_text().splitlines()]
    assert [m.get("method") for m in sent] == ["initialize", "initialized", "mcpServerStatus/list", "mcpServerStatus/list"]
    assert sent[3]["params"] == {"cursor": "1"}
    assert all("jsonrpc" not in m for m in sent)


@pytest.mark.parametrize(
    ("behaviour", "says"),
    [("exit", "exited without answering"), ("refuse", "refused mcpServerStatus/list: unknown method")],
)
def test_codex_failing_is_one_line_and_exit_1(fake_codex: Path, behaviour: str, says: str) -> None:
    done = _check(env={"FAKE_CODEX": behaviour})
    assert done.returncode == 1
    assert says in done.stdout, done.stdout


def test_a_codex_that_never_answers_is_bounded_and_ended(fake_codex: Path) -> None:
    with pytest.raises(CodexCheckError, match="in time"):
        codex_server_statuses(timeout_seconds=2.0, env={**os.environ, "FAKE_CODEX": "hang"})


def test_no_codex_on_path(tmp_path: Path) -> None:
    done = _check(env={"PATH": str(tmp_path)})
    assert done.returncode == 1
    assert "`codex` is not on PATH" in done.stdout


def test_bridge_options_do_not_go_with_client() -> None:
    done = _check("--url", "http://127.0.0.1:9/mcp")
    assert done.returncode == 2
    assert "give no bridge options with it" in done.stderr
    alone = subprocess.run(
        [sys.executable, "-m", "bridge", "check", "--name", "x"], capture_output=True, text=True, timeout=60
    )
    assert alone.returncode == 2 and "--name goes with --client" in alone.stderr
