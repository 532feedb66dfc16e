"""The server half for Python apps (``bridge/appserver/server.py``, issue 14 item 5).

In process: the token middleware and the auth route as ASGI (through httpx's ASGI
transport, and the bridge's own auth-route client against it), and the credential files.
As processes: the 20-line app exactly as the docs print it (docs/python-apps.md), reached by
``mcp-app-bridge --app-name`` and started by its own ``--mcp-stdio``; a discovery file
that appears only once the server answers and is gone after SIGTERM or Ctrl-C; the
bridge's start-up never importing the module or uvicorn.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any
from unittest import mock

import httpx
import pytest
from support import processes
from support.apps import REPO_ROOT, process_alive
from support.processes import INITIALIZED, BridgeProcess, handshake, initialize, wait_until
from support.pythonapp import START_TIMEOUT, docs_block, greet_through
from support.pythonapp import AppDesk as Desk

from bridge.app.tokens import AuthRouteTokenSource, TokenContext
from bridge.appserver import AppServer, TokenAuthMiddleware, UnsafeFileError, load_or_create_secret
from bridge.core.unixurl import UNIX_HOST, is_unix_url, split_unix_url

TOKEN = "tok-Aa0_appserver-test-token"
SECRET = "sec-Zz9_appserver-test-secret"
"""Seconds an app may take to start and publish itself (it imports the SDK; CI is slow)."""




# -- the middleware, in process ---------------------------------------------------------------


class Inner:
    """The protected app: answers 200 and counts the requests that reached it."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.calls.append(scope["type"])
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"inner"})


