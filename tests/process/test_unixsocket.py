"""The whole path over a Unix domain socket, with real processes (Linux): the example app
serving on its socket, a bridge finding it through the discovery file, SSE progress, a
restart and the session rebuilt, a launch; and the hostile cases: another user's socket,
a planted symbolic link, a process of this user that is not the named pid, a stale socket.

The hostile cases check the bytes that reached the impostor: none (no ``Authorization``,
no token, no request). Another user needs a second uid: a root test run makes one (no
account needed, as tests/process/test_security.py does); other runs skip those cases.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import processes
from support.apps import APP_SERVER_SCRIPT, LISTEN_TIMEOUT, REPO_ROOT, AppServer, start_listening_app
from support.lifecycle import LAUNCH_REPLY_TIMEOUT, LAUNCH_TIMEOUT, Desk, app_info, desk  # noqa: F401 (the fixture)
from support.processes import INITIALIZED, bridge_error_reason, initialize
from support.squatter import Squatter

from bridge.core.unixurl import split_unix_url

# mypy --platform reads this too: the rest of the module is POSIX code.
if sys.platform == "win32":
    pytest.skip("Unix sockets", allow_module_level=True)

pytestmark = [pytest.mark.process, pytest.mark.linux_only("the Unix-socket path is tested on Linux here")]
as_root = pytest.mark.skipif(os.name != "posix" or os.geteuid() != 0, reason="needs root to run the impostor as a second uid")
OTHER_UID = 54_321

def unix_app_args(here: Desk) -> list[str]:
    return [str(APP_SERVER_SCRIPT), "--link", "unix", *here.app_args()]


def start_unix_app(here: Desk) -> AppServer:
    app = start_listening_app(
        [sys.executable, *unix_app_args(here)], log_path=here.root / f"app-{len(here.launches())}.log",
        scheme="http+unix", what="the example app on its Unix socket",
    )
    here.note_token()
    return app


@pytest.fixture
def running(desk: Desk) -> Iterator[tuple[Desk, AppServer, Path]]:  # noqa: F811 (the imported fixture)
    """The app on its Unix socket: the desk, the app, the socket's path."""
    app = start_unix_app(desk)
    try:
        yield desk, app, Path(split_unix_url(app.url)[0])
    finally:
        app.stop()


def assert_got_nothing(received: list[bytes], *secrets: str) -> None:
    everything = b"".join(received)
    assert b"authorization" not in everything.lower(), everything[:300]
    for secret in secrets:
        assert secret.encode() not in everything
    assert everything == b"", f"request bytes reached the impostor: {everything[:300]!r}"


def test_sse_the_get_stream_a_restart_and_the_session_rebuilt_over_the_socket(running: tuple[Desk, AppServer, Path]) -> None:
    here, app, socket_path = running
    assert json.loads(here.discovery.read_text())["url"].startswith("http+unix://%2F")
    assert socket_path.parent == here.discovery.parent and oct(socket_path.stat().st_mode & 0o777) == "0o600"
    with here.bridge("--discovery-file", str(here.discovery), "--log-level", "info") as bridge:
        processes.handshake(bridge)
        bridge.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                     "params": {"name": "progress", "arguments": {"steps": 3, "delay_seconds": 0.05}, "_meta": {"progressToken": "p"}}})
        reply = bridge.read_reply(1)
        assert "completed 3 steps" in json.dumps(reply), reply
        progress = [m for m in bridge.messages if isinstance(m, dict) and m.get("method") == "notifications/progress"]
        assert [m["params"]["progress"] for m in progress] == [1, 2, 3], "SSE progress over the socket"
        assert app_info(bridge, 2)["pid"] == app.proc.pid
        check = subprocess.run([*processes.bridge_command(), "check", "--discovery-file", str(here.discovery)],
                               env=here.env, capture_output=True, timeout=60, cwd=REPO_ROOT)
        report = check.stdout.decode()
        assert check.returncode == 0 and f"✓ listener    Unix socket {socket_path}" in report and f"pid {app.proc.pid}" in report, report
        app.stop()
        assert not socket_path.exists(), "the app removes its socket file on the way out"
        again = start_unix_app(here)
        try:
            assert Path(split_unix_url(again.url)[0]) == socket_path, "the same place after a restart"
            assert app_info(bridge, 3, LAUNCH_REPLY_TIMEOUT)["pid"] == again.proc.pid, bridge.stderr_tail()
            assert "session" in bridge.stderr_tail().lower()
        finally:
            again.stop()


