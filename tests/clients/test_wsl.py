"""A client inside WSL (issue 37, item 3), with a fake /proc and fake paths: `config install`
writes an entry that runs the Windows bridge through WSL interop, with Windows paths, and
`check` says which side it runs on and what each entry runs."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from bridge.cli.commands import main
from bridge.clients.wsl import (
    describe_command,
    find_windows_exe,
    windows_entry,
    windows_path,
    wsl_distribution,
    wsl_exe_path,
)

pytestmark = pytest.mark.posix_only("WSL is Linux; the fake /mnt paths are POSIX paths")


def fake_proc(tmp_path: Path, *, interop: bool = False, version: str = "Linux version 6.6.0 (gcc) #1 SMP") -> Path:
    proc = tmp_path / "proc"
    (proc / "sys" / "fs" / "binfmt_misc").mkdir(parents=True)
    (proc / "version").write_text(version)
    if interop:
        (proc / "sys" / "fs" / "binfmt_misc" / "WSLInterop").write_text("enabled\n")
    return proc


def test_plain_linux_is_not_wsl(tmp_path: Path) -> None:
    assert wsl_distribution({}, fake_proc(tmp_path)) is None
    assert wsl_distribution({}, tmp_path / "no-proc") is None


@pytest.mark.parametrize(
    ("environ", "interop", "version", "expected"),
    [
        ({"WSL_DISTRO_NAME": "Ubuntu-24.04"}, False, "Linux version 6.6", "Ubuntu-24.04"),
        ({}, True, "Linux version 6.6", "WSL"),
        ({}, False, "Linux version 6.6.87.2-microsoft-standard-WSL2 (root@host)", "WSL"),
        ({}, False, "Linux version 4.4.0-19041-Microsoft (Microsoft@Microsoft.com)", "WSL"),
    ],
)
def test_wsl_is_told_by_its_name_its_interop_or_its_kernel(
    tmp_path: Path, environ: dict[str, str], interop: bool, version: str, expected: str
) -> None:
    assert wsl_distribution(environ, fake_proc(tmp_path, interop=interop, version=version)) == expected


@pytest.mark.parametrize(
    ("path", "windows"),
    [
        ("/mnt/c/Users/me/AppData/Local/MyApp/mcp-endpoint.json", "C:\\Users\\me\\AppData\\Local\\MyApp\\mcp-endpoint.json"),
        ("/mnt/d", "D:\\"),
        ("/home/me/secret.txt", "\\\\wsl.localhost\\Ubuntu\\home\\me\\secret.txt"),
        ("C:\\already\\windows.txt", "C:\\already\\windows.txt"),
    ],
)
def test_paths_are_written_the_windows_way(path: str, windows: str) -> None:
    assert windows_path(path, "Ubuntu") == windows


def test_the_windows_exe_may_be_given_either_way() -> None:
    assert wsl_exe_path("C:\\Users\\me\\.local\\bin\\mcp-app-bridge.exe") == "/mnt/c/Users/me/.local/bin/mcp-app-bridge.exe"
    assert wsl_exe_path("/mnt/c/x/mcp-app-bridge.exe") == "/mnt/c/x/mcp-app-bridge.exe"


def test_the_entry_runs_the_windows_bridge_with_windows_paths_and_wslenv() -> None:
    exe = "/mnt/c/Users/me/.local/bin/mcp-app-bridge.exe"
    args = ["--app-name", "MyApp", "--discovery-file", "/mnt/c/Users/me/d.json", "--launch",
            "'/mnt/c/Program Files/MyApp/MyApp.exe' --background", "--log-file=/mnt/c/tmp/bridge.log", "--token-env", "MYAPP_TOKEN"]
    argv, env, remarks = windows_entry(exe, args, {"XDG_STATE_HOME": "/home/me/.state", "OTHER": "1"}, ("MYAPP_TOKEN",), "Ubuntu")
    assert argv == [
        exe, "--app-name", "MyApp", "--discovery-file", "C:\\Users\\me\\d.json", "--launch",
        '"C:\\Program Files\\MyApp\\MyApp.exe" --background', "--log-file=C:\\tmp\\bridge.log", "--token-env", "MYAPP_TOKEN",
    ]
    assert env == {"OTHER": "1", "WSLENV": "OTHER:MYAPP_TOKEN"}, "XDG_STATE_HOME means nothing to Windows; WSLENV carries the rest"
    assert remarks == []
    _argv, _env, remarks = windows_entry(exe, ["--token-file", "/home/me/token"], {}, (), "Ubuntu")
    assert remarks and "Linux side" in remarks[0]


def test_check_says_what_an_entry_runs() -> None:
    assert "Windows program C:\\x\\mcp-app-bridge.exe through WSL interop" in describe_command("/mnt/c/x/mcp-app-bridge.exe", "Ubuntu")
    assert "Linux program inside WSL" in describe_command("/usr/local/bin/mcp-app-bridge", "Ubuntu")


# -- the commands, inside a pretended WSL ----------------------------------------------------


@pytest.fixture
def in_wsl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """WSL by its distribution's name, with a Windows bridge on PATH under a fake /mnt/c."""
    if sys.platform != "linux":
        pytest.skip("WSL is Linux")
    monkeypatch.setenv("WSL_DISTRO_NAME", "Ubuntu")
    bin_folder = tmp_path / "mnt" / "c" / "Users" / "me" / ".local" / "bin"
    bin_folder.mkdir(parents=True)
    exe = bin_folder / "mcp-app-bridge.exe"
    exe.write_text("MZ")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{os.environ.get('PATH', '')}:{bin_folder}")
    return exe


