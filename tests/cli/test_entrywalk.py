"""``config list``, ``check --client X --name N`` and ``check --all``: the entries that run the
bridge, walked with their own arguments and env (bridge/cli/entrywalk.py; issue 41, point 13)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from bridge.cli.commands import main
from bridge.cli.demoapp import DemoServer
from bridge.cli.entrywalk import bridge_args_of

pytestmark = pytest.mark.posix_only("HOME and XDG_CONFIG_HOME place the clients' files")


@pytest.fixture
def demo(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[DemoServer]:
    """The demo app on a free port, and a fresh HOME for the clients' files."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    server = DemoServer("Walked")
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_the_bridge_arguments_of_an_entry() -> None:
    assert bridge_args_of({"command": "/x/mcp-app-bridge", "args": ["--url", "u"]}) == ["--url", "u"]
    assert bridge_args_of({"command": "/x/python3", "args": ["-I", "-m", "bridge", "--app-name", "A"]}) == ["--app-name", "A"]
    assert bridge_args_of({"command": "/x/MyApp", "args": ["--mcp-stdio"]}) is None
    assert bridge_args_of({"url": "https://example.com/mcp"}) is None


def test_list_and_walk_each_entry_with_its_own_arguments_and_env(demo: DemoServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry whose token is in its own ``env`` (Claude Desktop's): ``check --client
    claude-desktop --name good`` walks it with that token, to ✓; ``check --all`` walks it and
    the broken one; ``config list`` shows both, the app's own entry too."""
    runner = CliRunner()
    monkeypatch.setenv("WALK_TOKEN", demo.token)
    good = ["config", "install", "--client", "claude-desktop", "--name", "good", "--url", demo.url, "--token-env", "WALK_TOKEN"]
    assert runner.invoke(main, good).exit_code == 0
    bad = ["config", "install", "--client", "claude-desktop", "--name", "bad", "--url", "http://127.0.0.1:9/mcp"]
    assert runner.invoke(main, bad).exit_code == 0
    own = ["config", "install", "--client", "cursor", "--name", "own", "--command", "/bin/sh", "--", "--mcp-stdio"]
    assert runner.invoke(main, own).exit_code == 0
    monkeypatch.delenv("WALK_TOKEN")  # only the entry's env has it now

    listed = runner.invoke(main, ["config", "list"])
    assert listed.exit_code == 0, listed.output
    lines = listed.stdout.splitlines()
    assert any(line.startswith("claude-desktop\tgood\t") and "--token-env WALK_TOKEN" in line for line in lines), lines
    assert any(line.startswith("claude-desktop\tbad\t") for line in lines), lines
    assert any(line.startswith("cursor\town\tthe app's own /bin/sh --mcp-stdio") for line in lines), lines
    assert demo.token not in listed.output

    walked = runner.invoke(main, ["check", "--client", "claude-desktop", "--name", "good"])
    assert walked.exit_code == 0, walked.output
    assert "The walk of claude-desktop's 'good'" in walked.output and "all checks passed" in walked.output
    assert "2 tools: echo, add" in walked.output, walked.output

    every = runner.invoke(main, ["check", "--all"])
    assert every.exit_code == 1, every.output
    assert "The walk of claude-desktop's 'good'" in every.output and "The walk of claude-desktop's 'bad'" in every.output
    assert "the check failed" in every.output


def test_an_entry_in_a_file_two_clients_read_is_one_row_naming_both(
    demo: DemoServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A project's ``.mcp.json`` is both ``claude-code``'s and ``vscode-agent-project``'s
    file, ``~/.copilot/mcp-config.json`` both ``copilot-cli``'s and ``vscode-agent``'s
    (docs/clients.md): each entry there is one row of ``config list`` naming both
    clients, and ``check --all`` walks it once (it was listed, and walked, twice)."""
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    runner = CliRunner()
    for client in ("claude-code", "vscode-agent"):
        done = runner.invoke(main, ["config", "install", "--client", client, "--name", "shared", "--url", demo.url])
        assert done.exit_code == 0, done.output

    listed = runner.invoke(main, ["config", "list"])
    assert listed.exit_code == 0, listed.output
    rows = [line for line in listed.stdout.splitlines() if "\tshared\t" in line]
    assert [row.split("\t")[0] for row in rows] == ["claude-code, vscode-agent-project", "copilot-cli, vscode-agent"], rows

    every = runner.invoke(main, ["check", "--all"])
    assert every.output.count("The walk of ") == 2, every.output
    assert "The walk of claude-code and vscode-agent-project's 'shared'" in every.output
    assert "The walk of copilot-cli and vscode-agent's 'shared'" in every.output