def client_for(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8765")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("headers", "challenge"),
    [
        ({}, "Bearer"),
        ({"Authorization": f"Bearer {TOKEN}x"}, 'Bearer error="invalid_token"'),
        ({"Authorization": f"Bearer {TOKEN[:-1]}"}, 'Bearer error="invalid_token"'),
        ({"Authorization": f"Basic {TOKEN}"}, "Bearer"),
        ({"Authorization": TOKEN}, "Bearer"),
        ({"Authorization": "Bearer"}, 'Bearer error="invalid_token"'),
    ],
)
async def test_a_request_without_the_right_bearer_token_gets_401_and_never_reaches_the_app(
    headers: dict[str, str], challenge: str
) -> None:
    inner = Inner()
    async with client_for(TokenAuthMiddleware(inner, token=TOKEN)) as client:
        response = await client.post("/mcp", content=b'{"jsonrpc":"2.0","id":1,"method":"ping"}', headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == challenge
    assert response.json()["error"] == "invalid_token"
    assert TOKEN not in response.text
    assert inner.calls == []


@pytest.mark.anyio
async def test_two_authorization_headers_are_refused_even_if_one_is_right() -> None:
    inner = Inner()
    async with client_for(TokenAuthMiddleware(inner, token=TOKEN)) as client:
        headers = [("Authorization", "Bearer wrong"), ("Authorization", f"Bearer {TOKEN}")]
        response = await client.get("/mcp", headers=headers)
    assert response.status_code == 401 and inner.calls == []


@pytest.mark.anyio
@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER"])
@pytest.mark.parametrize("path", ["/mcp", "/mcp/", "/other"])
async def test_the_right_token_reaches_the_app_on_every_path(scheme: str, path: str) -> None:
    inner = Inner()
    async with client_for(TokenAuthMiddleware(inner, token=TOKEN)) as client:
        response = await client.post(path, headers={"Authorization": f"{scheme} {TOKEN}"})
    assert (response.status_code, response.text, inner.calls) == (200, "inner", ["http"])


@pytest.mark.anyio
async def test_lifespan_passes_through_and_a_websocket_without_token_is_closed_unaccepted() -> None:
    inner = Inner()
    middleware = TokenAuthMiddleware(inner, token=TOKEN)
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "websocket.connect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    await middleware({"type": "lifespan"}, receive, send)
    assert inner.calls == ["lifespan"]
    await middleware({"type": "websocket", "path": "/ws", "headers": []}, receive, send)
    assert sent == [{"type": "websocket.close", "code": 1008}] and inner.calls == ["lifespan"]
    await middleware({"type": "websocket", "path": "/ws", "headers": [(b"authorization", f"Bearer {TOKEN}".encode())]}, receive, send)
    assert inner.calls == ["lifespan", "websocket"]


@pytest.mark.anyio
async def test_the_auth_route_gives_the_token_for_the_secret_and_nothing_else() -> None:
    inner = Inner()
    async with client_for(TokenAuthMiddleware(inner, token=TOKEN, secret=SECRET + "\n")) as client:
        good = await client.post("/auth/token", json={"secret": f"  {SECRET}\n"})  # as read from a file
        wrong = await client.post("/auth/token", json={"secret": SECRET + "x"})
        missing = await client.post("/auth/token", json={"token": SECRET})
        not_json = await client.post("/auth/token", content=b"secret=" + SECRET.encode())
        too_big = await client.post("/auth/token", json={"secret": "x" * (65 * 1024)})
        get = await client.get("/auth/token")
    assert good.status_code == 200 and good.json() == {"token": TOKEN, "token_type": "Bearer"}
    assert good.headers["cache-control"] == "no-store"
    assert [r.status_code for r in (wrong, missing, not_json, too_big, get)] == [403, 403, 400, 413, 405]
    assert get.headers["allow"] == "POST"
    for refused in (wrong, missing, not_json, too_big, get):
        assert TOKEN not in refused.text and SECRET not in refused.text
    assert inner.calls == []


@pytest.mark.anyio
async def test_without_a_secret_there_is_no_auth_route_only_the_token_check() -> None:
    inner = Inner()
    async with client_for(TokenAuthMiddleware(inner, token=TOKEN)) as client:
        response = await client.post("/auth/token", json={"secret": SECRET})
    assert response.status_code == 401 and inner.calls == []


@pytest.mark.anyio
async def test_the_bridges_own_auth_route_client_gets_the_token_from_the_middleware(tmp_path: Path) -> None:
    """What ``--auth-url /auth/token --secret-file S`` POSTs is what the middleware expects."""
    secret_file = tmp_path / "secret"
    secret = load_or_create_secret(secret_file, "secret file")
    app = TokenAuthMiddleware(Inner(), token=TOKEN, secret=secret)
    async with client_for(app) as client:
        source = AuthRouteTokenSource("/auth/token", secret_file)
        async def post_json(url: str, body: object) -> tuple[int, bytes]:
            response = await client.post(url, json=body)
            return response.status_code, response.content

        token = await source.fetch(TokenContext(base_url="http://127.0.0.1:8765/mcp", post_json=post_json))
        assert token == TOKEN
        reached = await client.post("/mcp", headers={"Authorization": f"Bearer {token}"})
    assert reached.status_code == 200


# -- credential files -------------------------------------------------------------------------


def test_a_token_file_is_created_private_and_reused_across_runs(tmp_path: Path) -> None:
    path = tmp_path / "new-folder" / "token"
    first = load_or_create_secret(path)
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", first)
    if os.name == "posix":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert load_or_create_secret(path) == first
    assert [p.name for p in path.parent.iterdir()] == ["token"]  # no temporary file left behind


@pytest.mark.posix_only("POSIX modes and symlinks")
def test_unsafe_credential_files_are_refused_and_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("attacker's token\n")
    target.chmod(0o600)
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(UnsafeFileError, match="symbolic link"):
        load_or_create_secret(link)
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "would-be-created")
    with pytest.raises(UnsafeFileError, match="symbolic link"):
        load_or_create_secret(dangling)
    assert not (tmp_path / "would-be-created").exists()
    loose = tmp_path / "loose"
    loose.write_text("token\n")
    loose.chmod(0o644)
    with pytest.raises(UnsafeFileError, match="chmod 600"):
        load_or_create_secret(loose)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(UnsafeFileError, match="others may write"):
        load_or_create_secret(shared / "token")
    assert list(shared.iterdir()) == []
    assert target.read_text() == "attacker's token\n"


