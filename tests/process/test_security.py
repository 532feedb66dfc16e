"""A squatter on the app's port gets no credential (issue 12), with real processes.

The app (``examples/app_server.py``, a token in its discovery file and an auth route for
its 0600 secret) runs, serves a call, and is killed, as by a crash: its discovery file
stays behind, naming a dead pid. A plain socket server then takes its port and records
every byte it receives, answering each request as the app would. The bridge must hand it
nothing: no ``Authorization`` header, no secret, no request at all. The client gets
reason ``listener_unverified`` where the bridge reached the squatter, ``app_unreachable``
where a stale file now counts as absent, and with ``--launch`` the real app is started.

Squatters of another user need a second uid: a root test run starts them under one (no
account needed); other runs skip those cases with that reason.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import apps, processes
from support.lifecycle import LAUNCH_REPLY_TIMEOUT, LAUNCH_TIMEOUT, Desk, app_info, desk  # noqa: F401 (the fixture)
from support.processes import INITIALIZED, bridge_error_reason, initialize
from support.squatter import Squatter

from bridge.app.discovery import process_start_time

pytestmark = [
    pytest.mark.process,
    pytest.mark.linux_only("the listener check is tested on Linux here"),
]
# mypy --platform reads this too: the rest of the module is Linux code.
if sys.platform != "linux":
    pytest.skip('the listener check is tested on Linux here', allow_module_level=True)
as_root = pytest.mark.skipif(os.name != "posix" or os.geteuid() != 0, reason="needs root to run the squatter as a second uid")
OTHER_UID = 54_321

@pytest.fixture
def crashed(desk: Desk) -> Iterator[tuple[Desk, int, str]]:  # noqa: F811 (the imported fixture)
    """The app ran (it served a call through a bridge, with its discovery token), then was
    killed: returns the desk, the app's old port, and its token."""
    app = desk.start_app()
    token = desk.note_token()
    with desk.bridge("--discovery-file", str(desk.discovery)) as bridge:
        processes.handshake(bridge)
        assert app_info(bridge, 1)["pid"] == app.proc.pid
    app.kill()
    assert desk.discovery.exists(), "a crashed app leaves its discovery file behind"
    yield desk, app.port, token


def assert_squatter_got_nothing(received: list[bytes], *secrets: str) -> None:
    everything = b"".join(received)
    assert b"authorization" not in everything.lower(), everything[:300]
    for secret in secrets:
        assert secret.encode() not in everything
    assert everything == b"", f"request bytes reached the squatter: {everything[:300]!r}"


def test_a_stale_discovery_file_is_absent_nothing_goes_to_its_old_port(crashed: tuple[Desk, int, str]) -> None:
    here, port, token = crashed
    squatter = Squatter(port)
    try:
        with here.bridge("--discovery-file", str(here.discovery), "--log-level", "info") as bridge:
            bridge.send(initialize(0))
            reply = bridge.read_reply(0)
            assert bridge_error_reason(reply) == "app_unreachable", reply
            assert "not running" in reply["error"]["message"] and "stale" in reply["error"]["message"]
    finally:
        received = squatter.stop()
    assert received == [], "the bridge even connected to the old port"
    assert_squatter_got_nothing(received, token, here.secret)


def test_with_launch_the_real_app_is_started_and_the_squatter_gets_nothing(crashed: tuple[Desk, int, str]) -> None:
    here, port, token = crashed
    squatter = Squatter(port)
    try:
        args = ["--discovery-file", str(here.discovery), "--launch", here.launch_command(),
                "--launch-timeout", str(LAUNCH_TIMEOUT), "--launch-log", str(here.launch_log)]
        with here.bridge(*args) as bridge:
            bridge.send(initialize(0))
            reply = bridge.read_reply(0, LAUNCH_REPLY_TIMEOUT)
            assert reply.get("result", {}).get("serverInfo", {}).get("name") == "example-app", f"{reply}\n{bridge.stderr_tail()}"
            bridge.send(INITIALIZED)
            relaunched = here.launches()[-1]
            assert app_info(bridge, 1)["pid"] == relaunched
            here.note_token()
        assert len(here.launches()) == 2, "the real app was not started again"
    finally:
        received = squatter.stop()
    assert_squatter_got_nothing(received, token, here.secret)


