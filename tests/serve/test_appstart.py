"""The running-app start (bridge/serve/appstart.py): a client's first ``initialize`` answered
by the running app before the serving loop exists, its reply the loop's byte for byte, its
MCP session adopted by the loop; and every failure left to the loop, with nothing written."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from support.helpers import NOTIF_INIT, FakeStdin, FakeStdout, init, request_line, running_bridge
from support.scripted import WAIT, ScriptedServer, closed_port, serve, wire_app
from support.squatter import Squatter

from bridge.app.discovery import write_discovery_file
from bridge.core.config import BridgeConfig
from bridge.core.unixurl import split_unix_url, unix_url
from bridge.serve import appstart
from bridge.serve.appstart import AppStart, answer_start_from_app
from bridge.serve.loop import Bridge

pytestmark = [pytest.mark.anyio, pytest.mark.posix_only("the start waits on stdin with select")]

RESULT = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {"listChanged": True}}, "serverInfo": {"name": "t", "version": "1"}}


def _reply(message: dict[str, Any], mode: str, session: str | None = "s-1") -> httpx.Response:
    headers = {"mcp-session-id": session} if session else {}
    if mode == "json":
        # Members spaced and ordered as the app chose: the loop writes them as they came.
        return httpx.Response(200, content=json.dumps(message, indent=1).encode(), headers={**headers, "content-type": "application/json"})
    body = f": primed\n\nid: 1\nevent: message\ndata: {json.dumps(message)}\n\n".encode()
    return httpx.Response(200, content=body, headers={**headers, "content-type": "text/event-stream"})


class CountingApp:
    """A legacy app that counts the ``initialize`` requests and MCP sessions it sees."""

    def __init__(self, mode: str, refuse: Callable[[httpx.Request], httpx.Response | None] | None = None) -> None:
        self.mode = mode
        self.refuse = refuse
        self.initializes: list[httpx.Request] = []
        self.posts: list[httpx.Request] = []

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method != "POST":
            return httpx.Response(405)
        self.posts.append(request)
        message = json.loads(request.content)
        if message.get("method") == "initialize":
            self.initializes.append(request)
            refusal = self.refuse(request) if self.refuse is not None else None
            if refusal is not None:
                return refusal
            return _reply({"jsonrpc": "2.0", "id": message["id"], "result": RESULT}, self.mode, f"s-{len(self.initializes)}")
        if "id" not in message:
            return httpx.Response(202)
        return _reply({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": []}}, self.mode, None)


async def _start(config: BridgeConfig, data: bytes) -> tuple[AppStart | None, bytes]:
    """Run the start on pipes (in a thread: the app is on this event loop); return it and
    what it wrote to stdout."""
    read_fd, feed_fd = os.pipe()
    out_fd, write_fd = os.pipe()
    os.write(feed_fd, data)
    try:
        start = await asyncio.to_thread(answer_start_from_app, config, read_fd=read_fd, write_fd=write_fd)
    finally:
        os.close(write_fd)
        os.close(feed_fd)
        os.close(read_fd)
    with os.fdopen(out_fd, "rb") as out:
        return start, out.read()


async def _loop_after(config: BridgeConfig, start: AppStart | None, lines: bytes, count: int) -> list[bytes]:
    """The serving loop after the start: ``lines`` fed, the first ``count`` stdout lines."""
    stdin, stdout = FakeStdin(), FakeStdout()
    bridge = Bridge(config, stdin=stdin, stdout=stdout, catalog_start=start)
    async with anyio.create_task_group() as tg:
        tg.start_soon(bridge.run)
        stdin.feed(lines)
        await stdout.wait_for(count, timeout_seconds=WAIT)
        bridge.stop("test over")
    return stdout.lines


@pytest.mark.parametrize("mode", ["json", "sse"])
async def test_the_reply_is_the_loops_and_the_loop_adopts_the_session(mode: str) -> None:
    app = CountingApp(mode)
    async with serve(wire_app(app, base_url="http://127.0.0.1")) as server:
        config = BridgeConfig(url=server.url())
        start, written = await _start(config, init(0))
        assert start is not None and start.answered == [init(0)[:-1]], start
        lines = await _loop_after(config, start, NOTIF_INIT + request_line(1, "tools/list"), 1)
        assert [json.loads(line)["id"] for line in lines] == [1]  # the initialize reply is not written again
        assert len(app.initializes) == 1  # one initialize, one MCP session
        later = app.posts[1:]
        assert [json.loads(p.content).get("method") for p in later] == ["notifications/initialized", "tools/list"]
        assert all(p.headers.get("mcp-session-id") == "s-1" and p.headers.get("mcp-protocol-version") == "2025-06-18" for p in later)
    loop_app = CountingApp(mode)
    async with running_bridge(loop_app, wire="pool") as h:  # the serving loop alone
        h.stdin.feed(init(0))
        await h.stdout.wait_for(1, timeout_seconds=WAIT)
        assert h.stdout.lines[0] == written
    # The same request as the loop's, header for header
    started, alone = app.initializes[0], loop_app.initializes[0]
    assert started.content == alone.content == init(0)[:-1]
    assert [(k, v) for k, v in started.headers.items() if k != "host"] == [(k, v) for k, v in alone.headers.items() if k != "host"]


async def test_the_trace_says_the_app_answered_the_adopted_initialize(caplog: pytest.LogCaptureFixture) -> None:
    """The reply the running-app start wrote is the app's, and the trace (``bridge.trace``,
    debug) says so, not "the catalog" as for a catalog start's reply."""
    app = CountingApp("json")
    async with serve(wire_app(app, base_url="http://127.0.0.1")) as server:
        config = BridgeConfig(url=server.url())
        start, _ = await _start(config, init(0))
        assert start is not None and start.answered
        with caplog.at_level(logging.DEBUG, logger="bridge.trace"):
            await _loop_after(config, start, NOTIF_INIT + request_line(1, "tools/list"), 1)
    traced = [record.getMessage() for record in caplog.records if record.name == "bridge.trace" and "reply to initialize" in record.getMessage()]
    assert len(traced) == 1 and traced[0].endswith("answered by the app"), traced


