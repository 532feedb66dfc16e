"""``mcp-app-bridge check --client codex`` against the pinned real Codex (tests/realclients):
a fresh user's ``config install --client codex``, then the bridge's own command asks Codex's
``app-server`` and prints what Codex says (issue 31: ``codex mcp list`` only says "enabled").

Marked ``clients`` (deselected by default; ``.ci/run`` runs them, first with ``python -m
bridge``, then with the frozen file when ``MCP_APP_BRIDGE_EXE`` names it)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from realclients.harness import CHECK_TIMEOUT_SECONDS, Home, config_install, fresh_home, require_clients
from support.apps import AppServer
from support.processes import bridge_command, free_port

pytestmark = [pytest.mark.clients, pytest.mark.posix_only("the clients' POSIX installs")]


@pytest.fixture(autouse=True)
def _clients_installed() -> None:
    require_clients()


def _check(home: Home, *names: str) -> subprocess.CompletedProcess[str]:
    args = [arg for name in names for arg in ("--name", name)]
    return subprocess.run(
        [*bridge_command(), "check", "--client", "codex", *args],
        cwd=home.project,
        env=home.env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=CHECK_TIMEOUT_SECONDS + 30,
    )


@pytest.mark.timeout(300)
def test_check_client_codex_reports_each_server_as_codex_sees_it(
    tmp_path: Path, start_app_server: Callable[..., AppServer]
) -> None:
    app = start_app_server()
    home = fresh_home(tmp_path / "user")
    config_install(home, "codex", "myapp", ["--url", app.url], bridge=bridge_command())
    config_install(home, "codex", "down", ["--url", f"http://127.0.0.1:{free_port()}/mcp"], bridge=bridge_command())

    done = _check(home, "myapp")
    assert done.returncode == 0, done.stdout + done.stderr
    line = next((line for line in done.stdout.splitlines() if "myapp:" in line), "")
    assert line.startswith(("✓ myapp: connected", "OK myapp: connected")) and "echo" in line, done.stdout

    everything = _check(home)
    assert everything.returncode == 1, everything.stdout + everything.stderr
    down = next((line for line in everything.stdout.splitlines() if " down:" in line), "")
    assert "The app is not running" in down, everything.stdout
    assert "myapp: connected" in everything.stdout


@pytest.mark.timeout(120)
def test_check_client_codex_without_codex_on_path_says_so(tmp_path: Path) -> None:
    home = fresh_home(tmp_path / "user")
    home.env["PATH"] = os.pathsep.join(p for p in home.env["PATH"].split(os.pathsep) if "realclients" not in p)
    if any((Path(folder) / "codex").exists() for folder in home.env["PATH"].split(os.pathsep) if folder):
        pytest.skip("a codex is installed on this machine's PATH")
    done = _check(home)
    assert done.returncode == 1 and "`codex` is not on PATH" in done.stdout, done.stdout
