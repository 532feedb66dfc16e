"""The real AI clients, pinned from npm, start the bridge as `config install` wrote it and report
it connected (issue 19, "The real clients in CI").

Claude Code, Gemini CLI, Qwen Code and Codex (``tests/realclients/package.json``), each with a
fresh HOME and XDG folders (``tests/realclients/harness.py``): ``mcp-app-bridge config install
--client …``, then the one-time trust/approval step a user takes, then the client's own check
(``claude mcp list``, ``gemini mcp list``, ``qwen mcp list``, Codex ``app-server``
``mcpServerStatus/list``). No login and no API key: none of these checks needs one.

- connected with the app up (``--url``), and with the app down and started by the bridge
  (``--launch``, found again through an explicit ``--discovery-file``);
- the bridge's reason reaches the user where the client shows one (Claude Code, Codex);
- Copilot CLI, which starts nothing without a login: its own ``copilot mcp get``/``list``
  read the entry;
- the frozen single file (``MCP_APP_BRIDGE_EXE``) under each client's own way of ending its
  servers (measured: docs/frozen.md, "Nothing left behind"), 20 checks in a row with a private
  TMPDIR: what the one-file build's unpack folders (``_MEI*``) leave there.

Marked ``clients`` and deselected by default (``python -m pytest -m clients`` runs them);
missing clients skip them, or fail them under ``CI=true``. ``config install`` runs as
``python -m bridge`` and writes this environment's ``mcp-app-bridge`` script into the entry,
or runs as the frozen file (which writes itself) when ``MCP_APP_BRIDGE_EXE`` names it
(``.ci/run`` does both). POSIX only: the clients' POSIX installs, signals and TMPDIR.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from realclients.harness import (
    CLIENTS,
    COPILOT,
    LOGGED_OUT_PROMPT,
    Home,
    check,
    config_install,
    fresh_home,
    require_clients,
    start_session,
    trust,
)
from realclients.traced_app import traced_methods
from support.apps import APP_SERVER_SCRIPT, AppServer, read_pids, start_listening_app
from support.processes import BRIDGE_EXE_VAR, bridge_command, free_port

pytestmark = [pytest.mark.clients, pytest.mark.posix_only("the clients' POSIX installs; signals and TMPDIR")]

NAME = "example-app"
"""The entry's name: the example app (``examples/app_server.py``, its server name too)."""
LAUNCH_TIMEOUT_SECONDS = 30.0
"""--launch-timeout: bound on the app's start (about 1 s; a loaded CI machine is slower)."""
KILL_PATTERN_RUNS = 20
DEMO = "demo"
"""The entry of ``mcp-app-bridge demo-app`` (DemoApp, tools only)."""


@pytest.fixture(autouse=True)
def _clients_installed() -> None:
    require_clients()


def _home(tmp_path: Path, **extra: str) -> Home:
    return fresh_home(tmp_path / "user", **extra)


def _explain(client: str, status: object, name: str = NAME) -> str:
    return f"{client}'s own check did not report {name!r} connected:\n{getattr(status, 'output', status)}"


#: The example app's protocol-era modes, by its own options: both eras (its default), the
#: 2025 handshake only (``--legacy-only``: ``server/discover`` gets 400), MCP 2026-07-28 only
#: (``--modern-only``: ``initialize`` refused).
APP_ERAS: dict[str, tuple[str, ...]] = {
    "dual": (),
    "legacy-only": ("--legacy-only",),
    "modern-only": ("--modern-only",),
}

#: (era, link) cases of the app-up test: each era on the app's Unix socket (its default on
#: Linux and macOS), and one TCP case.
APP_CASES = [("dual", "unix"), ("legacy-only", "unix"), ("modern-only", "unix"), ("dual", "tcp")]

#: The handshake each client starts with (its first request, as the app sees it through the
#: bridge): Claude Code speaks 2026-07-28 first; the others 2025-11-25 or older.
FIRST_REQUEST = {"claude-code": "server/discover", "gemini-cli": "initialize", "qwen-code": "initialize", "codex": "initialize"}