def test_the_app_is_launched_on_its_socket_and_a_stale_socket_is_replaced(desk: Desk) -> None:  # noqa: F811
    first = start_unix_app(desk)
    socket_path = Path(split_unix_url(first.url)[0])
    first.kill()  # a crash: the socket file and the discovery file stay behind
    assert socket_path.exists() and desk.discovery.exists()
    with desk.bridge("--discovery-file", str(desk.discovery)) as bridge:
        bridge.send(initialize(0))
        reply = bridge.read_reply(0)
        assert bridge_error_reason(reply) == "app_unreachable" and "not running" in reply["error"]["message"], reply
    command = shlex.join([sys.executable, *unix_app_args(desk)])
    args = ["--discovery-file", str(desk.discovery), "--launch", command, "--launch-timeout", str(LAUNCH_TIMEOUT),
            "--launch-log", str(desk.launch_log)]
    try:
        with desk.bridge(*args) as bridge:
            bridge.send(initialize(0))
            reply = bridge.read_reply(0, LAUNCH_REPLY_TIMEOUT)
            assert reply.get("result", {}).get("serverInfo", {}).get("name") == "example-app", f"{reply}\n{bridge.stderr_tail()}"
            bridge.send(INITIALIZED)
            assert app_info(bridge, 1)["pid"] == desk.launches()[-1]
        assert json.loads(desk.discovery.read_text())["url"] == first.url, "the stale socket was replaced at its place"
        assert "replacing the stale socket" in desk.launch_log.read_text()
    finally:
        launched = desk.launches()[-1]
        os.kill(launched, 15)


def test_a_relative_auth_url_is_served_on_the_socket_and_never_sent_to_an_impostor(desk: Desk) -> None:  # noqa: F811
    """``--auth-url /auth/token`` on an ``http+unix://`` endpoint: the secret goes to the
    app's own socket (the same path, the same peer check), and a process squatting the
    socket gets neither the secret nor anything else."""
    app = start_listening_app(
        [sys.executable, str(APP_SERVER_SCRIPT), "--link", "unix", *desk.app_args(auth="secret")],
        log_path=desk.root / "app-secret.log", scheme="http+unix", what="the example app on its Unix socket",
    )
    socket_path = Path(split_unix_url(app.url)[0])
    auth = ["--discovery-file", str(desk.discovery), "--auth-url", "/auth/token", "--secret-file", str(desk.secret_file)]
    try:
        assert "token" not in json.loads(desk.discovery.read_text()), "only the auth route gives the token"
        with desk.bridge(*auth) as bridge:
            processes.handshake(bridge)
            assert app_info(bridge, 1)["pid"] == app.proc.pid
        impostor = _squat(socket_path, uid=None)  # the app still runs: its pid and start time are live
        try:
            with desk.bridge(*auth) as bridge:
                bridge.send(initialize(0))
                reply = bridge.read_reply(0)
                assert bridge_error_reason(reply) == "listener_unverified", reply
        finally:
            received = impostor.stop()
        assert_got_nothing(received, desk.secret)
    finally:
        app.stop()


def test_the_example_apps_mcp_stdio_sends_its_secret_only_to_the_checked_app(desk: Desk) -> None:  # noqa: F811
    """``examples/app_server.py --mcp-stdio --secret-file``, the library path a Python app
    copies: its auth route goes over the bridge's own checked link. Another process of this
    user squats the app's socket while the app still runs (its pid and start time are
    live, the discovery file names it): the squatter is not the named pid, so it gets
    neither the secret nor anything else, and no second app is launched."""
    app = start_listening_app(
        [sys.executable, str(APP_SERVER_SCRIPT), "--link", "unix", *desk.app_args(auth="secret")],
        log_path=desk.root / "app-secret.log", scheme="http+unix", what="the example app on its Unix socket",
    )
    socket_path = Path(split_unix_url(app.url)[0])
    try:
        with desk.app_stdio() as bridge:
            processes.handshake(bridge)
            assert app_info(bridge, 1)["pid"] == app.proc.pid, "the secret's route works on the app's own socket"
        impostor = _squat(socket_path, uid=None)
        try:
            with desk.app_stdio() as bridge:
                bridge.send(initialize(0))
                reply = bridge.read_reply(0)
                assert bridge_error_reason(reply) == "listener_unverified", f"{reply}\n{bridge.stderr_tail()}"
                assert f"not by pid {app.proc.pid}" in reply["error"]["message"], reply
        finally:
            received = impostor.stop()
        assert_got_nothing(received, desk.secret)
        assert desk.launches() == [app.proc.pid], "the squatter made the bridge launch a second app"
    finally:
        app.stop()


