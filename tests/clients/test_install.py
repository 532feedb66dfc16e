"""What `config install` writes so that the bridge works under each client as it really
runs servers: a stripped environment still finds the app's discovery file, a `--token-env`
token reaches the bridge without its value in the file, and a launch fits the client's
start-up timeout.

The clients' own rules for a server's environment are restated here from their source, so
the bridge can be run the way each client would run it:

- Codex: only ``DEFAULT_ENV_VARS`` of its own environment (openai/codex
  ``codex-rs/rmcp-client/src/utils.rs``, Unix list), then the names in ``env_vars``, then the
  literal ``env``.
- Gemini CLI: its environment without names matching TOKEN, SECRET, KEY, AUTH… (only an
  allow-list under GitHub Actions), then the entry's ``env`` with ``$VAR``/``${VAR}``
  expanded from its whole environment (google-gemini/gemini-cli
  ``packages/core/src/services/environmentSanitization.ts``, ``src/tools/mcp-client.ts``).
- Claude Code: its whole environment, then the entry's ``env``.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from click.testing import CliRunner
from support import processes
from support.apps import isolated_env, process_alive
from support.processes import BridgeProcess, handshake, initialize
from support.pythonapp import START_TIMEOUT, docs_block, greet_through
from support.pythonapp import AppDesk as Desk
from support.scripted import closed_port

from bridge.cli.commands import main
from bridge.clients import CLIENT_INFO, CLIENTS, ServerEntry, app_entry, entry_document, install_entry
from bridge.clients.clienttable import client_entry, client_run, state_environment
from bridge.clients.files import render_document

TOKEN = "tok-PLACEHOLDER-0123456789"
STATE_VARIABLE = "WIN_PD_OVERRIDE_LOCAL_APPDATA" if sys.platform == "win32" else "XDG_STATE_HOME"
"""The variable that moves platformdirs' state folder on this OS."""

CODEX_DEFAULT_ENV_VARS = (
    "HOME", "LOGNAME", "PATH", "SHELL", "USER", "__CF_USER_TEXT_ENCODING", "LANG", "LC_ALL", "TERM", "TMPDIR", "TZ",
)  # fmt: skip
GEMINI_ALWAYS_ALLOWED = {
    "PATH", "SYSTEMROOT", "COMSPEC", "PATHEXT", "WINDIR", "TEMP", "TMP", "USERPROFILE", "SYSTEMDRIVE",
    "HOME", "LANG", "SHELL", "TMPDIR", "USER", "LOGNAME",
}  # fmt: skip
GEMINI_NEVER_ALLOWED_NAME = re.compile("TOKEN|SECRET|PASSWORD|PASSWD|KEY|AUTH|CREDENTIAL|CREDS|PRIVATE|CERT", re.I)


def codex_server_env(parent: dict[str, str], entry: dict[str, Any]) -> dict[str, str]:
    names = (*CODEX_DEFAULT_ENV_VARS, *entry.get("env_vars", []))
    return {**{name: parent[name] for name in names if name in parent}, **entry.get("env", {})}


def gemini_server_env(parent: dict[str, str], entry: dict[str, Any]) -> dict[str, str]:
    strict = "GITHUB_SHA" in parent
    env = {
        name: value
        for name, value in parent.items()
        if name.upper() in GEMINI_ALWAYS_ALLOWED
        or name.upper().startswith("GEMINI_CLI_")
        or not (strict or GEMINI_NEVER_ALLOWED_NAME.search(name))
    }
    expand = re.compile(r"\$\{(\w+)\}|\$(\w+)")
    for name, value in entry.get("env", {}).items():
        env[name] = expand.sub(lambda match: parent.get(match[1] or match[2], ""), value)
    return env


def claude_code_server_env(parent: dict[str, str], entry: dict[str, Any]) -> dict[str, str]:
    return {**parent, **entry.get("env", {})}


SERVER_ENV = {"codex": codex_server_env, "gemini-cli": gemini_server_env, "claude-code": claude_code_server_env}


