"""Client targets that moved (issue 37, item 5): Antigravity CLI (which replaced Gemini CLI for
personal accounts) and VS Code's agent (its Agent Host reads Copilot CLI's two files). Each has
a `--client` name and `check --client`; Antigravity CLI exits on a JSON syntax error, so its
file is refused with comments and the result is parsed as strict JSON before it replaces the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from bridge.cli.commands import main
from bridge.clients import CLIENTS, ClientConfigError, ServerEntry, config_path, install_entry, jsonc, uninstall_entry

ENTRY = ServerEntry(command="/opt/bridge/mcp-app-bridge", args=("--app-name", "MyApp"))


@pytest.mark.parametrize(
    ("client", "expected"),
    [
        ("antigravity", "/h/.gemini/config/mcp_config.json"),
        ("antigravity-project", "/project/.agents/mcp_config.json"),
        ("vscode-agent", "/h/.copilot/mcp-config.json"),
        ("vscode-agent-project", "/project/.mcp.json"),
    ],
)
@pytest.mark.parametrize("platform", ["darwin", "win32", "linux"])
def test_each_moved_target_has_its_file(client: str, expected: str, platform: str) -> None:
    assert client in CLIENTS
    assert config_path(client, platform=platform, environ={}, home=Path("/h"), cwd=Path("/project")) == Path(expected)


def test_vscode_agent_follows_copilot_home() -> None:
    path = config_path("vscode-agent", platform="linux", environ={"COPILOT_HOME": "/c"}, home=Path("/h"))
    assert path == Path("/c/mcp-config.json")


@pytest.mark.parametrize("text", ['{\n  // mine\n  "mcpServers": {}\n}\n', '{"mcpServers": {},}\n'])
def test_antigravity_refuses_a_file_it_would_exit_on_and_leaves_it(tmp_path: Path, text: str) -> None:
    path = tmp_path / "mcp_config.json"
    path.write_text(text)
    with pytest.raises(ClientConfigError, match="exits on anything but strict JSON"):
        install_entry(path, "antigravity", "myapp", ENTRY)
    assert path.read_text() == text
    install_entry(path, "cursor", "myapp", ENTRY)  # another strict-JSON client keeps them, with a warning
    assert "myapp" in jsonc.parse(path.read_text()).to_python()["mcpServers"]


def test_antigravity_checks_the_result_as_strict_json_before_replacing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "mcp_config.json"
    before = '{\n  "mcpServers": {}\n}\n'
    path.write_text(before)
    apply = jsonc.apply

    def trailing_comma(text: str, edits: object) -> str:  # an edit that a lenient parser takes, agy not
        return apply(text, edits).replace("}\n}", "},\n}", 1)  # type: ignore[arg-type]

    monkeypatch.setattr(jsonc, "apply", trailing_comma)
    with pytest.raises(ClientConfigError, match="would not be strict JSON"):
        install_entry(path, "antigravity", "myapp", ENTRY)
    assert path.read_text() == before and not (tmp_path / "mcp_config.json.bak").exists()
    monkeypatch.setattr(jsonc, "apply", apply)
    install_entry(path, "antigravity-project", "myapp", ENTRY)
    assert json.loads(path.read_text())["mcpServers"]["myapp"]["args"] == ["--app-name", "MyApp"]
    uninstall_entry(path, "myapp", "antigravity")
    assert json.loads(path.read_text()) == {"mcpServers": {}}


@pytest.mark.parametrize("client", ["antigravity", "antigravity-project", "vscode-agent", "vscode-agent-project"])
def test_config_install_and_check_client_for_each_moved_target(
    client: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, private_state_folder: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("USERPROFILE", str(tmp_path / "home"))  # (Path.home() on Windows)
    monkeypatch.delenv("COPILOT_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    installed = CliRunner().invoke(main, ["config", "install", "--client", client, "--name", "myapp", "--app-name", "MyApp"])
    assert installed.exit_code == 0, installed.output
    path = config_path(client, home=tmp_path / "home", cwd=tmp_path)
    entry = json.loads(path.read_text())["mcpServers"]["myapp"]
    assert entry["args"][-2:] == ["--app-name", "MyApp"]
    assert entry.get("type") == {"vscode-agent": "local", "vscode-agent-project": "stdio"}.get(client)
    checked = CliRunner().invoke(main, ["check", "--client", client])
    assert checked.exit_code == 0, checked.output
    assert f"entries in {path}" in checked.stdout and "✓ myapp" in checked.stdout