TRACED_APP = Path(__file__).resolve().parent / "traced_app.py"


def _start_app(tmp_path: Path, start: Callable[[list[str], Path, str], AppServer], era: str, link: str) -> AppServer:
    """The example app in `era` mode (traced: :mod:`realclients.traced_app`), on its Unix socket
    beside a discovery file in `tmp_path` (``link="unix"``) or on a free TCP port."""
    options = list(APP_ERAS[era])
    where = ["--link", "unix", "--discovery-file", str(tmp_path / "app" / "mcp-endpoint.json")] if link == "unix" else ["--port", "0"]
    (tmp_path / "app").mkdir(exist_ok=True)
    return start([sys.executable, str(TRACED_APP), *where, *options], tmp_path / "app" / "app.log", "http+unix" if link == "unix" else "http")


@pytest.fixture
def start_traced_app() -> Iterator[Callable[[list[str], Path, str], AppServer]]:
    """Factory ``start(command, log_path, scheme) -> AppServer``; each is stopped at teardown."""
    started: list[AppServer] = []

    def start(command: list[str], log_path: Path, scheme: str) -> AppServer:
        server = start_listening_app(command, log_path=log_path, scheme=scheme, what=shlex.join(command[1:]))
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def _reached(app: AppServer) -> list[str]:
    return traced_methods(app.stderr_text())


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("era", "link"), APP_CASES, ids=[f"{era}-{link}" for era, link in APP_CASES])
@pytest.mark.parametrize("client", CLIENTS)
def test_the_client_reports_the_bridge_connected_with_tools_for_each_app_era(
    tmp_path: Path, start_traced_app: Callable[[list[str], Path, str], AppServer], client: str, era: str, link: str
) -> None:
    """``config install --url`` with the app's own URL (``http+unix://…`` for its socket); the
    client's check reports it connected once the user took the client's one-time step, and
    (where the client has such a step) not before. Then the client lists the app's tools:
    Claude Code and Codex in their check, Gemini CLI and Qwen Code at the start of a session
    (their ``mcp list`` does not ask); Codex also calls one.

    The app sees each client's own era through the bridge (:data:`FIRST_REQUEST`), or the
    other era's handshake where its mode refuses the client's: a legacy-only app gets
    ``initialize`` from every client (Claude Code falls back after its ``server/discover``
    gets the app's 400), a 2026-only app gets ``server/discover`` only."""
    app = _start_app(tmp_path, start_traced_app, era, link)
    assert app.url.startswith("http+unix://" if link == "unix" else "http://127.0.0.1:"), app.url
    home = _home(tmp_path)
    said = config_install(home, client, NAME, ["--url", app.url], bridge=bridge_command())
    if client in ("claude-code", "gemini-cli") and (era, link) == APP_CASES[0]:  # Qwen Code's folder trust does not gate a user-level entry
        assert "trust the folder" in said
        before = check(home, client, NAME)
        assert not before.connected, f"{client} started a server before the user's trust step:\n{before.output}"
        assert _reached(app) == []
    trust(home, client, NAME)
    status = check(home, client, NAME, call=("echo", {"text": "héllo"}) if client == "codex" else None)
    reached = _reached(app)
    assert status.connected, _explain(client, status) + f"\nthe app got: {reached}"
    handshakes = [entry for entry in reached if entry.split(" ")[0] in ("initialize", "server/discover")]
    expected = {"legacy-only": "initialize", "modern-only": "server/discover"}.get(era, FIRST_REQUEST[client])
    assert handshakes and all(entry == f"{expected} -> 200" for entry in handshakes if entry.endswith("200")), reached
    if client == "codex":  # the only check that lists the tools by name, and calls one
        assert status.tools is not None and {"echo", "slow", "app_info"} <= set(status.tools), status.tools
        result = (status.called or {}).get("result")
        assert isinstance(result, dict), (
            f"codex's mcpServer/tool/call got {status.called!r} after {status.seconds:.1f} s; what it printed:\n{status.output}"
            f"\nthe app got: {_reached(app)}"
        )
        # (a 2026-07-28 app's result also carries its serverInfo in _meta)
        assert (result.get("content"), result.get("isError")) == ([{"type": "text", "text": "héllo"}], False), result
    elif client in LOGGED_OUT_PROMPT:
        output = start_session(home, client, until=lambda: "tools/list -> 200" in _reached(app))
        assert "tools/list -> 200" in _reached(app), f"{client}'s session listed no tools:\n{output}\nthe app got: {_reached(app)}"
    assert "tools/list -> 200" in _reached(app), reached