def printed_entry(client: str, *args: str, env: dict[str, str | None]) -> tuple[str, dict[str, Any]]:
    """`config print --show-secrets` for ``client``: (the document's text, the entry)."""
    result = CliRunner().invoke(
        main, ["config", "print", "--client", client, "--name", "myapp", "--show-secrets", *args], env=env
    )
    assert result.exit_code == 0, result.output
    if CLIENT_INFO[client].syntax == "toml":
        import tomlkit

        document = tomlkit.parse(result.stdout).unwrap()
    else:
        document = json.loads(result.stdout)
    return result.stdout, document[CLIENT_INFO[client].servers_key]["myapp"]


# -- the state folder ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("platform", "environ", "expected"),
    [
        ("linux", {"XDG_STATE_HOME": "/s", "HOME": "/h"}, {"XDG_STATE_HOME": "/s"}),
        ("darwin", {"XDG_STATE_HOME": "/s"}, {"XDG_STATE_HOME": "/s"}),  # platformdirs honours it on macOS too
        ("linux", {"XDG_STATE_HOME": "  ", "HOME": "/h"}, {}),  # blank: the default folder, found anyway
        ("linux", {"HOME": "/h"}, {}),
        (
            "win32",
            {"XDG_STATE_HOME": "/s", "WIN_PD_OVERRIDE_LOCAL_APPDATA": "D:\\state"},
            {"WIN_PD_OVERRIDE_LOCAL_APPDATA": "D:\\state"},
        ),
    ],
)
def test_the_entry_carries_the_variable_that_moves_the_state_folder(
    platform: str, environ: dict[str, str], expected: dict[str, str]
) -> None:
    assert state_environment(environ, platform) == expected


def test_a_bridge_entry_and_an_apps_entry_carry_the_state_folder_for_every_client(tmp_path: Path) -> None:
    for client in CLIENTS:
        _, entry = printed_entry(client, "--app-name", "MyApp", env={STATE_VARIABLE: str(tmp_path)})
        assert entry["env"] == {STATE_VARIABLE: str(tmp_path)}, client
        _, own = printed_entry(
            client, "--command", sys.executable, "--", "app.py", "--mcp-stdio", env={STATE_VARIABLE: str(tmp_path)}
        )
        assert own["env"] == {STATE_VARIABLE: str(tmp_path)}, client
    _, unset = printed_entry("codex", "--app-name", "MyApp", env={STATE_VARIABLE: None})
    assert "env" not in unset


def test_an_apps_connect_button_entry_carries_it_too() -> None:
    entry = app_entry("/opt/MyApp/myapp", environ={"XDG_STATE_HOME": "/s"}, platform="linux")
    assert (entry.args, dict(entry.env), entry.startup_timeout_seconds) == (
        ("--mcp-stdio",),
        {"XDG_STATE_HOME": "/s"},
        45.0,
    )
    document = entry_document("codex", "myapp", entry)["mcp_servers"]["myapp"]
    assert document["env"] == {"XDG_STATE_HOME": "/s"} and document["startup_timeout_sec"] == 45


@pytest.fixture
def desk(tmp_path: Path) -> Iterator[Desk]:
    made = Desk(tmp_path, "MyApp")
    try:
        yield made
    finally:
        made.close()


def codex_started(entry: dict[str, Any], parent: dict[str, str]) -> BridgeProcess:
    """The entry's command, run as Codex runs it: only Codex's variables, then the entry's."""
    env = codex_server_env(parent, entry)
    with mock.patch.object(processes, "bridge_command", lambda: [entry["command"]]):
        return BridgeProcess(*entry["args"], env=env)


def stray_discovery(desk: Desk) -> Path:
    """Where a bridge without XDG_STATE_HOME looks for MyApp's discovery file."""
    return Path(desk.env["HOME"]) / ".local" / "state" / "MyApp" / "mcp-endpoint.json"


