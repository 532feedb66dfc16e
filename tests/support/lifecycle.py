"""The desktop-app lifecycle harness: a Desk with a launchable app, its discovery file and secret."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import httpx
import pytest

from support import processes
from support.apps import (
    APP_SERVER_SCRIPT,
    AppServer,
    isolated_env,
    make_secret_file,
    read_pids,
)
from support.processes import (
    BridgeProcess,
    initialize,
    result_text,
    tool_call,
)

LAUNCH_TIMEOUT = 20.0
"""--launch-timeout for launches that should work (an app starts in ~1 s; CI is slower)."""
LAUNCH_REPLY_TIMEOUT = LAUNCH_TIMEOUT + 10.0
"""Bound on a reply that waits for a launch."""
NEVER_LISTENS_TIMEOUT = 3.0
"""--launch-timeout for the app that never listens."""




# -- what every test leaves for the final grep for tokens -------------------------------------


@dataclass
class Captured:
    """Every secret and token the tests saw, and every output the bridges and apps wrote."""

    secrets: set[str] = field(default_factory=set)
    outputs: list[tuple[str, str]] = field(default_factory=list)
    """(where it came from, text)."""


CAPTURED = Captured()


# -- the per-test workspace ------------------------------------------------------------------


class AppStdioProcess(BridgeProcess):
    """``python examples/app_server.py --mcp-stdio …`` (the library path) with raw pipes."""

    def __init__(self, *args: str, **options: Any) -> None:
        command = [sys.executable, str(APP_SERVER_SCRIPT)]
        with mock.patch.object(processes, "bridge_command", lambda: command):
            super().__init__(*args, **options)


@dataclass
class Desk:
    """One test's desktop: the app's files, a private environment, the processes started."""

    root: Path
    start_app_server: Callable[..., AppServer]
    discovery: Path = field(init=False)
    secret_file: Path = field(init=False)
    started_file: Path = field(init=False)
    launch_log: Path = field(init=False)
    env: dict[str, str] = field(init=False)
    secret: str = field(init=False)
    bridges: list[BridgeProcess] = field(default_factory=list)

    def __post_init__(self) -> None:
        app_dir = self.root / "app"
        app_dir.mkdir(mode=0o700)
        self.discovery = app_dir / "mcp-endpoint.json"
        self.secret_file = app_dir / "secret"
        self.started_file = app_dir / "started"
        self.launch_log = self.root / "launched-app.log"
        self.secret = make_secret_file(self.secret_file)
        CAPTURED.secrets.add(self.secret)
        self.env = isolated_env(self.root)

    # the app

    def app_args(self, *extra: str, auth: str = "discovery") -> list[str]:
        """Server-mode arguments; ``auth`` is ``discovery`` (token in the discovery file),
        ``secret`` (auth route only) or ``none``."""
        args = ["--discovery-file", str(self.discovery), "--started-file", str(self.started_file)]
        if auth in ("discovery", "secret"):
            args += ["--secret-file", str(self.secret_file)]
        if auth == "discovery":
            args.append("--token-in-discovery")
        return [*args, *extra]

    def launch_command(self, *extra: str, auth: str = "discovery") -> str:
        """``--launch`` for the app in server mode on a free port (one string, no shell)."""
        return shlex.join([sys.executable, str(APP_SERVER_SCRIPT), "--port", "0", *self.app_args(*extra, auth=auth)])

    def start_app(self, auth: str = "discovery") -> AppServer:
        """Start the app as its user would (not through a bridge) and note its token."""
        server = self.start_app_server(*self.app_args(auth=auth))
        self.note_token()
        return server

    def launches(self) -> list[int]:
        return read_pids(self.started_file)

    def endpoint(self) -> str:
        assert processes.wait_until(self.discovery.exists, 10), "the app never wrote its discovery file"
        return str(json.loads(self.discovery.read_text(encoding="utf-8"))["url"])

    def current_token(self) -> str:
        """The running app's token: from the discovery file, else from its auth route."""
        document = json.loads(self.discovery.read_text(encoding="utf-8"))
        if document.get("token"):
            return str(document["token"])
        auth_url = document["url"].rsplit("/", 1)[0] + "/auth/token"
        transport = None
        if document["url"].startswith("npipe://"):  # the app on its named pipe (Windows): no httpx transport there
            status, body = over_pipe(document["url"], "/auth/token", {"secret": self.secret}, {})
            assert status == 200, status
            return str(json.loads(body)["token"])
        if document["url"].startswith("http+unix://"):  # the app on its Unix socket
            from bridge.core.unixurl import split_unix_url

            transport, auth_url = httpx.HTTPTransport(uds=split_unix_url(document["url"])[0]), "http://localhost/auth/token"
        with httpx.Client(transport=transport, trust_env=False, timeout=5) as client:
            response = client.post(auth_url, json={"secret": self.secret})
        assert response.status_code == 200, response.status_code
        return str(response.json()["token"])

    def note_token(self) -> str:
        # The app publishes its discovery file just after it starts listening, so a bridge
        # with a fixed --url can be served before the file exists: wait for it (bounded).
        assert processes.wait_until(self.discovery.exists, 10), "the app never wrote its discovery file"
        token = self.current_token()
        CAPTURED.secrets.add(token)
        return token

    # bridges

    def bridge(self, *args: str, **options: Any) -> BridgeProcess:
        """``python -m bridge *args`` (or the frozen executable) in the private environment."""
        process = BridgeProcess(*args, env=options.pop("env", self.env), **options)
        self.bridges.append(process)
        return process

    def app_stdio(self, *extra: str, **options: Any) -> BridgeProcess:
        """The app's own ``--mcp-stdio`` entry (the library path), auth route + launch."""
        process = AppStdioProcess(
            "--mcp-stdio",
            "--discovery-file", str(self.discovery),
            "--secret-file", str(self.secret_file),
            "--started-file", str(self.started_file),
            "--launch-log", str(self.launch_log),
            *extra,
            env=options.pop("env", self.env),
            **options,
        )
        self.bridges.append(process)
        return process

    def keep_outputs(self) -> None:
        for number, process in enumerate(self.bridges):
            out = b"".join(process.stdout_lines).decode("utf-8", errors="replace")
            CAPTURED.outputs.append((f"{self.root.name} bridge {number} stdout", out))
            CAPTURED.outputs.append((f"{self.root.name} bridge {number} stderr", process.stderr_text()))
        for log in sorted(self.root.rglob("*.log")):
            CAPTURED.outputs.append((str(log.relative_to(self.root.parent)), log.read_text(encoding="utf-8", errors="replace")))


