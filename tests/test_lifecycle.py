"""The desktop-app lifecycle, with real processes (issue 3; DESIGN.md §2.8–§2.10, §4, §5).

The app is ``examples/app_server.py`` as a desktop app: it publishes a discovery file
(``--discovery-file``), requires a bearer token that its ``/auth/token`` route issues for
a 0600 local secret (``--secret-file``) or that it writes into the discovery file
(``--token-in-discovery``), gets a new token and a new port on every start, and appends
its pid to ``--started-file`` (so launches can be counted). The bridge runs as an AI
client starts it: ``python -m bridge …`` (or the frozen executable), or the app's own
``--mcp-stdio`` entry built with the library.

Every bridge gets a private HOME/XDG state folder (its cross-process launch lock lives
there), every app a bridge launched is stopped at teardown (``reap_apps``), and every
stdout, stderr and log file is kept for the last test, which greps them for tokens and
secrets (HAZARDS B27).
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import anyio
import httpx
import pytest
import test_process
from conftest import (
    APP_SERVER_SCRIPT,
    REPO_ROOT,
    AppServer,
    isolated_env,
    make_secret_file,
    process_alive,
    read_pids,
)
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import TextContent
from test_process import (
    INITIALIZED,
    BridgeProcess,
    bridge_error_reason,
    handshake,
    initialize,
    result_text,
    tool_call,
    wait_until,
)

pytestmark = pytest.mark.process

LAUNCH_TIMEOUT = 20.0
"""--launch-timeout for launches that should work (an app starts in ~1 s; CI is slower)."""
LAUNCH_REPLY_TIMEOUT = LAUNCH_TIMEOUT + 10.0
"""Bound on a reply that waits for a launch."""
NEVER_LISTENS_TIMEOUT = 3.0
"""--launch-timeout for the app that never listens."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# -- what every test leaves for the final grep (HAZARDS B27) ---------------------------------


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
        with mock.patch.object(test_process, "bridge_command", lambda: command):
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
        assert test_process.wait_until(self.discovery.exists, 10), "the app never wrote its discovery file"
        return str(json.loads(self.discovery.read_text(encoding="utf-8"))["url"])

    def current_token(self) -> str:
        """The running app's token: from the discovery file, else from its auth route."""
        document = json.loads(self.discovery.read_text(encoding="utf-8"))
        if document.get("token"):
            return str(document["token"])
        auth_url = document["url"].rsplit("/", 1)[0] + "/auth/token"
        with httpx.Client(trust_env=False, timeout=5) as client:
            response = client.post(auth_url, json={"secret": self.secret})
        assert response.status_code == 200, response.status_code
        return str(response.json()["token"])

    def note_token(self) -> str:
        # The app publishes its discovery file just after it starts listening, so a bridge
        # with a fixed --url can be served before the file exists: wait for it (bounded).
        assert test_process.wait_until(self.discovery.exists, 10), "the app never wrote its discovery file"
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


def app_info(bridge: BridgeProcess, request_id: int, timeout: float = test_process.REPLY_TIMEOUT) -> dict[str, Any]:
    bridge.send(tool_call(request_id, "app_info", {}))
    info: dict[str, Any] = json.loads(result_text(bridge.read_reply(request_id, timeout)))
    return info


def rejected_by(url: str, token: str) -> int:
    """The HTTP status `url` answers an initialize carrying `token` with."""
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    with httpx.Client(trust_env=False, timeout=5) as client:
        return client.post(url, json=initialize(), headers=headers).status_code


def reply_ids(bridge: BridgeProcess) -> list[Any]:
    return [message.get("id") for message in bridge.messages if "method" not in message]


# -- the app is not running ------------------------------------------------------------------


