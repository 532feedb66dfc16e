"""A 2025-era client (``initialize``, sessions) through the real bridge process to an app
that serves only MCP 2026-07-28 (docs/behaviour.md, "Protocol eras"), with the default
``--protocol-era auto``:

- the SDK's ``ClientSession`` (its 2025-era handshake) with ``examples/app_server.py
  --modern-only``: initialize, tools/list, tools/call with progress;
- the same client with an SDK v2 server of 2026-07-28 alone (``tests/support/modern_only_app.py``): an
  elicitation round trip (an ``input_required`` result) and a ``list_changed`` (a
  ``subscriptions/listen`` event);
- the official SDK v1.x client (``mcp==1.27.*``, in a throwaway venv under the user's cache
  folder: ``.ci/run`` installs it, the fixture does when it is missing) with that server.

Each fails on the bridge before the translation: the app's -32022 answered the client's
``initialize``, and the client gave up.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import ElicitResult, TextContent
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from support.apps import REPO_ROOT, AppServer, start_listening_app
from support.isolation import CALLER_ENVIRON, caller_home
from support.processes import REPLY_TIMEOUT, bridge_command

HERE = Path(__file__).resolve().parent
MODERN_ONLY_APP = HERE.parent / "support" / "modern_only_app.py"
#: Where the official SDK v1.x client is installed (``.ci/run`` makes it; the fixture too).
SDK_V1_VENV = caller_home() / ".cache" / "mcp-app-bridge-tests" / "mcp-sdk-1.27"
SDK_V1_REQUIREMENT = "mcp==1.27.*"


def _params(url: str) -> StdioServerParameters:
    command = bridge_command()
    return StdioServerParameters(command=command[0], args=[*command[1:], "--url", url, "--protocol-era", "auto"], cwd=REPO_ROOT)


@pytest.fixture
def modern_only_app(tmp_path: Path) -> Iterator[AppServer]:
    server = start_listening_app(
        [sys.executable, str(MODERN_ONLY_APP)], log_path=tmp_path / "modern_only_app.log", scheme="http", what="modern_only_app.py"
    )
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.process
@pytest.mark.anyio
async def test_a_2025_client_with_the_example_app_modern_only(start_app_server: Callable[..., AppServer], tmp_path: Path) -> None:
    app = start_app_server("--modern-only")
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    with open(tmp_path / "bridge.log", "w", encoding="utf-8") as errlog, anyio.fail_after(60):
        async with stdio_client(_params(app.url), errlog=errlog) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=REPLY_TIMEOUT) as session:
                init = await session.initialize()
                assert init.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
                assert init.server_info.name == "example-app"
                names = {tool.name for tool in (await session.list_tools()).tools}
                assert {"echo", "progress"} <= names
                result = await session.call_tool("echo", {"text": "Grüße 🌍"})
                assert "".join(b.text for b in result.content if isinstance(b, TextContent)) == "Grüße 🌍"
                result = await session.call_tool("progress", {"steps": 3, "delay_seconds": 0.05}, progress_callback=on_progress)
                assert not result.is_error
    assert seen == [1.0, 2.0, 3.0]
    assert '"POST /mcp HTTP/1.1" 400' in app.stderr_text()  # the app really refused the initialize


@pytest.mark.process
@pytest.mark.anyio
async def test_a_2025_client_gets_elicitation_and_list_changed_from_a_modern_only_sdk_server(modern_only_app: AppServer, tmp_path: Path) -> None:
    elicited: list[str] = []
    changed = anyio.Event()

    async def on_elicit(context: object, params: object) -> ElicitResult:
        elicited.append(getattr(params, "message", ""))
        return ElicitResult(action="accept", content={"name": "Ada"})

    async def on_message(message: object) -> None:
        if "tools/list_changed" in repr(message) or "ToolListChanged" in type(getattr(message, "root", message)).__name__:
            changed.set()

    with open(tmp_path / "bridge.log", "w", encoding="utf-8") as errlog, anyio.fail_after(60):
        async with stdio_client(_params(modern_only_app.url), errlog=errlog) as (read, write):
            async with ClientSession(
                read, write, read_timeout_seconds=REPLY_TIMEOUT, elicitation_callback=on_elicit, message_handler=on_message
            ) as session:
                init = await session.initialize()
                assert init.server_info.name == "modern-only-app"
                result = await session.call_tool("ask_name", {})
                assert "".join(b.text for b in result.content if isinstance(b, TextContent)) == "hello, Ada"
                await session.call_tool("add_tool", {"name": "fresh"})
                with anyio.fail_after(10):
                    await changed.wait()
                names = {tool.name for tool in (await session.list_tools()).tools}
    assert elicited == ["What is your name?"]
    assert "fresh" in names


def _sdk_v1_python() -> Path:
    """The venv's Python with the official SDK v1.x (made when missing); skips when pip cannot
    install it, except under CI, where it fails (``.ci/run`` installs it first)."""
    python = SDK_V1_VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    if python.exists() and subprocess.run([str(python), "-c", "import mcp"], capture_output=True, timeout=60).returncode == 0:
        return python
    try:
        venv.EnvBuilder(with_pip=True, clear=True).create(SDK_V1_VENV)
        subprocess.run(  # with the caller's own pip settings and cache (support.isolation)
            [str(python), "-m", "pip", "install", "-q", SDK_V1_REQUIREMENT], check=True, timeout=300, capture_output=True, env=dict(CALLER_ENVIRON)
        )
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        reason = f"the official SDK v1.x client ({SDK_V1_REQUIREMENT}) could not be installed: {exc} {detail[-500:]!r}"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return python


@pytest.mark.process
def test_the_official_sdk_v1_client_with_an_sdk_v2_server_of_2026_07_28_alone(modern_only_app: AppServer) -> None:
    """The pair the issue names: SDK v1.x client → bridge → SDK v2 server serving only
    2026-07-28: initialize, tools/list, tools/call with progress, an elicitation round trip
    and a list_changed."""
    python = _sdk_v1_python()
    argv = [*bridge_command(), "--url", modern_only_app.url, "--protocol-era", "auto"]
    done = subprocess.run(
        [str(python), str(HERE / "sdk_v1_client.py"), json.dumps(argv)], capture_output=True, timeout=90, cwd=REPO_ROOT
    )
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")[-3000:]
    seen = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert seen["protocol_version"] in HANDSHAKE_PROTOCOL_VERSIONS
    assert seen["server"] == "modern-only-app"
    assert {"ask_name", "progress", "add_tool", "echo"} <= set(seen["tools"])
    assert seen["progress"] == [1.0, 2.0, 3.0] and seen["progress_result"] == "completed 3 steps"
    assert seen["elicited"] == ["What is your name?"] and seen["ask_result"] == "hello, Ada"
    assert seen["list_changed"] >= 1 and "fresh" in seen["tools_after"]


@pytest.mark.process
@pytest.mark.anyio
@pytest.mark.parametrize(("mode", "era"), [("2026-07-28", "modern"), ("auto", "legacy")])
async def test_auto_with_a_legacy_only_app_translates_only_a_client_that_cannot_fall_back(
    start_app_server: Callable[..., AppServer], mode: str, era: str
) -> None:
    """``--protocol-era auto`` and the example app ``--legacy-only``: the official client
    pinned to 2026-07-28 (it never probes) is translated once the app refused its first
    request for want of a session; the dual-era client (``auto``) gets the app's refusal of its
    ``server/discover`` probe and falls back to ``initialize``, losing nothing."""
    from mcp import Client
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    legacy = start_app_server("--legacy-only")
    with anyio.fail_after(60):
        async with Client(_params(legacy.url), mode=mode, read_timeout_seconds=REPLY_TIMEOUT) as client:
            versions = MODERN_PROTOCOL_VERSIONS if era == "modern" else HANDSHAKE_PROTOCOL_VERSIONS
            assert client.protocol_version in versions
            result = await client.call_tool("echo", {"text": "either era"})
            assert "".join(b.text for b in result.content if isinstance(b, TextContent)) == "either era"


@pytest.mark.process
def test_check_says_the_app_serves_2026_only_and_the_bridge_translates(modern_only_app: AppServer) -> None:
    """``check`` against a 2026-07-28-only app: its ``initialize`` step passes (translated),
    and the server line says so instead of showing a 2025 protocol version alone (a
    newcomer's trial read "protocol 2025-06-18" and thought the app spoke it)."""
    done = subprocess.run(
        [*bridge_command(), "check", "--url", modern_only_app.url],
        capture_output=True, text=True, timeout=60, cwd=REPO_ROOT, env={**os.environ, "NO_COLOR": "1"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "protocol 2025-11-25 (the app serves MCP 2026-07-28 only; the bridge translates for 2025-era clients)" in done.stdout
