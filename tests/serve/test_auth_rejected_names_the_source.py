"""``auth_rejected`` names the token source the user must check (the variable's name, the
file's path, the token command, the discovery file), never the token itself. (A source
that gave no token at all: test_recovery.py's 401 tests.)"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.helpers import RunBridge, request_line
from support.mcp_app import McpApp

from bridge.app.tokencommand import CommandTokenSource
from bridge.app.tokens import DiscoveryTokenSource, EnvTokenSource, FileTokenSource, TokenSource
from bridge.system.privatefile import write_private_file

pytestmark = pytest.mark.anyio

SECRET = "s3cret-TOKEN-value-0123456789"


def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[TokenSource, str]:
    monkeypatch.setenv("MYAPP_TOKEN", SECRET)
    return EnvTokenSource("MYAPP_TOKEN"), "environment variable MYAPP_TOKEN"


def _file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[TokenSource, str]:
    path = tmp_path / "state" / "token"
    write_private_file(path, SECRET.encode())
    return FileTokenSource(path), f"token file {path}"


def _command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[TokenSource, str]:
    return CommandTokenSource([sys.executable, "-c", f"print({SECRET!r})"], timeout_seconds=30), "token command"


def _discovery(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[TokenSource, str]:
    return DiscoveryTokenSource(lambda: SECRET), "discovery file"


Make = Callable[[Path, pytest.MonkeyPatch], tuple[TokenSource, str]]


@pytest.mark.process
@pytest.mark.parametrize("make", [_env, _file, _command, _discovery], ids=["env", "file", "command", "discovery"])
async def test_a_rejected_token_names_its_source_and_not_its_value(
    make: Make, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_bridge: RunBridge
) -> None:
    source, named = make(tmp_path, monkeypatch)
    async with run_bridge(McpApp(token="never-issued", stateless=True), token_source=source) as h:
        h.stdin.feed(request_line(1))
        (reply,) = await h.stdout.wait_for(1)
    error: dict[str, Any] = reply["error"]
    assert error["data"]["reason"] == "auth_rejected"
    assert f"the {named}" in error["message"], error["message"]
    assert SECRET not in str(reply)