async def test_a_session_rebuild_replays_the_adopted_initialize() -> None:
    """The driver keeps the adopted ``initialize`` for a rebuild, as one it sent itself."""
    forgot = {"done": False}

    app = CountingApp("json")

    async def handler(request: httpx.Request) -> httpx.Response:
        message = json.loads(request.content) if request.method == "POST" else {}
        if message.get("method") == "tools/list" and not forgot["done"]:
            forgot["done"] = True
            return httpx.Response(404)  # the app restarted: it no longer knows the session
        return await app(request)

    async with serve(wire_app(handler, base_url="http://127.0.0.1")) as server:
        config = BridgeConfig(url=server.url())
        start, _ = await _start(config, init(0))
        lines = await _loop_after(config, start, NOTIF_INIT + request_line(1, "tools/list"), 2)
        # The adopted capabilities say the tools may change: the client is told after the rebuild.
        assert [json.loads(line).get("id", json.loads(line).get("method")) for line in lines] == ["notifications/tools/list_changed", 1]
        assert len(app.initializes) == 2 and json.loads(app.initializes[1].content)["params"] == json.loads(init(0))["params"]


async def test_with_lazy_launch_the_adopted_initialize_is_kept_in_the_catalog() -> None:
    """A launch command configured and the app running: the catalog start does not apply
    (the app is not down), this one does, and lazy launch keeps the adopted reply in the
    catalog as one it forwarded (bridge/serve/lazy.py)."""
    from bridge.app.servedcatalog import ServedCatalog

    def never_started() -> None:
        raise AssertionError("the app runs: nothing may start it")

    app = CountingApp("sse")
    async with serve(wire_app(app, base_url="http://127.0.0.1")) as server:
        config = BridgeConfig(url=server.url(), ensure_running=never_started)
        start, written = await _start(config, init(0))
        assert start is not None and start.answered and written
        lines = await _loop_after(config, start, NOTIF_INIT + request_line(1, "tools/list"), 1)
        assert [json.loads(line)["id"] for line in lines] == [1] and len(app.initializes) == 1
        entry = ServedCatalog(config.app_name, server.url()).entry()
    assert entry is not None and entry["initialize"]["serverInfo"] == RESULT["serverInfo"], entry