@pytest.mark.frozen_relevant
@pytest.mark.parametrize("source", ["discovery-token", "auth-route", "token-file"])
def test_a_listener_that_is_not_the_named_pid_gets_no_token_and_no_secret(
    crashed: tuple[Desk, int, str], tmp_path: Path, source: str
) -> None:
    """The discovery file names a live process (its pid and start time: a process that
    looks like the app's), but another process of the same user holds the port: the bridge
    connects, sees the mismatch, and writes nothing."""
    here, port, token = crashed
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    document = json.loads(here.discovery.read_text())
    document["pid"] = sleeper.pid
    document["pid_start_time"] = process_start_time(sleeper.pid)
    here.discovery.write_text(json.dumps(document))  # still 0600: written in place
    token_file = tmp_path / "token"
    token_file.write_text(token)
    token_file.chmod(0o600)
    args = {
        "discovery-token": [],
        "auth-route": ["--auth-url", "/auth/token", "--secret-file", str(here.secret_file)],
        "token-file": ["--token-file", str(token_file)],
    }[source]
    squatter = Squatter(port)
    try:
        with here.bridge("--discovery-file", str(here.discovery), *args) as bridge:
            bridge.send(initialize(0))
            reply = bridge.read_reply(0)
            assert bridge_error_reason(reply) == "listener_unverified", reply
            message = reply["error"]["message"]
            assert f"not by pid {sleeper.pid}" in message and f"held by pid {squatter.proc.pid}" in message, message
            assert token not in message and here.secret not in message
    finally:
        received = squatter.stop()
        sleeper.kill()
        sleeper.wait()
    assert_squatter_got_nothing(received, token, here.secret)


@as_root
@pytest.mark.parametrize("source", ["token-env", "auth-route"])
def test_another_users_squatter_on_a_fixed_url_gets_nothing_and_check_says_whose_it_is(
    crashed: tuple[Desk, int, str], source: str
) -> None:
    here, port, token = crashed
    env = dict(here.env, APP_TOKEN=token)
    args = ["--url", f"http://127.0.0.1:{port}/mcp"]
    args += ["--token-env", "APP_TOKEN"] if source == "token-env" else ["--auth-url", "/auth/token", "--secret-file", str(here.secret_file)]
    squatter = Squatter(port, uid=OTHER_UID)
    try:
        with here.bridge(*args, env=env) as bridge:
            bridge.send(initialize(0))
            reply = bridge.read_reply(0)
            assert bridge_error_reason(reply) == "listener_unverified", reply
            assert f"belongs to uid {OTHER_UID}" in reply["error"]["message"], reply
        check = subprocess.run(
            [*processes.bridge_command(), "check", *args], env=env, capture_output=True, timeout=60, cwd=apps.REPO_ROOT
        )
        report = check.stdout.decode()
        assert check.returncode == 1 and "✗ listener" in report and f"uid {OTHER_UID}" in report, report
        assert token not in report + check.stderr.decode()
    finally:
        received = squatter.stop()
    everything = b"".join(received)
    assert b"authorization" not in everything.lower() and token.encode() not in everything
    assert here.secret.encode() not in everything and everything == b""


def test_no_verify_listener_is_the_documented_way_out(crashed: tuple[Desk, int, str]) -> None:
    """With the check off the bridge talks to whatever listens (a container's forwarded
    port looks the same): the squatter's answer reaches the client. The test proves the
    option works, and so that the check above is what kept the token back."""
    here, port, token = crashed
    squatter = Squatter(port)
    try:
        with here.bridge("--url", f"http://127.0.0.1:{port}/mcp", "--no-verify-listener") as bridge:
            bridge.send(initialize(0))
            reply = bridge.read_reply(0)
            assert reply.get("result", {}).get("serverInfo", {}).get("name") == "squatter", reply
    finally:
        received = squatter.stop()
    assert received and received[0].startswith(b"POST /mcp")


