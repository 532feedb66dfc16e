"""``check --client CLIENT``: an entry whose programs no longer exist is flagged (issue 30
item 3; docs/clients.md, "A stable launcher path"), and ``check``'s launch step names a
versioned install folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.posix_only("POSIX executables and PATH")


def _program(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def _bridge(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bridge", *args], cwd=cwd, capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})}
    )


@pytest.mark.process
def test_an_entry_whose_command_was_removed_by_an_update_is_flagged(tmp_path: Path) -> None:
    """The entry was written for the app's own executable (``--command``) and for a
    ``--launch`` program; an update removes the app's install folder: ``check --client``
    says which program no longer exists, and exits 1. Before that, both are ✓."""
    app = _program(tmp_path / "MyApp" / "myapp")
    launched = _program(tmp_path / "Other" / "other")
    installed = _bridge("config", "install", "--client", "claude-code", "--name", "mine", "--command", str(app), "--", "--mcp-stdio", cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr
    installed = _bridge("config", "install", "--client", "claude-code", "--name", "other", "--app-name", "Other", "--launch", f"{launched} --serve", cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr

    done = _bridge("check", "--client", "claude-code", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"✓ mine: command {app}" in done.stdout and f"--launch {launched}" in done.stdout

    app.unlink()
    launched.unlink()
    done = _bridge("check", "--client", "claude-code", cwd=tmp_path)
    assert done.returncode == 1, done.stdout
    assert f"✗ mine: its command {app} no longer exists" in done.stdout
    assert f"✗ other: its --launch program {launched} no longer exists" in done.stdout
    assert "config install --client claude-code --name mine --force" in done.stdout
    done = _bridge("check", "--client", "claude-code", "--name", "nothere", cwd=tmp_path)
    assert done.returncode == 1 and "✗ nothere: no entry of that name" in done.stdout


@pytest.mark.process
def test_codex_s_entries_are_flagged_before_codex_is_asked(tmp_path: Path) -> None:
    """For Codex only a broken entry is shown before Codex's own report (which follows)."""
    home = tmp_path / "codex"
    home.mkdir()
    (home / "config.toml").write_text(
        f'[mcp_servers.gone]\ncommand = "{tmp_path / "MyApp-1.2" / "myapp"}"\nargs = ["--mcp-stdio"]\n', encoding="utf-8"
    )
    done = _bridge("check", "--client", "codex", cwd=tmp_path, env={"CODEX_HOME": str(home), "PATH": os.path.dirname(sys.executable)})
    assert done.returncode == 1
    assert f"✗ gone: its command {tmp_path / 'MyApp-1.2' / 'myapp'} no longer exists" in done.stdout, done.stdout
    assert "Codex's own report" in done.stdout


@pytest.mark.process
def test_check_names_a_launch_program_in_a_versioned_folder(tmp_path: Path) -> None:
    program = _program(tmp_path / "MyApp-1.2.3" / "myapp")
    done = _bridge("check", "--url", "http://127.0.0.1:9/mcp", "--launch", str(program), "--launch-policy", "never", cwd=tmp_path)
    assert f"✓ launch      program {program}" in done.stdout
    assert "inside a versioned install folder ('MyApp-1.2.3')" in done.stdout, done.stdout


@pytest.mark.process
def test_an_unknown_client_is_refused(tmp_path: Path) -> None:
    done = _bridge("check", "--client", "nope", cwd=tmp_path)
    assert done.returncode == 2 and "'nope' is not one of" in done.stderr


@pytest.mark.process
@pytest.mark.posix_only("a real Unix socket")
def test_an_entry_whose_unix_socket_url_is_gone_gets_a_note(tmp_path: Path) -> None:
    """An entry written with the example app's ``--url http+unix://…``: the app's next start
    makes another socket, so the entry reaches nothing. ``check --client`` says so and
    points at ``--app-name``/``--discovery-file`` (found by a newcomer's trial, where it
    showed a bare ✓ that read as "connected")."""
    import socket

    if sys.platform == "win32":  # (for mypy --platform win32: the rest is POSIX code)
        pytest.skip("a real Unix socket")
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    sock_path = folder / "app.sock"
    url = "http+unix://" + str(sock_path).replace("/", "%2F") + "/mcp"
    installed = _bridge("config", "install", "--client", "claude-code", "--name", "sock", "--url", url, cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr

    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(sock_path))
    try:
        done = _bridge("check", "--client", "claude-code", cwd=tmp_path)
    finally:
        listener.close()
    assert done.returncode == 0 and "✓ sock:" in done.stdout and "does not exist now" not in done.stdout, done.stdout

    sock_path.unlink()
    done = _bridge("check", "--client", "claude-code", cwd=tmp_path)
    assert f"its --url names the socket {str(sock_path)!r}, which does not exist now" in done.stdout, done.stdout
    assert "--app-name or --discovery-file" in done.stdout


def test_an_entry_that_launches_its_app_is_not_told_to_start_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The app of an entry with ``--launch`` is down: ``check --client`` lists nothing (it
    starts nothing), and says the bridge starts the app itself when the client first needs
    it, not the launcher's "Start it and try again", which reads as a step left to the
    user (newcomer finding). An entry without ``--launch`` keeps that advice."""
    from click.testing import CliRunner

    from bridge.cli.commands import main

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    refused = tmp_path / "state" / "Other" / "mcp-endpoint.json"  # others may write it: refused
    refused.parent.mkdir(parents=True, mode=0o700)
    refused.write_text('{"url": "http://127.0.0.1:9/mcp"}')
    refused.chmod(0o666)
    program = _program(tmp_path / "MyApp" / "myapp")
    runner = CliRunner()
    entries = (
        ("launched", ["--app-name", "MyApp", "--launch", str(program)]),
        ("plain", ["--app-name", "MyApp"]),
        ("refused", ["--app-name", "Other", "--launch", str(program)]),
    )
    for name, options in entries:
        done = runner.invoke(main, ["config", "install", "--client", "cursor", "--name", name, *options])
        assert done.exit_code == 0, done.output
    done = runner.invoke(main, ["check", "--client", "cursor"])
    lines = {line.split(":", 1)[0].strip(): line for line in done.stdout.splitlines() if "could not be listed" in line}
    assert "Start it" not in lines["launched"] and "the bridge starts it itself (the entry's --launch) when Cursor first needs it" in lines["launched"], lines
    assert "Start it and try again" in lines["plain"] and lines["plain"].endswith("run this again once the app runs"), lines
    # a discovery file the bridge refuses: starting the app would not mend it, so the why stays
    assert "Other cannot be reached" in lines["refused"] and "starts it itself" not in lines["refused"], lines