@pytest.mark.process
@pytest.mark.posix_only("XDG_STATE_HOME and Codex's Unix variable list")
def test_a_bridge_codex_starts_finds_the_app_that_runs_with_xdg_state_home(desk: Desk) -> None:
    script = desk.root / "myapp.py"
    script.write_text(docs_block("# myapp.py"), encoding="utf-8")
    desk.start(script)
    desk.published()
    assert desk.discovery.parent != stray_discovery(desk).parent  # the app's file is not in the default place
    _, entry = printed_entry("codex", "--app-name", "MyApp", env=dict(desk.env))
    with codex_started(entry, desk.env) as bridge:
        assert handshake(bridge)["serverInfo"]["name"] == "MyApp"
        assert greet_through(bridge) == "Hello, Ada!"


@pytest.mark.process
@pytest.mark.posix_only("XDG_STATE_HOME and Codex's Unix variable list")
def test_the_apps_own_entry_under_codex_reaches_the_running_app_and_starts_no_second_one(desk: Desk) -> None:
    if sys.platform == "win32":  # its marker skips it first; this tells mypy --platform
        pytest.skip("POSIX only")
    script = desk.root / "myapp.py"
    script.write_text(docs_block("# myapp.py"), encoding="utf-8")
    app = desk.start(script)
    assert desk.published()["pid"] == app.pid
    _, entry = printed_entry("codex", "--command", sys.executable, "--", str(script), "--mcp-stdio", env=dict(desk.env))
    try:
        with codex_started(entry, desk.env) as bridge:
            bridge.send(initialize(0))
            assert "result" in bridge.read_reply(0, START_TIMEOUT + 10)
            assert greet_through(bridge) == "Hello, Ada!"
        assert "starting MyApp" not in bridge.stderr_text()
        assert not stray_discovery(desk).exists(), "a second instance of the app was started"
        assert json.loads(desk.discovery.read_text())["pid"] == app.pid and app.poll() is None
    finally:
        if stray_discovery(desk).exists():  # without the fix: stop the second instance
            stray = json.loads(stray_discovery(desk).read_text())["pid"]
            if process_alive(stray):
                os.kill(stray, signal.SIGKILL)


# -- secrets ------------------------------------------------------------------------------------


@pytest.mark.process
@pytest.mark.posix_only("the clients' Unix variable lists")
@pytest.mark.parametrize("client", ["codex", "gemini-cli", "claude-code"])
@pytest.mark.parametrize("github_actions", [False, True], ids=["desktop", "github-actions"])
def test_a_token_env_token_reaches_the_bridge_and_its_value_is_not_in_the_file(
    tmp_path: Path, client: str, github_actions: bool
) -> None:
    """The bridge the client starts has the token (it would refuse to start without it:
    "environment variable MYAPP_TOKEN is not set"), and the file holds no copy of it."""
    parent = {**isolated_env(tmp_path), "MYAPP_TOKEN": TOKEN}
    if github_actions:
        parent["GITHUB_SHA"] = "0" * 40  # Gemini CLI then passes only its allow-list
    url = f"http://127.0.0.1:{closed_port()}/mcp"
    text, entry = printed_entry(client, "--url", url, "--token-env", "MYAPP_TOKEN", env=dict(parent))
    assert TOKEN not in text
    env = SERVER_ENV[client](parent, entry)
    with (
        mock.patch.object(processes, "bridge_command", lambda: [entry["command"]]),
        BridgeProcess(*entry["args"], env=env) as bridge,
    ):
        bridge.send(initialize(0))
        reply = bridge.read_reply(0)
        assert "MYAPP_TOKEN" not in json.dumps(reply) and "is not set" not in bridge.stderr_text()
        assert reply["error"]["data"]["reason"] == "app_unreachable"  # it got as far as connecting


