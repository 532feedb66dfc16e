"""The frozen one-file executable as shipped: process lifetime and the extraction folder.

These run only when ``MCP_APP_BRIDGE_EXE`` names the PyInstaller one-file build (CI sets
it after building); the protocol behaviour of the same file is covered by running
processes.py against it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.apps import process_alive
from support.processes import BRIDGE_EXE_VAR, handshake, start_bridge, wait_until

from bridge.stdio.fds import is_onefile_child

SPEC = Path(__file__).resolve().parents[2] / "build" / "mcp-app-bridge.spec"

frozen = pytest.mark.skipif(not os.environ.get(BRIDGE_EXE_VAR), reason=f"{BRIDGE_EXE_VAR} names no frozen executable")
posix = pytest.mark.posix_only("POSIX signals, pgrep and TMPDIR")


def test_build_spec_bakes_in_utf8_mode_unbuffered_io_console_and_the_anyio_backend() -> None:
    """HAZARDS B06/B10/B16: a frozen program ignores PYTHONUTF8/PYTHONUNBUFFERED given at
    run time, and a windowed one has no stdio at all, so the spec must set them."""
    spec = SPEC.read_text(encoding="utf-8")
    assert '("u", None, "OPTION")' in spec
    assert '("X utf8", None, "OPTION")' in spec
    assert "console=True" in spec
    assert '"anyio._backends._asyncio"' in spec


def test_plain_python_is_not_taken_for_a_onefile_child() -> None:
    assert not is_onefile_child()


def children_of(pid: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return [int(child) for child in found]


def alive(pid: int) -> bool:
    return process_alive(pid)  # /proc on Linux (zombies count as gone), kill(pid, 0) on macOS


@pytest.fixture
def private_tmpdir(tmp_path: Path) -> Path:
    """The bootloader extracts into TMPDIR: a private one shows what it leaves behind."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    return folder


@pytest.mark.frozen
@frozen
@posix
@pytest.mark.parametrize("how", ["stdin_eof", "sigterm"])
def test_onefile_exits_whole_and_removes_its_extraction_folder(app_server, private_tmpdir: Path, how: str) -> None:
    env = {**os.environ, "TMPDIR": str(private_tmpdir)}
    with start_bridge(app_server.url, env=env) as bridge:
        handshake(bridge)
        (inner,) = children_of(bridge.proc.pid)
        assert list(private_tmpdir.glob("_MEI*")), "the one-file build extracts itself"
        started = time.monotonic()
        if how == "stdin_eof":
            bridge.close_stdin()
        else:
            bridge.proc.send_signal(signal.SIGTERM)
        assert bridge.wait(5) == 0
        assert wait_until(lambda: not alive(inner), 5)
        assert time.monotonic() - started < 2.5
        assert list(private_tmpdir.glob("_MEI*")) == []


@pytest.mark.frozen
@frozen
@posix
def test_inner_process_exits_when_the_bootloader_is_killed(app_server, private_tmpdir: Path) -> None:
    """HAZARDS B14: SIGKILL of the bootloader leaves the client's stdin pipe open, so only
    the parent-death watchdog can tell the inner process to go."""
    env = {**os.environ, "TMPDIR": str(private_tmpdir)}
    bridge = start_bridge(app_server.url, env=env)
    inner = None
    try:
        handshake(bridge)
        (inner,) = children_of(bridge.proc.pid)
        bridge.proc.kill()
        bridge.proc.wait(5)
        assert wait_until(lambda: not alive(inner), 5), "the inner process outlived its bootloader"
    finally:
        if inner is not None and alive(inner):
            os.kill(inner, signal.SIGKILL)
        bridge.kill()
        bridge.close_stdin()
        bridge.join_readers()


@pytest.mark.frozen
@frozen
def test_frozen_version_matches_the_package() -> None:
    from bridge import __version__

    done = subprocess.run([os.environ[BRIDGE_EXE_VAR], "--version"], capture_output=True, timeout=30)
    assert done.returncode == 0
    assert __version__.encode() in done.stdout
    assert sys.platform == "win32" or b"\r" not in done.stdout


@pytest.mark.frozen
@frozen
@pytest.mark.parametrize(
    "command",
    [["config", "print", "--client", "codex", "--name", "app", "--url", "http://127.0.0.1:9/mcp"], ["check", "--help"]],
)
def test_every_command_runs_from_the_frozen_file(command: list[str]) -> None:
    """The main group loads `config` by its module name (lazily): the build must carry the
    modules its analysis cannot see, or the shipped file fails at `config install`."""
    done = subprocess.run([os.environ[BRIDGE_EXE_VAR], *command], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
