"""Qwen Code (0.24.4) also reads Claude Code's project file, ``.mcp.json`` in the folder it is
started in: an entry of the same name there shows "Pending approval" in place of the user entry
``config install --client qwen-code`` wrote (seen with the real client: ``qwen mcp list``).
So ``config install --client qwen-code`` warns when the current folder's ``.mcp.json`` has one."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from bridge.cli.commands import main

URL = "http://127.0.0.1:8765/mcp"


def _install(tmp_path: Path, client: str = "qwen-code", name: str = "myapp") -> tuple[int, str, str]:
    settings = tmp_path / "home" / "settings.json"
    settings.parent.mkdir(exist_ok=True)
    result = CliRunner().invoke(
        main, ["config", "install", "--client", client, "--name", name, "--path", str(settings), "--force", "--url", URL]
    )
    return result.exit_code, result.stdout, result.stderr


def _project_file(folder: Path, *names: str) -> Path:
    path = folder / ".mcp.json"
    path.write_text(json.dumps({"mcpServers": {name: {"type": "stdio", "command": "x"} for name in names}}))
    return path


def test_a_same_named_project_entry_is_warned_about(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    project_file = _project_file(tmp_path, "myapp")
    code, out, err = _install(tmp_path)
    assert code == 0, out + err
    assert "added 'myapp'" in out
    assert "warning:" in err and str(project_file) in err and "Pending approval" in err, err
    assert "config remove --client claude-code --name myapp" in err


@pytest.mark.parametrize("names", [(), ("other",)])
def test_no_warning_without_a_same_named_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, names: tuple[str, ...]
) -> None:
    monkeypatch.chdir(tmp_path)
    if names:
        _project_file(tmp_path, *names)
    code, out, err = _install(tmp_path)
    assert code == 0 and "Pending approval" not in err, err


def test_other_clients_are_not_warned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _project_file(tmp_path, "myapp")
    code, out, err = _install(tmp_path, client="gemini-cli")
    assert code == 0 and "Pending approval" not in err, err


@pytest.mark.parametrize("content", [b"{not json", b"[1, 2]", b'{"mcpServers": ["myapp"]}'])
def test_an_unreadable_project_file_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".mcp.json").write_bytes(content)
    code, out, err = _install(tmp_path)
    assert code == 0 and "Pending approval" not in err, out + err


@pytest.mark.skipif(sys.platform == "win32", reason="FIFOs are POSIX")
def test_a_fifo_named_mcp_json_does_not_hang_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if sys.platform == "win32":  # (for mypy --platform win32: the rest is POSIX code)
        pytest.skip("FIFOs are POSIX")
    monkeypatch.chdir(tmp_path)
    os.mkfifo(tmp_path / ".mcp.json")
    code, out, err = _install(tmp_path)
    assert code == 0, out + err