def test_what_each_client_gets_for_a_token_env_variable() -> None:
    argv = ["/b", "--url", "http://127.0.0.1:1/mcp", "--token-env", "MYAPP_TOKEN"]
    shown = {}
    for client in CLIENTS:
        entry, remarks = client_entry(client, argv, token_variables=["MYAPP_TOKEN"], environ={"MYAPP_TOKEN": TOKEN})
        obj = entry_document(client, "x", entry)[CLIENT_INFO[client].servers_key]["x"]
        shown[client] = (obj.get("env"), obj.get("env_vars"), remarks)
    by_name = "MYAPP_TOKEN goes into the entry by name only: {0} passes it to the bridge from its own environment, so start {0} with MYAPP_TOKEN set"
    assert shown["codex"] == (None, ["MYAPP_TOKEN"], [by_name.format("Codex")])
    assert shown["gemini-cli"] == ({"MYAPP_TOKEN": "$MYAPP_TOKEN"}, None, [by_name.format("Gemini CLI")])
    assert shown["claude-code"][:2] == shown["claude-code-user"][:2] == (None, None)
    assert "by name only" in shown["claude-code"][2][0]
    assert shown["qwen-code"][:2] == (None, None) and "by name only" in shown["qwen-code"][2][0]
    for client in ("claude-desktop", "cursor", "vscode", "windsurf", "zed", "lm-studio", "copilot-cli"):
        assert shown[client] == ({"MYAPP_TOKEN": TOKEN}, None, []), client


def test_an_unset_token_variable_says_where_it_must_be_set() -> None:
    argv = ["/b", "--url", "http://127.0.0.1:1/mcp", "--token-env", "MYAPP_TOKEN"]
    _, codex = client_entry("codex", argv, token_variables=["MYAPP_TOKEN"], environ={})
    assert codex == [
        "MYAPP_TOKEN is not set here: Codex passes it to the bridge from its own environment, so start Codex with MYAPP_TOKEN set"
    ]
    entry, desktop = client_entry("claude-desktop", argv, token_variables=["MYAPP_TOKEN"], environ={})
    assert not entry.env and "add it to the entry's env block" in desktop[0]


def test_config_print_hides_the_token_but_shows_the_state_folder() -> None:
    result = CliRunner().invoke(
        main,
        [
            "config",
            "print",
            "--client",
            "cursor",
            "--name",
            "m",
            "--url",
            "http://127.0.0.1:1/mcp",
            "--token-env",
            "MYAPP_TOKEN",
        ],
        env={"MYAPP_TOKEN": TOKEN, STATE_VARIABLE: "/s"},
    )
    assert json.loads(result.stdout)["mcpServers"]["m"]["env"] == {
        STATE_VARIABLE: "/s",
        "MYAPP_TOKEN": "<the value of MYAPP_TOKEN>",
    }


# -- start-up timeouts --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config_options", "bridge_options", "codex_seconds", "gemini_ms"),
    [
        ([], ["--launch", "/opt/MyApp/myapp"], 45, 600_000),
        ([], ["--launch", "/opt/MyApp/myapp", "--launch-timeout", "100"], 115, 600_000),
        # (Gemini CLI: its `timeout` also bounds a tool call, which may wait for the launch: 300 + 700.5 + 15)
        ([], ["--launch", "/opt/MyApp/myapp", "--launch-timeout", "700.5"], 716, 1_016_000),
        (["--startup-timeout", "20"], ["--launch", "/opt/MyApp/myapp"], 20, 600_000),
        ([], [], None, None),  # nothing to start: the clients' defaults are enough
    ],
)
def test_a_launch_gets_the_clients_start_up_timeout(
    config_options: list[str], bridge_options: list[str], codex_seconds: int | None, gemini_ms: int | None
) -> None:
    """Codex `startup_timeout_sec` (unset: 30 s in 0.169.0) and Gemini CLI `timeout` (ms; 5 s in
    `gemini mcp list`, and the bound of every request too, so never below its 600 s)."""
    _, codex = printed_entry("codex", *config_options, "--app-name", "MyApp", *bridge_options, env={})
    _, gemini = printed_entry("gemini-cli", *config_options, "--app-name", "MyApp", *bridge_options, env={})
    _, qwen = printed_entry("qwen-code", *config_options, "--app-name", "MyApp", *bridge_options, env={})
    assert codex.get("startup_timeout_sec") == codex_seconds
    assert gemini.get("timeout") == gemini_ms
    assert qwen.get("discoveryTimeoutMs") == (None if codex_seconds is None else math.ceil(codex_seconds) * 1000)
    for client in CLIENTS:
        if client_run(client).startup_timeout_key is None:
            _, entry = printed_entry(client, *config_options, "--app-name", "MyApp", *bridge_options, env={})
            assert not {"timeout", "startup_timeout_sec", "discoveryTimeoutMs"} & set(entry), client