def test_a_token_file_keeps_the_token_across_starts_and_without_one_every_start_is_new(tmp_path: Path) -> None:
    """For a bridge with ``--token-file``: the file's token is the one the server checks."""
    token_file = tmp_path / "token"
    first = AppServer(Inner(), discovery_file=tmp_path / "d.json", token_file=token_file)
    second = AppServer(Inner(), discovery_file=tmp_path / "d.json", token_file=token_file)
    assert first.token == second.token == token_file.read_text().strip()
    assert AppServer(Inner()).token != AppServer(Inner()).token
    assert AppServer(Inner(), require_token=False).token is None


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "::"])
def test_the_server_refuses_to_listen_off_loopback(host: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a loopback address"):
        AppServer(Inner(), host=host, discovery_file=tmp_path / "d.json")


def test_a_gui_app_runs_the_server_in_a_thread_and_stops_it(tmp_path: Path) -> None:
    """The GUI's own thread keeps the signals; ``stop()`` ends ``run()`` and unpublishes,
    and a ``stop()`` that comes before the server exists is not lost."""
    import threading

    discovery = tmp_path / "state" / "mcp-endpoint.json"
    server = AppServer(Inner(), discovery_file=discovery)
    statuses: list[int] = []
    thread = threading.Thread(target=lambda: statuses.append(server.run()), daemon=True)
    thread.start()
    assert wait_until(discovery.exists, START_TIMEOUT)
    published = json.loads(discovery.read_text())
    assert published == {"url": server.url, "pid": os.getpid(), "token": server.token, "pid_start_time": published["pid_start_time"]}
    from bridge.app.discovery import process_start_time

    started = process_start_time(os.getpid())
    assert started is not None and abs(published["pid_start_time"] - started) < 0.01, "the pid's start time is recorded beside it"
    reply = httpx.get(published["url"], headers={"Authorization": f"Bearer {server.token}"}, timeout=10)
    assert reply.text == "inner"
    server.stop()
    thread.join(START_TIMEOUT)
    assert statuses == [0] and not discovery.exists()

    early = AppServer(Inner(), discovery_file=discovery)
    early.stop()
    assert early.run() == 0 and not discovery.exists()


@pytest.mark.process
def test_the_bridges_start_up_never_imports_the_server_half_or_uvicorn() -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "bridge", "--url", "http://127.0.0.1:9/mcp"],
        stdin=subprocess.DEVNULL, capture_output=True, timeout=30, cwd=REPO_ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.decode().splitlines() if line.startswith("import time:")}
    assert "bridge.serve.loop" in imported  # the list is real: the bridge's own loop is in it
    assert not {name for name in imported if name.startswith("uvicorn") or name == "bridge.appserver"}


# -- as processes -----------------------------------------------------------------------------


@pytest.fixture
def desk(tmp_path: Path) -> Iterator[Desk]:
    made = Desk(tmp_path, "MyApp")
    try:
        yield made
    finally:
        made.close()


async def _status_over_pipe(url: str, message: dict[str, Any]) -> int:
    """The status a POST of ``message`` without a token gets over the app's named pipe
    (the bridge's own pool: httpx has no pipe transport)."""
    from bridge.transport.pool import Http11Pool

    pool = Http11Pool(max_connections=1, connect_timeout_seconds=10, pool_timeout_seconds=10)
    try:
        response = await pool.request("POST", url, [("content-type", "application/json")], json.dumps(message).encode(),
                                      read_timeout_seconds=10)
        await response.aclose()
        return response.status_code
    finally:
        await pool.aclose()