def test_two_bridges_started_against_the_down_app_launch_it_once_on_its_socket(desk: Desk) -> None:  # noqa: F811
    """The launch lock holds over the socket: two bridges meet a down app (no socket yet)
    at once; exactly one app process is started, both initialize, both reach it."""
    args = ["--discovery-file", str(desk.discovery), "--launch", shlex.join([sys.executable, *unix_app_args(desk)]),
            "--launch-timeout", str(LAUNCH_TIMEOUT), "--launch-log", str(desk.launch_log), "--log-level", "info"]
    bridges = [desk.bridge(*args) for _ in range(2)]
    try:
        for bridge in bridges:
            bridge.send(initialize(0))
        for bridge in bridges:
            reply = bridge.read_reply(0, LAUNCH_REPLY_TIMEOUT)
            assert "result" in reply, f"{reply}\n{bridge.stderr_tail()}"
            bridge.send(INITIALIZED)
        (pid,) = desk.launches()
        assert json.loads(desk.discovery.read_text())["url"].startswith("http+unix://%2F")
        for number, bridge in enumerate(bridges, 1):
            assert app_info(bridge, number)["pid"] == pid
        for bridge in bridges:
            bridge.finish()
        starting = [line for bridge in bridges for line in bridge.stderr_text().splitlines() if "starting the app" in line.lower()]
        assert len(starting) == 1, "\n".join(line[:160] for line in starting)
        assert desk.launches() == [pid]
    finally:
        for bridge in bridges:
            bridge.__exit__(RuntimeError, None, None)  # kill if still alive, close pipes
        for launched in desk.launches():
            with contextlib.suppress(ProcessLookupError):
                os.kill(launched, 15)


def _squat(socket_path: Path, *, uid: int | None) -> Squatter:
    """An impostor takes the app's socket path (the app is gone; its discovery file stays)."""
    if uid is None:
        socket_path.unlink(missing_ok=True)
        return Squatter(unix_path=socket_path)
    own = Path(tempfile.mkdtemp(prefix="impostor-"))
    os.chown(own, uid, uid)
    impostor = Squatter(unix_path=own / "s.sock", uid=uid)
    socket_path.unlink(missing_ok=True)
    os.rename(own / "s.sock", socket_path)  # the listening socket follows its file
    own.rmdir()
    return impostor


def test_a_process_of_this_user_that_is_not_the_named_pid_gets_nothing(running: tuple[Desk, AppServer, Path]) -> None:
    here, app, socket_path = running
    token = here.note_token()
    impostor = _squat(socket_path, uid=None)  # the app still runs: its pid and start time are live
    try:
        with here.bridge("--discovery-file", str(here.discovery)) as bridge:
            bridge.send(initialize(0))
            reply = bridge.read_reply(0)
            assert bridge_error_reason(reply) == "listener_unverified", reply
            message = reply["error"]["message"]
            assert f"served by pid {impostor.proc.pid}, not by pid {app.proc.pid}" in message, message
    finally:
        received = impostor.stop()
    assert_got_nothing(received, token, here.secret)


@as_root
@pytest.mark.parametrize("owner", ["file", "peer"])
def test_another_users_socket_gets_nothing(running: tuple[Desk, AppServer, Path], owner: str) -> None:
    """``file``: the socket file is the other user's (refused before connecting); ``peer``:
    the file was made ours, the process serving it is not (refused by SO_PEERCRED)."""
    here, _app, socket_path = running
    token = here.note_token()
    impostor = _squat(socket_path, uid=OTHER_UID)
    if owner == "peer":
        os.lchown(socket_path, os.geteuid(), os.getegid())
    try:
        with here.bridge("--discovery-file", str(here.discovery)) as bridge:
            bridge.send(initialize(0))
            reply = bridge.read_reply(0)
            assert bridge_error_reason(reply) == "listener_unverified", reply
            message = reply["error"]["message"]
            expected = f"belongs to uid {OTHER_UID}" if owner == "file" else f"uid {OTHER_UID}) belongs to another user"
            assert expected in message, message
        check = subprocess.run([*processes.bridge_command(), "check", "--discovery-file", str(here.discovery)],
                               env=here.env, capture_output=True, timeout=60, cwd=REPO_ROOT)
        report = check.stdout.decode()
        # the same verdict as the bridge's, on the listener step, naming the other user
        assert check.returncode == 1 and "✗ listener    " in report and "Unix socket" in report and str(OTHER_UID) in report, report
    finally:
        received = impostor.stop()
    assert_got_nothing(received, token, here.secret)


