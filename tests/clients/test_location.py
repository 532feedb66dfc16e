"""The packaged (MSIX) Claude Desktop's configuration file on Windows (issue 37, item 1), with a
fake profile on every OS: the package's own file, not ``%APPDATA%\\Claude``, which it ignores."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from bridge.cli.commands import main
from bridge.clients import ClientConfigError, config_path
from bridge.clients.clienttable import config_location
from bridge.clients.location import AmbiguousLocation, claude_desktop_location

PUBLISHER = "pzs8sxrjxfjjc"  # as the reports show it; the code does not know it


def package_file(local: Path, folder: str = f"Claude_{PUBLISHER}", *, exists: bool = False) -> Path:
    package = local / "Packages" / folder
    path = package / "LocalCache" / "Roaming" / "Claude" / "claude_desktop_config.json"
    package.mkdir(parents=True, exist_ok=True)
    if exists:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text('{"mcpServers": {}}\n', encoding="utf-8")
    return path


@pytest.fixture
def profile(tmp_path: Path) -> dict[str, Path]:
    """A Windows profile's folders, redirected (LOCALAPPDATA and APPDATA not under home)."""
    folders = {"home": tmp_path / "home", "local": tmp_path / "redirected" / "Local", "roaming": tmp_path / "redirected" / "Roaming"}
    for folder in folders.values():
        folder.mkdir(parents=True)
    return folders


def environ(profile: dict[str, Path]) -> dict[str, str]:
    return {"LOCALAPPDATA": str(profile["local"]), "APPDATA": str(profile["roaming"])}


def test_an_unpackaged_install_keeps_the_appdata_file(profile: dict[str, Path]) -> None:
    location = claude_desktop_location(environ(profile), profile["home"])
    assert location.path == profile["roaming"] / "Claude" / "claude_desktop_config.json"
    assert "unpackaged" in location.reason and location.ignored == ()


def test_a_package_with_no_config_yet_gets_its_own_file(profile: dict[str, Path]) -> None:
    expected = package_file(profile["local"])
    location = claude_desktop_location(environ(profile), profile["home"])
    assert location.path == expected and not expected.exists()
    assert f"Claude_{PUBLISHER}" in location.reason and "does not exist yet" in location.reason


def test_the_publisher_id_is_not_hard_coded(profile: dict[str, Path]) -> None:
    expected = package_file(profile["local"], "Claude_someotherid1", exists=True)
    assert claude_desktop_location(environ(profile), profile["home"]).path == expected


def test_a_package_beside_the_unpackaged_file_wins_and_the_other_is_named_ignored(profile: dict[str, Path]) -> None:
    expected = package_file(profile["local"], exists=True)
    unpackaged = profile["roaming"] / "Claude" / "claude_desktop_config.json"
    unpackaged.parent.mkdir(parents=True)
    unpackaged.write_text("{}", encoding="utf-8")
    location = claude_desktop_location(environ(profile), profile["home"])
    assert location.path == expected and location.ignored == (unpackaged,)
    assert "never the unpackaged path" in location.reason


def test_of_two_packages_the_one_with_a_config_is_chosen(profile: dict[str, Path]) -> None:
    package_file(profile["local"], "Claude_aaaaaaaaaaaaa")
    expected = package_file(profile["local"], "Claude_bbbbbbbbbbbbb", exists=True)
    location = claude_desktop_location(environ(profile), profile["home"])
    assert location.path == expected and "only Claude_bbbbbbbbbbbbb has" in location.reason


@pytest.mark.parametrize("with_config", [0, 2])
def test_two_packages_that_do_not_tell_are_refused_and_listed(profile: dict[str, Path], with_config: int) -> None:
    first = package_file(profile["local"], "Claude_aaaaaaaaaaaaa", exists=with_config == 2)
    second = package_file(profile["local"], "Claude_bbbbbbbbbbbbb", exists=with_config == 2)
    with pytest.raises(AmbiguousLocation) as caught:
        claude_desktop_location(environ(profile), profile["home"])
    assert caught.value.candidates == (first, second)
    assert str(first) in str(caught.value) and str(second) in str(caught.value) and "--path" in str(caught.value)
    with pytest.raises(ClientConfigError, match="2 Claude Desktop packages"):
        config_path("claude-desktop", platform="win32", environ=environ(profile), home=profile["home"])


def test_without_the_variables_the_home_folders_appdata_is_searched(profile: dict[str, Path]) -> None:
    expected = package_file(profile["home"] / "AppData" / "Local")
    assert config_path("claude-desktop", platform="win32", environ={}, home=profile["home"]) == expected