@pytest.mark.parametrize(
    "how", ["discovery-token", "discovery+auth-route", "url+auth-route"]
)
def test_app_not_running_the_bridge_launches_it(desk: Desk, how: str) -> None:
    """HAZARDS B15/B18: nothing listens; the bridge launches the app (once), waits until it
    listens, and the initialize succeeds.

    ``discovery-token``: found by its discovery file, token from the same file.
    ``discovery+auth-route``: found by its discovery file, token from ``--auth-url
    --secret-file`` (which needs a fixed port: the auth URL is given up front).
    ``url+auth-route``: a fixed ``--url`` and ``--auth-url``, no discovery file."""
    port = test_process.free_port()
    auth_args = ["--auth-url", f"http://127.0.0.1:{port}/auth/token", "--secret-file", str(desk.secret_file)]
    fixed_port_launch = desk.launch_command("--port", str(port), auth="secret")
    if how == "discovery-token":
        args = ["--discovery-file", str(desk.discovery), "--launch", desk.launch_command()]
    elif how == "discovery+auth-route":
        args = ["--discovery-file", str(desk.discovery), *auth_args, "--launch", fixed_port_launch]
    else:
        args = ["--url", f"http://127.0.0.1:{port}/mcp", *auth_args, "--launch", fixed_port_launch]
    args += ["--launch-timeout", str(LAUNCH_TIMEOUT), "--launch-log", str(desk.launch_log), "--log-level", "debug"]
    assert not desk.discovery.exists()
    with desk.bridge(*args) as bridge:
        started = time.monotonic()
        bridge.send(initialize(0))
        reply = bridge.read_reply(0, LAUNCH_REPLY_TIMEOUT)
        elapsed = time.monotonic() - started
        assert "result" in reply, f"{reply}\n{bridge.stderr_tail()}"
        assert reply["result"]["serverInfo"]["name"] == "demo-app"
        bridge.send(INITIALIZED)
        (pid,) = desk.launches()
        assert app_info(bridge, 1)["pid"] == pid
        desk.note_token()
    assert elapsed < LAUNCH_TIMEOUT, f"initialize took {elapsed:.1f} s"
    assert "accepts connections" in bridge.stderr_text()  # the progress lines go to stderr
    assert process_alive(pid), "the launched app must outlive the bridge"


def test_mcp_stdio_library_path_with_the_sdk_client(desk: Desk) -> None:
    """``python examples/app_server.py --mcp-stdio …``, started by the SDK's stdio client as
    an AI client would: the app is down, the library bridge launches it through its
    ``launch_command`` and authenticates at ``/auth/token``; a second client session then
    reuses the running app (no second launch)."""
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            str(APP_SERVER_SCRIPT), "--mcp-stdio",
            "--discovery-file", str(desk.discovery),
            "--secret-file", str(desk.secret_file),
            "--started-file", str(desk.started_file),
            "--launch-log", str(desk.launch_log),
        ],
        env={key: desk.env[key] for key in ("HOME", "XDG_STATE_HOME") if key in desk.env},
        cwd=REPO_ROOT,
    )

    async def session(errlog_path: Path) -> dict[str, Any]:
        with open(errlog_path, "w", encoding="utf-8") as errlog, anyio.fail_after(LAUNCH_REPLY_TIMEOUT):
            async with stdio_client(params, errlog=errlog) as (read_stream, write_stream):
                async with ClientSession(read_stream, write_stream, read_timeout_seconds=LAUNCH_REPLY_TIMEOUT) as client:
                    init = await client.initialize()
                    assert init.server_info.name == "demo-app"
                    names = {tool.name for tool in (await client.list_tools()).tools}
                    assert {"echo", "app_info"} <= names
                    echoed = await client.call_tool("echo", {"text": "library path ✓"})
                    assert "".join(b.text for b in echoed.content if isinstance(b, TextContent)) == "library path ✓"
                    info = await client.call_tool("app_info", {})
                    assert info.structured_content is not None
                    return dict(info.structured_content)

    first = anyio.run(session, desk.root / "sdk-client-1.log")
    assert desk.launches() == [first["pid"]]
    desk.note_token()
    second = anyio.run(session, desk.root / "sdk-client-2.log")
    assert second["pid"] == first["pid"] and desk.launches() == [first["pid"]]


# -- the app restarts -------------------------------------------------------------------------


@pytest.mark.parametrize("launch", [False, True], ids=["no-launch", "launch-configured"])
def test_app_restarted_between_calls_on_a_new_port_with_a_new_token(desk: Desk, launch: bool) -> None:
    """HAZARDS B24 + token rotation: the user restarts the app between two calls (new
    process, new port, new token, the old session gone). The second call succeeds through
    the same bridge: the discovery file is re-read (endpoint and token) and the session is
    rebuilt without the replayed initialize reaching stdout. With ``--launch`` configured the
    bridge must find the restarted app instead of launching another one."""
    first_app = desk.start_app()
    old_token = desk.note_token()
    args = ["--discovery-file", str(desk.discovery), "--log-level", "debug"]
    if launch:
        args += ["--launch", desk.launch_command(), "--launch-timeout", str(LAUNCH_TIMEOUT)]
    with desk.bridge(*args) as bridge:
        handshake(bridge, 0)
        assert app_info(bridge, 1)["pid"] == first_app.proc.pid

        first_app.kill()
        second_app = desk.start_app()
        new_token = desk.note_token()
        assert new_token != old_token, "a restart rotates the token"
        assert second_app.port != first_app.port
        assert rejected_by(second_app.url, old_token) == 401, "the new app must refuse the old token"

        assert app_info(bridge, 2, LAUNCH_REPLY_TIMEOUT)["pid"] == second_app.proc.pid
        bridge.send(tool_call(3, "echo", {"text": "still here"}))
        assert result_text(bridge.read_reply(3)) == "still here"
    assert reply_ids(bridge) == [0, 1, 2, 3], "only the client's own replies reach stdout"
    assert desk.launches() == [first_app.proc.pid, second_app.proc.pid], "the bridge launched an app of its own"