@pytest.mark.frozen_relevant
def test_the_launched_app_gets_no_bridge_credential_in_its_environment(tmp_path: Path) -> None:
    """The app outlives the bridge (detached, on purpose); the ``--token-env`` variable and
    the bridge's own ``MCP_APP_BRIDGE_*`` variables stay behind."""
    dump = tmp_path / "launched-env.json"
    program = f"import json, os, sys; open({str(dump)!r}, 'w').write(json.dumps(dict(os.environ))); sys.exit(3)"
    env = dict(processes.base_env(), APP_TOKEN="tok-launch-0123456789", MCP_APP_BRIDGE_SOMETHING="1", KEEP_ME="yes")
    port = processes.free_port()
    with processes.BridgeProcess(
        "--url", f"http://127.0.0.1:{port}/mcp", "--token-env", "APP_TOKEN", "--launch", shlex.join([sys.executable, "-c", program]),
        env=env,
    ) as bridge:
        bridge.send(initialize(0))
        assert bridge_error_reason(bridge.read_reply(0, LAUNCH_REPLY_TIMEOUT)) == "app_launch_failed"
    launched = json.loads(dump.read_text())
    assert "APP_TOKEN" not in launched and "MCP_APP_BRIDGE_SOMETHING" not in launched
    assert launched["KEEP_ME"] == "yes"


#: Loaded by the bridge's Python (``PYTHONPATH``): ``localhost`` resolves to ``::1`` first,
#: then ``127.0.0.1``, as on a machine whose hosts file lists both (Ubuntu, macOS). This
#: test machine may list 127.0.0.1 only; the bridge resolves through ``socket.getaddrinfo``
#: either way (asyncio, anyio and httpx's anyio backend all end there).
_LOCALHOST_BOTH = textwrap.dedent(
    """
    import socket
    _real = socket.getaddrinfo
    def getaddrinfo(host, port, family=0, type=0, proto=0, flags=0):
        if host in ("localhost", b"localhost") and family in (0, socket.AF_UNSPEC):
            return _real("::1", port, socket.AF_INET6, type, proto, flags) + _real("127.0.0.1", port, socket.AF_INET, type, proto, flags)
        return _real(host, port, family, type, proto, flags)
    socket.getaddrinfo = getaddrinfo
    """
)


@as_root
@pytest.mark.skipif(bool(os.environ.get(processes.BRIDGE_EXE_VAR)), reason="resolution is set through the bridge's Python")
@pytest.mark.parametrize("source", ["auth-route", "token-env"])
def test_localhost_another_users_listener_on_ipv6_gets_nothing_and_requests_reach_the_app_on_ipv4(
    desk: Desk, tmp_path: Path, source: str  # noqa: F811 (the imported fixture)
) -> None:
    """``--url http://localhost:PORT``: the app listens on 127.0.0.1 only, another user on
    [::1] of the same port, and ``localhost`` resolves to ::1 first. Every connection (the
    MCP pool's and the auth route's) is verified on the socket the bytes then go on: ::1
    is skipped, never written to, and the requests are served by the app over 127.0.0.1."""
    app = desk.start_app(auth="secret" if source == "auth-route" else "discovery")
    token = desk.note_token()
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_LOCALHOST_BOTH)
    env = dict(desk.env, PYTHONPATH=os.pathsep.join(filter(None, [str(site), desk.env.get("PYTHONPATH")])), APP_TOKEN=token)
    args = ["--url", f"http://localhost:{app.port}/mcp"]
    args += (["--auth-url", "/auth/token", "--secret-file", str(desk.secret_file)] if source == "auth-route"
             else ["--token-env", "APP_TOKEN"])
    squatter = Squatter(app.port, uid=OTHER_UID, host="::1")
    try:
        for _start in range(2):  # a second bridge start: nothing left to chance
            with desk.bridge(*args, "--log-level", "info", env=env) as bridge:
                processes.handshake(bridge)
                for request_id in (1, 2):
                    assert app_info(bridge, request_id)["pid"] == app.proc.pid
                log = bridge.stderr_tail()
            assert "skipped ::1" in log, log
        check = subprocess.run(
            [*processes.bridge_command(), "check", *args], env=env, capture_output=True, timeout=60, cwd=apps.REPO_ROOT
        )
        report = check.stdout.decode()
        assert check.returncode == 0 and "at 127.0.0.1; skipped ::1" in report, report + check.stderr.decode()
    finally:
        received = squatter.stop()
    assert_squatter_got_nothing(received, token, desk.secret)


