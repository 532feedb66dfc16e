"""The example app's ``--link`` (examples/app_server.py), in process: ``npipe`` is refused
at once off Windows and ``unix`` on Windows, in server mode and with ``--mcp-stdio`` alike,
before anything is served or bridged; ``--mcp-stdio`` starts the app with the link it was
given (none: ``auto``, the app's socket or named pipe); its token comes from the public
``bridge.AuthRouteTokenSource``. The app served on each link runs in tests/process
(test_unixsocket.py on Linux, test_pipe_process.py on Windows)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from support.apps import REPO_ROOT

import bridge

if str(REPO_ROOT / "examples") not in sys.path:
    sys.path.insert(0, str(REPO_ROOT / "examples"))

import app_server  # noqa: E402 (examples/ is put on the path just above)


@pytest.mark.parametrize("mode", [[], ["--mcp-stdio"]])
@pytest.mark.posix_only("off Windows: there is no named pipe")
def test_link_npipe_is_refused_off_windows_in_one_clear_line(mode: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    discovery = tmp_path / "d.json"
    assert app_server.main([*mode, "--link", "npipe", "--discovery-file", str(discovery)]) == 2
    error = capsys.readouterr().err
    assert "--link" in error and "named pipes exist only on Windows" in error, error
    assert not discovery.exists()


@pytest.mark.parametrize("mode", [[], ["--mcp-stdio"]])
def test_link_unix_is_refused_on_windows(mode: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "win32")  # only the option's check reads it here
    assert app_server.main([*mode, "--link", "unix", "--discovery-file", str(tmp_path / "d.json")]) == 2
    monkeypatch.undo()
    error = capsys.readouterr().err
    assert "--link" in error and "Linux and macOS only" in error and "named pipe" in error, error


def test_mcp_stdio_launches_the_app_on_the_link_it_was_given(tmp_path: Path) -> None:
    discovery = tmp_path / "d.json"
    default = app_server.bridge_config(discovery_file=discovery).launch_command
    assert default is not None and "--link" not in default and "--port" not in default, "auto: the app's socket or pipe"
    tcp = app_server.bridge_config(discovery_file=discovery, link="tcp").launch_command
    assert tcp is not None and list(tcp[-2:]) == ["--link", "tcp"]


def test_mcp_stdio_gets_its_token_from_the_public_auth_route_source(tmp_path: Path) -> None:
    config = app_server.bridge_config(discovery_file=tmp_path / "d.json", secret_file=tmp_path / "secret")
    source = config.token_source
    assert isinstance(source, bridge.AuthRouteTokenSource)
    assert source.auth_url == app_server.AUTH_PATH and source.secret_file == tmp_path / "secret"
    assert app_server.bridge_config(discovery_file=tmp_path / "d.json").token_source is None, "the discovery file's token"
