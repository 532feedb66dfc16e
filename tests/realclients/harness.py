"""The real AI clients, pinned from npm, each in a fresh home: set up as a user would, then asked
whether the bridge is connected (``tests/realclients/test_realclients.py``, ``tests/realclients/measure.py``).

The clients (``package.json``, locked by ``package-lock.json``) are installed into
``tests/realclients/node_modules`` by ``npm ci --prefix tests/realclients`` (``.ci/run`` does this),
with their own Node.js 22 (the npm package ``node``): Claude Code and Qwen Code need Node ≥ 22.
None of the checks here logs in or needs an API key.

The lock file names five optional platform packages of ``@teddyzhu/clipboard`` (a Qwen Code
option, never loaded here) that the registry does not have (404): ``npm install`` leaves them
out of the lock, and ``npm ci`` then refuses the lock as out of step. They are in the lock by
hand, as npm writes platform packages (``optional``, ``os``, ``cpu``), so ``npm ci`` skips them
on every other platform; on theirs it tries, gets 404 and goes on (optional). Regenerating
the lock with ``npm install`` needs that step again.

Per client (:data:`CLIENTS`), with a fresh HOME and XDG folders (:func:`fresh_home`):

- where ``mcp-app-bridge config install --client …`` writes (its default place; the test
  runs ``config install`` in the fresh home and the project folder);
- the one-time step a user takes (:func:`trust`): Claude Code's folder trust and project
  server approval; Gemini CLI's folder trust; Qwen Code's folder trust (with the feature on);
  none for Codex (user-level servers);
- the client's own check (:func:`check`): ``claude mcp list``, ``gemini mcp list``,
  ``qwen mcp list`` (each prints ``<name>: … Connected``) or Codex's ``app-server``,
  driven over stdio JSON-RPC (``initialize``, then ``mcpServerStatus/list``, whose entry lists
  the server's tools);
- the tools a client offers its model (:func:`model_session`): a one-prompt session against a
  model endpoint on loopback (:func:`model_endpoint`) that records each request and answers
  400, so the request shows the tools, and nothing leaves the machine.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

CLIENTS_DIR = Path(__file__).resolve().parent
NODE_MODULES = CLIENTS_DIR / "node_modules"
BIN = NODE_MODULES / ".bin"
NODE = BIN / "node"
INSTALL_COMMAND = "npm ci --prefix tests/realclients --no-audit --no-fund"

CLIENTS = ("claude-code", "gemini-cli", "qwen-code", "codex")
"""The ``--client`` ids of the clients that run here without a login."""

PROGRAM = {"claude-code": "claude", "gemini-cli": "gemini", "qwen-code": "qwen", "codex": "codex"}

COPILOT = BIN / "copilot"
"""Copilot CLI: it starts no server without a GitHub login, so only its reading of the entry is
checked (``copilot mcp get`` / ``mcp list``)."""

CHECK_TIMEOUT_SECONDS = 120.0
"""Bound on one client check: a client start (1–2 s) plus the bridge's start, a launch of the
app included, on a loaded 2-core machine."""

PROXY_VARS = tuple(
    name for base in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY") for name in (base, base.lower())
)


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def missing_clients() -> list[str]:
    needed = [NODE, COPILOT, *(BIN / program for program in PROGRAM.values())]
    return [str(path.relative_to(CLIENTS_DIR)) for path in needed if not path.exists()]


def require_clients() -> None:
    """Skip (outside CI) or fail (``CI=true``) unless the pinned clients are installed."""
    missing = missing_clients()
    if not missing:
        return
    message = f"the pinned AI clients are not installed (missing {', '.join(missing)}); run: {INSTALL_COMMAND}"
    if in_ci():
        pytest.fail(f"CI=true: {message}", pytrace=False)
    pytest.skip(message)


@dataclass
class Home:
    """One fresh user: HOME, XDG folders and a project folder the client is started in."""

    root: Path
    env: dict[str, str]
    project: Path


def fresh_home(root: Path, **extra: str) -> Home:
    """A new HOME (and XDG config/data/state/cache folders) under `root`, a project folder,
    and the environment a client is started with there: no proxies, our Node.js first on
    PATH, no update checks or telemetry."""
    home = root / "home"
    env = {key: value for key, value in os.environ.items() if key not in PROXY_VARS}
    for name in ("CODEX_HOME", "QWEN_HOME", "COPILOT_HOME", "CLAUDE_CONFIG_DIR", "GEMINI_API_KEY", "ANTHROPIC_API_KEY"):
        env.pop(name, None)
    for name, sub in (
        ("XDG_CONFIG_HOME", "config"),
        ("XDG_DATA_HOME", "data"),
        ("XDG_STATE_HOME", "state"),
        ("XDG_CACHE_HOME", "cache"),
    ):
        (home / sub).mkdir(parents=True, exist_ok=True)
        env[name] = str(home / sub)
    env["HOME"] = str(home)
    env["PATH"] = os.pathsep.join([str(BIN), env.get("PATH", "")])
    # Claude Code: no auto-update, no telemetry or other non-essential traffic.
    env["DISABLE_AUTOUPDATER"] = "1"
    env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] = "1"
    env.update(extra)
    project = root / "project"
    project.mkdir(parents=True, exist_ok=True)
    return Home(root=root, env=env, project=project.resolve())


def config_install(
    home: Home, client: str, name: str, bridge_args: list[str], *, bridge: list[str] | None = None
) -> str:
    """``mcp-app-bridge config install --client CLIENT --name NAME -- BRIDGE_ARGS`` run as the
    fresh user in the project folder (the bridge: `bridge`, default ``python -m bridge``);
    returns its output. The entry's command is that same bridge."""
    command = bridge or [sys.executable, "-m", "bridge"]
    done = subprocess.run(
        [*command, "config", "install", "--client", client, "--name", name, *bridge_args],
        cwd=home.project,
        env=home.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, f"config install failed: {done.stdout}{done.stderr}"
    return done.stdout


def trust(home: Home, client: str, name: str) -> None:
    """The one-time step a user takes before the client starts the server, set as the client's
    own dialog sets it."""
    project = str(home.project)
    if client == "claude-code":
        # The folder-trust dialog (~/.claude.json "projects") and the project-server dialog
        # (".claude/settings.local.json", "enabledMcpjsonServers").
        _merge_json(Path(home.env["HOME"]) / ".claude.json", {"projects": {project: {"hasTrustDialogAccepted": True}}})
        _merge_json(home.project / ".claude" / "settings.local.json", {"enabledMcpjsonServers": [name]})
    elif client == "gemini-cli":
        _merge_json(Path(home.env["HOME"]) / ".gemini" / "trustedFolders.json", {project: "TRUST_FOLDER"})
    elif client == "qwen-code":
        folder_trust_on(home, client)
        _merge_json(Path(home.env["HOME"]) / ".qwen" / "trustedFolders.json", {project: "TRUST_FOLDER"})


def folder_trust_on(home: Home, client: str) -> None:
    """Qwen Code's folder trust is off by default: the user who turned it on
    (``security.folderTrust.enabled``), as its docs describe. Other clients: nothing to do."""
    if client == "qwen-code":
        _merge_json(
            Path(home.env["HOME"]) / ".qwen" / "settings.json", {"security": {"folderTrust": {"enabled": True}}}
        )


def _merge_json(path: Path, update: dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    document = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(document.get(key), dict):
            document[key] = {**document[key], **value}
        else:
            document[key] = value
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")


@dataclass
class Status:
    """What the client's own check said about one server."""

    connected: bool
    tools: list[str] | None
    """Tool names, where the check shows them (Codex); None where it does not."""
    output: str
    seconds: float
    called: dict[str, object] | None = None
    """Codex only, when asked (``call=``): the result of the tool call it made, or its error."""


def check(home: Home, client: str, name: str, *, call: tuple[str, dict[str, object]] | None = None) -> Status:
    """The client's own check of server `name`, run as the fresh user in the project folder.

    `call` (Codex only, the one client that calls a tool without a model or a login): the
    tool and arguments Codex then calls itself, in a new thread (``thread/start``, then
    ``mcpServer/tool/call``); its answer is :attr:`Status.called`."""
    started = time.monotonic()
    if client == "codex":
        return _codex_status(home, name, started, call)
    assert call is None, f"{client} calls no tool without a model"
    done = subprocess.run(
        [str(BIN / PROGRAM[client]), "mcp", "list"],
        cwd=home.project,
        env=home.env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=CHECK_TIMEOUT_SECONDS,
    )
    output = _plain(done.stdout + done.stderr)
    line = next((line for line in output.splitlines() if f" {name}:" in f" {line.strip()}"), "")
    connected = line.rstrip().endswith("Connected") and "Disconnected" not in line
    return Status(connected=connected, tools=None, output=output, seconds=time.monotonic() - started)


SESSION_TIMEOUT_SECONDS = 60.0
"""Bound on :func:`start_session`: the client's start and its MCP servers' discovery."""

LOGGED_OUT_PROMPT = {
    "gemini-cli": ["-p", "Say hi"],
    "qwen-code": ["-p", "Say hi"],
}
"""The clients whose ``mcp list`` does not list tools (it sends ``initialize``, and Gemini CLI
a ``ping``), but whose non-interactive session does, before it needs a model."""


def start_session(home: Home, client: str, until: Callable[[], bool]) -> str:
    """Start a non-interactive session of `client` (:data:`LOGGED_OUT_PROMPT`) without a login,
    which discovers its MCP servers' tools first; end it once `until()` is true (or it ended,
    or :data:`SESSION_TIMEOUT_SECONDS` passed); return its output.

    Qwen Code lists the tools, then stops: "No auth type is selected". Gemini CLI stops before
    its MCP servers without a way to authenticate, so it gets a placeholder API key and a
    model endpoint on a closed loopback port (``GOOGLE_GEMINI_BASE_URL``, with
    ``security.auth.selectedType`` ``gemini-api-key``): it lists the tools, then retries that
    port, and is ended here. Nothing leaves the machine."""
    env = dict(home.env)
    if client == "gemini-cli":
        env.update(GEMINI_API_KEY="placeholder-not-a-key", GOOGLE_GEMINI_BASE_URL="http://127.0.0.1:9")
        _merge_json(
            Path(home.env["HOME"]) / ".gemini" / "settings.json", {"security": {"auth": {"selectedType": "gemini-api-key"}}}
        )
    return _run_session(home, [str(BIN / PROGRAM[client]), *LOGGED_OUT_PROMPT[client]], env, until)


def _run_session(home: Home, command: list[str], env: dict[str, str], until: Callable[[], bool]) -> str:
    process = subprocess.Popen(
        command,
        cwd=home.project,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + SESSION_TIMEOUT_SECONDS
    while process.poll() is None and not until() and time.monotonic() < deadline:
        time.sleep(0.1)
    if process.poll() is None:
        _end_group(process)
    assert process.stdout is not None
    output = process.stdout.read().decode("utf-8", errors="replace")
    process.stdout.close()
    process.wait()
    return _plain(output)


@dataclass
class ModelEndpoint:
    """A model endpoint on loopback (:func:`model_endpoint`): every request it got."""

    url: str
    """``http://127.0.0.1:<port>``, the base URL a client is given."""
    bodies: list[str] = field(default_factory=list)
    """Each request's body, in order of arrival."""


@contextmanager
def model_endpoint() -> Iterator[ModelEndpoint]:
    """Serve a model endpoint on a free loopback port (in a thread) that records every POST body
    and answers HTTP 400 with an error object, which every client here ends its turn on."""
    endpoint = ModelEndpoint(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server name
            length = int(self.headers.get("content-length") or 0)
            endpoint.bodies.append(self.rfile.read(length).decode("utf-8", errors="replace"))
            body = b'{"error":{"code":400,"type":"invalid_request_error","message":"test model endpoint"}}'
            self.send_response(400)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the http.server name
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    endpoint.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield endpoint
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


MODEL_CLIENTS = ("claude-code", "gemini-cli", "qwen-code")
"""The clients whose one-prompt session (:func:`model_session`) runs against a model endpoint
on loopback with a placeholder key and no login."""

TOOL_PREFIX = {"claude-code": "mcp__{}__", "gemini-cli": "mcp_{}_", "qwen-code": "mcp__{}__"}
"""How each client names an MCP server's tool to its model (the server name filled in)."""


def model_session(home: Home, client: str, endpoint: ModelEndpoint, server: str) -> str:
    """A one-prompt session of `client` whose model is `endpoint`, with a placeholder key:
    Claude Code ``-p`` (``ANTHROPIC_BASE_URL``), Gemini CLI ``-p`` (``GOOGLE_GEMINI_BASE_URL``,
    API-key auth) and Qwen Code ``-p --auth-type openai`` (``OPENAI_BASE_URL``). Gemini CLI and
    Qwen Code run with ``--approval-mode yolo``: in a non-interactive session they offer the
    model no MCP tool that would ask for a confirmation; no tool runs, as the model answers
    400. Each discovers its MCP servers' tools before its first model request; the session
    is ended once a request names a tool of `server` (or it ended, or
    :data:`SESSION_TIMEOUT_SECONDS` passed); returns its output."""
    env = dict(home.env)
    command = [str(BIN / PROGRAM[client]), "-p", "Say hi"]
    if client == "claude-code":
        env.update(ANTHROPIC_API_KEY="placeholder-not-a-key", ANTHROPIC_BASE_URL=endpoint.url)
    elif client == "gemini-cli":
        env.update(GEMINI_API_KEY="placeholder-not-a-key", GOOGLE_GEMINI_BASE_URL=endpoint.url)
        _merge_json(
            Path(home.env["HOME"]) / ".gemini" / "settings.json", {"security": {"auth": {"selectedType": "gemini-api-key"}}}
        )
        command += ["--approval-mode", "yolo"]
    elif client == "qwen-code":
        env.update(
            OPENAI_API_KEY="placeholder-not-a-key",
            OPENAI_BASE_URL=f"{endpoint.url}/v1",
            OPENAI_MODEL="test-model",
            QWEN_CODE_SUPPRESS_YOLO_WARNING="1",
        )
        command += ["--auth-type", "openai", "--approval-mode", "yolo"]
    else:
        raise AssertionError(f"{client} has no model session here")
    prefix = TOOL_PREFIX[client].format(server)
    return _run_session(home, command, env, until=lambda: any(prefix in body for body in list(endpoint.bodies)))


def offered_tools(endpoint: ModelEndpoint, client: str, server: str) -> set[str]:
    """The tools of `server` that `client` named to its model, across the requests `endpoint`
    got (a tool list, or a list of deferred tools in the prompt)."""
    pattern = re.compile(re.escape(TOOL_PREFIX[client].format(server)) + r"([A-Za-z0-9_.-]+)")
    return {name for body in list(endpoint.bodies) for name in pattern.findall(body)}


def _end_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the client's process group (the client and the bridge it started), SIGKILL
    what is left after 5 s."""
    if sys.platform == "win32":  # the clients' POSIX installs only; for the type check
        process.kill()
        return
    for signal_number in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, signal_number)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=5.0)
            return
        except subprocess.TimeoutExpired:
            continue


def _plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def _codex_status(home: Home, name: str, started: float, call: tuple[str, dict[str, object]] | None) -> Status:
    """``codex app-server`` over stdio (newline-delimited JSON-RPC without the ``jsonrpc``
    member): ``initialize``, ``initialized``, then ``mcpServerStatus/list``; with `call`,
    ``thread/start`` and ``mcpServer/tool/call`` (``threadId``, ``server``, ``tool``,
    ``arguments``; Codex answers with the tool's result, no model involved)."""
    # Unbuffered (bufsize=0): `answer` waits with select on the pipe, and a buffered reader's
    # readline could take the awaited reply into its buffer with the line before it, where
    # select never sees it (a 120 s wait for a reply already read).
    process = subprocess.Popen(
        [str(BIN / "codex"), "app-server"],
        cwd=home.project,
        env=home.env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
    )
    assert process.stdin is not None and process.stdout is not None
    seen: list[str] = []
    called: dict[str, object] | None = None
    deadline = time.monotonic() + CHECK_TIMEOUT_SECONDS

    def send(message: dict[str, object]) -> None:
        assert process.stdin is not None
        process.stdin.write((json.dumps(message) + "\n").encode())
        process.stdin.flush()

    def answer(request_id: int) -> dict[str, object] | None:
        assert process.stdout is not None
        while time.monotonic() < deadline:
            ready, _, _ = select.select([process.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            line = process.stdout.readline()
            if not line:
                break
            seen.append(line.decode("utf-8", errors="replace").rstrip())
            message: dict[str, object] = json.loads(line)
            if message.get("id") == request_id and "method" not in message:
                return message
        return None

    try:
        send(
            {
                "id": 1,
                "method": "initialize",
                "params": {"clientInfo": {"name": "mcp-app-bridge-tests", "version": "1"}},
            }
        )
        answer(1)
        send({"method": "initialized"})
        send({"id": 2, "method": "mcpServerStatus/list", "params": {}})
        reply = answer(2)
        if call is not None:
            send({"id": 3, "method": "thread/start", "params": {}})
            thread = (answer(3) or {}).get("result")
            thread_id = thread.get("thread", {}).get("id") if isinstance(thread, dict) else None
            tool, arguments = call
            send(
                {
                    "id": 4,
                    "method": "mcpServer/tool/call",
                    "params": {"threadId": thread_id, "server": name, "tool": tool, "arguments": arguments},
                }
            )
            called = answer(4)
    finally:
        process.stdin.close()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        stderr = process.stderr.read().decode("utf-8", errors="replace") if process.stderr else ""
        process.stdout.close()
        if process.stderr:
            process.stderr.close()
    output = "\n".join(seen) + "\n" + stderr
    result = (reply or {}).get("result")
    entries = (result.get("data") if isinstance(result, dict) else None) or []
    entry = next((item for item in entries if isinstance(item, dict) and item.get("name") == name), None)
    tools = sorted((entry.get("tools") or {}).keys()) if entry else None
    connected = bool(entry) and not entry.get("toolsError") and bool(tools)  # type: ignore[union-attr]
    return Status(connected=connected, tools=tools, output=output, seconds=time.monotonic() - started, called=called)
