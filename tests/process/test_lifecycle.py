"""The desktop-app lifecycle, with real processes (docs/discovery.md, docs/security.md).

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
secrets.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import TextContent
from support import processes
from support.apps import (
    APP_SERVER_SCRIPT,
    REPO_ROOT,
    process_alive,
)
from support.lifecycle import (
    CAPTURED,
    LAUNCH_REPLY_TIMEOUT,
    LAUNCH_TIMEOUT,
    NEVER_LISTENS_TIMEOUT,
    Desk,
    app_info,
    rejected_by,
    reply_ids,
)
from support.processes import (
    INITIALIZED,
    bridge_error_reason,
    handshake,
    initialize,
    result_text,
    tool_call,
    wait_until,
)

pytestmark = [pytest.mark.process, pytest.mark.frozen_relevant]


@pytest.mark.parametrize(
    "how", ["discovery-token", "discovery+auth-route", "url+auth-route"]
)
def test_app_not_running_the_bridge_launches_it(desk: Desk, how: str) -> None:
    """Nothing listens (anthropics/claude-code#69593); the bridge launches the app (once), waits until it
    listens, and the initialize succeeds.

    ``discovery-token``: found by its discovery file, token from the same file.
    ``discovery+auth-route``: found by its discovery file, token from ``--auth-url
    --secret-file`` (which needs a fixed port: the auth URL is given up front).
    ``url+auth-route``: a fixed ``--url`` and ``--auth-url``, no discovery file."""
    port = processes.free_port()
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
        assert reply["result"]["serverInfo"]["name"] == "example-app"
        bridge.send(INITIALIZED)
        (pid,) = desk.launches()
        assert app_info(bridge, 1)["pid"] == pid
        desk.note_token()
    assert elapsed < LAUNCH_TIMEOUT, f"initialize took {elapsed:.1f} s"
    assert "accepts connections" in bridge.stderr_text()  # the progress lines go to stderr
    assert " DEBUG " in bridge.stderr_text(), "the leak check below greps debug-level logs"
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
                    assert init.server_info.name == "example-app"
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
    """An app restart (supercorp-ai/supergateway#212) and token rotation: the user restarts the app between two calls (new
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
    assert " DEBUG " in bridge.stderr_text(), "the leak check below greps debug-level logs"


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
    """docs/discovery.md, "Starting the app": an AI client starts three copies while the app is down;
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
    """A launch that never listens: the launched program runs but never listens; the initialize gets
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


def _never_listens(desk: Desk) -> str:
    """``--launch`` for a program that records its pid, then sleeps 101 s without listening."""
    return shlex.join([
        sys.executable, "-c",
        "import os, sys, time; open(sys.argv[1], 'a').write(f'{os.getpid()}\\n'); time.sleep(101)",
        str(desk.started_file),
    ])


def _running(pid: int) -> bool:
    from bridge.app.discovery import pid_is_alive

    return pid_is_alive(pid)


def test_a_launch_that_never_listens_runs_once_and_its_failure_is_remembered(desk: Desk) -> None:
    """Issue 20: ``--launch "sleep 101" --launch-timeout 2``. The first request launches it
    and fails after 2 s; the next one gets that failure at once (no second launch, no second
    wait); after the backoff (5 s) a request tries again by waiting for the same child, which
    still runs, and never starts a second one. The child is left running (a desktop app may
    be slow); the test stops it."""
    from bridge.core.policy import LAUNCH_RETRY_BACKOFF

    retry_first_seconds = LAUNCH_RETRY_BACKOFF.first_seconds

    args = ["--url", f"http://127.0.0.1:{processes.free_port()}/mcp", "--launch", _never_listens(desk),
            "--launch-timeout", "2"]
    with desk.bridge(*args) as bridge:
        bridge.send(initialize(0))
        first = bridge.read_reply(0, 15)
        failed_at = time.monotonic()
        assert bridge_error_reason(first) == "app_launch_failed", first
        assert processes.wait_until(lambda: len(desk.launches()) == 1, 15), "the launched child never recorded its pid"
        bridge.send(initialize(1))
        second = bridge.read_reply(1, 15)
        assert bridge_error_reason(second) == "app_launch_failed", second
        assert time.monotonic() - failed_at < retry_first_seconds, "the remembered failure was not answered at once"
        time.sleep(max(0.0, retry_first_seconds + 0.5 - (time.monotonic() - failed_at)))
        bridge.send(initialize(2))
        third = bridge.read_reply(2, 15)
        assert bridge_error_reason(third) == "app_launch_failed", third
        time.sleep(0.5)  # a launch would have recorded its pid by now
        assert len(desk.launches()) == 1, f"launched {len(desk.launches())} times"
        assert "was started but did not accept connections within 2 s" in first["error"]["message"], first
        assert "left running" in first["error"]["message"] and "tries again in 5 s" in first["error"]["message"]
        assert "tries again in" in second["error"]["message"]
        assert "was not started again" in third["error"]["message"], third
        assert "tries again in 10 s" in third["error"]["message"], third
    (pid,) = desk.launches()
    assert _running(pid), "the launched child was killed (the bridge leaves a launched app running)"


def test_check_launch_leaves_no_child_behind(desk: Desk) -> None:
    """``check --launch`` whose child never listens: the check fails, says it stopped the
    process it started, and that process is gone (reaped, not a zombie)."""
    args = ["check", "--url", f"http://127.0.0.1:{processes.free_port()}/mcp", "--launch", _never_listens(desk),
            "--launch-timeout", "2"]
    check = subprocess.run(
        [*processes.bridge_command(), *args], env=desk.env, capture_output=True, timeout=60, cwd=REPO_ROOT
    )
    report = check.stdout.decode()
    assert check.returncode == 1 and "did not accept connections within 2 s" in report, report
    (pid,) = desk.launches()
    assert f"stopped the process it started (pid {pid})" in report, report
    # One story: what the check did, not what the bridge would do next (a newcomer's trial
    # read "is left running … tries again in 5 s … The check stopped the process").
    assert "left running" not in report and "tries again" not in report, report
    assert processes.wait_until(lambda: not _running(pid), 5), f"pid {pid} still runs after check"


def test_check_launch_names_the_app_it_started_and_leaves_it_running(desk: Desk) -> None:
    """``check --launch`` that starts the app says so with its pid, and that it keeps
    running (the bridge leaves a launched app running, and so does the check once it listens)."""
    args = ["check", "--discovery-file", str(desk.discovery), "--launch", desk.launch_command(), "--launch-timeout", "20"]
    check = subprocess.run(
        [*processes.bridge_command(), *args], env=desk.env, capture_output=True, timeout=90, cwd=REPO_ROOT
    )
    report = check.stdout.decode()
    (pid,) = desk.launches()
    try:
        assert check.returncode == 0, report
        assert f"(pid {pid}; it keeps running, as the bridge leaves it)" in report, report
        assert _running(pid), "the check stopped an app that listened"
    finally:
        os.kill(pid, 15)


# -- the discovery file -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "launch", [False, True], ids=["no-launch", "launch-configured"]
)
@pytest.mark.posix_only("file modes (0666) are POSIX")
def test_world_writable_discovery_file_is_refused(desk: Desk, launch: bool) -> None:
    """docs/discovery.md: a discovery file others may write (0666) could send the token
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
    """pyinstaller/pyinstaller#4858, docs/discovery.md "Starting the app": the app the bridge launched keeps running after the
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
        assert status == 0 and seconds < processes.EOF_EXIT_BOUND + 0.5, (status, seconds)
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


# -- after the file's tests: nothing leaked ---------------------------------------------------


def pieces(secret: str, width: int = 8) -> set[str]:
    return {secret[start : start + width] for start in range(max(1, len(secret) - width + 1))}


def leaked_pieces() -> list[tuple[str, str]]:
    """(where, piece) for every 8-character piece of a token or secret the tests saw that is in
    an output captured so far (bridges at debug level, --launch-log files, the apps' logs)."""
    needles = {piece for secret in CAPTURED.secrets for piece in pieces(secret)}
    return [(where, needle) for where, text in CAPTURED.outputs for needle in needles if needle in text]


@pytest.fixture(scope="module", autouse=True)
def _no_token_or_secret_in_any_captured_output() -> Iterator[None]:
    """No token anywhere: every stdout, stderr and log file the file's tests captured holds no
    token and no secret, nor any 8-character piece of one. Checked when this process's run of
    the file ends (with ``-n``, each pytest-xdist worker checks the share it ran: a test named
    to run last saw only its own worker's share); a leak is an error at that teardown. Two
    tests run their bridges at debug level, and assert they logged at it."""
    yield
    found = leaked_pieces()
    assert not found, f"secret or token pieces found in captured output: {found[:10]}"


def test_the_leak_check_finds_a_piece_of_a_secret() -> None:
    """The check above is not vacuous: a secret's 8-character piece in a captured output is found."""
    secret = "s3cr3t-" + os.urandom(8).hex()
    CAPTURED.secrets.add(secret)
    CAPTURED.outputs.append(("planted", f"...{secret[3:11]}..."))
    try:
        assert ("planted", secret[3:11]) in leaked_pieces()
    finally:
        CAPTURED.outputs.remove(("planted", f"...{secret[3:11]}..."))
        CAPTURED.secrets.discard(secret)


# -- the app updated while a bridge is connected ----------------------------------------------


def _install_app(folder: Path, version: str) -> Path:
    """The example app "installed" at ``folder/myapp.py``, serving ``serverInfo.version``
    `version`; an existing install is replaced as an updater replaces a program: a new
    file renamed over the old one (a new inode, the old one gone)."""
    from support.apps import APP_SERVER_SCRIPT

    text = APP_SERVER_SCRIPT.read_text(encoding="utf-8")
    assert 'version="1.0.0"' in text
    folder.mkdir(exist_ok=True)
    program = folder / "myapp.py"
    staged = folder / ".myapp.py.new"
    staged.write_text(text.replace('version="1.0.0"', f'version="{version}"'), encoding="utf-8")
    os.replace(staged, program)
    return program


@pytest.mark.parametrize("restart", ["by-the-user", "by-the-bridge"])
def test_the_app_is_updated_while_a_bridge_is_connected(desk: Desk, restart: str) -> None:
    """docs/discovery.md, "App restarts": the app's program is replaced by a new version
    (renamed over the old file) and the app restarts on a new port with a new token and a
    new discovery file, while a client's bridge stays connected. Its next call works: the
    bridge re-reads the discovery file and rebuilds the session. ``by-the-user``: the user
    starts the new version; ``by-the-bridge``: nobody does, and the bridge's ``--launch``,
    which names the program's stable path, starts the new version."""
    from support.apps import start_listening_app

    program = _install_app(desk.root / "MyApp", "1.0.0")
    launch = shlex.join([sys.executable, str(program), "--port", "0", *desk.app_args()])
    old = start_listening_app(
        [sys.executable, str(program), "--port", "0", *desk.app_args()],
        log_path=desk.root / "old-app.log", scheme="http", what="the app, version 1.0.0",
    )
    try:
        old_token = desk.note_token()
        args = ["--discovery-file", str(desk.discovery), "--launch", launch, "--launch-timeout", str(LAUNCH_TIMEOUT)]
        with desk.bridge(*args) as bridge:
            bridge.send(initialize(0))
            assert bridge.read_reply(0, LAUNCH_REPLY_TIMEOUT)["result"]["serverInfo"]["version"] == "1.0.0"
            bridge.send(INITIALIZED)
            assert app_info(bridge, 1)["pid"] == old.proc.pid

            _install_app(desk.root / "MyApp", "2.0.0")  # the update: the program is replaced
            old.kill()  # the updater quits the old version
            assert wait_until(lambda: not process_alive(old.proc.pid), 10)
            new = None
            if restart == "by-the-user":
                new = start_listening_app(
                    [sys.executable, str(program), "--port", "0", *desk.app_args()],
                    log_path=desk.root / "new-app.log", scheme="http", what="the app, version 2.0.0",
                )
                assert new.port != old.port
            try:
                info = app_info(bridge, 2, LAUNCH_REPLY_TIMEOUT)
                new_token = desk.note_token()
                assert new_token != old_token and rejected_by(desk.endpoint(), old_token) == 401
                pids = desk.launches()
                assert info["pid"] == pids[-1] != old.proc.pid and len(pids) == 2, pids
                if new is not None:
                    assert info["pid"] == new.proc.pid
                bridge.send(tool_call(3, "echo", {"text": "after the update"}))
                assert result_text(bridge.read_reply(3)) == "after the update", bridge.stderr_tail()
                document = json.loads(desk.discovery.read_text(encoding="utf-8"))
                assert document["pid"] == info["pid"] and document["url"] != old.url
            finally:
                if new is not None:
                    new.stop()
            bridge.finish()
        assert reply_ids(bridge) == [0, 1, 2, 3], "only the client's own replies reach stdout"
    finally:
        old.stop()