def test_app_killed_the_library_bridge_relaunches_it_and_gets_a_new_token(desk: Desk) -> None:
    """The app crashes (SIGKILL: its discovery file stays behind, naming a dead pid and a
    dead port) between two calls through ``--mcp-stdio``: the bridge launches a new
    instance, its auth route issues a new token (the old one is refused), the session is
    rebuilt and the second call succeeds."""
    with desk.app_stdio() as bridge:
        bridge.send(initialize(0))
        assert "result" in bridge.read_reply(0, LAUNCH_REPLY_TIMEOUT)
        bridge.send(INITIALIZED)
        (first_pid,) = desk.launches()
        assert app_info(bridge, 1)["pid"] == first_pid
        old_token = desk.note_token()

        os.kill(first_pid, 9)
        assert wait_until(lambda: not process_alive(first_pid), 5)
        assert desk.discovery.exists(), "a crashed app leaves its discovery file behind"

        second = app_info(bridge, 2, LAUNCH_REPLY_TIMEOUT)
        _, second_pid = desk.launches()
        assert second["pid"] == second_pid != first_pid
        new_token = desk.note_token()
        assert new_token != old_token
        assert rejected_by(desk.endpoint(), old_token) == 401
    assert reply_ids(bridge) == [0, 1, 2]


# -- launching: one app for many bridges, bounded waits ---------------------------------------


def test_three_bridges_started_at_once_launch_one_app(desk: Desk) -> None:
    """HAZARDS B15, DESIGN.md §2.9: an AI client starts three copies while the app is down;
    exactly one app is launched (the file lock), and all three initialize."""
    args = [
        "--discovery-file", str(desk.discovery),
        "--launch", desk.launch_command(),
        "--launch-timeout", str(LAUNCH_TIMEOUT),
        "--log-level", "info",
    ]
    bridges = [desk.bridge(*args) for _ in range(3)]
    try:
        for bridge in bridges:
            bridge.send(initialize(0))
        for bridge in bridges:
            assert "result" in bridge.read_reply(0, LAUNCH_REPLY_TIMEOUT), bridge.stderr_tail()
            bridge.send(INITIALIZED)
        (pid,) = desk.launches()
        for number, bridge in enumerate(bridges, 1):
            assert app_info(bridge, number)["pid"] == pid
        for bridge in bridges:
            bridge.finish()
    finally:
        for bridge in bridges:
            bridge.__exit__(RuntimeError, None, None)  # kill if still alive, close pipes
    starting = [line for bridge in bridges for line in bridge.stderr_text().splitlines() if "starting the app" in line.lower()]
    assert len(starting) == 1, "\n".join(line[:160] for line in starting)
    time.sleep(1.0)  # an extra launch would show in the started file by now
    assert desk.launches() == [pid]


def test_an_app_that_never_listens_fails_within_the_launch_timeout(desk: Desk) -> None:
    """HAZARDS B15 case 3: the launched program runs but never listens; the initialize gets
    -32603 app_launch_failed within the launch timeout (plus a margin), never silence."""
    sleeper = shlex.join([
        sys.executable, "-c",
        "import os, sys, time; open(sys.argv[1], 'a').write(f'{os.getpid()}\\n'); time.sleep(60)",
        str(desk.started_file),
    ])
    args = ["--discovery-file", str(desk.discovery), "--launch", sleeper, "--launch-timeout", str(NEVER_LISTENS_TIMEOUT)]
    with desk.bridge(*args) as bridge:
        started = time.monotonic()
        bridge.send(initialize(0))
        reply = bridge.read_reply(0, NEVER_LISTENS_TIMEOUT + 10)
        elapsed = time.monotonic() - started
        assert bridge_error_reason(reply) == "app_launch_failed"
        assert "did not accept connections within 3 s" in reply["error"]["message"], reply
    # The margin covers the bridge's own start-up (a frozen one-file build unpacks first).
    assert NEVER_LISTENS_TIMEOUT - 0.5 <= elapsed < NEVER_LISTENS_TIMEOUT + 5, f"answered after {elapsed:.1f} s"
    assert len(desk.launches()) == 1