@pytest.fixture
def desk(tmp_path: Path, start_app_server: Callable[..., AppServer], reap_apps: Callable[[Path], Path]) -> Iterator[Desk]:
    here = Desk(tmp_path, start_app_server)
    reap_apps(here.started_file)
    try:
        yield here
    finally:
        if here.discovery.exists():
            try:
                here.note_token()  # an app still runs: its token joins the grep
            except (OSError, ValueError, KeyError, AssertionError, httpx.HTTPError):
                pass
        here.keep_outputs()


def app_info(bridge: BridgeProcess, request_id: int, timeout: float = processes.REPLY_TIMEOUT) -> dict[str, Any]:
    bridge.send(tool_call(request_id, "app_info", {}))
    info: dict[str, Any] = json.loads(result_text(bridge.read_reply(request_id, timeout)))
    return info


def rejected_by(url: str, token: str) -> int:
    """The HTTP status `url` answers an initialize carrying `token` with."""
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    if url.startswith("npipe://"):  # the app on its named pipe (Windows): no httpx transport there
        return over_pipe(url, None, initialize(), headers)[0]
    transport = None
    if url.startswith("http+unix://"):  # the app on its Unix socket
        from bridge.core.unixurl import split_unix_url

        socket_path, target = split_unix_url(url)
        transport, url = httpx.HTTPTransport(uds=socket_path), "http://localhost" + target
    with httpx.Client(transport=transport, trust_env=False, timeout=5) as client:
        return client.post(url, json=initialize(), headers=headers).status_code


def over_pipe(url: str, path: str | None, message: Any, headers: dict[str, str]) -> tuple[int, bytes]:
    """POST ``message`` (JSON) to ``url``'s named pipe (``path`` on it, if given) with the
    bridge's own pool, as httpx has no pipe transport: ``(status, body)``."""
    import asyncio

    from bridge.core.pipeurl import resolve_pipe_path
    from bridge.transport.pool import Http11Pool

    target = url if path is None else resolve_pipe_path(url, path)
    fields = [("content-type", "application/json"), *((name.lower(), value) for name, value in headers.items())]

    async def post() -> tuple[int, bytes]:
        pool = Http11Pool(max_connections=1, connect_timeout_seconds=5, pool_timeout_seconds=5)
        try:
            response = await pool.request("POST", target, fields, json.dumps(message).encode(), read_timeout_seconds=5)
            try:
                return response.status_code, await response.aread()
            finally:
                await response.aclose()
        finally:
            await pool.aclose()

    return asyncio.run(post())


def reply_ids(bridge: BridgeProcess) -> list[Any]:
    return [message.get("id") for message in bridge.messages if "method" not in message]


# -- the app is not running ------------------------------------------------------------------
