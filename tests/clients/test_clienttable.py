"""`config print/install/remove/path` and `check`: the entry a client needs, merged safely,
and a diagnosis that names the step that fails (issue "Connect in one step")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from support.apps import AppServer, make_secret_file

from bridge.cli.commands import main
from bridge.clients import (
    CLIENT_INFO,
    CLIENTS,
    ClientConfigError,
    ServerEntry,
    config_path,
    entry_document,
    install_entry,
    read_servers,
    uninstall_entry,
)

TOKEN = "tok-PLACEHOLDER-0123456789"
SPACED = ServerEntry(
    command="C:\\Program Files\\Vendor\\My App\\app.exe",
    args=("--mcp-stdio",),
    env={"MYAPP_TOKEN": TOKEN},
)


# -- the entry per client (golden files citing each client's docs) ----------------------------

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "clients"
GOLDEN_ENTRY = ServerEntry(command=SPACED.command, args=SPACED.args, env=SPACED.env)


def golden(client: str) -> tuple[str, str]:
    """(the doc URL in the golden file's header, the document after it)."""
    [path] = GOLDEN.glob(f"{client}.*.txt")
    header, _, body = path.read_text(encoding="utf-8").partition("\n\n")
    source = next(line for line in header.splitlines() if line.startswith("# source: "))
    return source.split()[2], body


@pytest.mark.parametrize("client", CLIENTS)
def test_each_clients_entry_matches_its_golden_file_and_cites_its_docs(client: str) -> None:
    from bridge.clients.files import render_document

    url, body = golden(client)
    assert url == CLIENT_INFO[client].doc_url
    assert render_document(client, entry_document(client, "my-app", GOLDEN_ENTRY)) == body


@pytest.mark.parametrize("client", CLIENTS)
def test_an_installed_entry_reads_back_as_the_golden_one(tmp_path: Path, client: str) -> None:
    """What `config install` writes into a new file is the golden document, and the client's
    own reader (JSON, or TOML for Codex) gets back the entry's argv and env unchanged."""
    path = tmp_path / "config"
    install_entry(path, client, "my-app", GOLDEN_ENTRY)
    assert path.read_text(encoding="utf-8") == golden(client)[1]
    document = _load_any(path)
    entry = document[CLIENT_INFO[client].servers_key]["my-app"]
    assert [entry["command"], *entry["args"]] == [SPACED.command, "--mcp-stdio"]
    assert entry["env"] == {"MYAPP_TOKEN": TOKEN}


def _load_any(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    if path.read_text().lstrip().startswith("["):
        import tomlkit

        return tomlkit.parse(text).unwrap()
    document: dict[str, Any] = json.loads(text)
    return document


@pytest.mark.parametrize(
    ("client", "platform", "expected"),
    [
        ("claude-desktop", "darwin", "/h/Library/Application Support/Claude/claude_desktop_config.json"),
        ("claude-desktop", "win32", "/appdata/Claude/claude_desktop_config.json"),
        ("claude-desktop", "linux", "/xdg/Claude/claude_desktop_config.json"),
        ("vscode", "darwin", "/h/Library/Application Support/Code/User/mcp.json"),
        ("vscode", "win32", "/appdata/Code/User/mcp.json"),
        ("vscode", "linux", "/xdg/Code/User/mcp.json"),
        ("zed", "darwin", "/h/.config/zed/settings.json"),
        ("zed", "win32", "/appdata/Zed/settings.json"),
        ("zed", "linux", "/xdg/zed/settings.json"),
        ("claude-code", "darwin", "/project/.mcp.json"),
        ("claude-code", "win32", "/project/.mcp.json"),
        ("codex", "linux", "/codexhome/config.toml"),
        ("qwen-code", "linux", "/qwenhome/settings.json"),
        ("copilot-cli", "win32", "/copilothome/mcp-config.json"),
        *[
            (client, platform, f"/h/{tail}")
            for client, tail in [
                ("claude-code-user", ".claude.json"),
                ("cursor", ".cursor/mcp.json"),
                ("gemini-cli", ".gemini/settings.json"),
                ("qwen-code", ".qwen/settings.json"),
                ("copilot-cli", ".copilot/mcp-config.json"),
                ("windsurf", ".codeium/windsurf/mcp_config.json"),
                ("lm-studio", ".lmstudio/mcp.json"),
            ]
            for platform in ("darwin", "win32", "linux")
        ],
    ],
)
def test_config_paths_per_os(client: str, platform: str, expected: str) -> None:
    environ = {"APPDATA": "/appdata", "XDG_CONFIG_HOME": "/xdg", "CODEX_HOME": "/codexhome"}
    if expected.startswith(("/qwenhome", "/copilothome")):
        environ.update(QWEN_HOME="/qwenhome", COPILOT_HOME="/copilothome")
    path = config_path(client, platform=platform, environ=environ, home=Path("/h"), cwd=Path("/project"))
    assert path == Path(expected)


@pytest.mark.parametrize("platform", ["darwin", "win32", "linux"])
def test_config_paths_without_the_environment_fall_back_to_the_home_folder(platform: str) -> None:
    paths = {
        client: config_path(client, platform=platform, environ={}, home=Path("/h"), cwd=Path("/p"))
        for client in CLIENTS
    }
    assert paths["codex"] == Path("/h/.codex/config.toml")
    if platform == "linux":
        assert paths["zed"] == Path("/h/.config/zed/settings.json")
        assert paths["claude-desktop"] == Path("/h/.config/Claude/claude_desktop_config.json")
    if platform == "win32":
        assert paths["vscode"] == Path("/h/AppData/Roaming/Code/User/mcp.json")


# -- merging ----------------------------------------------------------------------------------


def test_install_merges_keeping_other_servers_and_unknown_keys_and_a_backup(tmp_path: Path) -> None:
    path = tmp_path / "claude_desktop_config.json"
    before: dict[str, Any] = {
        "globalShortcut": "Ctrl+Space",
        "mcpServers": {"other": {"command": "/bin/other", "args": [], "x-extra": 1}},
    }
    path.write_text(json.dumps(before))
    install_entry(path, "claude-desktop", "My App", SPACED)
    after = json.loads(path.read_text())
    assert after["globalShortcut"] == "Ctrl+Space"
    assert after["mcpServers"]["other"] == before["mcpServers"]["other"]
    assert after["mcpServers"]["My App"] == {
        "command": SPACED.command,
        "args": ["--mcp-stdio"],
        "env": {"MYAPP_TOKEN": TOKEN},
    }
    assert json.loads((tmp_path / "claude_desktop_config.json.bak").read_text()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "claude_desktop_config.json",
        "claude_desktop_config.json.bak",
    ]


def test_install_creates_a_missing_file_and_folder(tmp_path: Path) -> None:
    path = tmp_path / "Code" / "User" / "mcp.json"
    install_entry(path, "vscode", "My App", SPACED)
    assert json.loads(path.read_text()) == entry_document("vscode", "My App", SPACED)


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b'{"mcpServers": {', "not valid JSON .*line 1, column 1.*correct it there"),
        (b'{"mcpServers": {"a": {"command": "x"}} /* open', "not closed"),
        (b"\xff\xfe{}", "not UTF-8 text.*save it as UTF-8"),
        (b"[1, 2]", "JSON object"),
        (b'{"mcpServers": [], "x": 1}', '"mcpServers" is not an object; make it one'),
        (b'{"mcpServers": {}, "servers": {}}', 'Cursor reads "mcpServers", but this file has "servers".*--client'),
        (b'{"mcpServers": {"a": {"command": "x", "url": "http://127.0.0.1/mcp"}}}', "both"),
        (
            b'{"mcpServers": {"My App": {"command": "/old"}}}',
            "exists already; replace it with force=True",
        ),
    ],
)
def test_invalid_files_and_name_collisions_are_refused_byte_for_byte_unchanged(
    tmp_path: Path, content: bytes, says: str
) -> None:
    path = tmp_path / "mcp.json"
    path.write_bytes(content)
    with pytest.raises(ClientConfigError, match=says):
        install_entry(path, "cursor", "My App", SPACED)
    assert path.read_bytes() == content
    assert not (tmp_path / "mcp.json.bak").exists()


