"""The tool filter and the client-limits check through the real bridge process, with a
server on the official SDK that serves 50 tools, one of them 70 characters long
(``tests/support/sdk_many_tools_app.py``): the client is shown only what passes, a filtered
call never reaches the app (the app logs every call it runs), and ``check --client
claude-code`` names the tool Claude Code will drop (docs/usage.md, "Which tools a client
sees"; docs/clients.md, "What each client sees")."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.apps import AppServer, isolated_env
from support.processes import count_in_log, handshake, request, result_text, start_bridge, tool_call
from support.sdk_many_tools_app import LONG_NAME, MEDIUM_NAME, TOOL_COUNT, launch_many_tools_app, tool_names

pytestmark = pytest.mark.process


@pytest.fixture
def many_tools_app(tmp_path: Path) -> Iterator[AppServer]:
    with launch_many_tools_app(tmp_path / "app.log") as app:
        yield app


def _bridge(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bridge", *args], cwd=cwd, capture_output=True, text=True, timeout=60, env=isolated_env(cwd)
    )


def test_the_client_is_shown_only_the_allowed_tools_and_a_hidden_call_never_reaches_the_app(many_tools_app: AppServer) -> None:
    with start_bridge(many_tools_app.url, "--allow-tool", "read_0?", "--ignore-tool", "read_09") as bridge:
        handshake(bridge)
        bridge.send(request(1, "tools/list"))
        listing = bridge.read_reply(1)
        bridge.send(tool_call(2, "write_00", {}))
        refused = bridge.read_reply(2)
        bridge.send(tool_call(3, "read_01", {}))
        allowed = bridge.read_reply(3)
    assert [tool["name"] for tool in listing["result"]["tools"]] == [f"read_0{n}" for n in range(9)]
    assert refused["error"]["code"] == -32602 and refused["error"]["data"]["option"] == "--allow-tool"
    assert result_text(allowed) == "read_01"
    assert count_in_log(many_tools_app, "tools/call ") == 1  # read_01 alone reached the app


def test_read_only_through_the_process(many_tools_app: AppServer) -> None:
    with start_bridge(many_tools_app.url, "--read-only") as bridge:
        handshake(bridge)
        bridge.send(request(1, "tools/list"))
        listing = bridge.read_reply(1)
        bridge.send(tool_call(2, "write_03", {}))
        refused = bridge.read_reply(2)
    assert [tool["name"] for tool in listing["result"]["tools"]] == [name for name in tool_names() if name.startswith("read_")]
    assert refused["error"]["data"] == {"source": "bridge", "reason": "tool_filtered", "option": "--read-only"}
    assert count_in_log(many_tools_app, "tools/call ") == 0


def test_check_client_claude_code_names_the_tool_claude_code_drops(many_tools_app: AppServer, tmp_path: Path) -> None:
    """A 70-character tool name passes Claude Code's 64 whatever the entry's name: ``check
    --client claude-code`` names it and exits 1. ``config install`` connects to nothing (the
    client's trust step comes first): with no catalog it says nothing; once a bridge with a
    launcher has cached the app's list, it warns of the same tools from the catalog. Hidden
    with ``--deny-tool``, the check passes. Cursor, which reads 40 tools, loses ten."""
    entry = ["--url", many_tools_app.url, "--launch", "true"]  # (a launcher: the bridge keeps a catalog)
    installed = _bridge("config", "install", "--client", "claude-code", "--name", "docs-app", *entry, cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr
    assert "loses" not in installed.stderr, installed.stderr  # no catalog yet, and the app was not asked

    with start_bridge(many_tools_app.url, "--launch", "true", env=isolated_env(tmp_path)) as bridge:
        handshake(bridge)
        bridge.send(request(1, "tools/list"))
        assert len(bridge.read_reply(1)["result"]["tools"]) == TOOL_COUNT  # now in the catalog
    installed = _bridge("config", "install", "--client", "claude-code", "--name", "docs-app", "--force", *entry, cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr
    assert f"Claude Code loses {LONG_NAME!r}: mcp__docs-app__{LONG_NAME} is 85 characters, over Claude Code's 64" in installed.stderr
    assert f"Claude Code loses {MEDIUM_NAME!r}" in installed.stderr  # 5 + 8 + 2 + 52 = 67
    assert "at most 5 characters keeps the other names within the limit: install it again with --name docs " in installed.stderr

    done = _bridge("check", "--client", "claude-code", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"✗ docs-app: {TOOL_COUNT} of {TOOL_COUNT} tools shown (from the app)" in done.stdout, done.stdout
    assert f"Claude Code loses {LONG_NAME!r}" in done.stdout
    assert f"too long for Claude Code whatever the entry's name: {LONG_NAME!r}" in done.stdout

    installed = _bridge("config", "install", "--client", "claude-code", "--name", "docs", "--force", "--url", many_tools_app.url,
                        "--deny-tool", LONG_NAME, cwd=tmp_path)
    assert installed.returncode == 0 and "loses" not in installed.stderr, installed.stderr
    done = _bridge("check", "--client", "claude-code", "--name", "docs", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"✓ docs: {TOOL_COUNT - 1} of {TOOL_COUNT} tools shown (from the app), none past Claude Code's limits" in done.stdout
    assert f"the tool filter hides 1 of {TOOL_COUNT}: by --deny-tool: {LONG_NAME}" in done.stdout

    cursor = _bridge("config", "install", "--client", "cursor", "--name", "d", *entry, cwd=tmp_path)
    assert cursor.returncode == 0
    assert f"Cursor loses {tool_names()[40]!r}: tool 41 of {TOOL_COUNT}, past Cursor's 40" in cursor.stderr, cursor.stderr
    assert os.path.exists(tmp_path / "home" / ".cursor" / "mcp.json")


def test_check_shows_what_the_filter_hides_and_why(many_tools_app: AppServer, tmp_path: Path) -> None:
    done = _bridge("check", "--url", many_tools_app.url, "--deny-tool", "write_*", cwd=tmp_path)
    assert done.returncode == 0, done.stdout
    writes = [name for name in tool_names() if name.startswith("write_")]
    assert f"the tool filter hides {len(writes)} of {TOOL_COUNT}: by --deny-tool: {', '.join(writes)}" in done.stdout, done.stdout
    assert f"a client is shown {TOOL_COUNT - len(writes)}: read_00, " in done.stdout
    assert f"Claude Code: too long whatever the entry's name: {LONG_NAME!r}" in done.stdout
    assert "longest entry name (--name) that keeps every tool name within the client's limit: Claude Code 5, Cursor 7" in done.stdout

    done = _bridge("check", "--url", many_tools_app.url, "--allow-tool", "Read_*", cwd=tmp_path)  # case-sensitive: none
    assert done.returncode == 1, done.stdout
    assert "✗ tool filter the tool filter leaves no tool" in done.stdout, done.stdout
    done = _bridge("check", "--url", many_tools_app.url, "--deny-tool", "*", cwd=tmp_path)  # asked for: no ✗
    assert done.returncode == 0 and "a client is shown 0: (none)" in done.stdout, done.stdout