@pytest.mark.parametrize(
    "refusal",
    [
        pytest.param(lambda r: httpx.Response(401), id="401"),
        pytest.param(lambda r: httpx.Response(500), id="500"),
        pytest.param(lambda r: httpx.Response(202), id="202"),
        pytest.param(
            lambda r: httpx.Response(400, json={"jsonrpc": "2.0", "id": 0, "error": {"code": -32022, "message": "2026-07-28 only"}}),
            id="2026-only-400",
        ),
        pytest.param(
            lambda r: _reply({"jsonrpc": "2.0", "id": 0, "error": {"code": -32022, "message": "2026-07-28 only"}}, "json"),
            id="2026-only-error",
        ),
        pytest.param(
            lambda r: _reply({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}}, "sse"),
            id="a-message-first",
        ),
    ],
)
async def test_a_refusal_writes_nothing_and_leaves_the_line_to_the_loop(refusal: Callable[[httpx.Request], httpx.Response]) -> None:
    calls = {"n": 0}

    def once(request: httpx.Request) -> httpx.Response | None:
        calls["n"] += 1
        return refusal(request) if calls["n"] == 1 else None

    app = CountingApp("json", once)
    async with serve(wire_app(app, base_url="http://127.0.0.1")) as server:
        config = BridgeConfig(url=server.url())
        start, written = await _start(config, init(0) + NOTIF_INIT)
        assert written == b""
        assert start is not None and start.answered == [] and start.rest == init(0) + NOTIF_INIT
        lines = await _loop_after(config, start, b"", 1)
        assert json.loads(lines[0]) == {"jsonrpc": "2.0", "id": 0, "result": RESULT}  # the loop sent it again
        assert len(app.initializes) == 2


async def test_a_401_goes_to_the_loop_and_its_token_refresh_works(tmp_path: Path) -> None:
    discovery = tmp_path / "app" / "mcp-endpoint.json"
    seen: list[str | None] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.headers.get("authorization") != "Bearer new-token":
            seen.append(request.headers.get("authorization"))
            if len(seen) == 2:  # the loop's try: the app has a new token by then
                write_discovery_file(discovery, url=url, pid=os.getpid(), token="new-token")
            return httpx.Response(401)
        return await CountingApp("json")(request)

    async with serve(wire_app(handler, base_url="http://127.0.0.1")) as server:
        url = server.url()
        write_discovery_file(discovery, url=url, pid=os.getpid(), token="old-token")
        config = BridgeConfig(discovery_file=discovery)
        start, written = await _start(config, init(0))
        assert written == b"" and start is not None and start.answered == []
        lines = await _loop_after(config, start, b"", 1)
        assert "result" in json.loads(lines[0]), lines
    assert seen == ["Bearer old-token", "Bearer old-token"]  # the start's, then the loop's first try: then refreshed


async def test_a_slow_app_is_given_up_within_the_bound_and_left_to_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(appstart, "APP_START_BOUND_SECONDS", 0.2)
    app = CountingApp("sse")

    async def handler(request: httpx.Request) -> httpx.Response:
        if len(app.initializes) == 0 and request.method == "POST":
            await anyio.sleep(1.0)  # past the start's bound, within the loop's
        return await app(request)

    async with serve(wire_app(handler, base_url="http://127.0.0.1")) as server:
        config = BridgeConfig(url=server.url())
        start, written = await _start(config, init(0))
        assert written == b"" and start is not None and start.answered == []
        lines = await _loop_after(config, start, b"", 1)
        assert "result" in json.loads(lines[0])