def test_force_replaces_only_that_entry(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(
        json.dumps({"mcpServers": {"My App": {"command": "/old"}, "keep": {"url": "http://127.0.0.1:1/mcp"}}})
    )
    install_entry(path, "cursor", "My App", SPACED, force=True)
    servers = json.loads(path.read_text())["mcpServers"]
    assert servers["My App"]["command"] == SPACED.command and servers["keep"] == {"url": "http://127.0.0.1:1/mcp"}


def test_remove_drops_the_entry_and_refuses_an_unknown_name(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    install_entry(path, "vscode", "My App", SPACED)
    install_entry(path, "vscode", "other", ServerEntry(command="/bin/o"))
    uninstall_entry(path, "My App")
    assert list(json.loads(path.read_text())["servers"]) == ["other"]
    content = path.read_bytes()
    with pytest.raises(ClientConfigError, match="no entry"):
        uninstall_entry(path, "My App")
    assert path.read_bytes() == content


def test_reading_infers_the_transport_from_command_or_url() -> None:
    key, entries = read_servers(
        {
            "servers": {
                "a": {"command": "/x"},
                "b": {"url": "http://127.0.0.1:1/mcp"},
                "c": {"type": "stdio", "command": "/y"},
            }
        }
    )
    assert key == "servers"
    assert [entries[name]["type"] for name in "abc"] == ["stdio", "streamable-http", "stdio"]
    with pytest.raises(ClientConfigError, match="neither"):
        read_servers({"mcpServers": {"a": {"args": []}}})


# -- the CLI ----------------------------------------------------------------------------------


def test_config_print_puts_options_in_args_and_secrets_only_in_env() -> None:
    result = CliRunner().invoke(
        main,
        [
            "config",
            "print",
            "--client",
            "claude-desktop",
            "--name",
            "myapp",
            "--url",
            "http://127.0.0.1:8765/mcp",
            "--token-env",
            "MYAPP_TOKEN",
        ],
        env={"MYAPP_TOKEN": TOKEN, "XDG_STATE_HOME": None},  # no state folder to carry
    )
    assert result.exit_code == 0, result.output
    entry = json.loads(result.stdout)["mcpServers"]["myapp"]
    assert os.path.isabs(entry["command"])
    assert entry["args"][-4:] == ["--url", "http://127.0.0.1:8765/mcp", "--token-env", "MYAPP_TOKEN"]
    assert entry["env"] == {"MYAPP_TOKEN": "<the value of MYAPP_TOKEN>"}
    assert TOKEN not in result.output
    revealed = CliRunner().invoke(
        main,
        [
            "config",
            "print",
            "--client",
            "cursor",
            "--name",
            "myapp",
            "--show-secrets",
            "--url",
            "http://127.0.0.1:8765/mcp",
            "--token-env",
            "MYAPP_TOKEN",
        ],
        env={"MYAPP_TOKEN": TOKEN, "XDG_STATE_HOME": None},
    )
    entry = json.loads(revealed.stdout)["mcpServers"]["myapp"]
    assert entry["env"] == {"MYAPP_TOKEN": TOKEN} and TOKEN not in json.dumps(entry["args"])


def test_config_print_refuses_bad_bridge_options_with_status_2() -> None:
    result = CliRunner().invoke(
        main, ["config", "print", "--client", "vscode", "--name", "x", "--url", "http://192.168.0.9/mcp"]
    )
    assert result.exit_code == 2 and "not a loopback address" in result.stderr and result.stdout == ""


def test_config_install_and_remove_through_the_cli_leave_an_invalid_file_alone(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    args = ["--client", "vscode", "--name", "myapp", "--path", str(path)]
    result = CliRunner().invoke(main, ["config", "install", *args, "--url", "http://127.0.0.1:8765/mcp"])
    assert result.exit_code == 0 and "added 'myapp'" in result.stdout
    again = CliRunner().invoke(main, ["config", "install", *args, "--url", "http://127.0.0.1:8765/mcp"])
    assert again.exit_code == 1 and "exists already" in again.stderr and "was not changed" in again.stderr
    assert "replace it with --force" in again.stderr and "force=True" not in again.stderr  # a CLI error speaks CLI
    assert CliRunner().invoke(main, ["config", "remove", *args]).exit_code == 0
    path.write_text("{broken")
    broken = CliRunner().invoke(main, ["config", "install", *args, "--url", "http://127.0.0.1:8765/mcp"])
    assert broken.exit_code == 1 and path.read_text() == "{broken"


def test_config_path_prints_the_clients_file() -> None:
    result = CliRunner().invoke(main, ["config", "path", "--client", "cursor"])
    assert result.exit_code == 0 and result.stdout.strip().endswith(os.path.join(".cursor", "mcp.json"))


def test_bridge_options_before_a_command_are_refused() -> None:
    result = CliRunner().invoke(main, ["--url", "http://127.0.0.1:1/mcp", "check"])
    assert result.exit_code == 2 and "after `check`" in result.stderr


@pytest.mark.process
def test_an_installed_entry_whose_paths_have_spaces_starts_the_bridge(app_server: AppServer, tmp_path: Path) -> None:
    """punkpeye/mcp-remote#52: a command path and an argument with spaces survive, since every part
    is its own argv element (launched here without a shell, as the clients do for a
    real executable)."""
    folder = tmp_path / "Program Files" / "My App"
    folder.mkdir(parents=True)
    launcher = folder / "my app"
    launcher.write_text(f"#!/bin/sh\nexec '{sys.executable}' -m bridge \"$@\"\n")
    launcher.chmod(0o755)
    log = tmp_path / "log dir" / "bridge log.txt"
    log.parent.mkdir()
    config_file = tmp_path / "claude_desktop_config.json"
    result = CliRunner().invoke(
        main,
        [
            "config",
            "install",
            "--client",
            "claude-desktop",
            "--name",
            "My App",
            "--path",
            str(config_file),
            "--command",
            str(launcher),
            "--url",
            app_server.url,
            "--log-file",
            str(log),
        ],
    )
    assert result.exit_code == 0, result.output
    entry = json.loads(config_file.read_text())["mcpServers"]["My App"]
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }
    done = subprocess.run(
        [entry["command"], *entry["args"]],
        input=json.dumps(init).encode() + b"\n",
        capture_output=True,
        timeout=30,
        cwd=Path("/"),
        env={**os.environ, **entry.get("env", {})},
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[0])["result"]["serverInfo"]["name"] == "example-app"


# -- check ------------------------------------------------------------------------------------


def run_check(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bridge", "check", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.process
def test_check_against_a_running_app_passes_and_lists_the_tools(app_server: AppServer) -> None:
    done = run_check("--url", app_server.url)
    assert done.returncode == 0, done.stdout + done.stderr
    for step in ("✓ endpoint", "✓ connect", "✓ token", "✓ initialize", "✓ tools/list", "✓ ping", "all checks passed"):
        assert step in done.stdout
    assert "echo" in done.stdout and "\x1b[" not in done.stdout  # no colour when not a terminal


@pytest.mark.process
def test_check_with_the_app_down_fails_at_connect_with_the_fix(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    done = run_check("--url", f"http://127.0.0.1:{port}/mcp")
    assert done.returncode == 1
    assert "✗ connect" in done.stdout and "fix: Start the app" in done.stdout and "the check failed" in done.stdout


@pytest.mark.process
def test_check_with_a_wrong_token_fails_at_initialize_and_never_shows_the_token(
    start_app_server: object, tmp_path: Path
) -> None:
    secret = tmp_path / "secret"
    make_secret_file(secret)
    server = start_app_server("--secret-file", str(secret))  # type: ignore[operator]
    done = run_check("--url", server.url, "--token-env", "MYAPP_TOKEN", env={"MYAPP_TOKEN": TOKEN})
    assert done.returncode == 1
    assert "✓ token       from environment variable MYAPP_TOKEN, 26 characters" in done.stdout
    assert "✗ initialize" in done.stdout and "HTTP 401" in done.stdout and "fix: Check the token source" in done.stdout
    for start in range(len(TOKEN) - 7):
        assert TOKEN[start : start + 8] not in done.stdout + done.stderr


#: What `config install` tells the user to do next, per client: the client's own approval or
#: folder-trust step where it has one (each seen with the real client, tests/realclients/test_realclients.py),
#: else a restart.
NEXT_STEPS = {
    "claude-code": ("trust the folder and approve the server 'my-app'", "claude mcp list"),
    "claude-code-user": ("restart Claude Code", "claude mcp list"),
    "gemini-cli": ("trust the folder you start it in", "gemini mcp list"),
    "qwen-code": ("restart Qwen Code to use it", "qwen mcp list"),
    "copilot-cli": ("trust the folder you start it in", "copilot mcp list"),
    "antigravity": ("restart Antigravity CLI (agy) to use it", "/mcp"),
    "antigravity-project": ("start Antigravity CLI (agy) in the folder that holds", "/mcp"),
    "vscode-agent": ("restart VS Code's agent", "Copilot CLI reads this file too"),
    "vscode-agent-project": ("start its agent there", "Copilot CLI read this file too"),
}


@pytest.mark.parametrize("client", CLIENTS)
def test_install_names_the_clients_own_next_step(tmp_path: Path, client: str) -> None:
    target = tmp_path / "project" / "config"
    result = CliRunner().invoke(
        main,
        ["config", "install", "--client", client, "--name", "my-app", "--path", str(target),
         "--url", "http://127.0.0.1:9/mcp"],
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"added 'my-app' in {target}; ")  # (stderr may warn first)
    for words in NEXT_STEPS.get(client, (f"restart {CLIENT_INFO[client].title} to use it",)):
        assert words in result.output
    if client == "claude-code":
        assert f"run `claude` in {target.parent}," in result.output


@pytest.mark.process
def test_serving_never_loads_the_config_file_code_and_the_package_reaches_it() -> None:
    """The bridge's start-up and idle memory stay as they were: tomlkit and the config
    writers load only for a `config` command. `bridge.clients` works after `import bridge`."""
    code = (
        "import sys, bridge, bridge.cli\n"
        "loaded = [m for m in ('tomlkit', 'bridge.clients', 'bridge.clients.clienttable', 'bridge.clients.files', 'bridge.clients.jsonc') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
        "import bridge.clients\n"
        "assert 'claude-desktop' in bridge.clients.CLIENTS\n"
    )
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


@pytest.mark.process
@pytest.mark.posix_only("HOME decides the path on POSIX only")
def test_the_docs_connect_to_claude_snippet_runs_as_written(tmp_path: Path) -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "clients.md").read_text(encoding="utf-8")
    start = page.index("import bridge.clients as cc")
    snippet = page[start : page.index("```", start)]
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CONFIG_HOME", "APPDATA")}
    env["HOME"] = str(tmp_path)
    for _ in range(2):  # the second run replaces the first entry (force=True)
        done = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True, timeout=60, env=env)
        assert done.returncode == 0, done.stderr
    path = config_path("claude-desktop", environ={}, home=tmp_path)
    assert json.loads(path.read_text())["mcpServers"]["MyApp"]["args"] == ["--mcp-stdio"]


@pytest.mark.parametrize(
    ("client", "says", "never"),
    [
        ("claude-desktop", "Claude Desktop reads strict JSON: no comments, no trailing commas", "are fine"),
        ("vscode", "accepts comments and trailing commas", "strict JSON"),
    ],
)
def test_a_broken_file_is_described_with_the_clients_own_syntax(tmp_path: Path, client: str, says: str, never: str) -> None:
    """Claude Desktop's file is strict JSON: the advice must not invite comments into it."""
    path = tmp_path / "config.json"
    path.write_bytes(b'{"mcpServers": {')
    with pytest.raises(ClientConfigError) as raised:
        install_entry(path, client, "My App", SPACED)
    assert says in str(raised.value) and never not in str(raised.value)