@pytest.mark.timeout(300)
@pytest.mark.parametrize("client", CLIENTS)
def test_the_client_reports_the_bridge_connected_with_the_app_down_and_launched(
    tmp_path: Path, reap_apps: Callable[[Path], Path], client: str
) -> None:
    """The app is not running: the bridge the client starts launches it (``--launch``), finds it
    through its discovery file (which names the app's Unix socket) and the client reports it
    connected, within the client's own start-up budget (Gemini CLI's is the shortest)."""
    home = _home(tmp_path)
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    discovery = app_dir / "mcp-endpoint.json"
    started = reap_apps(app_dir / "started")
    # No --port: the app serves on its Unix socket, beside its discovery file.
    launch = shlex.join(
        [
            sys.executable,
            str(APP_SERVER_SCRIPT),
            "--discovery-file",
            str(discovery),
            "--started-file",
            str(started),
        ]
    )
    config_install(
        home,
        client,
        NAME,
        [
            "--discovery-file",
            str(discovery),
            "--launch",
            launch,
            "--launch-timeout",
            f"{LAUNCH_TIMEOUT_SECONDS:g}",
            "--launch-log",
            str(app_dir / "launched.log"),
        ],
        bridge=bridge_command(),
    )
    trust(home, client, NAME)
    assert not discovery.exists() and read_pids(started) == []
    status = check(home, client, NAME)
    assert status.connected, _explain(client, status) + _launch_log(app_dir)
    assert len(read_pids(started)) == 1, "the bridge launched the app once"
    published = json.loads(discovery.read_text(encoding="utf-8"))["url"]
    assert published.startswith("http+unix://"), f"the launched app is not on its Unix socket: {published}"
    # The bridge's own check of that link: the socket file and its peer, as the OS reports it.
    checked = subprocess.run(
        [*bridge_command(), "check", "--discovery-file", str(discovery)],
        env=home.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    listener = next((line for line in checked.stdout.splitlines() if "listener" in line), "")
    assert checked.returncode == 0 and "Unix socket" in listener and "its peer" in listener, checked.stdout + checked.stderr
    if client == "codex":
        assert status.tools is not None and "echo" in status.tools, status.tools


def _launch_log(app_dir: Path) -> str:
    log = app_dir / "launched.log"
    return (
        f"\nlaunched app's log:\n{log.read_text(errors='replace')[-2000:]}"
        if log.exists()
        else "\n(the app was not launched)"
    )


#: The clients whose own check shows a server's error message (Gemini CLI and Qwen Code show
#: only "Disconnected", whatever the server answered).
SHOWS_ERRORS = ("claude-code", "codex")


def _error_text(client: str, status: object) -> str:
    """The part of the check's output about `NAME`: Claude Code's line, Codex's ``toolsError``."""
    output = str(getattr(status, "output", ""))
    return "\n".join(line for line in output.splitlines() if NAME in line or "toolsError" in line)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("link", ["unix", "tcp"])
@pytest.mark.parametrize("client", SHOWS_ERRORS)
def test_the_app_is_not_running_message_reaches_the_user(tmp_path: Path, client: str, link: str) -> None:
    """App down and no ``--launch``: the bridge answers ``initialize`` with its reason, and the
    client shows it to the user instead of "Connection closed"; for an app's Unix socket
    (no such file) as for its TCP port (nothing listening)."""
    home = _home(tmp_path)
    url = (
        "http+unix://" + quote(str(tmp_path / "gone.sock"), safe="") + "/mcp"
        if link == "unix"
        else f"http://127.0.0.1:{free_port()}/mcp"
    )
    config_install(home, client, NAME, ["--url", url], bridge=bridge_command())
    trust(home, client, NAME)
    status = check(home, client, NAME)
    assert not status.connected
    assert "The app is not running" in _error_text(client, status), status.output


@pytest.mark.timeout(300)
@pytest.mark.parametrize("client", SHOWS_ERRORS)
def test_a_configuration_error_reaches_the_user(tmp_path: Path, client: str) -> None:
    """An entry whose ``--token-env`` variable is not set: the client shows the bridge's reason
    (naming the variable), not "Connection closed", and the ``--log-file`` has it too."""
    home = _home(tmp_path)
    log = tmp_path / "bridge.log"
    variable = "MCP_APP_BRIDGE_TEST_UNSET_TOKEN"
    args = ["--url", "http://127.0.0.1:9/mcp", "--token-env", variable, "--log-file", str(log)]
    config_install(home, client, NAME, args, bridge=bridge_command())
    trust(home, client, NAME)
    status = check(home, client, NAME)
    assert not status.connected
    assert variable in _error_text(client, status), status.output
    assert log.exists() and variable in log.read_text(encoding="utf-8", errors="replace")


@pytest.mark.timeout(300)
def test_copilot_cli_reads_the_entry_config_install_writes(tmp_path: Path) -> None:
    """Copilot CLI starts no server without a GitHub login, so this checks what it shows without
    one: its own ``copilot mcp get`` reads the user-level entry as a local server with every
    tool and the token only masked; a workspace ``.mcp.json`` is listed once the folder is trusted
    (``trusted_folders``, as its trust dialog stores it), and not before."""
    token = "tok-PLACEHOLDER-copilot-0123456789"
    home = _home(tmp_path, MYAPP_TOKEN=token)
    args = ["--url", "http://127.0.0.1:9/mcp", "--token-env", "MYAPP_TOKEN"]
    said = config_install(home, "copilot-cli", NAME, args, bridge=bridge_command())
    assert "trust the folder you start it in" in said and "copilot mcp list" in said

    def copilot(*command: str) -> str:
        done = subprocess.run(
            [str(COPILOT), *command],
            cwd=home.project,
            env=home.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout + done.stderr

    shown = copilot("mcp", "get", NAME)
    assert "Type: local" in shown and "Tools: * (all)" in shown and "Source: User" in shown, shown
    entry = json.loads((Path(home.env["HOME"]) / ".copilot" / "mcp-config.json").read_text())["mcpServers"][NAME]
    assert f"Command: {' '.join([entry['command'], *entry['args']])}" in shown, shown
    assert "MYAPP_TOKEN: ***" in shown and token not in shown

    workspace = "workspace-app"
    config_install(home, "copilot-cli", workspace, ["--path", ".mcp.json", *args], bridge=bridge_command())
    assert f"{workspace} (local)" not in copilot("mcp", "list")
    settings = Path(home.env["HOME"]) / ".copilot" / "config.json"
    settings.write_text(json.dumps({"trusted_folders": [str(home.project)]}), encoding="utf-8")
    listed = copilot("mcp", "list")
    assert f"{NAME} (local)" in listed and f"{workspace} (local)" in listed, listed


@pytest.mark.timeout(300)
def test_the_vscode_agent_files_are_read_by_the_copilot_cli_from_npm(tmp_path: Path) -> None:
    """VS Code's agent (its Agent Host) reads Copilot CLI's two files, ``~/.copilot/mcp-config.json``
    and a workspace ``.mcp.json``. VS Code is not on npm; Copilot CLI, which reads the same two
    files, is: what ``--client vscode-agent`` and ``--client vscode-agent-project`` write, it
    reads (the user entry as a local server; the workspace one once the folder is trusted).
    Antigravity CLI (``agy``) is not on npm: its targets have no real-client test."""
    home = _home(tmp_path)
    args = ["--url", "http://127.0.0.1:9/mcp"]
    said = config_install(home, "vscode-agent", NAME, args, bridge=bridge_command())
    assert "restart VS Code's agent" in said and str(Path(home.env["HOME"]) / ".copilot" / "mcp-config.json") in said
    workspace = "workspace-app"
    config_install(home, "vscode-agent-project", workspace, args, bridge=bridge_command())
    assert json.loads((home.project / ".mcp.json").read_text())["mcpServers"][workspace]["type"] == "stdio"

    def copilot(*command: str) -> str:
        done = subprocess.run([str(COPILOT), *command], cwd=home.project, env=home.env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout + done.stderr

    shown = copilot("mcp", "get", NAME)
    assert "Type: local" in shown and "Source: User" in shown, shown
    settings = Path(home.env["HOME"]) / ".copilot" / "config.json"
    settings.write_text(json.dumps({"trusted_folders": [str(home.project)]}), encoding="utf-8")
    listed = copilot("mcp", "list")
    assert f"{NAME} (local)" in listed and f"{workspace} (local)" in listed, listed


# -- the frozen single file under each client's kill pattern ----------------------------------


def _unpack_folders(tmpdir: Path) -> tuple[int, int]:
    """(how many ``_MEI*`` folders, their bytes) in `tmpdir`."""
    folders = list(tmpdir.glob("_MEI*"))
    size = sum(
        path.stat().st_size
        for folder in folders
        for path in folder.rglob("*")
        if path.is_file() and not path.is_symlink()
    )
    return len(folders), size



@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    "client", CLIENTS
)
def test_the_frozen_file_leaves_nothing_in_tmpdir_under_the_clients_kill_pattern(
    tmp_path: Path, start_traced_app: Callable[[list[str], Path, str], AppServer], client: str
) -> None:
    """20 checks in a row, each ending the frozen bridge the client's own way (Claude Code:
    SIGINT, SIGTERM 0.1 s later, SIGKILL 0.5 s after the first; Codex: SIGTERM to the process
    group and SIGKILL within 5 ms; Gemini CLI: SIGTERM, then stdin closed; Qwen Code: stdin
    closed, SIGTERM 2 s later, SIGKILL 2 s after that). What is left in the private TMPDIR
    is at most one folder, the last run's (without the sweep all 20 stay; before each run
    emptied its own folder at its end, fresh-clone CI runs left 1, 2, 3 and 6 folders after
    20 Codex checks: Codex's SIGKILL cut the bootloader's clean-up short)."""
    exe = os.environ.get(BRIDGE_EXE_VAR)
    if not exe:
        pytest.skip(f"{BRIDGE_EXE_VAR} names no frozen executable")
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    home = _home(tmp_path, TMPDIR=str(tmpdir))
    # Every one of these clients passes TMPDIR on to its servers (Codex's short list has it).
    app = _start_app(tmp_path, start_traced_app, "dual", "unix")
    config_install(home, client, NAME, ["--url", app.url], bridge=[exe])
    trust(home, client, NAME)
    for run in range(KILL_PATTERN_RUNS):
        status = check(home, client, NAME)
        assert status.connected, f"run {run + 1}: " + _explain(client, status)
    # A folder whose bootloader was SIGKILLed while it was cleaning up has no lock left; it is
    # swept once older than the sweep's grace (10 s). So: let every bridge end (Qwen Code's
    # SIGKILL comes 4 s after its check) and the grace pass, then one more check, whose start
    # sweeps what the 20 left; its own folder may remain, and, when Codex's SIGKILL cut its
    # sweep short (seen once in CI: a 3.4 MB remnant), the folder it was removing.
    time.sleep(11.0)
    assert check(home, client, NAME).connected
    time.sleep(5.0)
    folders, size = _unpack_folders(tmpdir)
    # Each run empties its own folder but its lock file at its end, and a start removes a
    # dead run's folder that still has its lock, or none left at all, at once
    # (bridge/system/unpacksweep.py): at most the last run's folder stays.
    assert folders <= 1, f"{KILL_PATTERN_RUNS} {client} checks left {folders} unpack folders ({size / 1e6:.1f} MB) in TMPDIR"


# -- lazy launch: the clients' probes never start the app (issue 30) ---------------------------

#: A 2026-07-28 request's ``_meta``, as Claude Desktop's era probe sends it.
_MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "desktop-probe", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _run_entry(home: Home, messages: list[dict[str, object]]) -> dict[object, dict[str, object]]:
    """Run the bridge as Claude Code's entry (``.mcp.json``) says, in a process of its own (as
    Claude Desktop's throwaway probe does), write `messages`, close stdin and return the
    replies by id: at end of input the bridge finishes the requests in flight, then exits."""
    entry = json.loads((home.project / ".mcp.json").read_text(encoding="utf-8"))["mcpServers"][NAME]
    done = subprocess.run(
        [entry["command"], *entry["args"]],
        input="".join(json.dumps(message) + "\n" for message in messages),
        cwd=home.project,
        env={**home.env, **entry.get("env", {})},
        capture_output=True,
        text=True,
        timeout=LAUNCH_TIMEOUT_SECONDS + 60,
    )
    replies = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return {reply["id"]: reply for reply in replies if "id" in reply}


def _not_launched(started: Path, pid: int, probe: str) -> None:
    time.sleep(1.0)  # a launch would show in the started file by now
    assert read_pids(started) == [pid], f"{probe} launched the app"


@pytest.mark.timeout(600)
@pytest.mark.parametrize("era_flag", ["", "--modern-only", "--legacy-only"], ids=["dual", "modern-only", "legacy-only"])
def test_the_clients_probes_with_the_app_down_answer_from_the_catalog_and_the_first_call_launches_once(
    tmp_path: Path, reap_apps: Callable[[Path], Path], era_flag: str
) -> None:
    """docs/behaviour.md, "Lazy launch": with a catalog cached and the app down, ``claude mcp
    list`` (twice), a Claude Desktop-style ``server/discover`` probe from a second process and
    Codex's start all report the server with its tools, and the app is never launched; the
    first ``tools/call`` launches it once and gets its reply.

    The catalog is written the way a user's first day writes it: each client's first start
    launches the app (the bridge's default ``--launch-policy on-call`` with no catalog yet),
    and Claude Desktop's probe runs while it is up. Both clients' entries share the state
    folder (``XDG_STATE_HOME``, written into each entry), so they share the catalog.

    With the example app serving one era only (``era_flag``), each client of the other era is
    answered from the catalog too: Codex (2025-06-18) from the 2026-only app's cached
    ``server/discover``, translated; Claude Code's and the probe's ``server/discover`` with
    the legacy-only app's refusal (Claude Code falls back to ``initialize``), and the probe's
    ``tools/list`` in its era."""
    from support.apps import process_alive, stop_pids
    from support.processes import wait_until

    home = _home(tmp_path)
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    discovery = app_dir / "mcp-endpoint.json"
    started = reap_apps(app_dir / "started")
    launch = shlex.join(
        [sys.executable, str(APP_SERVER_SCRIPT), "--port", "0", "--discovery-file", str(discovery), "--started-file", str(started)]
        + ([era_flag] if era_flag else [])
    )
    args = ["--discovery-file", str(discovery), "--launch", launch, "--launch-timeout", f"{LAUNCH_TIMEOUT_SECONDS:g}"]
    # _run_entry closes stdin at once: the launch its call needs may take longer than the
    # default --drain-timeout on a loaded machine.
    args += ["--drain-timeout", f"{LAUNCH_TIMEOUT_SECONDS + 30:g}"]
    for client in ("claude-code", "codex"):
        config_install(home, client, NAME, args, bridge=bridge_command())
    trust(home, "claude-code", NAME)
    discover = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": _MODERN_META}}
    tools = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": _MODERN_META}}

    # The first day: each client's first start launches the app, whose answers are cached.
    for client in ("claude-code", "codex"):
        status = check(home, client, NAME)
        assert status.connected, _explain(client, status)
    served = _run_entry(home, [discover, tools])
    assert ("error" if era_flag == "--legacy-only" else "result") in served[1] and "result" in served[2], served
    (pid,) = read_pids(started)
    stop_pids([pid])
    assert wait_until(lambda: not process_alive(pid), 10)

    # The app is down: every probe is answered from the catalog.
    for run in range(2):
        status = check(home, "claude-code", NAME)
        assert status.connected, f"claude mcp list, run {run + 1}: " + _explain("claude-code", status)
        _not_launched(started, pid, f"claude mcp list, run {run + 1}")
    # Claude Code waits for its subscriptions/listen to be acknowledged before it goes on, and
    # logs this line when it gave up waiting (27 s later: before the bridge acknowledged a
    # held listen from the catalog, every `claude mcp list` with the app down took that long).
    logs = sorted(Path(home.env["XDG_CACHE_HOME"]).glob(f"claude-cli-nodejs/*/mcp-logs-{NAME}/*.jsonl"))
    assert logs, "Claude Code wrote no MCP log"
    unacknowledged = [str(log) for log in logs if "no auto-opened subscriptions/listen" in log.read_text(encoding="utf-8")]
    assert not unacknowledged, f"Claude Code waited for an acknowledgment of its listen stream: {unacknowledged}"
    probed = _run_entry(home, [discover, tools])
    if era_flag == "--legacy-only":
        assert "error" in probed[1], probed
    else:
        assert probed[1].get("result") == served[1]["result"], probed
    assert probed[2].get("result") == served[2]["result"], probed
    _not_launched(started, pid, "the server/discover probe")
    status = check(home, "codex", NAME)
    assert status.connected, _explain("codex", status)
    assert status.tools is not None and {"echo", "slow", "app_info"} <= set(status.tools), status.tools
    _not_launched(started, pid, "Codex's start")

    # The first tools/call launches it, once, and gets its reply.
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "a user", "version": "0"}},
    }
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "lazy ✓"}}}
    replies = _run_entry(home, [initialize, {"jsonrpc": "2.0", "method": "notifications/initialized"}, call])
    result = replies.get(3, {}).get("result")
    assert isinstance(result, dict) and result["content"][0]["text"] == "lazy ✓", replies
    assert len(read_pids(started)) == 2, "the first call launched the app once"