def test_found_on_path_is_the_windows_exe(in_wsl: Path) -> None:
    assert find_windows_exe(os.environ["PATH"]) == str(in_wsl)


def test_config_install_in_wsl_writes_the_windows_bridge_through_interop(in_wsl: Path, tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    exe = "/mnt/c/Users/me/.local/bin/mcp-app-bridge.exe"
    result = CliRunner().invoke(main, [
        "config", "install", "--client", "claude-code", "--name", "myapp", "--path", str(tmp_path / ".mcp.json"),
        "--windows-exe", "C:\\Users\\me\\.local\\bin\\mcp-app-bridge.exe",
        "--app-name", "MyApp", "--discovery-file", "/mnt/c/Users/me/AppData/Local/MyApp/mcp-endpoint.json", "--token-env", "MYAPP_TOKEN",
    ])
    assert result.exit_code == 0, result.output
    entry = json.loads((tmp_path / ".mcp.json").read_text())["mcpServers"]["myapp"]
    assert entry["command"] == exe
    assert entry["args"] == ["--app-name", "MyApp", "--discovery-file", "C:\\Users\\me\\AppData\\Local\\MyApp\\mcp-endpoint.json",
                             "--token-env", "MYAPP_TOKEN"]
    assert entry["env"]["WSLENV"] == "MYAPP_TOKEN" and "XDG_STATE_HOME" not in entry["env"]
    assert "inside WSL (Ubuntu)" in result.stderr and "C:\\Users\\me\\.local\\bin\\mcp-app-bridge.exe" in result.stderr
    assert not config.exists()


def test_config_print_in_wsl_finds_the_windows_exe_on_path(in_wsl: Path) -> None:
    result = CliRunner().invoke(main, ["config", "print", "--client", "cursor", "--name", "myapp", "--app-name", "MyApp"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["mcpServers"]["myapp"]["command"] == str(in_wsl)


def test_linux_bridge_keeps_the_linux_entry_and_a_missing_exe_is_refused(in_wsl: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    linux = CliRunner().invoke(main, ["config", "print", "--client", "cursor", "--name", "myapp", "--linux-bridge", "--app-name", "MyApp"])
    assert linux.exit_code == 0 and not json.loads(linux.stdout)["mcpServers"]["myapp"]["command"].endswith(".exe")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    missing = CliRunner().invoke(main, ["config", "print", "--client", "cursor", "--name", "myapp", "--app-name", "MyApp"])
    assert missing.exit_code == 2 and "this is WSL (Ubuntu)" in missing.stderr and "--windows-exe" in missing.stderr


def test_outside_wsl_the_wsl_options_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WSL_DISTRO_NAME", raising=False)
    if wsl_distribution(os.environ) is not None:
        pytest.skip("this machine is WSL")
    result = CliRunner().invoke(main, ["config", "print", "--client", "cursor", "--name", "x", "--linux-bridge", "--app-name", "A"])
    assert result.exit_code == 2 and "WSL" in result.stderr


def test_check_in_wsl_says_which_side_and_what_each_entry_runs(in_wsl: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {
        "win": {"type": "stdio", "command": "/mnt/c/Users/me/.local/bin/mcp-app-bridge.exe", "args": ["--app-name", "MyApp"]},
        "lin": {"type": "stdio", "command": sys.executable, "args": []},
    }}))
    result = CliRunner().invoke(main, ["check", "--client", "claude-code"])
    assert "This check runs inside WSL (Ubuntu), on the Linux side" in result.stdout
    assert "Windows program C:\\Users\\me\\.local\\bin\\mcp-app-bridge.exe through WSL interop" in result.stdout
    assert "Linux program inside WSL" in result.stdout
    plain = CliRunner().invoke(main, ["check", "--url", "http://127.0.0.1:9/mcp", "--connect-timeout", "1"])
    assert "walks the path a Linux bridge takes" in plain.stdout
