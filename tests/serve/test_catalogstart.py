"""The catalog start (bridge/serve/catalogstart.py): a client's start-up answered from the
catalog before the serving loop exists, byte for byte as the loop answers it; what it leaves
to the loop; the hand-over; and what it imports before its first answer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.helpers import NOTIF_INIT, FakeStdin, FakeStdout, init, request_line, running_bridge

from bridge.app.servedcatalog import ServedCatalog
from bridge.core.config import DEFAULT_APP_NAME, BridgeConfig
from bridge.serve.catalogstart import CatalogStart, answer_start_from_catalog
from bridge.serve.loop import Bridge

pytestmark = [pytest.mark.anyio, pytest.mark.posix_only("the catalog start waits on the stdin pipe with select (POSIX)")]

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"}}
TOOLS = {"tools": [{"name": "echo", "description": "Say it\u2028again ✓", "inputSchema": {"type": "object"}}]}
INITIALIZE = {
    "protocolVersion": "2025-06-18",
    "capabilities": {"tools": {"listChanged": True}, "prompts": {}, "resources": {}},
    "serverInfo": {"name": "app", "version": "1.2"},
    "instructions": "Cached.",
}
DISCOVER = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}, "serverInfo": {"name": "app", "version": "1.2"}}
LISTS = {
    "tools/list": TOOLS,
    "prompts/list": {"prompts": [{"name": "p"}]},
    "resources/list": {"resources": []},
    "resources/templates/list": {"resourceTemplates": []},
}


def _cache(discovery: Path, **parts: Any) -> None:
    entry = {"format": 1, "app": DEFAULT_APP_NAME, "endpoint": str(discovery), "savedAtSeconds": 1.0,
             "initialize": INITIALIZE, "discover": DISCOVER, "lists": LISTS}
    ServedCatalog(DEFAULT_APP_NAME, str(discovery)).replace({**entry, **parts})


def _modern(request_id: Any, method: str) -> bytes:
    return request_line(request_id, method, {"_meta": dict(META)})


def _never_started() -> None:
    raise AssertionError("the app was started for a start-up the catalog answers")


def _config(discovery: Path, **options: Any) -> BridgeConfig:
    return BridgeConfig(discovery_file=discovery, ensure_running=options.pop("ensure_running", _never_started), **options)


def _run_start(config: BridgeConfig, data: bytes) -> tuple[CatalogStart | None, list[bytes]]:
    """The catalog start over real pipes, ``data`` then EOF on its stdin; its written lines."""
    read_in, write_in = os.pipe()
    read_out, write_out = os.pipe()
    try:
        os.write(write_in, data)
        os.close(write_in)
        start = answer_start_from_catalog(config, read_fd=read_in, write_fd=write_out, idle_seconds=0.05)
        os.close(write_out)
        with os.fdopen(read_out, "rb") as out:
            return start, out.read().splitlines(keepends=True)
    finally:
        os.close(read_in)


SCENARIOS = {
    "2025-client": (init(0) + NOTIF_INIT + request_line(1, "tools/list") + request_line(2, "prompts/list")
                    + request_line(3, "resources/list") + request_line(4, "resources/templates/list") + request_line(5, "ping"), {}),
    "2025-client-older-version": (init(0).replace(b"2025-06-18", b"2024-11-05") + NOTIF_INIT + request_line(1, "tools/list"), {}),
    "2026-client": (_modern(1, "server/discover") + _modern(2, "tools/list") + _modern(3, "prompts/list") + _modern(4, "ping"), {}),
    "2026-client-legacy-only-app": (_modern(1, "server/discover"), {"refusesDiscover": True}),
}


@pytest.mark.parametrize("scenario", SCENARIOS)
async def test_its_answers_are_the_serving_loop_s_byte_for_byte(tmp_path: Path, scenario: str) -> None:
    data, parts = SCENARIOS[scenario]
    discovery = tmp_path / "absent" / "mcp-endpoint.json"  # the app is down: no discovery file
    _cache(discovery, **parts)
    start, written = _run_start(_config(discovery), data)
    assert start is not None and start.rest == b"" and len(start.answered) == data.count(b"\n")
    async with running_bridge(discovery_file=discovery, ensure_running=_never_started) as h:
        h.stdin.feed(data)
        await h.stdout.wait_for(len(written))
        loop_lines = list(h.stdout.lines)
    assert len(written) == sum(1 for line in data.splitlines() if b'"id"' in line)
    assert sorted(written) == sorted(loop_lines)


def test_it_leaves_the_first_line_it_cannot_answer_and_what_follows(tmp_path: Path) -> None:
    discovery = tmp_path / "mcp-endpoint.json"
    _cache(discovery, lists={"tools/list": TOOLS})
    call = request_line(2, "tools/call", {"name": "echo", "arguments": {}})
    start, written = _run_start(_config(discovery), init(0) + NOTIF_INIT + request_line(1, "tools/list") + call + request_line(3))
    assert start is not None
    assert start.answered == [init(0)[:-1], NOTIF_INIT[:-1], request_line(1, "tools/list")[:-1]]
    assert start.rest == call + request_line(3)
    assert [json.loads(line)["id"] for line in written] == [0, 1]
    # a list the catalog does not hold is the app's to answer
    start, written = _run_start(_config(discovery), init(0) + request_line(1, "prompts/list"))
    assert start is not None and len(start.answered) == 1 and start.rest == request_line(1, "prompts/list")


@pytest.mark.parametrize(
    "case",
    ["no-catalog", "app-up", "on-start", "modern-era", "no-launch", "refuses-initialize", "not-json", "list-before-initialize",
     "tool-filter"],
)
def test_where_it_does_not_apply_the_loop_reads_everything(tmp_path: Path, case: str) -> None:
    discovery = tmp_path / "mcp-endpoint.json"
    options: dict[str, Any] = {}
    data = init(0) + request_line(1, "tools/list")
    if case != "no-catalog":
        _cache(discovery, **({"refusesInitialize": True} if case == "refuses-initialize" else {}))
    if case == "app-up":
        discovery.write_text(json.dumps({"url": "http://127.0.0.1:9/mcp"}), encoding="utf-8")
    by_case: dict[str, dict[str, Any]] = {
        "on-start": {"launch_policy": "on-start"}, "modern-era": {"protocol_era": "modern"}, "tool-filter": {"deny_tools": ("echo",)},
    }
    options |= by_case.get(case, {})
    if case == "no-launch":
        options["ensure_running"] = None
    if case == "not-json":
        data = b"{not json\n" + data
    if case == "list-before-initialize":
        data = request_line(1, "tools/list") + init(0)
    start, written = _run_start(_config(discovery, **options), data)
    assert written == []
    assert start is None or (start.answered == [] and start.rest == data)


async def test_the_loop_takes_over_its_state_and_writes_no_reply_twice(tmp_path: Path) -> None:
    discovery = tmp_path / "mcp-endpoint.json"
    _cache(discovery)
    starts: list[int] = []

    def start_app() -> None:
        starts.append(1)
        raise RuntimeError("no app in this test")

    config = _config(discovery, ensure_running=start_app, launch_timeout_seconds=1.0)
    call = request_line(2, "tools/call", {"name": "echo", "arguments": {}})
    start, written = _run_start(config, init(0) + NOTIF_INIT + request_line(1, "tools/list") + call)
    assert start is not None and [json.loads(line)["id"] for line in written] == [0, 1]
    stdin, stdout = FakeStdin(), FakeStdout()
    stdin.close()  # the rest, then EOF
    bridge = Bridge(config, stdin=stdin, stdout=stdout, catalog_start=start)
    assert await bridge.run() == 0
    # only the call's reply: the two answered ones are not written again, and the call,
    # the first request the catalog cannot answer, started the app (as after a loop's own
    # catalog answer: docs/behaviour.md, "Lazy launch")
    (reply,) = stdout.messages()
    assert reply["id"] == 2 and reply["error"]["data"]["reason"] == "app_launch_failed", reply
    assert starts == [1]


#: What a catalog-answered start must not have loaded when its first reply is written:
#: the serving loop and everything only it needs (asyncio, whose import loads the
#: subprocess machinery and inspect; the HTTP link; the launcher; TLS), the token command,
#: the other links' checks, dataclasses, and platformdirs with tempfile.
NOT_BEFORE_THE_FIRST_REPLY = (
    "asyncio", "subprocess", "_posixsubprocess", "tempfile", "shutil", "inspect", "ast", "dataclasses", "ssl", "_ssl",
    "platformdirs", "httpx", "httpcore", "anyio", "click", "socket",
    "bridge.serve.loop", "bridge.serve.driver", "bridge.serve.dispatch", "bridge.serve.legacyapp", "bridge.serve.modernapp",
    "bridge.app.launcher", "bridge.app.tokencommand", "bridge.app.listener", "bridge.app.unixpeer", "bridge.app.pipepeer",
    "bridge.app.discovery", "bridge.transport", "bridge.streamable", "bridge.stdio",
)

_RECORD_AT_FIRST_REPLY = """
import os, sys
before = set(sys.modules)
write = os.write
def first_reply(fd, data):
    if not sys.modules.get("_catalog_start_seen"):
        sys.modules["_catalog_start_seen"] = sys
        sys.stderr.write("LOADED " + " ".join(sorted(set(sys.modules) - before)) + "\\n")
    return write(fd, data)