@pytest.mark.parametrize(
    ("bridge_options", "codex_seconds"),
    [
        ([], 315),  # --request-timeout 300 + 15
        (["--request-timeout", "100"], 115),
        (["--request-timeout", "100", "--launch", "/opt/MyApp/myapp"], 145),  # + --launch-timeout 30
        (["--request-timeout", "3600.5", "--launch", "/opt/MyApp/myapp", "--launch-timeout", "10"], 3626),
    ],
)
def test_codex_gets_a_tool_timeout_sized_to_the_bridges_own(bridge_options: list[str], codex_seconds: int) -> None:
    """Codex `tool_timeout_sec` (unset: 60 s) is sized so that the bridge's own `timeout`
    reply comes first; no other client gets a tool-call key."""
    _, codex = printed_entry("codex", "--app-name", "MyApp", *bridge_options, env={})
    assert codex.get("tool_timeout_sec") == codex_seconds
    _, gemini = printed_entry("gemini-cli", "--app-name", "MyApp", *bridge_options, env={})
    # Gemini CLI's `timeout` bounds every request: raised only past its own 600 s
    assert gemini.get("timeout") == (codex_seconds * 1000 if codex_seconds > 600 else (600_000 if "--launch" in bridge_options else None))
    for client in CLIENTS:
        if client != "codex":
            _, entry = printed_entry(client, "--app-name", "MyApp", *bridge_options, env={})
            assert "tool_timeout_sec" not in entry, client  # (Gemini CLI: its `timeout`, above)


def test_the_apps_own_entry_gets_a_start_up_timeout_for_its_default_launch_bound() -> None:
    _, codex = printed_entry("codex", "--command", sys.executable, "--", "app.py", "--mcp-stdio", env={})
    assert codex["startup_timeout_sec"] == 45


def test_the_apps_own_entry_is_told_how_to_shorten_its_launch_bound_in_the_apps_code() -> None:
    """The app's own ``--mcp-stdio`` takes no ``--launch-timeout`` (a newcomer followed the
    advice and got "No such option"): the remark names the app's ``BridgeConfig`` instead."""
    result = CliRunner().invoke(
        main, ["config", "print", "--client", "claude-code", "--name", "m", "--command", sys.executable, "--", "app.py", "--mcp-stdio"]
    )
    assert result.exit_code == 0, result.output
    assert "have the app's --mcp-stdio wait 15 s or less for the app to start" in result.stderr
    assert "BridgeConfig(launch_timeout_seconds=...)" in result.stderr
    assert "--launch-timeout" not in result.stderr


def test_claude_code_has_no_per_server_timeout_so_the_user_is_told_how_to_raise_its_30_s() -> None:
    result = CliRunner().invoke(
        main,
        [
            "config",
            "print",
            "--client",
            "claude-code",
            "--name",
            "m",
            "--app-name",
            "MyApp",
            "--launch",
            "/opt/MyApp/myapp",
        ],
    )
    assert result.exit_code == 0
    assert "gives a server 30 s to start" in result.stderr and "MCP_TIMEOUT=45000" in result.stderr
    quick = CliRunner().invoke(
        main,
        [
            "config",
            "print",
            "--client",
            "claude-code",
            "--name",
            "m",
            "--app-name",
            "MyApp",
            "--launch",
            "/opt/MyApp/myapp",
            "--launch-timeout",
            "10",
        ],
    )
    assert "MCP_TIMEOUT" not in quick.stderr  # 10 + 15 s fits in 30 s
    slow = CliRunner().invoke(
        main,
        [
            "config",
            "print",
            "--client",
            "claude-code",
            "--name",
            "m",
            "--app-name",
            "MyApp",
            "--launch",
            "/opt/MyApp/myapp",
            "--launch-timeout",
            "60",
        ],
    )
    assert "more than it can give (60 s): lower --launch-timeout to 45 or less" in slow.stderr