def test_a_file_that_is_not_a_folder_is_no_package(profile: dict[str, Path]) -> None:
    (profile["local"] / "Packages").mkdir()
    (profile["local"] / "Packages" / "Claude_notafolder").write_text("")
    assert claude_desktop_location(environ(profile), profile["home"]).path.parent == profile["roaming"] / "Claude"


def test_other_oses_and_clients_are_unchanged(profile: dict[str, Path]) -> None:
    package_file(profile["local"], exists=True)
    for platform in ("darwin", "linux"):
        location = config_location("claude-desktop", platform=platform, environ=environ(profile), home=profile["home"])
        assert location.reason == "" and "Packages" not in str(location.path)
    vscode = config_location("vscode", platform="win32", environ=environ(profile), home=profile["home"])
    assert vscode.path == profile["roaming"] / "Code" / "User" / "mcp.json" and vscode.reason == ""


# -- the commands, on a fake Windows profile ------------------------------------------------


@pytest.fixture
def on_windows(profile: dict[str, Path], monkeypatch: pytest.MonkeyPatch, private_state_folder: Path) -> dict[str, Path]:
    from bridge.app import launcher

    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setattr(launcher, "state_folder", lambda: private_state_folder / "mcp-app-bridge")
    for name, value in environ(profile).items():
        monkeypatch.setenv(name, value)
    return profile


ENTRY = ["--client", "claude-desktop", "--name", "myapp", "--command", sys.executable, "--", "--mcp-stdio"]


def test_config_print_names_the_packages_file(on_windows: dict[str, Path]) -> None:
    expected = package_file(on_windows["local"])
    result = CliRunner().invoke(main, ["config", "print", *ENTRY])
    assert result.exit_code == 0, result.output
    assert f"Claude Desktop reads {expected}" in result.stderr and "MSIX package Claude_" in result.stderr
    assert json.loads(result.stdout)["mcpServers"]["myapp"]["args"] == ["--mcp-stdio"]


def test_config_install_and_remove_edit_the_packages_file_and_say_why(on_windows: dict[str, Path]) -> None:
    expected = package_file(on_windows["local"], exists=True)
    unpackaged = on_windows["roaming"] / "Claude" / "claude_desktop_config.json"
    unpackaged.parent.mkdir(parents=True)
    unpackaged.write_text('{"mcpServers": {}}', encoding="utf-8")
    result = CliRunner().invoke(main, ["config", "install", *ENTRY])
    assert result.exit_code == 0, result.output
    assert "myapp" in json.loads(expected.read_text(encoding="utf-8"))["mcpServers"]
    assert json.loads(unpackaged.read_text(encoding="utf-8")) == {"mcpServers": {}}
    assert f"Claude Desktop reads {expected}" in result.stderr and f"{unpackaged} exists too" in result.stderr
    path = CliRunner().invoke(main, ["config", "path", "--client", "claude-desktop"])
    assert path.stdout.strip() == str(expected)
    check = CliRunner().invoke(main, ["check", "--client", "claude-desktop", "--name", "myapp"])
    assert f"entries in {expected}" in check.stdout and "the app reads this file" in check.stdout
    removed = CliRunner().invoke(main, ["config", "remove", "--client", "claude-desktop", "--name", "myapp"])
    assert removed.exit_code == 0 and json.loads(expected.read_text(encoding="utf-8"))["mcpServers"] == {}


def test_config_install_with_two_packages_refuses_lists_them_and_changes_nothing(on_windows: dict[str, Path]) -> None:
    first = package_file(on_windows["local"], "Claude_aaaaaaaaaaaaa")
    second = package_file(on_windows["local"], "Claude_bbbbbbbbbbbbb")
    result = CliRunner().invoke(main, ["config", "install", *ENTRY])
    assert result.exit_code == 1
    assert str(first) in result.stderr and str(second) in result.stderr and "Nothing was changed" in result.stderr
    assert not first.exists() and not second.exists()
    assert not (on_windows["roaming"] / "Claude").exists()
    check = CliRunner().invoke(main, ["check", "--client", "claude-desktop"])
    assert check.exit_code == 1 and str(first) in check.stdout
    printed = CliRunner().invoke(main, ["config", "print", *ENTRY])  # prints, and says it cannot tell which file
    assert printed.exit_code == 0 and "warning:" in printed.stderr and str(second) in printed.stderr
    assert json.loads(printed.stdout)["mcpServers"]["myapp"]
    chosen = CliRunner().invoke(main, ["config", "install", *ENTRY[:4], "--path", str(second), *ENTRY[4:]])
    assert chosen.exit_code == 0, chosen.output
    assert "myapp" in json.loads(second.read_text(encoding="utf-8"))["mcpServers"]