# -- the discovery file -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "launch", [False, True], ids=["no-launch", "launch-configured"]
)
@pytest.mark.posix_only("file modes (0666) are POSIX")
def test_world_writable_discovery_file_is_refused(desk: Desk, launch: bool) -> None:
    """DESIGN.md §4: a discovery file others may write (0666) could send the token
    anywhere; the bridge refuses it with a message that says why, and sends nothing to
    the endpoint it names."""
    app = desk.start_app()
    os.chmod(desk.discovery, 0o666)
    args = ["--discovery-file", str(desk.discovery), "--log-level", "info"]
    if launch:
        args += ["--launch", desk.launch_command(), "--launch-timeout", "5"]
    with desk.bridge(*args) as bridge:
        bridge.send(initialize(0))
        reply = bridge.read_reply(0, LAUNCH_REPLY_TIMEOUT)
        assert "error" in reply, f"a 0666 discovery file was used: {reply}"
        message = reply["error"]["message"]
        assert "writable by group or others" in message and str(desk.discovery) in message, message
        assert bridge_error_reason(reply) in ("app_unreachable", "app_launch_failed")
    assert "writable by group or others" in bridge.stderr_text(), bridge.stderr_tail()
    assert stat.S_IMODE(desk.discovery.stat().st_mode) == 0o666, "the refused file was replaced"
    assert '"POST /mcp' not in app.stderr_text(), "a request went to the endpoint of a refused file"
    assert desk.launches() == [app.proc.pid], "a second instance was launched"


# -- the launched app is detached -------------------------------------------------------------


@pytest.mark.parametrize("with_log", [False, True], ids=["devnull", "launch-log"])
def test_the_launched_app_holds_none_of_the_bridges_stdio(desk: Desk, with_log: bool) -> None:
    """HAZARDS B14/B16, DESIGN.md §5: the app the bridge launched keeps running after the
    bridge exits, yet the client sees EOF on the bridge's stdout and stderr at once: the
    app holds none of the bridge's pipes (its output goes to the null device or the
    --launch-log file)."""
    args = ["--discovery-file", str(desk.discovery), "--launch", desk.launch_command(), "--launch-timeout", str(LAUNCH_TIMEOUT)]
    if with_log:
        args += ["--launch-log", str(desk.launch_log)]
    with desk.bridge(*args) as bridge:
        bridge.send(initialize(0))
        assert "result" in bridge.read_reply(0, LAUNCH_REPLY_TIMEOUT)
        bridge.send(INITIALIZED)
        (pid,) = desk.launches()
        status, seconds = bridge.close_and_time_exit()
        assert status == 0 and seconds < test_process.EOF_EXIT_BOUND + 0.5, (status, seconds)
        started = time.monotonic()
        bridge.join_readers()  # both reader threads end only at EOF
        assert not any(thread.is_alive() for thread in bridge._threads), "stdout/stderr still open: the app holds them"
        assert time.monotonic() - started < 2
        assert process_alive(pid), "the app must keep running"
    if with_log:
        assert "LISTENING http://127.0.0.1:" in desk.launch_log.read_text(encoding="utf-8")
    if sys.platform.startswith("linux"):
        fds = [os.readlink(link) for link in Path(f"/proc/{pid}/fd").iterdir() if link.name in ("0", "1", "2")]
        assert not any(target.startswith("pipe:") for target in fds), fds


# -- last: nothing leaked ---------------------------------------------------------------------


def pieces(secret: str, width: int = 8) -> set[str]:
    return {secret[start : start + width] for start in range(max(1, len(secret) - width + 1))}


def test_zz_no_token_or_secret_in_any_captured_output() -> None:
    """HAZARDS B27: every stdout, stderr and log file captured above (bridges at debug
    level, --launch-log files, the apps' logs) holds no token and no secret, nor any
    8-character piece of one. Runs last; needs the other tests of this file."""
    if not CAPTURED.outputs or not CAPTURED.secrets:
        pytest.skip("run with the rest of test_lifecycle.py: nothing was captured")
    assert any("DEBUG" in text for _, text in CAPTURED.outputs), "expected debug-level bridge logs to grep"
    needles = {piece: secret for secret in CAPTURED.secrets for piece in pieces(secret)}
    found = [
        (where, needle)
        for where, text in CAPTURED.outputs
        for needle in needles
        if needle in text
    ]
    assert not found, f"secret or token pieces found in captured output: {found[:10]}"