@pytest.mark.process
def test_the_readme_app_is_reached_by_mcp_app_bridge_with_only_its_name(desk: Desk) -> None:
    script = desk.root / "myapp.py"
    script.write_text(docs_block("# myapp.py"), encoding="utf-8")
    app = desk.start(script)
    published = desk.published()
    assert published["pid"] == app.pid  # the process that holds the listening socket
    assert published["token"]
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    if os.name == "posix":  # link="auto" as printed: the Unix domain socket
        assert is_unix_url(published["url"]), published["url"]
        socket_path, mcp_path = split_unix_url(published["url"])
        assert mcp_path == "/mcp" and stat.S_ISSOCK(os.lstat(socket_path).st_mode)
        assert stat.S_IMODE(os.lstat(socket_path).st_mode) == 0o600
        assert stat.S_IMODE(desk.discovery.stat().st_mode) == 0o600
        assert stat.S_IMODE(desk.discovery.parent.stat().st_mode) == 0o700
        with httpx.Client(transport=httpx.HTTPTransport(uds=socket_path)) as over_socket:
            anonymous = over_socket.post(f"http://{UNIX_HOST}{mcp_path}", json=ping, timeout=10)
        anonymous_status = anonymous.status_code
    else:  # Windows: link="auto" is a named pipe of a new name, for this user only
        assert re.fullmatch(r"npipe://\./pipe/mcp-app-bridge-\d+-[0-9a-f]{16}/mcp", published["url"]), published["url"]
        anonymous_status = asyncio.run(_status_over_pipe(published["url"], ping))
    assert anonymous_status == 401
    with BridgeProcess("--app-name", "MyApp", env=desk.env) as bridge:
        result = handshake(bridge)
        assert result["serverInfo"]["name"] == "MyApp"
        assert greet_through(bridge) == "Hello, Ada!"
    app.send_signal(signal.SIGTERM)
    app.wait(10)
    assert not desk.discovery.exists()


@pytest.mark.process
def test_the_readme_app_started_by_its_own_mcp_stdio_answers(desk: Desk) -> None:
    """Nothing runs yet: ``python myapp.py --mcp-stdio`` launches ``launch_command``
    (the same script, detached) and bridges to it."""
    script = desk.root / "myapp.py"
    script.write_text(docs_block("# myapp.py"), encoding="utf-8")
    command = [sys.executable, str(script)]
    with mock.patch.object(processes, "bridge_command", lambda: command):
        bridge = BridgeProcess("--mcp-stdio", env=desk.env)
    with bridge:
        bridge.send(initialize(0))
        reply = bridge.read_reply(0, START_TIMEOUT + 10)
        assert "result" in reply, reply
        bridge.send(INITIALIZED)
        assert greet_through(bridge) == "Hello, Ada!"
    published = desk.published()
    assert published["pid"] != bridge.proc.pid and process_alive(published["pid"])  # the app outlives the bridge
    assert is_unix_url(published["url"]) == (os.name == "posix"), published["url"]  # launched on its socket
    # a launch is a normal event: at the default log level (warning) it writes nothing
    assert "starting MyApp" not in bridge.stderr_text() and "WARNING" not in bridge.stderr_text(), bridge.stderr_text()