@pytest.mark.process
@pytest.mark.linux_only("the listener check's pid test, as the security tests run it")
async def test_a_squatter_gets_no_token_and_the_loop_answers(tmp_path: Path) -> None:
    """Another process on the app's port (the discovery file names the app's, which holds
    no socket): the listener check refuses it before a byte is written, the start writes
    nothing, and the loop answers ``listener_unverified`` as without the start."""
    import subprocess

    port = closed_port()
    squatter = Squatter(port)
    the_app = subprocess.Popen(["sleep", "60"])
    try:
        discovery = tmp_path / "app" / "mcp-endpoint.json"
        write_discovery_file(discovery, url=f"http://127.0.0.1:{port}/mcp", pid=the_app.pid, token="secret-token")
        config = BridgeConfig(discovery_file=discovery)
        start, written = await _start(config, init(0))
        assert written == b"" and start is not None and start.answered == []
        lines = await _loop_after(config, start, b"", 1)
        reply = json.loads(lines[0])
        assert reply["error"]["data"]["reason"] == "listener_unverified", reply
    finally:
        the_app.kill()
        the_app.wait()
        received = squatter.stop()
    assert b"".join(received) == b"", received


@pytest.mark.parametrize(
    "options",
    [
        {"protocol_era": "legacy"},
        {"protocol_era": "modern"},
        {"read_only": True},
        {"allow_tools": ("a",)},
        {"token_source": lambda base_url: "t"},
    ],
    ids=lambda o: next(iter(o)),
)
async def test_where_it_does_not_apply_it_reads_nothing(options: dict[str, Any]) -> None:
    start, written = await _start(BridgeConfig(url="http://127.0.0.1:9/mcp", **options), init(0))
    assert start is None and written == b""


@pytest.mark.parametrize("first", [request_line(0, "ping"), NOTIF_INIT, b"not json\n"])
async def test_a_first_line_other_than_initialize_goes_to_the_loop_unread(first: bytes) -> None:
    start, written = await _start(BridgeConfig(url="http://127.0.0.1:9/mcp"), first)
    assert start is not None and start.answered == [] and start.rest == first and written == b""


@pytest.mark.process
@pytest.mark.parametrize("replies", ["sse", "json"])
async def test_the_example_apps_reply_is_the_loops_byte_for_byte(replies: str, app_server: Any, start_app_server: Any) -> None:
    """``mcp-app-bridge --url URL`` (its first reply from the running-app start) against the
    serving loop alone, on the running example app (SSE or JSON replies)."""
    import subprocess
    import sys

    app = app_server if replies == "sse" else start_app_server("--json-response")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    done = subprocess.run(
        [sys.executable, "-m", "bridge", "--url", app.url, "--log-level", "debug"], input=init(0), capture_output=True, timeout=60, env=env
    )
    async with running_bridge(url=app.url) as h:
        h.stdin.feed(init(0))
        await h.stdout.wait_for(1, timeout_seconds=WAIT)
    assert done.stdout == h.stdout.lines[0], done.stderr.decode()[-2000:]
    assert b"MCP session" in done.stderr  # the loop adopted it (mcpsession.py logs it)


# -- over a Unix socket (http+unix://): the loop's checks, in its order, before a byte -------------


@pytest.fixture
def run_folder(tmp_path: Path) -> Path:
    """A folder only this user may write to, as the app's runtime folder is."""
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    return folder


async def _loop_alone(config: BridgeConfig, lines: bytes, count: int) -> list[bytes]:
    """The serving loop with no early start: the first ``count`` stdout lines."""
    return await _loop_after(config, None, lines, count)


@pytest.mark.parametrize("mode", ["json", "sse"])
async def test_over_a_unix_socket_the_reply_is_the_loops_and_the_loop_adopts_the_session(mode: str, run_folder: Path) -> None:
    """``http+unix://`` (the example app's default link on Linux and macOS): the start answers
    the ``initialize`` there too, byte for byte as the loop alone, one ``initialize`` at the app."""
    app = CountingApp(mode)
    async with serve(wire_app(app, base_url="http://localhost"), unix_path=run_folder / "app.sock") as server:
        config = BridgeConfig(url=server.url())
        start, written = await _start(config, init(0))
        assert start is not None and start.answered == [init(0)[:-1]] and written, start
        lines = await _loop_after(config, start, NOTIF_INIT + request_line(1, "tools/list"), 1)
        assert [json.loads(line)["id"] for line in lines] == [1] and len(app.initializes) == 1
        assert all(p.headers.get("mcp-session-id") == "s-1" for p in app.posts[1:])
    loop_app = CountingApp(mode)
    async with serve(wire_app(loop_app, base_url="http://localhost"), unix_path=run_folder / "alone.sock") as server:
        alone = await _loop_alone(BridgeConfig(url=server.url()), init(0), 1)
    assert alone == [written]
    started, by_loop = app.initializes[0], loop_app.initializes[0]
    assert started.content == by_loop.content == init(0)[:-1]
    assert list(started.headers.items()) == list(by_loop.headers.items())  # Host: localhost on both