os.write = first_reply
sys.argv = ["mcp-app-bridge", *sys.argv[1:]]
from bridge.cli.serve import main
main()
"""


@pytest.mark.process
@pytest.mark.linux_only("platformdirs (and tempfile) are imported on other systems")
@pytest.mark.parametrize("first", ["initialize", "server/discover"])
def test_a_catalog_answered_start_loads_nothing_it_does_not_use(tmp_path: Path, first: str) -> None:
    state = tmp_path / "state"
    discovery = tmp_path / "app" / "mcp-endpoint.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")} | {"XDG_STATE_HOME": str(state)}
    script = subprocess.run([sys.executable, "-c", (
        f"from bridge.app.servedcatalog import ServedCatalog; ServedCatalog('MyApp', {str(discovery)!r}).replace("
        f"{{'format': 1, 'app': 'MyApp', 'endpoint': {str(discovery)!r}, 'savedAtSeconds': 1.0, "
        f"'initialize': {INITIALIZE!r}, 'discover': {DISCOVER!r}, 'lists': {LISTS!r}}})")],
        env=env, capture_output=True, text=True, timeout=60)
    assert script.returncode == 0, script.stderr
    data = init(0) + NOTIF_INIT + request_line(1, "tools/list") if first == "initialize" else _modern(0, "server/discover") + _modern(1, "tools/list")
    done = subprocess.run(
        [sys.executable, "-c", _RECORD_AT_FIRST_REPLY, "--app-name", "MyApp", "--discovery-file", str(discovery),
         "--launch", f"{sys.executable} -c pass", "--log-level", "info"],
        input=data, capture_output=True, timeout=60, env=env,
    )
    stderr = done.stderr.decode()
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    assert [reply["id"] for reply in replies] == [0, 1] and all("result" in reply for reply in replies), stderr
    (loaded_line,) = [line for line in stderr.splitlines() if line.startswith("LOADED ")]
    loaded = set(loaded_line.split()[1:])
    assert "bridge.serve.catalogstart" in loaded  # the list is of a real start
    bad = sorted(name for name in loaded if any(name == n or name.startswith(n + ".") for n in NOT_BEFORE_THE_FIRST_REPLY))
    assert not bad, bad
    assert "initialize answered from its catalog" in stderr or first != "initialize", stderr  # the loop took over
    assert not (tmp_path / "app").exists()  # nothing was launched


#: What a 2025-era client's start must not load before the ``initialize`` reply from a
#: running app of its era, with no tool filter and no launch command: the era translations
#: (built when a request first needs one, bridge/serve/translate.py), the tool filter
#: (bridge/serve/dispatch.py), the link kinds, the token command and the catalog it does not
#: use, and the TLS stack and the faces (tests/test_layout.py).
NOT_BEFORE_A_RUNNING_APPS_REPLY = (
    "bridge.serve.legacyapp", "bridge.serve.modernapp", "bridge.core.modernmap",
    "bridge.serve.toolgate", "bridge.core.toolfilter", "bridge.app.tokencommand", "bridge.app.servedcatalog",
    "bridge.core.lazylaunch", "bridge.app.unixpeer", "bridge.app.pipepeer", "_ssl", "httpx", "anyio", "click",
)
#: What the running-app start (bridge/serve/appstart.py) answers without: asyncio and the
#: serving loop, whose import is most of a start's time.
NOT_BEFORE_THE_RUNNING_APP_START = (
    "asyncio", "bridge.serve.loop", "bridge.serve.translate", "bridge.transport.pool", "bridge.streamable.upstream",
)
#: On Linux also what only a launch command (``shlex``), a header value that is not plain
#: ASCII (``base64``) or the state folder (found without platformdirs there) needs.
NOT_BEFORE_A_RUNNING_APPS_REPLY_ON_LINUX = ("shlex", "base64", "tempfile", "shutil", "dataclasses", "platformdirs")


@pytest.mark.process
@pytest.mark.parametrize("replies", ["sse", "json"])
def test_a_running_apps_first_reply_loads_no_translation(replies: str, app_server: Any, start_app_server: Any) -> None:
    """``mcp-app-bridge --url URL`` as the cold-start benchmark runs it (bench/cold_start.py):
    ``sys.modules`` when the ``initialize`` reply from the running example app (SSE or JSON
    replies) is written."""
    app = app_server if replies == "sse" else start_app_server("--json-response")
    loaded = _loaded_at_first_reply(["--url", app.url])
    assert {"bridge.serve.appstart", "bridge.transport.http1", "bridge.app.listener"} <= loaded  # the list is of a real start
    # The running-app start answered it (bridge/serve/appstart.py): before asyncio and the loop.
    _assert_none_of(loaded, NOT_BEFORE_A_RUNNING_APPS_REPLY + NOT_BEFORE_THE_RUNNING_APP_START)


@pytest.mark.process
@pytest.mark.posix_only("a Unix domain socket")
@pytest.mark.parametrize("replies", ["sse", "json"])
def test_a_running_apps_first_reply_over_its_unix_socket_loads_no_asyncio(replies: str, tmp_path: Path) -> None:
    """The same over the example app's default link on Linux and macOS, its Unix socket
    (``http+unix://``), found through its discovery file (with the token in it): the
    running-app start answers there too, with the socket-file and peer checks, before
    asyncio and the serving loop are loaded."""
    from support.apps import APP_SERVER_SCRIPT, start_listening_app

    discovery = tmp_path / "app" / "mcp-endpoint.json"
    command = [sys.executable, str(APP_SERVER_SCRIPT), "--link", "unix", "--discovery-file", str(discovery)]
    command += ["--secret-file", str(tmp_path / "secret"), "--token-in-discovery", *(["--json-response"] if replies == "json" else [])]
    app = start_listening_app(command, log_path=tmp_path / "app.log", scheme="http+unix", what="the example app on its Unix socket")
    try:
        loaded = _loaded_at_first_reply(["--discovery-file", str(discovery)])
    finally:
        app.stop()
    assert {"bridge.serve.appstart", "bridge.transport.http1", "bridge.transport.socketfile", "bridge.app.unixpeer"} <= loaded
    the_unix_links = tuple(name for name in NOT_BEFORE_A_RUNNING_APPS_REPLY if name != "bridge.app.unixpeer")
    _assert_none_of(loaded, the_unix_links + NOT_BEFORE_THE_RUNNING_APP_START + ("bridge.transport.unixlink",))


def _loaded_at_first_reply(args: list[str]) -> set[str]:
    """The modules a bridge run with ``args`` had loaded when it wrote its first reply to
    an ``initialize`` (which must be a result)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    done = subprocess.run([sys.executable, "-c", _RECORD_AT_FIRST_REPLY, *args], input=init(0), capture_output=True, timeout=60, env=env)
    stderr = done.stderr.decode()
    replies_read = [json.loads(line) for line in done.stdout.splitlines()]
    assert [reply["id"] for reply in replies_read] == [0] and "result" in replies_read[0], stderr
    (loaded_line,) = [line for line in stderr.splitlines() if line.startswith("LOADED ")]
    return set(loaded_line.split()[1:])


def _assert_none_of(loaded: set[str], names: tuple[str, ...]) -> None:
    names += NOT_BEFORE_A_RUNNING_APPS_REPLY_ON_LINUX if sys.platform == "linux" else ()
    bad = sorted(name for name in loaded if any(name == n or name.startswith(n + ".") for n in names))
    assert not bad, bad
