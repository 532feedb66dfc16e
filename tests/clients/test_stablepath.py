"""A stable launcher path (issue 30 item 3; docs/clients.md, "A stable launcher path"): the
entries ``config install`` writes and the bundle name the path an update does not move,
never a versioned install folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bridge.cli.commands import main
from bridge.clients.bundle import read_manifest
from bridge.clients.stablepath import stable_launch_command, stable_path, versioned_folder

posix_only = pytest.mark.posix_only("POSIX paths, symlinks and modes")


@pytest.mark.parametrize(
    ("path", "folder"),
    [
        ("/opt/MyApp-1.2.3/myapp", "MyApp-1.2.3"),
        ("/home/ada/.local/share/myapp/versions/1.2/bin/myapp", "1.2"),
        ("/opt/homebrew/Cellar/myapp/2.0.1/bin/myapp", "2.0.1"),
        ("/home/ada/.local/share/JetBrains/Toolbox/apps/IDEA-U/ch-0/223.8214.52/bin/idea.sh", "223.8214.52"),
        (r"C:\Users\ada\AppData\Local\MyApp\app-1.2.3\MyApp.exe", "app-1.2.3"),
        ("/opt/My App 2.1/myapp", "My App 2.1"),
        ("/opt/myapp-v3.0.0-beta.1/myapp", "myapp-v3.0.0-beta.1"),
        ("/Applications/MyApp.app/Contents/MacOS/MyApp", None),
        ("/usr/lib/jvm/java-17-openjdk/bin/java", None),
        ("/home/ada/.venv/lib/python3.11/site-packages/x", None),
        ("/opt/myapp/bin/myapp-1.2.3", None),  # the file's own name is not a folder
        ("/usr/lib/x86_64-linux-gnu/myapp", None),
    ],
)
def test_a_versioned_folder_is_a_version_or_ends_in_one(path: str, folder: str | None) -> None:
    assert versioned_folder(path) == folder


def test_homebrew_s_cellar_becomes_its_opt_link_without_a_look() -> None:
    path, remarks = stable_path("/opt/homebrew/Cellar/myapp/2.0.1/bin/myapp", what="the --launch program", check_exists=False)
    assert path == "/opt/homebrew/opt/myapp/bin/myapp"
    assert "writing its stable path /opt/homebrew/opt/myapp/bin/myapp instead" in remarks[0]
    assert stable_path("/opt/homebrew/Cellar/myapp/2.0.1/bin/myapp", what="x", exists=lambda p: False)[0].endswith("/2.0.1/bin/myapp")


def test_squirrel_s_stub_beside_update_exe_is_used_when_it_is_there() -> None:
    path = r"C:\Users\ada\AppData\Local\MyApp\app-1.2.3\MyApp.exe"
    stub = r"C:\Users\ada\AppData\Local\MyApp\MyApp.exe"
    assert stable_path(path, what="x", exists={stub}.__contains__)[0] == stub
    kept, remarks = stable_path(path, what="x", exists=lambda p: False)
    assert kept == path and "versioned install folder ('app-1.2.3')" in remarks[0]


def test_a_path_with_no_version_is_kept_without_a_word() -> None:
    assert stable_path("/Applications/MyApp.app/Contents/MacOS/MyApp", what="x") == ("/Applications/MyApp.app/Contents/MacOS/MyApp", [])


@posix_only
def test_a_link_on_path_or_a_current_sibling_replaces_the_versioned_path(tmp_path: Path) -> None:
    program = _program(tmp_path / "share" / "myapp" / "versions" / "1.2" / "myapp")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "myapp").symlink_to(program)
    path, remarks = stable_path(str(program), what="x", environ={"PATH": str(bin_dir)})
    assert path == str(bin_dir / "myapp") and "stable path" in remarks[0]
    (program.parent.parent / "current").symlink_to(program.parent)
    path, _ = stable_path(str(program), what="x", environ={"PATH": ""})
    assert path == str(tmp_path / "share" / "myapp" / "versions" / "current" / "myapp")


@posix_only
def test_a_bare_launch_name_is_written_as_its_path_on_path(tmp_path: Path) -> None:
    program = _program(tmp_path / "bin" / "myapp")
    command, remarks = stable_launch_command("myapp --serve 'a b'", windows=False, environ={"PATH": str(program.parent)})
    assert command == f"{program} --serve 'a b'" and remarks == []
    assert stable_launch_command("not-there --serve", windows=False, environ={"PATH": str(program.parent)}) == ("not-there --serve", [])


def test_a_windows_launch_command_keeps_its_quotes_and_arguments() -> None:
    command = r'"C:\Program Files\MyApp\app-1.2.3\MyApp.exe" --serve "x y"'
    rewritten, remarks = stable_launch_command(command, windows=True, check_exists=False)
    assert rewritten == command and "versioned install folder" in remarks[0]
    brew = "/usr/local/Cellar/my-app/1.0/bin/my-app --serve"
    assert stable_launch_command(brew, windows=False, check_exists=False)[0] == "/usr/local/opt/my-app/bin/my-app --serve"


# -- config install and bundle ----------------------------------------------------------------


def _program(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def _printed(*args: str) -> tuple[dict[str, Any], str]:
    done = CliRunner().invoke(main, ["config", "print", "--client", "claude-desktop", "--name", "x", *args])
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)["mcpServers"]["x"], done.stderr


@posix_only
def test_config_writes_the_stable_launch_program_and_warns_for_a_versioned_one(tmp_path: Path) -> None:
    cellar = _program(tmp_path / "brew" / "Cellar" / "myapp" / "2.0.1" / "bin" / "myapp")
    opt = tmp_path / "brew" / "opt" / "myapp"
    opt.parent.mkdir()
    opt.symlink_to(cellar.parent.parent)
    entry, stderr = _printed("--app-name", "MyApp", "--launch", f"{cellar} --serve")
    launch = entry["args"][entry["args"].index("--launch") + 1]
    assert launch == f"{opt}/bin/myapp --serve", entry["args"]
    assert f"writing its stable path {opt}/bin/myapp instead" in stderr

    versioned = _program(tmp_path / "MyApp-1.2.3" / "myapp")
    entry, stderr = _printed("--app-name", "MyApp", f"--launch={versioned}")
    assert f"--launch={versioned}" in entry["args"]
    assert "is inside a versioned install folder ('MyApp-1.2.3')" in stderr.replace("\n", " ")


@posix_only
def test_config_writes_the_stable_command_for_a_versioned_one(tmp_path: Path) -> None:
    program = _program(tmp_path / "myapp" / "versions" / "1.2" / "MyApp")
    (program.parent.parent / "current").symlink_to(program.parent)
    entry, stderr = _printed("--command", str(program), "--", "--mcp-stdio")
    assert entry["command"] == str(tmp_path / "myapp" / "versions" / "current" / "MyApp")
    assert "--command" in stderr and "stable path" in stderr


@posix_only
def test_the_bundle_gets_homebrew_s_opt_path_and_a_warning_for_a_versioned_folder(tmp_path: Path) -> None:
    exe = tmp_path / "mcp-app-bridge"
    exe.write_bytes(b"\x7fELF" + bytes(range(256)) * 64)
    exe.chmod(0o755)
    out = tmp_path / "MyApp.mcpb"
    common = ["bundle", "--exe", str(exe), "--out", str(out), "--platform", "darwin", "--app-name", "MyApp"]
    done = CliRunner().invoke(main, [*common, "--launch", "/opt/homebrew/Cellar/myapp/2.0.1/bin/myapp --serve"])
    assert done.exit_code == 0, done.output
    args = read_manifest(out)["server"]["mcp_config"]["args"]
    assert args[args.index("--launch") + 1] == "/opt/homebrew/opt/myapp/bin/myapp --serve"
    done = CliRunner().invoke(main, [*common, "--launch", "/opt/MyApp-1.2.3/myapp"])
    assert done.exit_code == 0 and "versioned install folder ('MyApp-1.2.3')" in done.stderr
    args = read_manifest(out)["server"]["mcp_config"]["args"]
    assert args[args.index("--launch") + 1] == "/opt/MyApp-1.2.3/myapp"


@posix_only
def test_app_entry_writes_the_running_app_s_stable_path(tmp_path: Path) -> None:
    """A "Connect to Claude" button in an app run from a versioned folder: the entry names
    the path that follows updates (here its ``current`` folder)."""
    from bridge.clients import app_entry

    program = _program(tmp_path / "MyApp" / "app-1.2.3" / "myapp")
    assert app_entry(str(program), environ={"PATH": ""}).command == str(program)  # nothing stable: kept
    (tmp_path / "MyApp" / "current").symlink_to(program.parent)
    assert app_entry(str(program), environ={"PATH": ""}).command == str(tmp_path / "MyApp" / "current" / "myapp")