def _refused_start(how: str, folder: Path, socket_path: Path) -> Path:
    """Make the link ``how`` says; return the socket path the bridge is given."""
    if how == "folder-writable-by-group":
        folder.chmod(0o770)
        return socket_path
    if how == "folder-writable-by-others":
        folder.chmod(0o702)
        return socket_path
    link = folder / "link.sock"
    link.symlink_to(socket_path)
    return link


@pytest.mark.parametrize("how", ["folder-writable-by-group", "folder-writable-by-others", "symlink"])
async def test_over_a_unix_socket_a_refused_socket_file_gets_nothing_and_the_loop_says_so(how: str, run_folder: Path) -> None:
    """The socket-file check (bridge/transport/socketfile.py), before connecting: a socket in a
    folder others may write to, or a symbolic link to it, is refused; the start writes
    nothing, the app gets no byte, and the loop's refusal is the one it writes alone.
    (On the same socket checked fine, the start answers: that part fails on the old code.)"""
    app = CountingApp("json")
    async with serve(wire_app(app, base_url="http://localhost"), unix_path=run_folder / "app.sock") as server:
        start, written = await _start(BridgeConfig(url=server.url()), init(0))
        assert start is not None and start.answered and written  # the control: a safe link
        sent = len(server.raw_requests)
        config = BridgeConfig(url=unix_url(_refused_start(how, run_folder, run_folder / "app.sock")))
        start, written = await _start(config, init(0))
        assert written == b"" and start is not None and start.answered == [] and start.rest == init(0)
        after_start = await _loop_after(config, start, b"", 1)
        alone = await _loop_alone(config, init(0), 1)
        assert len(server.raw_requests) == sent and server.connections == 1  # refused before connecting
        run_folder.chmod(0o700)
    assert after_start == alone
    reply = json.loads(after_start[0])
    assert reply["error"]["data"]["reason"] == "listener_unverified", reply
    assert f"the app's Unix socket {config_socket(config)} is refused" in reply["error"]["message"], reply


def config_socket(config: BridgeConfig) -> str:
    assert config.url is not None
    return split_unix_url(config.url)[0]


@pytest.mark.process
async def test_over_a_unix_socket_a_peer_not_the_discovery_files_pid_gets_no_byte(tmp_path: Path, run_folder: Path) -> None:
    """A process listening on the app's socket path whose pid is not the one the discovery
    file names (a squatter): the peer check (bridge/app/unixpeer.py) on the connected socket
    refuses it before a byte is written; the loop answers ``listener_unverified`` as alone.
    (With the discovery file naming the listener, the start answers: that part fails on the
    old code.)"""
    import subprocess

    app = CountingApp("sse")
    discovery = tmp_path / "app" / "mcp-endpoint.json"
    the_app = subprocess.Popen(["sleep", "60"])
    try:
        async with serve(wire_app(app, base_url="http://localhost"), unix_path=run_folder / "app.sock") as server:
            write_discovery_file(discovery, url=server.url(), pid=os.getpid(), token="secret-token")
            config = BridgeConfig(discovery_file=discovery)
            start, written = await _start(config, init(0))
            assert start is not None and start.answered and written  # the control: the listener is the named pid
            sent = len(server.raw_requests)
            write_discovery_file(discovery, url=server.url(), pid=the_app.pid, token="secret-token")
            start, written = await _start(config, init(0))
            assert written == b"" and start is not None and start.answered == []
            lines = await _loop_after(config, start, b"", 1)
            assert server.connections == 3 and len(server.raw_requests) == sent  # connected, checked, nothing sent
            assert all(bytes(received) == b"" for received in server.received[1:])
    finally:
        the_app.kill()
        the_app.wait()
    reply = json.loads(lines[0])
    assert reply["error"]["data"]["reason"] == "listener_unverified", reply
    assert f"not by pid {the_app.pid}" in reply["error"]["message"], reply