@pytest.mark.parametrize("uid", [None, pytest.param(OTHER_UID, marks=as_root)])
def test_a_planted_symbolic_link_gets_nothing(running: tuple[Desk, AppServer, Path], tmp_path: Path, uid: int | None) -> None:
    here, _app, socket_path = running
    token = here.note_token()
    elsewhere = Path(tempfile.mkdtemp(prefix="planted-"))
    if uid is not None:
        os.chown(elsewhere, uid, uid)
    impostor = Squatter(unix_path=elsewhere / "s.sock", uid=uid)
    socket_path.unlink()
    socket_path.symlink_to(elsewhere / "s.sock")
    try:
        with here.bridge("--url", json.loads(here.discovery.read_text())["url"], "--token-env", "APP_TOKEN",
                         env=dict(here.env, APP_TOKEN=token)) as bridge:
            bridge.send(initialize(0))
            reply = bridge.read_reply(0)
            assert bridge_error_reason(reply) == "listener_unverified", reply
            assert "symbolic link" in reply["error"]["message"], reply
    finally:
        received = impostor.stop()
        socket_path.unlink()
    assert received == [], "the bridge connected through the link"
    assert_got_nothing(received, token, here.secret)


# -- a restart while the old server still shuts down ----------------------------------------

#: An AppServer on the socket path given (argv 1), no token, answering its pid, whose
#: shutdown (the app's lifespan) waits until the file argv 2 exists, at most 30 s: an app
#: that takes its time to stop, after it stopped listening.
_SLOW_STOP_APP = """
import asyncio, os, sys
from bridge.appserver import AppServer

async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        for _ in range(1500):
            if os.path.exists(sys.argv[2]):
                break
            await asyncio.sleep(0.02)
        await send({"type": "lifespan.shutdown.complete"})
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": str(os.getpid()).encode()})

def listening(server):
    print("LISTENING", server.url, flush=True)
    sys.stdout = sys.stderr

AppServer(app, link="unix", socket_path=sys.argv[1], require_token=False, on_listening=listening).run()
"""


def _refused(path: Path) -> bool:
    import socket

    probe = socket.socket(socket.AF_UNIX)
    try:
        probe.connect(str(path))
    except ConnectionRefusedError:
        return True
    except OSError:
        return False
    finally:
        probe.close()
    return False


def test_an_old_server_finishing_its_shutdown_leaves_the_new_instances_socket(tmp_path: Path) -> None:
    """Issue 41, 1: the old server stopped listening (its socket reads as stale), a new one
    replaced the socket (on ext4 it gets the old one's inode number), then the old one's
    shutdown ends: the new socket stays, and is served."""
    import httpx

    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    path, go = folder / "app.sock", tmp_path / "stop-now"
    script = tmp_path / "slow_stop_app.py"
    script.write_text(_SLOW_STOP_APP)

    def start(n: int) -> AppServer:
        command = [sys.executable, str(script), str(path), str(go)]
        return start_listening_app(command, log_path=tmp_path / f"app-{n}.log", scheme="http+unix", what="the slow-stop app")

    for restart in range(3):  # (ext4 mostly, not always, hands the new socket the old inode number)
        old = start(2 * restart)
        new: AppServer | None = None
        try:
            old.proc.terminate()  # it stops listening, then its shutdown waits for `go`
            assert processes.wait_until(lambda: _refused(path), LISTEN_TIMEOUT), "the old server kept listening"
            assert old.proc.poll() is None, "the old server is still shutting down"
            new = start(2 * restart + 1)
            go.touch()  # the old server's shutdown ends now, and it cleans up
            old.proc.wait(timeout=LISTEN_TIMEOUT)
            assert path.is_socket(), f"restart {restart}: the old server removed the new instance's socket"
            with httpx.Client(transport=httpx.HTTPTransport(uds=str(path)), timeout=10) as client:
                assert client.get("http://localhost/pid").text == str(new.proc.pid)
        finally:
            go.touch()
            old.stop()
            if new is not None:
                new.stop()
            go.unlink()
        assert not path.exists(), "the new server removed its own socket on exit"