@pytest.mark.parametrize("written_by", ["start-time-recorded", "older-writer"])
def test_a_reused_pid_counts_as_absent_the_app_is_launched_and_the_messages_say_so(
    crashed: tuple[Desk, int, str], written_by: str
) -> None:
    """The app crashed and its pid now belongs to an unrelated live process. The discovery
    file is stale: without ``--launch`` the request says so (not "started"), and with it the
    real app is started at once, not after waiting out the launch timeout for a stranger.
    ``older-writer``: a file without ``pid_start_time``, written before that process started."""
    here, _port, token = crashed
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        document = json.loads(here.discovery.read_text())
        assert document["pid_start_time"] > 0, "the app's writer records its start time"
        # The app ran for a minute before it crashed (here it started a moment before the
        # stranger, closer than the comparison's tolerance).
        document["pid_start_time"] -= 60
        document["pid"] = stranger.pid
        if written_by == "older-writer":
            del document["pid_start_time"]
        here.discovery.write_text(json.dumps(document))  # still 0600: written in place
        if written_by == "older-writer":
            before = time.time() - 60
            os.utime(here.discovery, (before, before))
        args = ["--discovery-file", str(here.discovery), "--launch", here.launch_command(),
                "--launch-timeout", str(LAUNCH_TIMEOUT), "--launch-log", str(here.launch_log)]
        with here.bridge(*args) as bridge:
            bridge.send(initialize(0))
            reply = bridge.read_reply(0, LAUNCH_REPLY_TIMEOUT)
            assert reply.get("result", {}).get("serverInfo", {}).get("name") == "example-app", f"{reply}\n{bridge.stderr_tail()}"
            bridge.send(INITIALIZED)
            assert app_info(bridge, 1)["pid"] == here.launches()[-1]
            assert "is starting; waiting" not in bridge.stderr_tail()
            here.note_token()
        assert len(here.launches()) == 2, "the real app was not started again"
        # Down again, and the file names the stranger once more: without --launch, the
        # request says what happened (and nothing about a start).
        os.kill(here.launches()[-1], signal.SIGKILL)
        document["pid"] = stranger.pid
        here.discovery.write_text(json.dumps(document))
        if written_by == "older-writer":
            os.utime(here.discovery, (before, before))
        with here.bridge("--discovery-file", str(here.discovery)) as bridge:
            bridge.send(initialize(0))
            reply = bridge.read_reply(0)
            assert bridge_error_reason(reply) == "app_unreachable", reply
            message = reply["error"]["message"]
            assert f"pid {stranger.pid}, which now belongs to another process" in message, message
    finally:
        stranger.kill()
        stranger.wait()


@as_root
@pytest.mark.skipif(bool(os.environ.get(processes.BRIDGE_EXE_VAR)), reason="resolution is set through the bridge's Python")
def test_localhost_another_users_listener_on_ipv6_does_not_keep_the_app_from_being_launched(
    desk: Desk, tmp_path: Path  # noqa: F811 (the imported fixture)
) -> None:
    """The app is down; another user listens on [::1]:PORT; ``localhost`` resolves to ::1
    first. ``--launch`` still starts the app (on 127.0.0.1:PORT), whose listener alone counts
    as "the app is up", and the request, secret included, goes to it; ::1 gets nothing."""
    from support.apps import APP_SERVER_SCRIPT

    port = processes.free_port()
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_LOCALHOST_BOTH)
    env = dict(desk.env, PYTHONPATH=os.pathsep.join(filter(None, [str(site), desk.env.get("PYTHONPATH")])))
    launch = shlex.join([sys.executable, str(APP_SERVER_SCRIPT), "--host", "127.0.0.1", "--port", str(port),
                         *desk.app_args(auth="secret")])
    args = ["--url", f"http://localhost:{port}/mcp", "--auth-url", "/auth/token", "--secret-file", str(desk.secret_file),
            "--launch", launch, "--launch-timeout", str(LAUNCH_TIMEOUT), "--launch-log", str(desk.launch_log)]
    squatter = Squatter(port, uid=OTHER_UID, host="::1")
    try:
        with desk.bridge(*args, env=env) as bridge:
            bridge.send(initialize(0))
            reply = bridge.read_reply(0, LAUNCH_REPLY_TIMEOUT)
            assert reply.get("result", {}).get("serverInfo", {}).get("name") == "example-app", f"{reply}\n{bridge.stderr_tail()}"
            bridge.send(INITIALIZED)
            assert app_info(bridge, 1)["pid"] == desk.launches()[-1]
            desk.note_token()
        assert len(desk.launches()) == 1
    finally:
        received = squatter.stop()
    assert_squatter_got_nothing(received, desk.secret)