async def test_over_a_unix_socket_a_stale_socket_is_left_to_the_loop_which_launches(run_folder: Path) -> None:
    """A socket file nobody listens on (a dead run's): the connect is refused, the start
    writes nothing, and the loop launches the app as it always did; the next bridge's start
    answers from the launched app (that part fails on the old code)."""
    path = run_folder / "app.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # type: ignore[attr-defined,unused-ignore]  # POSIX only
    stale.bind(str(path))
    stale.close()  # the file stays; nobody listens
    app = CountingApp("json")
    server = ScriptedServer(wire_app(app, base_url="http://localhost"), unix_path=path)
    launches: list[str] = []

    async def launch() -> None:
        launches.append("launched")
        path.unlink()
        await server.start()

    try:
        config = BridgeConfig(url=server.url(), ensure_running=launch)
        start, written = await _start(config, init(0))
        assert written == b"" and start is not None and start.answered == [] and launches == []
        lines = await _loop_after(config, start, b"", 1)
        assert json.loads(lines[0]) == {"jsonrpc": "2.0", "id": 0, "result": RESULT} and launches == ["launched"]
        start, written = await _start(BridgeConfig(url=server.url()), init(0))
        assert start is not None and start.answered and written
    finally:
        await server.stop()


@pytest.mark.parametrize("how", ["folder-writable-by-group", "symlink"])
async def test_over_a_unix_socket_no_verify_listener_answers_without_the_checks(how: str, run_folder: Path) -> None:
    """``--no-verify-listener`` turns the socket-file and peer checks off, for the start as
    for the loop: the start answers where the checks would refuse."""
    app = CountingApp("json")
    async with serve(wire_app(app, base_url="http://localhost"), unix_path=run_folder / "app.sock"):
        config = BridgeConfig(url=unix_url(_refused_start(how, run_folder, run_folder / "app.sock")), verify_listener=False)
        start, written = await _start(config, init(0))
        run_folder.chmod(0o700)
    assert start is not None and start.answered == [init(0)[:-1]] and json.loads(written)["result"] == RESULT
    assert len(app.initializes) == 1


@pytest.mark.process
@pytest.mark.parametrize("replies", ["sse", "json"])
async def test_the_example_apps_reply_over_its_unix_socket_is_the_loops_byte_for_byte(replies: str, tmp_path: Path) -> None:
    """``mcp-app-bridge --discovery-file FILE`` on the example app on its Unix socket (its
    default link on Linux and macOS, the token in the discovery file): the start's reply
    against the serving loop's alone, and the loop adopted the MCP session."""
    import subprocess
    import sys

    from support.apps import APP_SERVER_SCRIPT, start_listening_app

    discovery = tmp_path / "app" / "mcp-endpoint.json"
    command = [sys.executable, str(APP_SERVER_SCRIPT), "--link", "unix", "--discovery-file", str(discovery)]
    command += ["--secret-file", str(tmp_path / "secret"), "--token-in-discovery", *(["--json-response"] if replies == "json" else [])]
    app = start_listening_app(command, log_path=tmp_path / "app.log", scheme="http+unix", what="the example app on its Unix socket")
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        done = subprocess.run(
            [sys.executable, "-m", "bridge", "--discovery-file", str(discovery), "--log-level", "debug"],
            input=init(0), capture_output=True, timeout=60, env=env,
        )
        async with running_bridge(discovery_file=discovery) as h:
            h.stdin.feed(init(0))
            await h.stdout.wait_for(1, timeout_seconds=WAIT)
    finally:
        app.stop()
    assert done.stdout == h.stdout.lines[0], done.stderr.decode()[-2000:]
    assert b"the running-app start left" not in done.stderr and b"MCP session" in done.stderr