# -- what each client's entry now looks like (golden files) -------------------------------------

LAUNCH_GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "clients" / "launch"
LAUNCH_ARGV = [
    "/opt/mcp-app-bridge/mcp-app-bridge",
    "--app-name",
    "MyApp",
    "--launch",
    "/opt/MyApp/myapp",
    "--token-env",
    "MYAPP_TOKEN",
]


@pytest.mark.parametrize("path", sorted(LAUNCH_GOLDEN.glob("*.txt")), ids=lambda path: path.name.split(".")[0])
def test_each_clients_launch_entry_matches_its_golden_file(tmp_path: Path, path: Path) -> None:
    """``config install --client C --name my-app --app-name MyApp --launch … --token-env
    MYAPP_TOKEN`` with the token and XDG_STATE_HOME set, on Linux; the header says why."""
    client = path.name.split(".")[0]
    header, _, body = path.read_text(encoding="utf-8").partition("\n\n")
    assert f"# source: {CLIENT_INFO[client].doc_url}" in header
    entry, _ = client_entry(
        client,
        LAUNCH_ARGV,
        token_variables=["MYAPP_TOKEN"],
        environ={"MYAPP_TOKEN": TOKEN, "XDG_STATE_HOME": "/home/ada/state"},
        platform="linux",
        startup_timeout_seconds=45.0,
        tool_timeout_seconds=345.0,
    )
    assert render_document(client, entry_document(client, "my-app", entry)) == body
    written = tmp_path / "config"
    install_entry(written, client, "my-app", entry)
    assert written.read_text(encoding="utf-8") == body


def test_the_launch_golden_files_cover_the_clients_this_change_is_about() -> None:
    covered = {path.name.split(".")[0] for path in LAUNCH_GOLDEN.glob("*.txt")}
    assert {"codex", "gemini-cli", "claude-code", "claude-code-user", "claude-desktop", "vscode"} <= covered


def test_a_plain_server_entry_is_written_as_before() -> None:
    """A ServerEntry without the new fields (an app's code from before) gives the same entry:
    no env_vars, no start-up timeout."""
    entry = ServerEntry(command="/opt/a", args=("--mcp-stdio",), env={"K": "v"})
    for client in CLIENTS:
        obj = entry_document(client, "x", entry)[CLIENT_INFO[client].servers_key]["x"]
        assert (obj["command"], obj["args"], obj["env"]) == ("/opt/a", ["--mcp-stdio"], {"K": "v"}), client
        assert not {"env_vars", "timeout", "startup_timeout_sec", "discoveryTimeoutMs"} & set(obj), client


# -- an app on a Unix domain socket -------------------------------------------------------------

UNIX_URL = "http+unix://%2Frun%2Fuser%2F1000%2Fmyapp%2Fmcp-endpoint.sock/mcp"


@pytest.mark.posix_only("the bridge connects to Unix domain sockets on Linux and macOS")
def test_an_http_unix_url_is_written_as_given_for_every_client() -> None:
    for client in CLIENTS:
        _text, entry = printed_entry(client, "--url", UNIX_URL, env={})
        assert entry["args"] == ["--url", UNIX_URL], client