WAITING_APP = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from bridge.appserver import serve_app

    GO = Path(sys.argv[1])

    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    print("lifespan waiting", file=sys.stderr, flush=True)
                    while not GO.exists():
                        await asyncio.sleep(0.02)
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"served"})

    sys.exit(serve_app(app, app_name="MyApp"))
    """
)


@pytest.mark.process
@pytest.mark.posix_only("SIGTERM and SIGINT as POSIX signals")
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_the_discovery_file_appears_once_the_server_answers_and_goes_at_a_signal(desk: Desk, stop: signal.Signals) -> None:
    script = desk.root / "waiting_app.py"
    script.write_text(WAITING_APP, encoding="utf-8")
    go = desk.root / "go"
    app = desk.start(script, str(go))
    assert wait_until(lambda: "lifespan waiting" in desk.log(app), START_TIMEOUT), desk.log(app)
    assert not desk.discovery.exists()  # the app's start-up is not done: nothing is published yet
    go.touch()
    published = desk.published()
    # The moment the file exists, the endpoint answers (and only with the token).
    answered = httpx.get(published["url"], headers={"Authorization": f"Bearer {published['token']}"}, timeout=10)
    assert (answered.status_code, answered.text) == (200, "served")
    assert httpx.get(published["url"], timeout=10).status_code == 401
    app.send_signal(stop)
    status = app.wait(10)
    assert not desk.discovery.exists()
    assert status == (-signal.SIGTERM if stop == signal.SIGTERM else 0), desk.log(app)



# -- hardening: umask, unsafe folders, one instance, Host and Origin, header timeout ---------


class Running:
    """An :class:`AppServer` run in a thread of this process (as a GUI app would)."""

    def __init__(self, server: AppServer) -> None:
        import threading

        self.server = server
        self.statuses: list[int] = []
        self.thread = threading.Thread(target=lambda: self.statuses.append(server.run()), daemon=True)

    def __enter__(self) -> Running:
        self.thread.start()
        assert self.server.discovery_file is not None
        assert wait_until(self.server.discovery_file.exists, START_TIMEOUT), "the server never published itself"
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()
        self.thread.join(START_TIMEOUT)


@pytest.mark.process
@pytest.mark.posix_only("the umask")
def test_the_readme_app_serves_under_umask_0002_with_its_folders_0700(desk: Desk) -> None:
    """Ubuntu's and Fedora's default umask: missing parent folders must not come out 0775."""
    state = desk.root / "home" / "new-state" / "deeper"
    desk.env["XDG_STATE_HOME"] = str(state)
    desk.discovery = state / "MyApp" / "mcp-endpoint.json"
    script = desk.root / "myapp.py"
    script.write_text(docs_block("# myapp.py"), encoding="utf-8")
    log = open(desk.root / "myapp-0.log", "wb")  # noqa: SIM115
    app = subprocess.Popen(
        [sys.executable, str(script)], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        cwd=desk.root, env=desk.env, umask=0o002,
    )
    log.close()
    desk.apps.append(app)
    assert wait_until(lambda: desk.discovery.exists() or app.poll() is not None, START_TIMEOUT)
    assert app.poll() is None, desk.log(app)
    published = desk.published()
    for folder in (state.parent, state, state / "MyApp"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    with BridgeProcess("--app-name", "MyApp", env=desk.env) as bridge:
        handshake(bridge)
        assert greet_through(bridge) == "Hello, Ada!"
    assert published["pid"] == app.pid
    assert "Traceback" not in desk.log(app)


@pytest.mark.process
@pytest.mark.posix_only("POSIX folder modes")
def test_an_unsafe_folder_is_refused_before_serving_in_one_line(desk: Desk) -> None:
    state = Path(desk.env["XDG_STATE_HOME"])
    state.chmod(0o777)  # others may write: they could swap the discovery file
    script = desk.root / "waiting_app.py"
    script.write_text(WAITING_APP, encoding="utf-8")
    go = desk.root / "go"
    go.touch()
    app = desk.start(script, str(go))
    assert app.wait(START_TIMEOUT) == 1
    output = desk.log(app)
    assert "Traceback" not in output and "lifespan waiting" not in output, output  # nothing was served
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1 and "bad ownership or modes for directory" in lines[0] and str(state) in lines[0], output
    assert not desk.discovery.exists()


@pytest.mark.process
def test_a_second_instance_refuses_while_the_first_lives(desk: Desk) -> None:
    script = desk.root / "waiting_app.py"
    script.write_text(WAITING_APP, encoding="utf-8")
    go = desk.root / "go"
    go.touch()
    first = desk.start(script, str(go))
    published = desk.published()
    second = desk.start(script, str(go))
    assert second.wait(START_TIMEOUT) == 1
    output = desk.log(second)
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1 and "another instance already serves" in lines[0] and "Traceback" not in output, output
    assert json.loads(desk.discovery.read_text()) == published  # the first one's file is untouched
    assert first.poll() is None
    first.send_signal(signal.SIGTERM)
    first.wait(10)
    assert not desk.discovery.exists()
    third = desk.start(script, str(go))  # the lock went with the first: the next one starts
    assert desk.published()["pid"] == third.pid


def test_two_servers_in_one_process_on_one_discovery_file_the_second_refuses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    discovery = tmp_path / "state" / "mcp-endpoint.json"
    with Running(AppServer(Inner(), discovery_file=discovery)) as first:
        second = AppServer(Inner(), discovery_file=discovery)
        assert second.run() == 1
        assert "another instance already serves" in capsys.readouterr().err
        assert json.loads(discovery.read_text())["url"] == first.server.url
    assert first.statuses == [0]


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 200),
        ({"Host": "localhost:PORT"}, 200),
        ({"Host": "LOCALHOST:PORT", "Origin": "http://localhost:3000"}, 200),
        ({"Origin": "http://127.0.0.1:PORT"}, 200),
        ({"Host": "evil.example:PORT"}, 421),
        ({"Host": "127.0.0.1:1"}, 421),
        ({"Host": "127.0.0.1"}, 421),
        ({"Host": "localhost.evil.example:PORT"}, 421),
        ({"Origin": "http://evil.example"}, 403),
        ({"Origin": "http://evil.example:PORT"}, 403),
        ({"Origin": "null"}, 403),
        ({"Origin": "http://localhost.evil.example"}, 403),
    ],
)
def test_host_and_origin_must_be_loopback_for_the_app_and_the_auth_route(tmp_path: Path, headers: dict[str, str], status: int) -> None:
    """A web page whose name was rebound to 127.0.0.1 (DNS rebinding) sends its own name in
    Host and Origin: it reaches neither the app nor the auth route, even with the secret."""
    from support.apps import make_secret_file

    secret_file = tmp_path / "secret"
    secret = make_secret_file(secret_file)
    server = AppServer(Inner(), discovery_file=tmp_path / "state" / "d.json", secret_file=secret_file)
    with Running(server):
        assert server.url is not None
        headers = {name: value.replace("PORT", str(server.port)) for name, value in headers.items()}
        with httpx.Client(timeout=10) as client:
            auth = client.post(server.url.replace("/mcp", "/auth/token"), json={"secret": secret}, headers=headers)
            app = client.get(server.url, headers={**headers, "Authorization": f"Bearer {server.token}"})
    assert (auth.status_code, app.status_code) == (status, status)
    if status == 200:
        assert auth.json()["token"] == server.token and app.text == "inner"
    else:
        assert server.token is not None and server.token not in auth.text and app.text != "inner"
        assert auth.json()["error"]["code"] == -32000 and "id" not in auth.json()


def test_uvicorn_gets_header_idle_and_connection_bounds(tmp_path: Path) -> None:
    from bridge.appserver.server import KEEP_ALIVE_SECONDS, MAX_CONNECTIONS, MAX_HEADER_BYTES

    server = AppServer(Inner())
    config = server._uvicorn_config()
    assert config.h11_max_incomplete_event_size == MAX_HEADER_BYTES
    assert config.timeout_keep_alive == KEEP_ALIVE_SECONDS
    # The connection limit is kept behind the token check, not by uvicorn (which counts
    # every open connection, idle or not).
    assert config.limit_concurrency is None and server._admission.limit == MAX_CONNECTIONS


@pytest.mark.slow
def test_connections_that_drip_or_never_finish_their_head_are_closed(tmp_path: Path) -> None:
    """uvicorn has no header timeout of its own: 400 dripping connections stayed open. Here
    50 connect (some silent, some dripping a header line every 0.2 s) and all are closed
    once the header timeout passes, while a normal request still gets its answer."""
    import socket
    import time

    server = AppServer(Inner(), discovery_file=tmp_path / "state" / "d.json", header_timeout_seconds=1.0)
    with Running(server):
        assert server.url is not None
        sockets = [socket.create_connection(("127.0.0.1", server.port), timeout=30) for _ in range(50)]
        try:
            for index, sock in enumerate(sockets):
                if index % 2:
                    sock.sendall(f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n".encode())
            closed: set[int] = set()
            deadline = time.monotonic() + 30  # a bound, not a speed: the timeout is 1 s
            while len(closed) < len(sockets) and time.monotonic() < deadline:
                for index, sock in enumerate(sockets):
                    if index in closed:
                        continue
                    try:
                        if index % 2:
                            sock.sendall(b"X-Drip: 1\r\n")
                        sock.settimeout(0.005)
                        if sock.recv(1024) == b"":
                            closed.add(index)
                    except (TimeoutError, BlockingIOError):
                        pass
                    except OSError:
                        closed.add(index)
                time.sleep(0.2)
            assert len(closed) == len(sockets), f"{len(sockets) - len(closed)} connections still open"
            answered = httpx.get(server.url, headers={"Authorization": f"Bearer {server.token}"}, timeout=10)
            assert answered.text == "inner"
        finally:
            for sock in sockets:
                sock.close()


class Slowloris:
    """``count`` connections that each send a request head's first line and then one header
    line every ``drip_seconds``, never the end (or, ``auth_body``, a whole head for the auth
    route and then its body a byte at a time); each one the server closes is opened again at
    once. In a thread; bounded by leaving the ``with`` block."""

    def __init__(self, port: int, count: int, drip_seconds: float = 0.5, *, auth_body: bool = False) -> None:
        import threading

        self.port, self.count, self.drip_seconds, self.auth_body = port, count, drip_seconds, auth_body
        self.reopened = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _open(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        if self.auth_body:
            sock.sendall(
                f"POST /auth/token HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
                "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{".encode()
            )
        else:
            sock.sendall(f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n".encode())
        sock.setblocking(False)
        return sock

    def __enter__(self) -> Slowloris:
        import time

        self.sockets = []
        for _ in range(self.count):  # a few at a time: each head is read before the next arrive
            self.sockets.append(self._open())
            if len(self.sockets) % 10 == 0:
                time.sleep(0.05)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.drip_seconds):
            for index, sock in enumerate(self.sockets):
                try:
                    sock.sendall(b" " if self.auth_body else b"X-Drip: 1\r\n")
                    if sock.recv(4096) == b"":
                        raise ConnectionResetError
                except BlockingIOError:
                    pass
                except OSError:
                    sock.close()
                    try:
                        self.sockets[index] = self._open()
                        self.reopened += 1
                    except OSError:
                        pass

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        for sock in self.sockets:
            sock.close()


@pytest.mark.slow
@pytest.mark.parametrize("auth_body", [False, True], ids=["heads", "auth-route-bodies"])
def test_idle_connections_without_a_request_cannot_deny_the_app(tmp_path: Path, auth_body: bool) -> None:
    """Anyone on the machine may connect: 200 connections dripping their heads (reopened as
    the header timeout closes them) took every slot of uvicorn's limit_concurrency, and a
    real client got 8 of 100 requests served (92 x 503); 73 of 100 with the auth route's
    bodies dripped. Only connections that had a request let in count now: at least 99 of
    100 are served, on new connections and on one kept alive."""
    server = AppServer(
        Inner(), discovery_file=tmp_path / "state" / "d.json", header_timeout_seconds=1.0, secret_file=tmp_path / "secret"
    )
    with Running(server), Slowloris(server.port, 200, auth_body=auth_body) as attack:
        assert server.url is not None
        headers = {"Authorization": f"Bearer {server.token}"}
        served = 0
        with httpx.Client(timeout=10, headers=headers) as kept_alive:
            for index in range(100):
                try:
                    if index % 2:
                        answer = kept_alive.post(server.url)
                    else:
                        answer = httpx.post(server.url, headers=headers, timeout=10)  # a new connection
                except httpx.HTTPError:
                    continue
                served += answer.status_code == 200 and answer.text == "inner"
                if index == 50:  # by now the header timeout has closed (and the attack reopened) some
                    assert wait_until(lambda: attack.reopened >= 50, 30)
        assert served >= 99, f"{served} of 100 requests served"


@pytest.mark.slow
def test_a_request_slower_than_the_header_timeout_still_gets_its_answer(tmp_path: Path) -> None:
    """The header clock stops once the head is complete: a slow tool call (or a long SSE
    stream) is the app's business."""
    import asyncio

    async def slow(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await asyncio.sleep(2.5)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"slow"})

    server = AppServer(slow, discovery_file=tmp_path / "state" / "d.json", header_timeout_seconds=1.0)
    with Running(server):
        assert server.url is not None
        with httpx.Client(timeout=30, headers={"Authorization": f"Bearer {server.token}"}) as client:
            assert client.get(server.url).text == "slow"
            assert client.get(server.url).text == "slow"  # the same connection, kept alive


@pytest.mark.posix_only("POSIX modes")
def test_an_unsafe_token_file_ends_serve_app_with_one_line_and_status_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bridge.appserver import serve_app

    token_file = tmp_path / "token"
    token_file.write_text("readable-by-others\n")
    token_file.chmod(0o644)
    assert serve_app(Inner(), discovery_file=tmp_path / "state" / "d.json", token_file=token_file) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot serve the app" in err and "chmod 600" in err, err
    assert not (tmp_path / "state" / "d.json").exists()