@pytest.mark.timeout(300)
def test_codex_starts_against_a_tools_only_app_that_is_down_without_launching_it(
    tmp_path: Path, reap_apps: Callable[[Path], Path]
) -> None:
    """Issue 41, point 10: Codex asks for ``resources/list`` and ``resources/templates/list``
    at every start, whatever the app declared. ``mcp-app-bridge demo-app`` serves tools only
    (its ``initialize`` declares no ``resources``) and answers those with its JSON-RPC error.
    With a catalog cached and the app down, the catalog answers them as the app did: Codex's
    start reports the server with its tools, and the app is never launched."""
    from support.apps import process_alive, stop_pids
    from support.processes import wait_until

    home = _home(tmp_path)
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    discovery = app_dir / "mcp-endpoint.json"
    started = reap_apps(app_dir / "started")
    # The demo app, its pid appended to `started` at each start (it has no --started-file).
    demo_app = [*bridge_command(), "demo-app", "--app-name", "TestApp", "--discovery-file", str(discovery)]
    launch = shlex.join(["sh", "-c", 'echo $$ >> "$0" && exec "$@"', str(started), *demo_app])
    args = ["--discovery-file", str(discovery), "--launch", launch, "--launch-timeout", f"{LAUNCH_TIMEOUT_SECONDS:g}"]
    config_install(home, "codex", DEMO, args, bridge=bridge_command())

    status = check(home, "codex", DEMO)  # the first start launches the app; its answers are cached
    assert status.connected, _explain("codex", status, DEMO)
    (pid,) = read_pids(started)
    stop_pids([pid])
    assert wait_until(lambda: not process_alive(pid), 10)

    for run in range(2):
        status = check(home, "codex", DEMO)
        assert status.connected, f"Codex's start, run {run + 1}: " + _explain("codex", status, DEMO)
        assert status.tools is not None and {"echo", "add"} <= set(status.tools), status.tools
        _not_launched(started, pid, f"Codex's start, run {run + 1}")