def test_config_install_writes_an_http_unix_entry_and_refuses_a_bad_one_like_a_tcp_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "claude_desktop_config.json"
    install = ["config", "install", "--client", "claude-desktop", "--name", "myapp", "--path", str(target)]
    relative = CliRunner().invoke(main, [*install, "--url", "http+unix://run.sock/mcp"])
    assert relative.exit_code == 2 and "must be absolute" in relative.output, relative.output
    no_path = CliRunner().invoke(main, [*install, "--url", "http+unix://%2Frun%2Fapp.sock"])
    assert no_path.exit_code == 2 and "needs the socket path" in no_path.output, no_path.output
    assert not target.exists(), "nothing is written for a refused URL"
    if sys.platform == "win32":
        monkeypatch.setattr(sys, "platform", "linux")
    written = CliRunner().invoke(main, [*install, "--url", UNIX_URL])
    assert written.exit_code == 0, written.output
    assert json.loads(target.read_text())["mcpServers"]["myapp"]["args"] == ["--url", UNIX_URL]
    monkeypatch.setattr(sys, "platform", "win32")  # the bridge there has no Unix-socket link
    windows = CliRunner().invoke(main, [*install, "--name", "other", "--url", UNIX_URL])
    assert windows.exit_code == 2 and "does not connect to" in windows.output, windows.output


def test_an_entry_for_a_client_that_drops_list_pages_is_told_about_merge_list_pages() -> None:
    """Issue 41, point 12: ``config install --client gemini-cli`` (and ``print``) says that
    Gemini CLI reads only a list's first page and names ``--merge-list-pages``; not with the
    option given, and not for a client that follows ``nextCursor``."""

    def stderr(client: str, *extra: str) -> str:
        result = CliRunner().invoke(main, ["config", "print", "--client", client, "--name", "m", "--app-name", "MyApp", *extra])
        assert result.exit_code == 0, result.output
        return result.stderr

    assert "Gemini CLI reads only the first page of a list" in stderr("gemini-cli") and "--merge-list-pages" in stderr("gemini-cli")
    assert "first page" not in stderr("gemini-cli", "--merge-list-pages")
    assert "first page" not in stderr("codex")


def test_an_apps_script_named_by_a_relative_path_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 41, point 13: ``--command python -- script.py`` from the script's folder gives
    an entry that works from anywhere (the client starts it in another folder)."""
    (tmp_path / "script.py").write_text("", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        main, ["config", "print", "--client", "claude-code", "--name", "m", "--command", sys.executable, "--", "script.py", "--mcp-stdio", "notafile"]
    )
    assert result.exit_code == 0, result.output
    entry = json.loads(result.stdout)["mcpServers"]["m"]
    assert entry["args"][-3:] == [str(tmp_path / "script.py"), "--mcp-stdio", "notafile"], entry
    assert "the argument script.py names a file in this folder" in result.stderr


def test_force_after_the_double_dash_is_told_to_go_before_it(tmp_path: Path) -> None:
    target = tmp_path / "config.json"
    result = CliRunner().invoke(
        main, ["config", "install", "--client", "claude-code", "--name", "m", "--path", str(target), "--", "--app-name", "A", "--force"]
    )
    assert result.exit_code == 2 and "put --force before --" in result.output, result.output
    assert not target.exists()


@pytest.mark.posix_only("XDG_STATE_HOME places the discovery files")
def test_an_app_name_nothing_published_under_names_the_apps_that_did(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A wrong ``--app-name``: ``config install`` warns, naming the apps that published
    (``check`` and the bridge's ``app_unreachable`` say the same)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    (tmp_path / "state" / "RealApp").mkdir(parents=True)
    (tmp_path / "state" / "RealApp" / "mcp-endpoint.json").write_text("{}", encoding="utf-8")
    (tmp_path / "state" / "mcp-app-bridge").mkdir()
    result = CliRunner().invoke(main, ["config", "print", "--client", "codex", "--name", "m", "--app-name", "ReelApp"])
    assert result.exit_code == 0, result.output
    assert "no app called ReelApp has published here" in result.stderr and "found: RealApp:" in result.stderr, result.stderr
    right = CliRunner().invoke(main, ["config", "print", "--client", "codex", "--name", "m", "--app-name", "RealApp"])
    assert "has published" not in right.stderr
